"""The native APCache runtime (APCACHE.md; kernels/src/apcache/) from Python.

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
import shutil
import signal
import subprocess
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from tierlab import __version__
from tierlab.core.errors import TierlabError

DEFAULT_CACHE = 64 * 2**20
DEFAULT_SEGMENT = 32 * 2**10
DEFAULT_DRAM_BUDGET = 50_000_000
DEFAULT_READAHEAD = 128 * 2**10
DEFAULT_LOOKAHEAD = 16
TABLES = ("cache_run", "cache_query", "cache_timeline")


def configs() -> list[str]:
    """The configuration registry of the C runtime (names users type)."""
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    return [ffi.string(lib.tierlab_apcache_config_name(i)).decode()
            for i in range(lib.TIERLAB_APCACHE_CONFIGS)]


def policies() -> list[str]:
    """The eviction policies of kernels/src/cache/ (names users type)."""
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    out = []
    for i in range(lib.TIERLAB_POLICIES):
        p = lib.tierlab_policy_name(i)
        if p != ffi.NULL:
            out.append(ffi.string(p).decode())
    return out


def _binary() -> Path:
    from tierlab.core.native import native_dir

    b = native_dir() / "tierlab-kernels"
    if not b.exists():
        raise TierlabError(f"the C kernels are not built ({b} missing): run `make build`")
    return b


def _check_slow_tier(spec: str) -> str:
    if spec == "dram":
        return spec
    if spec.startswith("pm:"):
        path = Path(spec[3:])
        if not spec[3:] or not path.is_dir():
            raise TierlabError(f"--slow-tier {spec}: pm:PATH needs an existing directory")
        if not os.access(path, os.W_OK):
            raise TierlabError(f"--slow-tier {spec}: directory {path} is not writable")
        return spec
    if spec.startswith("numa:"):
        node = spec[5:]
        if not node.isdigit():
            raise TierlabError(f"--slow-tier {spec}: numa:N needs a node number")
        if not Path(f"/sys/devices/system/node/node{int(node)}").exists():
            raise TierlabError(f"--slow-tier {spec}: no NUMA node {int(node)} on this machine")
        return spec
    raise TierlabError(f"--slow-tier '{spec}': one of dram, pm:PATH, numa:N")


def _lookahead(config: str, lookahead) -> str:
    """'none', 'adaptive' or a number, as the C CLI takes it."""
    if config in ("base", "hybrid"):
        if lookahead not in (None, "none"):
            raise TierlabError(f"--lookahead {lookahead}: only base-prefetch and hybrid-prefetch "
                               "look ahead")
        return "none"
    if lookahead is None:
        return "adaptive" if config == "hybrid-prefetch" else str(DEFAULT_LOOKAHEAD)
    text = str(lookahead)
    if text == "adaptive":
        if config != "hybrid-prefetch":
            raise TierlabError("--lookahead adaptive: only hybrid-prefetch has adaptive lookahead; "
                               "give base-prefetch a number of queries (default 16)")
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise TierlabError(f"--lookahead '{text}': a number of queries >= 1, or adaptive")
    return str(n)


def _device_args(device: str) -> tuple[list[str], dict, str]:
    """C CLI arguments, the spec as recorded, and the cache_run `device` value."""
    if device == "real":
        return [], {}, "real"
    from tierlab.core import specs

    spec = specs.load(device, kind="storage")
    args = ["--device-bandwidth", repr(spec["read_bandwidth_bytes_per_s"]),
            "--device-latency-ns", repr(spec["read_latency_ns"]),
            "--device-seek-ns", repr(spec.get("seek_ns", 0.0)),
            "--device-queue-depth", str(int(spec["queue_depth"]))]
    return args, spec.as_dict(), spec.name


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
            for p in (cg / "cgroup.procs").read_text().split():
                (parent / "cgroup.procs").write_text(p)
            cg.rmdir()
            removed.append(str(cg))
        except OSError:
            pass
    return removed


def _percentiles(lat: np.ndarray) -> dict:
    if len(lat) == 0:
        return {f"latency_{k}_ns": math.nan for k in ("mean", "p50", "p99", "p999")}
    return {"latency_mean_ns": float(lat.mean()),
            "latency_p50_ns": float(np.percentile(lat, 50)),
            "latency_p99_ns": float(np.percentile(lat, 99)),
            "latency_p999_ns": float(np.percentile(lat, 99.9))}


def _rate(miss: int, hit: int) -> float:
    return miss / (miss + hit) if miss + hit else math.nan


def run(index, workload, out, *, config: str = "hybrid-prefetch", cache_size: int = DEFAULT_CACHE,
        segment_size: int = DEFAULT_SEGMENT, lookahead=None, dram_budget: int = DEFAULT_DRAM_BUDGET,
        device: str = "real", slow_tier: str = "dram", cores: int = 1, policy: str = "lru",
        k: int = 1024, place_dict: str | None = None, place_skip: str | None = None,
        readahead: int = DEFAULT_READAHEAD, sample_ms: int = 10, memory_limit: bool = True,
        results=None, progress=None) -> dict:
    """Run `workload` on `index` under one APCache configuration; write the
    three tables into directory `out`; return the cache_run row as a dict.
    progress(done, total) gets queries done of all cores. Ctrl-C stops the
    child, writes what was measured (params.partial = true) and re-raises."""
    from tierlab.engine.index import read_manifest
    from tierlab.engine.query import machine
    from tierlab.engine.workload import read_queries

    index, workload, out = Path(index), Path(workload), Path(out)
    known = configs()
    if config not in known:
        raise TierlabError(f"unknown configuration '{config}'; known: {', '.join(known)}")
    pols = policies()
    if policy not in pols:
        raise TierlabError(f"unknown policy '{policy}'; known: {', '.join(pols)}")
    if cores < 1:
        raise TierlabError(f"--cores {cores}: at least 1")
    if k < 1:
        raise TierlabError(f"--k {k}: at least 1")
    hybrid = config.startswith("hybrid")
    if hybrid and (segment_size < 64 or segment_size % 8):
        raise TierlabError(f"--segment-size {segment_size}: a multiple of 8 bytes, at least 64")
    if hybrid and cache_size // cores < segment_size:
        raise TierlabError(f"--cache-size {cache_size}: less than one {segment_size}-byte segment "
                           f"per core")
    if not hybrid and cache_size < 4096:
        raise TierlabError(f"--cache-size {cache_size}: the page-cache cap must hold a 4096-byte page")
    la = _lookahead(config, lookahead)
    slow = _check_slow_tier(slow_tier)
    dev_args, dev_spec, dev_name = _device_args(device)
    if readahead == 0 and dev_name != "real":
        raise TierlabError("--readahead kernel: only on the real device (an emulated device "
                           "has no kernel readahead)")
    if readahead and not 4096 <= readahead <= 2**20:
        raise TierlabError(f"--readahead {readahead}: 4 KiB .. 1 MiB, or kernel")
    manifest = read_manifest(index)
    queries = read_queries(workload)
    meta = _workload_meta(workload, queries)
    if results is not None and Path(results).is_dir():
        raise TierlabError(f"--results {results}: is a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TierlabError(f"--out {out}: cannot create ({e.strerror})") from None
    raw = out / f".raw-{uuid.uuid4().hex[:12]}"
    raw.mkdir()

    cmd = [str(_binary()), "apcache", str(index), str(workload), str(raw), "--config", config,
           "--policy", policy, "--cores", str(cores), "--k", str(k),
           "--sample-ms", str(sample_ms), "--cache-bytes", str(cache_size),
           "--segment-bytes", str(segment_size), "--readahead-bytes", str(readahead),
           "--dram-budget-bytes", str(dram_budget if hybrid else 0), "--slow-tier", slow,
           *dev_args]
    if la != "none":
        cmd += ["--lookahead", la]
    if place_dict:
        cmd += ["--place-dict", place_dict]
    if place_skip:
        cmd += ["--place-skip", place_skip]
    if not memory_limit:
        cmd.append("--no-memory-limit")
    if results is not None:
        cmd.append("--hits")
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    interrupted = False
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)  # Ctrl-C is forwarded below, once
    errs: list[str] = []
    drain = threading.Thread(target=lambda: errs.extend(child.stderr), daemon=True)
    drain.start()
    try:
        for line in child.stdout:
            parts = line.split()
            if progress and len(parts) == 3 and parts[0] == "progress":
                progress(int(parts[1]), int(parts[2]))
        child.wait()
    except KeyboardInterrupt:  # stop the child; it writes what it measured
        interrupted = True
        while child.poll() is None:
            child.send_signal(signal.SIGINT)
            try:
                child.wait()
            except KeyboardInterrupt:
                pass
    drain.join(timeout=5)
    rc = child.returncode
    if rc not in (0, 130):
        left = _cleanup_child(child.pid, index)
        shutil.rmtree(raw, ignore_errors=True)
        msg = "".join(errs).strip().splitlines()
        why = msg[-1].removeprefix("tierlab-kernels apcache: ") if msg else f"exit status {rc}"
        if rc < 0:
            why = f"the runtime was killed by signal {-rc}" + (f" ({why})" if msg else "")
            if rc == -signal.SIGKILL and memory_limit and device == "real":
                why += ("; in its memory cgroup the kernel may have killed it for lack of "
                        "memory: try a larger cache or --no-memory-limit")
        raise TierlabError(f"apcache run failed: {why}"
                           + (f"; removed what it left: {', '.join(left)}" if left else ""))
    try:
        row = _tables(raw, out, index=index, workload=workload, manifest=manifest, meta=meta,
                      dev_name=dev_name, dev_spec=dev_spec, started=started, machine=machine(),
                      results=results, extra={"k": k, "readahead_bytes": readahead,
                                              "sample_ms": sample_ms, "place_dict": place_dict,
                                              "place_skip": place_skip})
    finally:
        shutil.rmtree(raw, ignore_errors=True)
    if interrupted:
        raise KeyboardInterrupt
    return row


def _read_tsv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t")


def _tables(raw: Path, out: Path, *, index, workload, manifest, meta, dev_name, dev_spec,
            started, machine, results, extra) -> dict:
    from tierlab.traces.schema import write_table

    s = json.loads((raw / "summary.json").read_text())
    q = _read_tsv(raw / "queries.tsv")
    t = _read_tsv(raw / "timeline.tsv")
    run_id = uuid.uuid4().hex
    wall = int(s["wall_ns"])
    ph, pm = int(s["page_cache_hits"]), int(s["page_cache_misses"])
    sh, sm = int(s["segment_cache_hits"]), int(s["segment_cache_misses"])
    hybrid = s["config"].startswith("hybrid")
    device = dev_name if s["device_mode"] == "emulated" else f"real:{s['block_device'] or 'unknown'}"
    params = {key: s[key] for key in s if key not in (
        "format", "format_version", "config", "policy", "cores", "lookahead", "device_mode",
        "slow_tier", "cache_bytes", "segment_bytes", "dram_budget_bytes", "memory_limit_enforced",
        "queries", "wall_ns", "page_cache_hits", "page_cache_misses", "segment_cache_hits",
        "segment_cache_misses", "storage_reads", "storage_bytes_read", "worker_stall_ns",
        "query_wait_ns", "lookahead_mean", "peak_dram_bytes", "peak_slow_tier_bytes",
        "device_utilisation", "index_bytes")}
    params["partial"] = bool(s["partial"])
    params["device_spec"] = dev_spec
    params["codec"] = manifest.get("codec")
    params["block_size"] = manifest.get("block_size")
    params["build_id"] = manifest.get("build_id")
    params.update(extra)
    row = {
        "run_id": run_id, "source": "measured", "started_at": started,
        "tierlab_version": __version__, "config": s["config"], "policy": s["policy"],
        "device": device, "device_mode": s["device_mode"], "slow_tier": s["slow_tier"],
        "index_path": str(index), "index_bytes": int(s["index_bytes"]),
        "workload": str(workload), **meta, "cores": int(s["cores"]), "queries": int(s["queries"]),
        "cache_bytes": int(s["cache_bytes"]), "segment_bytes": int(s["segment_bytes"]),
        "lookahead": s["lookahead"], "dram_budget_bytes": int(s["dram_budget_bytes"]),
        "memory_limit_enforced": s["memory_limit_enforced"], "wall_ns": wall,
        "qps": int(s["queries"]) / (wall / 1e9) if wall else math.nan,
        **_percentiles(q["latency_ns"].to_numpy(dtype=np.float64)),
        "page_cache_hits": ph, "page_cache_misses": pm, "page_cache_miss_rate": _rate(pm, ph),
        "segment_cache_hits": sh, "segment_cache_misses": sm,
        "segment_cache_miss_rate": _rate(sm, sh) if hybrid else math.nan,
        "storage_reads": int(s["storage_reads"]), "storage_bytes_read": int(s["storage_bytes_read"]),
        "worker_stall_ns": int(s["worker_stall_ns"]), "query_wait_ns": int(s["query_wait_ns"]),
        "lookahead_mean": float(s["lookahead_mean"]) if s["lookahead"] != "none" else math.nan,
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
    if results is not None and (raw / "hits.tsv").exists():
        dst = Path(results)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw / "hits.tsv", dst)
    row["params"] = params
    return row
