"""The memory-trace benchmark (`tierlab bench memtrace`): what recording an
address trace costs (traces/memtrace.md), on SINGLE H and AND H.

What is run
-----------
The inputs of `tierlab bench index` (bench/index.py `make_inputs`): one
generated corpus (--size, seeded) and its workloads; the index is built with
--codec and opened with --placement (default dram: no page faults in either
run). The thread is pinned to one CPU. Per workload (SINGLE H, AND H):
  uninstrumented  the release library (libtierlab.so, gcc), the workload run
                  --reps times back to back in C (tierlab_query_batch) after
                  one warm pass; per query its fastest repetition
                  (tierlab_query_stats.latency_ns), summed;
  traced          the tracing build's driver (tierlab-memtrace) on the same
                  queries, once, every query recorded (no sampling) into a
                  trace file in the scratch folder: the driver's clock around
                  each query (the same span, lookup to sorted top-k), summed.
The driver is pinned to the same CPU.

What is reported
----------------
Per workload: uninstrumented_ms, traced_ms, slowdown (traced / uninstrumented),
records (traced accesses), ns_per_access (traced time / records),
trace_bytes (the file), bytes_per_access (file bytes / records, header
included), accesses and bytes per query, and the accesses per region.

JSON layout
-----------
{benchmark: "memtrace", machine{..., loadavg_start, loadavg_end},
config{size_bytes, seed, rp, queries, codec, block_size, placement, k, reps,
classes}, corpus{...}, index{bytes, files{name: bytes}, blocks, postings},
workloads[{type, class, queries, uninstrumented_ms, traced_ms, slowdown,
records, ns_per_access, trace_bytes, bytes_per_access, accesses_per_query,
trace_bytes_per_query, regions{name: accesses}, lackey{queries, accesses,
lackey_accesses, bytes, lackey_bytes, accesses_diff, bytes_diff, regions{name:
the same}} (with --lackey-queries N: the first N queries against valgrind's
lackey on the same run, tierlab.engine.memtrace.lackey_check)}], errors[...]}.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field

import numpy as np

from tierlab.core import registry
from tierlab.core.errors import TierlabError
from tierlab.experiments.bench.index import (Inputs, _machine, corpus_record, inputs_config,
                                             make_inputs, make_work, remove_work,
                                             validate_inputs)

CLASSES = ("H",)


@dataclass(frozen=True)
class Config(Inputs):
    size_bytes: int = 20_000_000
    queries: dict = field(default_factory=lambda: {"H": 200, "M": 1, "L": 1})
    codec: str = "pfor-delta256"
    block_size: int = 256
    placement: str = "dram"
    k: int = 1024
    reps: int = 5
    lackey_queries: int = 0


def validate(cfg: Config) -> None:
    validate_inputs(cfg)
    from tierlab.core import native

    native.codec(cfg.codec)
    if cfg.reps < 1:
        raise TierlabError(f"--reps must be at least 1, got {cfg.reps}")
    if cfg.k < 1:
        raise TierlabError(f"--k must be at least 1, got {cfg.k}")
    if cfg.lackey_queries < 0:
        raise TierlabError(f"--lackey-queries must be >= 0, got {cfg.lackey_queries}")
    if cfg.lackey_queries and shutil.which("valgrind") is None:
        raise TierlabError("--lackey-queries needs valgrind: run `make deps`")


def uninstrumented_ms(ix, queries, k: int, reps: int) -> float:
    """Sum over queries of each query's fastest of `reps` repetitions (ms),
    after one warm pass, with the release library."""
    ix.run_batch(queries, k=k)
    lat = np.vstack([ix.run_batch(queries, k=k)[0]["latency_ns"].astype(np.float64)
                     for _ in range(reps)])
    return float(lat.min(axis=0).sum() / 1e6)


def traced(index, workload, trace, *, k: int, placement: str, cpu: int | None) -> dict:
    """Record the whole workload once (the driver pinned to `cpu`); the
    traced time, records, file size and accesses per region."""
    from tierlab.engine import memtrace as engine
    from tierlab.traces import memtrace

    old = os.sched_getaffinity(0) if cpu is not None else None
    try:
        if cpu is not None:  # the child inherits the affinity
            os.sched_setaffinity(0, {cpu})
        rec = engine.record(index, workload, trace, placement=placement, k=k)
    finally:
        if old is not None:
            os.sched_setaffinity(0, old)
    h, r = memtrace.read(rec.path)
    names = registry.memory_regions()
    counts = np.bincount(r["region"], minlength=len(names)) if len(r) else np.zeros(len(names))
    size = rec.path.stat().st_size
    return {"traced_ms": rec.wall_ns / 1e6, "records": h.records, "trace_bytes": size,
            "ns_per_access": rec.wall_ns / max(h.records, 1),
            "bytes_per_access": size / max(h.records, 1),
            "accesses_per_query": h.records / max(h.queries_traced, 1),
            "trace_bytes_per_query": size / max(h.queries_traced, 1),
            "regions": {n: int(c) for n, c in zip(names, counts)}}


def cross_check(index, queries, path, *, k: int, placement: str) -> dict:
    """The first queries against valgrind's lackey on the same run
    (tierlab.engine.memtrace.lackey_check): per region and in all, accesses
    and bytes of both, and the trace's relative difference."""
    from tierlab.engine import memtrace as engine
    from tierlab.engine.workload import write_queries

    write_queries(path, queries)
    r = engine.lackey_check(index, path, k=k, placement=placement, work=path.parent)
    regions = {}
    for name in sorted(set(r["ours"]) | set(r["lackey"])):
        o, t = r["ours"].get(name, [0, 0]), r["lackey"].get(name, [0, 0])
        regions[name] = {"accesses": o[0], "lackey_accesses": t[0], "bytes": o[1],
                         "lackey_bytes": t[1],
                         "accesses_diff": o[0] / t[0] - 1 if t[0] else None,
                         "bytes_diff": o[1] / t[1] - 1 if t[1] else None}
    tot = {k2: sum(v[k2] for v in regions.values())
           for k2 in ("accesses", "lackey_accesses", "bytes", "lackey_bytes")}
    return {"queries": len(queries), "regions": regions, **tot,
            "accesses_diff": tot["accesses"] / tot["lackey_accesses"] - 1,
            "bytes_diff": tot["bytes"] / tot["lackey_bytes"] - 1}


def run(cfg: Config, out) -> dict:
    """Run the benchmark; returns the JSON document."""
    from tqdm import tqdm

    from tierlab.engine import index as index_mod
    from tierlab.engine import memtrace as engine
    from tierlab.engine.query import pin
    from tierlab.engine.workload import read_queries

    validate(cfg)
    work = make_work(cfg, out, "memtrace")
    load_start = os.getloadavg()
    combos = [(t, c) for t in registry.query_types() for c in CLASSES]
    bar = tqdm(total=1 + 6 + 2 + 2 * len(combos), desc="bench memtrace", unit="step",
               file=sys.stderr, disable=not cfg.progress, leave=False)
    errors: list[dict] = []
    records: list[dict] = []
    index_rec: dict = {}
    cman = None
    try:
        bar.set_postfix_str("tracing build")
        engine.build()
        bar.update()
        cpath, cman, workloads = make_inputs(work, cfg, bar=bar)
        ixpath = work / "index"
        bar.set_postfix_str("build")
        m = index_mod.build(cpath, ixpath, codec=cfg.codec, block_size=cfg.block_size).manifest
        bar.update()
        index_rec = {"bytes": sum(int(v) for v in m["files"].values()),
                     "files": {k: int(v) for k, v in m["files"].items()},
                     "blocks": int(m["blocks"]), "postings": int(m["postings"])}
        affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        cpu = pin(None)
        try:
            with index_mod.Index(ixpath, cfg.placement) as ix:
                for w in workloads:
                    if (w["type"], w["class"]) not in combos:
                        continue
                    queries = read_queries(w["path"])
                    rec = {"type": w["type"], "class": w["class"], "queries": len(queries)}
                    try:
                        bar.set_postfix_str(f"{w['type']} {w['class']} uninstrumented")
                        rec["uninstrumented_ms"] = uninstrumented_ms(ix, queries, cfg.k,
                                                                     cfg.reps)
                        bar.update()
                        bar.set_postfix_str(f"{w['type']} {w['class']} traced")
                        trace = work / f"{w['type']}-{w['class']}.memtrace"
                        rec.update(traced(ixpath, w["path"], trace, k=cfg.k,
                                          placement=cfg.placement,
                                          cpu=cpu if isinstance(cpu, int) else None))
                        trace.unlink(missing_ok=True)
                        rec["slowdown"] = rec["traced_ms"] / rec["uninstrumented_ms"]
                        bar.update()
                        if cfg.lackey_queries:
                            bar.set_postfix_str(f"{w['type']} {w['class']} lackey")
                            rec["lackey"] = cross_check(ixpath, queries[:cfg.lackey_queries],
                                                        work / f"{w['type']}-lackey.queries",
                                                        k=cfg.k, placement=cfg.placement)
                    except TierlabError as e:
                        rec["error"] = str(e)
                        errors.append({"type": w["type"], "class": w["class"], "error": str(e)})
                    records.append(rec)
        finally:
            if affinity is not None:
                os.sched_setaffinity(0, affinity)
    finally:
        bar.close()
        if not cfg.keep:
            shutil.rmtree(work / "index", ignore_errors=True)
        remove_work(cfg, work)
    machine = _machine()
    machine["loadavg_start"] = [round(x, 2) for x in load_start]
    machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return {
        "benchmark": "memtrace",
        "machine": machine,
        "config": {**inputs_config(cfg, work), "codec": cfg.codec, "block_size": cfg.block_size,
                   "placement": cfg.placement, "k": cfg.k, "reps": cfg.reps,
                   "classes": list(CLASSES), "lackey_queries": cfg.lackey_queries},
        "corpus": corpus_record(cman, index_rec.get("postings")) if cman else None,
        "index": index_rec,
        "workloads": records,
        "errors": errors,
    }


def format_table(doc: dict) -> str:
    lines = [f"{'workload':<10}{'queries':>8}{'uninstr. ms':>13}{'traced ms':>12}{'slowdown':>10}"
             f"{'accesses':>14}{'ns/access':>11}{'B/access':>10}{'MB/query':>10}"]
    for r in doc["workloads"]:
        if "slowdown" not in r:
            lines.append(f"{r['type']} {r['class']:<6}  ERROR {r.get('error')}")
            continue
        lines.append(f"{r['type'] + ' ' + r['class']:<10}{r['queries']:>8}"
                     f"{r['uninstrumented_ms']:>13.2f}{r['traced_ms']:>12.2f}"
                     f"{r['slowdown']:>9.1f}x{r['records']:>14,}{r['ns_per_access']:>11.2f}"
                     f"{r['bytes_per_access']:>10.3f}{r['trace_bytes_per_query'] / 1e6:>10.2f}")
    for r in doc["workloads"]:
        lk = r.get("lackey")
        if not lk:
            continue
        lines.append(f"\n{r['type']} {r['class']}, first {lk['queries']} queries against "
                     f"valgrind lackey (off the stack): accesses {100 * lk['accesses_diff']:+.1f} %, "
                     f"bytes {100 * lk['bytes_diff']:+.1f} %")
        for name, g in lk["regions"].items():
            diff = ("-" if g["accesses_diff"] is None else f"{100 * g['accesses_diff']:+.1f} %")
            bdiff = "-" if g["bytes_diff"] is None else f"{100 * g['bytes_diff']:+.1f} %"
            lines.append(f"  {name:<14}{g['accesses']:>12,} vs {g['lackey_accesses']:>12,} "
                         f"({diff:>8}); bytes {g['bytes']:>12,} vs {g['lackey_bytes']:>12,} "
                         f"({bdiff:>8})")
    lines.append("\nuninstrumented: the release library, sum of each query's fastest of "
                 f"{doc['config']['reps']} repetitions; traced: the tracing build recording "
                 "every access, once")
    m = doc["machine"]
    lines.append(f"load average {m['loadavg_start'][0]} at the start, {m['loadavg_end'][0]} at "
                 f"the end ({os.cpu_count()} CPUs)")
    return "\n".join(lines)
