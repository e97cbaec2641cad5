"""Running a query workload against an index (docs/engine.md "Queries",
docs/workload.md "Measurement protocol").

`run` drops the index files from the page cache (drop_caches as root, else
posix_fadvise DONTNEED per file; or the method asked for), opens the index with the requested
placement, pins the thread to one CPU, runs the workload `passes` times in C
(tierlab_query_batch: no per-query Python overhead) and reports the LAST pass
(the warm one when passes >= 2). Output:
  - the `query` table of the result schema (traces/schema.yaml; Parquet or
    CSV by extension), one row per query of the reported pass;
  - `<out stem>.summary.json` next to it: the run_id of the table's rows;
    qps, latency_mean_ns, latency_p50_ns, latency_p99_ns, latency_p999_ns for
    the reported pass and every pass, how the cache was dropped, where every
    file lived and how that was verified, the machine;
  - optionally a TSV of the top-k: query_id, rank, did, score;
  - optionally (`trace`) a trace directory: the run, query and term tables
    (tierlab.traces.runs), the term table holding each term's postings and
    blocks.
qps = queries / wall time of the C loop of the pass (lookups, decoding,
scoring, sorting; no Python). Bytes "read" are what the algorithm touched in
each file, not device traffic.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from tierlab import __version__
from tierlab.core.errors import TierlabError
from tierlab.core.files import atomic_outputs, write_atomic
from tierlab.engine.index import FILES, Index, dontneed, read_manifest, resident_bytes

BATCH = 4096  # queries per C call (bounds the hits buffer)
HITS_BUFFER_BYTES = 64 << 20  # ... and so does this, for a large k
SUMMARY_SUFFIX = ".summary.json"


def summary_path(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(out.stem + SUMMARY_SUFFIX)


DROP_METHODS = ("auto", "drop-caches", "fadvise")


def drop_caches(index: str | os.PathLike, method: str = "auto") -> dict:
    """Drop the index files from the page cache; say how, and check it.
    auto: drop_caches when root (after sync), else posix_fadvise DONTNEED per
    file; drop-caches: only the global drop (fails without root); fadvise:
    only the per-file drop (leaves other processes' caches alone)."""
    if method not in DROP_METHODS:
        raise TierlabError(f"unknown cache-drop method '{method}' ({', '.join(DROP_METHODS)})")
    how = {"requested": method}
    if method == "drop-caches" and os.geteuid() != 0:
        raise TierlabError("--drop-caches drop-caches needs root; use fadvise or auto")
    if method != "fadvise" and os.geteuid() == 0:
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")
            how["method"] = "drop_caches"
        except OSError as e:
            how["drop_caches_error"] = f"writing /proc/sys/vm/drop_caches failed: {e.strerror or e}"
            if method == "drop-caches":
                raise TierlabError(how["drop_caches_error"]) from None
    if "method" not in how:
        dontneed(index)
        how["method"] = "posix_fadvise_dontneed"
    how["resident_bytes_after"] = resident_bytes(index)
    return how


def machine() -> dict:
    m = {"kernel": platform.release(), "python": platform.python_version(),
         "tierlab_version": __version__}
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                m["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                m["mem_total_bytes"] = int(line.split()[1]) * 1024
                break
    except OSError:
        pass
    gov = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
    m["governor"] = gov.read_text().strip() if gov.exists() else "unknown (no cpufreq)"
    try:
        from tierlab.core.native import cpu_features
        m["cpu_simd"] = cpu_features()
    except Exception:
        pass
    return m


def _device_of(path: Path) -> dict:
    """Mount point, source device and filesystem holding `path`."""
    real = os.path.realpath(path)
    best = ("", "", "")
    try:
        for line in open("/proc/self/mountinfo"):
            parts = line.split()
            point = parts[4]
            sep = parts.index("-")
            fstype, source = parts[sep + 1], parts[sep + 2]
            if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) > len(best[0]):
                best = (point, source, fstype)
    except (OSError, ValueError, IndexError):
        pass
    return {"mount": best[0], "device": best[1], "fs": best[2]}


def pin(cpu: int | None) -> int | None:
    """Pin this thread to one CPU (default: the last one allowed). Returns it."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if cpu is None:
        cpu = allowed[-1]
    if cpu not in allowed:
        raise TierlabError(f"cannot pin to CPU {cpu}: allowed CPUs are {allowed}")
    os.sched_setaffinity(0, {cpu})
    return cpu


def _percentiles(lat: np.ndarray) -> dict:
    if len(lat) == 0:
        return {"latency_mean_ns": 0.0, "latency_p50_ns": 0.0, "latency_p99_ns": 0.0,
                "latency_p999_ns": 0.0}
    return {"latency_mean_ns": float(lat.mean()),
            "latency_p50_ns": float(np.percentile(lat, 50)),
            "latency_p99_ns": float(np.percentile(lat, 99)),
            "latency_p999_ns": float(np.percentile(lat, 99.9))}


def run(index: str | os.PathLike, workload: str | os.PathLike, out: str | os.PathLike, *,
        k: int = 1024, passes: int = 2, drop: str | None = None, placement: str | None = None,
        results: str | os.PathLike | None = None, cpu: int | None = None,
        trace: str | os.PathLike | None = None, progress=None, verify: bool = False) -> dict:
    """Run a workload file (see the module docstring); returns the summary.
    verify: open the index with full checks (every file's body checksum at
    open, every posting of every block decoded; `Index(verify=True)`)."""
    from tierlab.engine.workload import read_queries
    from tierlab.traces import runs
    from tierlab.traces.schema import write_table

    from tierlab.core.values import output_dir, output_file

    out = Path(out)
    if out.suffix not in (".parquet", ".csv"):
        raise TierlabError(f"--out must end in .parquet or .csv, not '{out.suffix or out.name}'")
    if passes < 1:
        raise TierlabError("passes must be >= 1")
    # every output is checked before the run, and written all or nothing after it
    output_file(out, "--out")
    output_file(summary_path(out), "--out (its summary)")
    if results is not None:
        output_file(results, "--results")
    if trace is not None:
        output_dir(trace, "--trace")
        for name in runs.TABLES:
            output_file(Path(trace) / f"{name}.parquet", "--trace")
    manifest = read_manifest(index)
    queries = read_queries(workload)
    cache = drop_caches(index, drop) if drop else {"method": "none"}
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    pinned = pin(cpu)
    try:
        n = len(queries)
        with Index(index, placement, verify=verify) as ix:
            place = ix.placement()
            kept = ix.kept(k)
            batch = max(1, min(BATCH, HITS_BUFFER_BYTES // (16 * kept))) if results else BATCH
            pass_summaries = []
            for p in range(passes):
                last = p == passes - 1
                stats, hits, nhits, wall = [], [], [], 0
                for a in range(0, n, batch):
                    st, w, h, nh = ix.run_batch(queries[a:a + batch], k=k,
                                                want_hits=last and results is not None)
                    stats.append(st)
                    wall += w
                    if h is not None:
                        hits.append(h)
                        nhits.append(nh)
                    if progress:
                        progress(p, min(a + batch, n), n)
                st = np.concatenate(stats) if stats else np.zeros(0)
                lat = st["latency_ns"].astype(np.float64) if n else np.zeros(0)
                s = {"pass": p + 1, "queries": n, "wall_ns": wall,
                     "qps": n / (wall / 1e9) if wall else 0.0, **_percentiles(lat)}
                pass_summaries.append(s)
    finally:
        if affinity is not None:
            os.sched_setaffinity(0, affinity)  # the caller's process, as it was
    summary = {
        "run_id": runs.new_run_id(),
        "index": str(index), "workload": str(workload), "out": str(out),
        "k": k, "passes": passes, "reported_pass": passes,
        "reported": "last pass (warm when passes >= 2)",
        **{key: pass_summaries[-1][key] for key in
           ("queries", "wall_ns", "qps", "latency_mean_ns", "latency_p50_ns", "latency_p99_ns",
            "latency_p999_ns")},
        "unknown_queries": int((st["unknown_terms"] > 0).sum()) if n else 0,
        "single_queries": int(sum(1 for q in queries if len(q) == 1)),
        "and_queries": int(sum(1 for q in queries if len(q) > 1)),
        "per_pass": pass_summaries,
        "cache_drop": cache,
        "placement": place,
        "index_manifest": {key: manifest.get(key) for key in
                           ("codec", "block_size", "documents", "terms", "postings", "blocks",
                            "build_id", "files")},
        "index_device": _device_of(Path(index)),
        "pinned_cpu": pinned,
        "machine": machine(),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tierlab_version": __version__,
        "placement_request": placement or "storage",
        "checks": "full" if verify else "default",
    }
    qclass = _workload_class(workload)
    table = runs.query_run_tables(summary=summary, queries=queries, stats=st,
                                  query_class=qclass, tables=("query",))["query"]
    # the query table and its summary last: when they are there, so is the rest
    written: list[Path] = []
    try:
        if results is not None:
            written.append(Path(results))
            _write_hits(results, hits, nhits)
        if trace is not None:
            written += [Path(trace) / f"{name}.parquet" for name in runs.TABLES]
            runs.write_query_run(trace, summary=summary, queries=queries, stats=st,
                                 query_class=qclass)
        out.parent.mkdir(parents=True, exist_ok=True)
        written.append(out)
        write_table("query", table, out)
        written.append(summary_path(out))
        write_atomic(summary_path(out), json.dumps(summary, indent=2) + "\n")
    except BaseException as e:
        for path in written:
            path.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise TierlabError(f"cannot write {e.filename or 'the results'}: "
                               f"{e.strerror or e}; nothing was kept") from None
        raise
    if trace is not None:
        summary["trace"] = str(trace)
    return summary


def _workload_class(workload) -> str:
    """The frequency class recorded by `tierlab workload generate`, if any."""
    side = Path(f"{workload}.json")
    try:
        return str(json.loads(side.read_text()).get("generator", {}).get("class", "") or "")
    except (OSError, ValueError, AttributeError):
        return ""


def _write_hits(path, hits, nhits) -> None:
    with atomic_outputs(Path(path)) as (tmp,), open(tmp, "w") as f:
        f.write("query_id\trank\tdid\tscore\n")
        qid = 0
        for h, nh in zip(hits, nhits):
            for row, cnt in zip(h, nh):
                for r in range(int(cnt)):
                    f.write(f"{qid}\t{r + 1}\t{int(row[r]['did'])}\t{float(row[r]['score'])!r}\n")
                qid += 1


__all__ = ["run", "drop_caches", "summary_path", "FILES"]
