"""The real device as the runtime's own reads see it: a small probe of
latency and bandwidth through the runtime's read path, turned into a storage
spec of sim-configs/devices that the model of a real-device row gets."""
from __future__ import annotations

import json
import mmap
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import yaml

from tierlab.core.errors import TierlabError
from tierlab.core.files import atomic_outputs, write_atomic
from tierlab.experiments.validate.grid import REAL, Grid, Row, cache_bytes
from tierlab.engine.index import postings_bytes


def _aligned(n: int) -> mmap.mmap:
    return mmap.mmap(-1, n)  # page-aligned, as O_DIRECT needs


def _open_direct(path: Path) -> tuple[int, bool]:
    flags = os.O_RDONLY | getattr(os, "O_DIRECT", 0)
    try:
        return os.open(path, flags), bool(getattr(os, "O_DIRECT", 0))
    except OSError:
        return os.open(path, os.O_RDONLY), False


def runtime_reads(path, run_bytes: int, cap_bytes: int, reads: int, seed: int = 0) -> dict:
    """`tierlab-kernels read-probe`: `reads` reads of run_bytes at random
    offsets of `path`, each as the runtime reads a real-device miss (readahead
    of the run, kernel read-around off, pages touched through a mapping), the
    page cache capped at cap_bytes in a child cgroup when one is writable.
    Returns mean and median ns and how the cap was held; TierlabError when
    the probe cannot run."""
    import numpy as np

    from tierlab.runtime.apcache import _binary

    cmd = [str(_binary()), "read-probe", str(path), str(run_bytes), str(cap_bytes), str(reads),
           str(seed)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise TierlabError(f"read probe failed: {r.stderr.strip() or r.returncode}")
    lines = r.stdout.splitlines()
    how = next((x[4:] for x in lines if x.startswith("how ")), "")
    ns = np.array([float(x) for x in lines if x and not x.startswith("how ")])
    if len(ns) != reads:
        raise TierlabError(f"read probe: {len(ns)} timings for {reads} reads")
    return {"run_bytes": int(run_bytes), "reads": int(reads), "mean_ns": float(ns.mean()),
            "median_ns": float(np.median(ns)), "p99_ns": float(np.quantile(ns, 0.99)),
            "cap_bytes": int(cap_bytes), "how": how}


def runtime_pair(path, run_bytes: int, cap_bytes: int, reads: int, seed: int = 0) -> list:
    """[4 KiB runs, run_bytes runs] of `runtime_reads`: the two points of a
    device line (runtime_line)."""
    return [runtime_reads(path, b, cap_bytes, reads, seed) for b in (4096, run_bytes)]


def probe_device(folder, *, file_bytes: int = 128 * 2**20, random_reads: int = 2000,
                 seq_chunk: int = 2**20, threads: int = 4, seed: int = 0,
                 run_bytes: int | None = 128 * 2**10, cap_bytes: int = 4 * 2**20,
                 run_reads: int = 1000, caps: tuple = (), scratch: Path | None = None) -> dict:
    """Measure the storage under `folder`: a scratch file of file_bytes
    (written, fsynced, dropped from the page cache), then random 4 KiB reads
    at queue depth 1 (median latency), random 4 KiB reads from `threads`
    threads (IOPS -> the parallelism the device offers) and one sequential
    pass in seq_chunk reads (bandwidth). O_DIRECT where the file system
    allows it, else posix_fadvise DONTNEED before each phase. Then, unless
    run_bytes is None, the same device through the runtime's own read path
    (`runtime_reads`: runs of 4 KiB and of run_bytes, page cache capped at
    cap_bytes): the latency and bandwidth of a line through those two means
    are what the model's `real` device gets (`read_path` says which); and
    the same line under each page-cache cap of `caps` (`runtime_lines`: a
    read through the kernel's page cache costs more as the cgroup cap forces
    reclaim, so each cap a grid's real rows plan gets its own line). The
    scratch file is removed, unless it is the
    `scratch` given (written if missing, kept for later probes). Returns the
    numbers and how they were taken."""
    import random

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    keep = scratch is not None
    scratch = scratch if keep else folder / f".probe-{os.getpid()}.bin"
    page = 4096
    try:
        _scratch_file(scratch, file_bytes)
        size = scratch.stat().st_size
        pages = size // page

        def drop():
            fd = os.open(scratch, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

        drop()
        fd, direct = _open_direct(scratch)
        rng = random.Random(seed)
        buf = _aligned(page)
        lat = []
        try:
            for _ in range(random_reads):
                off = rng.randrange(pages) * page
                t0 = time.perf_counter_ns()
                os.preadv(fd, [buf], off)
                lat.append(time.perf_counter_ns() - t0)
        finally:
            os.close(fd)
        lat.sort()
        median = lat[len(lat) // 2]
        # parallel random reads: IOPS with `threads` readers
        drop()
        per = max(random_reads // threads, 1)
        done = [0] * threads

        def reader(i):
            f2, _ = _open_direct(scratch)
            b = _aligned(page)
            r = random.Random(seed + 1 + i)
            try:
                for _ in range(per):
                    os.preadv(f2, [b], r.randrange(pages) * page)
                    done[i] += 1
            finally:
                os.close(f2)

        ts = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter_ns()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        par_ns = time.perf_counter_ns() - t0
        iops_par = sum(done) / (par_ns / 1e9)
        # sequential bandwidth
        drop()
        fd, _ = _open_direct(scratch)
        big = _aligned(seq_chunk)
        try:
            t0 = time.perf_counter_ns()
            off = 0
            while off < size:
                n = os.preadv(fd, [big], off)
                if n <= 0:
                    break
                off += n
            seq_ns = time.perf_counter_ns() - t0
        finally:
            os.close(fd)
        bw = off / (seq_ns / 1e9)
        runtime, by_cap = None, {}
        if run_bytes and run_bytes > page:
            try:
                runtime = runtime_pair(scratch, run_bytes, cap_bytes, run_reads, seed)
                for cap in sorted(set(caps)):
                    by_cap[str(cap)] = runtime_pair(scratch, run_bytes, cap, run_reads, seed)
            except (TierlabError, OSError, subprocess.TimeoutExpired) as e:
                runtime = str(e)
    finally:
        if not keep:
            scratch.unlink(missing_ok=True)
    # positioning = latency of a 4 KiB random read minus its transfer time
    read_latency = max(median - page / bw * 1e9, 0.0)
    qd = max(1, min(64, round(iops_par * median / 1e9)))
    extra = {"read_path": "O_DIRECT" if direct else "buffered",
             "direct_read_latency_ns": float(read_latency),
             "direct_read_bandwidth_bytes_per_s": float(bw)}
    if isinstance(runtime, list):
        extra["runtime_reads"] = runtime
        line = runtime_line(*runtime)
        if line:
            read_latency, bw = line
            extra["read_path"] = "runtime"
            extra["runtime_lines"] = {}
            for cap, reads in by_cap.items():
                at = runtime_line(*reads)
                if at:
                    extra["runtime_lines"][cap] = {"read_latency_ns": at[0],
                                                   "read_bandwidth_bytes_per_s": at[1],
                                                   "runtime_reads": reads}
        else:
            extra["runtime_reads_unused"] = "a longer run was not slower: kept the O_DIRECT line"
    elif runtime is not None:
        extra["runtime_reads_unused"] = runtime
    return {**extra, "read_latency_ns": float(read_latency), "read_4k_median_ns": float(median),
            "read_4k_p90_ns": float(lat[int(0.9 * (len(lat) - 1))]),
            "read_bandwidth_bytes_per_s": float(bw), "iops_parallel": float(iops_par),
            "threads": threads, "queue_depth": int(qd), "o_direct": direct,
            "file_bytes": int(size), "random_reads": random_reads, "seq_chunk_bytes": seq_chunk,
            "folder": str(folder)}


def runtime_line(small: dict, big: dict) -> tuple[float, float] | None:
    """(latency ns, bytes/s) of the line through the mean read times of a
    4 KiB run and a longer one (runtime_reads); None when the longer run was
    not slower."""
    dt = big["mean_ns"] - small["mean_ns"]
    if dt <= 0:
        return None
    bw = (big["run_bytes"] - small["run_bytes"]) / (dt / 1e9)
    return max(small["mean_ns"] - small["run_bytes"] / bw * 1e9, 0.0), bw


def real_page_cap(row: "Row", cache: int) -> int:
    """The page-cache cap a real-device run of `row` plans: the cache of the
    base configurations, the DRAM budget of the hybrid ones."""
    return int(row.values["dram_budget_bytes"]) if row.values["config"].startswith("hybrid") \
        else int(cache)


def host_caching_suspected(p: dict) -> bool:
    """A 4 KiB random read well below any SSD's (~20 us) reads a cache, not a disk."""
    return p["read_4k_median_ns"] < 20_000


def write_device_spec(p: dict, path, *, block_device: str = "") -> Path:
    """A storage spec (sim-configs format) from a probe's numbers."""
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    src = f"measured on this machine by tierlab validate on {date}"
    how = ("O_DIRECT" if p["o_direct"] else "buffered reads after posix_fadvise DONTNEED")
    doc = {
        "name": REAL, "kind": "storage",
        "description": (f"the disk under {p['folder']}"
                        + (f" ({block_device})" if block_device else "")
                        + f"; {p['file_bytes'] >> 20} MiB scratch file, {how}"
                        + ("; WARNING: 4 KiB reads at about memory speed, the host caches them"
                           if host_caching_suspected(p) else "")),
        "read_bandwidth_bytes_per_s": {
            "value": round(p["read_bandwidth_bytes_per_s"]),
            "source": f"{src}: one sequential pass in {p['seq_chunk_bytes'] >> 10} KiB reads "
                      f"({how})"},
        "read_latency_ns": {
            "value": round(p["read_latency_ns"]),
            "source": f"{src}: median of {p['random_reads']} random 4 KiB reads at queue depth "
                      f"1 ({p['read_4k_median_ns'] / 1e3:.1f} us, p90 "
                      f"{p['read_4k_p90_ns'] / 1e3:.1f} us) minus the transfer time ({how})"},
        "queue_depth": {
            "value": int(p["queue_depth"]),
            "source": f"{src}: {p['iops_parallel']:.0f} IOPS with {p['threads']} threads x "
                      f"median latency, rounded (the parallelism the device gave)"},
    }
    rt = p.get("runtime_reads") if p.get("read_path") == "runtime" else None
    if rt:
        small, big = rt
        line = (f"{src}: reads as the APCache runtime reads a real-device miss (readahead(2) "
                f"of a run, pages touched through a mapping; {small['how']}), {small['reads']} "
                f"at random offsets per size: mean {small['mean_ns'] / 1e3:.1f} us for 4 KiB, "
                f"{big['mean_ns'] / 1e3:.1f} us for {big['run_bytes'] >> 10} KiB; ")
        doc["read_bandwidth_bytes_per_s"]["source"] = (
            line + f"the slope between them (O_DIRECT sequential: "
            f"{p['direct_read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s)")
        doc["read_latency_ns"]["source"] = (
            line + f"the 4 KiB mean minus its transfer time (O_DIRECT 4 KiB median: "
            f"{p['read_4k_median_ns'] / 1e3:.1f} us)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1000))
    return path


def read_ahead_kb(dev: str) -> int | None:
    """The kernel's readahead (KiB) of block device MAJ:MIN (a partition's
    disk for a partition), which mmap page faults of the real device use."""
    if not dev:
        return None
    base = Path("/sys/dev/block") / dev
    for q in (base / "queue" / "read_ahead_kb", base / ".." / "queue" / "read_ahead_kb"):
        try:
            return int(q.read_text().strip())
        except (OSError, ValueError):
            continue
    return None


def real_spec_path(out: Path, cap: int | None = None) -> Path:
    """OUT/devices/real.yaml, or the spec of the real device under page-cache cap `cap`."""
    return out / "devices" / ("real.yaml" if cap is None else f"real-cap{cap}.yaml")


@dataclass
class RealDevice:
    """The real device of a grid: its specs (OUT/devices/real.yaml, and
    real-capN.yaml under each page-cache cap the grid's real rows plan), the
    probe's numbers, and the scratch file each real row's own probes read
    (written at the first one, removed when the grid run ends)."""

    default: Path
    by_cap: dict
    probe: dict
    scratch: Path

    def spec(self, cap: int) -> Path:
        return self.by_cap.get(cap, self.default)


def prepare_real(grid: Grid, index: Path, log=print) -> RealDevice | None:
    """The real device's specs (probed once) when the grid uses `real`."""
    rows = [r for r in grid.rows if r.values["device"] == REAL]
    if not rows:
        return None
    ib = postings_bytes(index)
    caps = sorted({real_page_cap(r, cache_bytes(r, ib)) for r in rows})
    path = real_spec_path(grid.out)
    probe_file = grid.out / "devices" / "real-probe.json"
    real = RealDevice(path, {c: real_spec_path(grid.out, c) for c in caps}, {},
                      grid.out / "devices" / "probe-scratch.bin")
    if path.exists() and probe_file.exists() and all(x.exists() for x in real.by_cap.values()):
        real.probe = json.loads(probe_file.read_text())
        return real
    log("probing the disk under the index (random 4 KiB reads, sequential bandwidth, reads "
        "through the runtime's read path under each page-cache cap of the grid) ...")
    ra = max(int(r.values["readahead_bytes"]) for r in rows)
    p = probe_device(index.resolve().parent, run_bytes=ra, caps=tuple(caps),
                     scratch=real.scratch)
    try:
        st = os.stat(index / "dids.bin")
        p["block_device"] = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    except OSError:
        p["block_device"] = ""
    p["read_ahead_kb"] = read_ahead_kb(p["block_device"])
    p["host_caching_suspected"] = host_caching_suspected(p)
    write_device_spec(p, path, block_device=p["block_device"])
    lines = p.get("runtime_lines") or {}
    for cap, spec in real.by_cap.items():
        at = lines.get(str(cap))  # else this cap's reads gave no line: the default one
        write_device_spec({**p, **at} if at else p, spec, block_device=p["block_device"])
    write_atomic(probe_file, json.dumps(p, indent=1) + "\n")
    real.probe = p
    return real


SCRATCH_BYTES = 128 * 2**20


def _scratch_file(path: Path, nbytes: int = SCRATCH_BYTES) -> None:
    """A file of nbytes of random data for the probes to read (written
    and fsynced once, dropped from the page cache; kept if already there)."""
    if path.exists() and path.stat().st_size == nbytes:
        return
    with atomic_outputs(path) as (tmp,):
        with open(tmp, "wb") as f:
            for _ in range(nbytes >> 20):
                f.write(os.urandom(2**20))
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
