"""The native APCache runtime (docs/apcache.md; kernels/src/apcache/) from Python.

`run` checks the parameters (a TierlabError names the bad one), starts the C
runtime as a child process (`tierlab-kernels apcache`, so a cgroup, a Ctrl-C
or a crash concerns only the child), follows its progress lines, and turns
its raw files into the result schema's tables (traces/schema.yaml, source
`measured`): OUT/cache_run.parquet (one row), OUT/cache_query.parquet (one
row per query per core) and OUT/cache_timeline.parquet (samples), plus the
top-k of core 0 as a TSV when asked (the format of `tierlab query run
--results`).

What the runtime does, in short (the C sources say it in full):
- every core is a shard: its own copy of the index (real device; emulated:
  its own device addresses over the same files), a query thread, a worker,
  a share of the segment cache; every core runs the whole workload back to
  back, and qps counts the queries of all cores;
- devices: `real` reads the index's own device (mmap page faults, pread,
  page-cache hits and misses counted with mincore; what a miss reads ahead
  is `readahead`, applied by the runtime with readahead(2) and the kernel's
  read-around turned off, or the kernel's own with readahead=0); a storage spec of
  sim-configs/devices makes the device emulated: every read of postings is a
  pread plus an injected delay by the spec's bandwidth, latency (+ seek) and
  queue depth, and goes through the runtime's own page cache (LRU over 4 KiB
  pages, the same readahead rule), because page faults cannot be delayed;
- the DRAM cap (page cache) is `cache_size` for base configurations and the
  DRAM budget for hybrid ones. Real device: a child cgroup's memory limit
  when one is writable (cache_run.memory_limit_enforced says how, or why
  not). Emulated: the runtime's page cache holds at most that much;
- the index files are dropped from the page cache before the run (fadvise).
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from tierlab import __version__
from tierlab.core import files, runspec, signals, specs
from tierlab.core.errors import TierlabError

TABLES = ("cache_run", "cache_query", "cache_timeline")


def _binary() -> Path:
    from tierlab.core.native import native_dir

    b = native_dir() / "tierlab-kernels"
    if not b.exists():
        raise TierlabError(f"the C kernels are not built ({b} missing): run `make build`")
    return b


def _check_placement(placement: str) -> str:
    """The segment cache's placement must exist on this machine."""
    if placement.startswith("pm:"):
        path = Path(placement[3:])
        if not path.is_dir():
            raise TierlabError(f"slow_tier_placement: {placement}: pm:PATH needs an existing "
                               "directory")
        if not os.access(path, os.W_OK):
            raise TierlabError(f"slow_tier_placement: {placement}: directory {path} is not "
                               "writable")
    elif placement.startswith("numa:"):
        node = int(placement[5:])
        if not Path(f"/sys/devices/system/node/node{node}").exists():
            raise TierlabError(f"slow_tier_placement: {placement}: no NUMA node {node} on this "
                               "machine")
    return placement


# The storage spec keys the C runtime's emulated device takes, each as
# `--device-<key>` (kernels/src/cli/main.c).
DEVICE_KEYS = ("read_bandwidth_bytes_per_s", "read_latency_ns", "seek_ns", "queue_depth")


def _device(device: str) -> tuple[list[str], dict]:
    """C CLI arguments of the device and the spec as the result records it."""
    if device == specs.REAL:
        return [], {}
    spec = specs.load(device, kind="storage")
    if spec.get("drive_cache_bytes") is not None:  # model/device.py DriveCache
        raise TierlabError(f"device {device}: the runtime's emulated device has no drive read "
                           f"cache (the spec's drive_cache_bytes); only the model runs it")
    args = []
    for key in DEVICE_KEYS:
        value = spec.get(key, 0.0)
        args += [f"--device-{key.replace('_', '-')}",
                 str(int(value)) if key == "queue_depth" else repr(value)]
    return args, spec.as_dict()


def command(spec: runspec.RunSpec, index: Path, workload: Path, raw: Path, cache: int,
            hits: bool) -> list[str]:
    """The `tierlab-kernels apcache` command line of a run: every run spec key
    the runtime reads, as its flag (the key with dashes)."""
    hybrid = spec.hybrid
    la = spec.lookahead_value()
    value = {"cache_bytes": cache, "dram_budget_bytes": spec["dram_budget_bytes"] if hybrid else 0,
             "slow_tier_placement": _check_placement(runspec.placement(spec)),
             "memory_limit": int(spec["memory_limit"])}
    cmd = [str(_binary()), "apcache", str(index), str(workload), str(raw)]
    for key in ("config", "policy", "cores", "k", "sample_ns", "cache_bytes", "segment_bytes",
                "readahead_bytes", "dram_budget_bytes", "slow_tier_placement", "memory_limit"):
        cmd += [runspec.flag(key), str(value.get(key, spec[key]))]
    if la != "none":
        cmd += ["--lookahead", str(la)]
    for key in ("place_dict", "place_skip"):
        if spec[key]:
            cmd += [runspec.flag(key), spec[key]]
    cmd += _device(spec["device"])[0]
    if hits:
        cmd.append("--hits")
    return cmd


def _workload_meta(workload: Path, queries) -> dict:
    types = {"single" if len(q) == 1 else "and" for q in queries}
    meta = {"query_type": types.pop() if len(types) == 1 else "mixed", "query_class": "",
            "rp": math.nan}
    from tierlab.engine.workload import stats_path

    side = stats_path(workload)
    try:
        gen = json.loads(side.read_text()).get("generator", {})
        meta["query_class"] = str(gen.get("class", ""))
        meta["rp"] = float(gen.get("rp", math.nan))
    except (OSError, ValueError, AttributeError):
        pass
    return meta


def _cgroup_parents() -> list[Path]:
    """This process's cgroup directories (v2, and v1 memory): where a runtime
    started from here creates its `tierlab-<pid>` child."""
    mounts = {}
    try:
        for line in open("/proc/self/mountinfo"):
            left, _, right = line.partition(" - ")
            fstype, _, opts = (right.split() + ["", "", ""])[:3]
            point = left.split()[4]
            if fstype == "cgroup2":
                mounts.setdefault("v2", point)
            elif fstype == "cgroup" and "memory" in opts.split(","):
                mounts.setdefault("v1", point)
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        _, ctrl, path = line.split(":", 2)
        key = "v2" if ctrl == "" else "v1" if "memory" in ctrl.split(",") else None
        if key and key in mounts:
            out.append(Path(mounts[key] + (path if path != "/" else "")))
    return out


RAW = r"\.raw-(?P<pid>\d+)-[0-9a-f]+"  # OUT/.raw-<pid of `run`>-<hex>
OLD_RAW = re.compile(r"\.raw-[0-9a-f]{12}")  # before the pid was in the name


def _leftovers(index: Path, out: Path, spec: runspec.RunSpec,
               results) -> tuple[list[str], list[str]]:
    """Remove what runs killed by SIGKILL left (tierlab.core.signals): OUT/.raw-<pid>-*
    of a `run` that is gone, the shard copies `.tierlab-shard-<pid>-*` next to
    the index and the cgroups `tierlab-<pid>` of a runtime that is gone, its
    slow-tier files in a pm: directory, a --results file half written.
    Returns (what was removed, OUT/.raw-* without a pid (older tierlab):
    kept, to be reported)."""
    removed = signals.remove_stale(out, RAW)
    dead = {pid for _, pid in signals.stale(index.resolve().parent,
                                            r"\.tierlab-shard-(?P<pid>\d+)-\d+")}
    for parent in _cgroup_parents():
        dead |= {pid for _, pid in signals.stale(parent, r"tierlab-(?P<pid>\d+)")}
    for pid in sorted(dead):
        removed += _cleanup_child(pid, index)
    pm = {v[3:] for v in (runspec.placement(spec), spec["place_dict"], spec["place_skip"])
          if isinstance(v, str) and v.startswith("pm:")}
    for d in sorted(pm):  # slowtier.c and tiers/pm.c: unlinked once mapped, unless killed
        removed += signals.remove_stale(d, r"tierlab-segcache-(?P<pid>\d+)-\w{6}")
        removed += signals.remove_stale(d, r"tierlab-(?P<pid>\d+)-\d+-.+")
    if results is not None:
        removed += files.sweep(results, report=False)
    try:
        old = sorted(str(p) for p in out.iterdir() if OLD_RAW.fullmatch(p.name))
    except OSError:
        old = []
    return removed, old


def _cleanup_child(pid: int, index: Path) -> list[str]:
    """Remove what a killed runtime (pid) left: its cgroup and shard copies."""
    removed = []
    for copy in index.resolve().parent.glob(f".tierlab-shard-{pid}-*"):
        shutil.rmtree(copy, ignore_errors=True)
        removed.append(str(copy))
    for parent in _cgroup_parents():
        cg = parent / f"tierlab-{pid}"
        if not cg.is_dir():
            continue
        try:
            procs = (cg / "cgroup.procs").read_text().split()
        except OSError:
            continue
        if any(signals.alive(int(p)) and int(p) != pid for p in procs):
            continue  # not the runtime's: left alone
        if _remove_cgroup(parent, cg):
            removed.append(str(cg))
    return removed


def _remove_cgroup(parent: Path, cg: Path, wait: float = 2.0) -> bool:
    """Move what is left in cgroup `cg` to `parent` and remove it. A process
    just killed is still leaving it (its memory is being freed; a zombie
    cannot be moved), so the removal is tried again for up to `wait` s;
    False when it was not removed (then a later run tries again)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            for p in (cg / "cgroup.procs").read_text().split():
                try:
                    (parent / "cgroup.procs").write_text(p)
                except OSError:  # ended meanwhile, or a zombie: leaves by itself
                    pass
            cg.rmdir()
            return True
        except FileNotFoundError:  # another run removed it
            return False
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def _percentiles(lat: np.ndarray) -> dict:
    if len(lat) == 0:
        return {f"latency_{k}_ns": math.nan for k in ("mean", "p50", "p99", "p999")}
    return {"latency_mean_ns": float(lat.mean()),
            "latency_p50_ns": float(np.percentile(lat, 50)),
            "latency_p99_ns": float(np.percentile(lat, 99)),
            "latency_p999_ns": float(np.percentile(lat, 99.9))}


def _rate(miss: int, hit: int) -> float:
    return miss / (miss + hit) if miss + hit else math.nan


def _path(spec: runspec.RunSpec, key: str, inner: str) -> Path:
    """The index folder or workload file of a runtime run (a path, or {inner: path})."""
    v = spec[key]
    if isinstance(v, dict) and set(v) == {inner}:
        v = v[inner]
    if not isinstance(v, (str, os.PathLike)) or (key == "index" and v == "reference"):
        what = "an index folder (`tierlab index build`)" if key == "index" else "a query file"
        raise TierlabError(f"{key}: the runtime runs {what}, got {v!r} (synthetic indexes and "
                           f"generated workloads are the model's)")
    return Path(v)


def run(spec: runspec.RunSpec, out=None, *, results=None, progress=None) -> dict:
    """Run the spec's workload on its index under its APCache configuration
    (the keys `tierlab list keys` shows as read by runtime);
    write the three tables into folder `out` (default: the spec's `out`);
    return the cache_run row as a dict. progress(done, total) gets queries
    done of all cores. Ctrl-C (SIGINT, and SIGTERM or SIGHUP under
    tierlab.core.signals.handled) stops the child, writes what was measured
    (params.partial = true; the three tables, or none) and re-raises. What
    killed runs left is removed first (_leftovers) and reported on stderr."""
    from tierlab.engine.index import postings_bytes, read_manifest
    from tierlab.engine.query import machine
    from tierlab.engine.workload import read_queries

    index, workload = _path(spec, "index", "path"), _path(spec, "workload", "file")
    out = Path(out if out is not None else spec["out"])
    manifest = read_manifest(index)
    queries = read_queries(workload)
    meta = _workload_meta(workload, queries)
    cache = spec.cache_size(postings_bytes(index))
    from tierlab.core.values import output_dir, output_file

    output_dir(out, "out")
    for name in TABLES:
        output_file(out / f"{name}.parquet", "out")
    if results is not None:
        output_file(results, "--results")
    raw = out / f".raw-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    cmd = command(spec, index, workload, raw, cache, hits=results is not None)
    dev_spec = _device(spec["device"])[1]
    # the folders this run creates: removed again when the runtime refuses or fails
    created = [p for p in (out, *out.parents) if not p.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TierlabError(f"out: cannot create {out} ({e.strerror})") from None
    removed, kept = _leftovers(index, out, spec, results)
    signals.report(removed)
    for p in kept:
        print(f"tierlab: {p}: left by an earlier run (no pid in its name); remove it if no "
              f"run writes into {out}", file=sys.stderr)
    raw.mkdir()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        rc, errs, pid, stop = _follow(cmd, progress)
        if rc not in (0, 130):
            left = _cleanup_child(pid, index)
            shutil.rmtree(raw, ignore_errors=True)
            for folder in created:  # deepest first: what this run created, if empty
                try:
                    folder.rmdir()
                except OSError:
                    break
            if stop is not None:  # stopped, and killed when it did not stop in time
                signals.report(left, f"the runtime (pid {pid}), killed as it did not stop")
                raise stop
            msg = "".join(errs).strip().splitlines()
            why = msg[-1].removeprefix("tierlab-kernels apcache: ") if msg else f"exit status {rc}"
            if rc < 0:
                why = f"the runtime was killed by signal {-rc}" + (f" ({why})" if msg else "")
                if rc == -signal.SIGKILL and spec["memory_limit"] and spec["device"] == specs.REAL:
                    why += ("; in its memory cgroup the kernel may have killed it for lack of "
                            "memory: try a larger cache or memory_limit false")
            raise TierlabError(f"apcache run failed: {why}"
                               + (f"; removed what it left: {', '.join(left)}" if left else ""))
        # the tables of a run stopped by a signal too (params.partial), all three or none
        with signals.held(files.MOVING):
            row = _commit(raw, out, results, spec=spec, cache=cache, index=index,
                          workload=workload, manifest=manifest, meta=meta, dev_spec=dev_spec,
                          started=started, machine=machine())
    finally:
        with signals.held():
            shutil.rmtree(raw, ignore_errors=True)
    if stop is not None:
        raise stop
    return row


def _follow(cmd: list[str], progress):
    """Run the runtime and follow its progress lines. A signal that stops
    this process (SIGINT, SIGTERM, SIGHUP: tierlab.core.signals) is passed
    on: the runtime stops and writes what it measured. Returns (exit status,
    stderr lines, the child's pid, the KeyboardInterrupt caught or None)."""
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=signals.child_env(),
                             start_new_session=True)  # a terminal's Ctrl-C is passed on below
    errs: list[str] = []
    drain = threading.Thread(target=lambda: errs.extend(child.stderr), daemon=True)
    drain.start()
    stop = None
    try:
        try:
            for line in child.stdout:
                parts = line.split()
                if progress and len(parts) == 3 and parts[0] == "progress":
                    progress(int(parts[1]), int(parts[2]))
            child.wait()
        except KeyboardInterrupt as e:
            stop = e
            with signals.held():
                # its progress lines must not fill the pipe while it stops
                threading.Thread(target=_discard, args=(child.stdout,), daemon=True).start()
                signals.stop([child], signals.signum(e), timeout=STOP_SECONDS)
    finally:  # whatever went wrong here, the runtime does not run on alone
        if child.poll() is None:
            with signals.held():
                signals.stop([child], signal.SIGTERM, timeout=STOP_SECONDS)
    drain.join(timeout=5)
    return child.returncode, errs, child.pid, stop


def _discard(f) -> None:
    try:
        for _ in f:
            pass
    except (OSError, ValueError):
        pass


# How long a runtime asked to stop may take to write what it measured and leave its
# cgroup before it is killed (and what it left removed).
STOP_SECONDS = 30.0


def _commit(raw: Path, out: Path, results, **kw) -> dict:
    """The tables (and --results) of a run from its raw files, written next to
    their final names, then renamed into place (call it inside signals.held())."""
    stage = raw / "tables"
    stage.mkdir(exist_ok=True)
    row = _tables(raw, stage, **kw)
    moves = [(stage / f"{name}.parquet", out / f"{name}.parquet") for name in TABLES]
    tmp = None
    if results is not None and (raw / "hits.tsv").exists():
        dst = Path(results)
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = files.temporary_name(dst)
        try:
            shutil.copyfile(raw / "hits.tsv", tmp)
            moves.append((tmp, dst))
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    for a, b in moves:
        os.replace(a, b)
    return row


def _read_tsv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t")


def _tables(raw: Path, out: Path, *, spec, cache, index, workload, manifest, meta, dev_spec,
            started, machine) -> dict:
    from tierlab.traces.schema import write_table

    s = json.loads((raw / "summary.json").read_text())
    q = _read_tsv(raw / "queries.tsv")
    t = _read_tsv(raw / "timeline.tsv")
    run_id = uuid.uuid4().hex
    wall = int(s["wall_ns"])
    ph, pm = int(s["page_cache_hits"]), int(s["page_cache_misses"])
    sh, sm = int(s["segment_cache_hits"]), int(s["segment_cache_misses"])
    columns = runspec.run_columns(spec, cache)
    # the page-cache cap the run had: the spec's, unless the real device's
    # memory cgroup needed a larger one (memory_limit_enforced says so)
    columns["dram_budget_bytes" if spec.hybrid else "cache_bytes"] = int(s["page_cap_bytes"])
    # what the runtime reports beyond the columns: its own echo of the
    # parameters is left out (the spec is recorded whole)
    params = {key: s[key] for key in s if key not in (
        "format", "format_version", "config", "policy", "cores", "lookahead", "device_mode",
        "cache_bytes", "segment_bytes", "page_cap_bytes", "memory_limit_enforced",
        "queries", "wall_ns", "page_cache_hits", "page_cache_misses", "segment_cache_hits",
        "segment_cache_misses", "storage_reads", "storage_bytes_read", "worker_stall_ns",
        "query_wait_ns", "lookahead_mean", "peak_dram_bytes", "peak_slow_tier_bytes",
        "device_utilisation", "index_bytes") and not key.startswith("device_read")}
    params["partial"] = bool(s["partial"])
    params["device_spec"] = dev_spec
    params["codec"] = manifest.get("codec")
    params["block_size"] = manifest.get("block_size")
    params["build_id"] = manifest.get("build_id")
    params["spec"] = spec.as_dict()
    row = {
        "run_id": run_id, "source": "measured", "started_at": started,
        "tierlab_version": __version__, **columns, "device_mode": s["device_mode"],
        "index_path": str(index), "index_bytes": int(s["index_bytes"]),
        "workload": str(workload), **meta, "queries": int(s["queries"]),
        "memory_limit_enforced": s["memory_limit_enforced"], "wall_ns": wall,
        "qps": int(s["queries"]) / (wall / 1e9) if wall else math.nan,
        **_percentiles(q["latency_ns"].to_numpy(dtype=np.float64)),
        "page_cache_hits": ph, "page_cache_misses": pm, "page_cache_miss_rate": _rate(pm, ph),
        "segment_cache_hits": sh, "segment_cache_misses": sm,
        "segment_cache_miss_rate": _rate(sm, sh) if spec.hybrid else math.nan,
        "storage_reads": int(s["storage_reads"]), "storage_bytes_read": int(s["storage_bytes_read"]),
        "worker_stall_ns": int(s["worker_stall_ns"]), "query_wait_ns": int(s["query_wait_ns"]),
        "lookahead_mean": (float(s["lookahead_mean"]) if columns["lookahead"] != "none"
                           else math.nan),
        "peak_dram_bytes": int(s["peak_dram_bytes"]),
        "peak_slow_tier_bytes": int(s["peak_slow_tier_bytes"]),
        "device_utilisation": float(s["device_utilisation"]),
        "params": json.dumps(params, sort_keys=True), "machine": json.dumps(machine, sort_keys=True),
    }
    write_table("cache_run", {key: [v] for key, v in row.items()}, out / "cache_run.parquet")
    qt = {"run_id": [run_id] * len(q), "source": ["measured"] * len(q)}
    for col in ("core", "query_id", "start_ns", "latency_ns", "wait_ns", "terms",
                "segment_cache_misses", "page_cache_misses"):
        qt[col] = q[col].astype("int64").tolist()
    write_table("cache_query", qt, out / "cache_query.parquet")
    tt = {"run_id": [run_id] * len(t), "source": ["measured"] * len(t),
          "core": t["core"].tolist(), "t_ns": t["t_ns"].tolist(),
          "queries_done": t["queries_done"].tolist(),
          "lookahead_queries": t["lookahead_queries"].tolist(),
          "rolling_sum_segments": t["rolling_sum_segments"].tolist(),
          "cache_used_bytes": t["cache_used_bytes"].tolist(),
          "storage_bytes_read": t["storage_bytes_read"].tolist()}
    write_table("cache_timeline", tt, out / "cache_timeline.parquet")
    row["params"] = params
    return row
