"""The integrity benchmark (`tierlab bench integrity`): what the checks of a
query cost (kernels/formats/index.md, "Checksums"; tierlab.h,
TIERLAB_CHECKS_*), as ratios of query time with and without them, measured
in one run on one index.

What is run
-----------
The inputs of `tierlab bench index` (bench/index.py `make_inputs`): one
generated corpus (--size, seeded) and one workload per SINGLE/AND x class
(default H only). The index is built with --codec (default pfor-delta256,
block size 256) and opened once with --placement (default: every file in
DRAM, so that the device does not hide the CPU cost). The thread is pinned
to one CPU. For every workload: one warm pass at each level, whose top-k must
be identical at every level (the checks never change a result), then --reps
repetitions, each running the whole workload (`Index.run_batch`, the C loop
of tierlab_query_batch) once at every level. A repetition interleaves the
levels chunk by chunk (CHUNK queries at one level, the same queries at the
next, ...; the order of the levels rotating from chunk to chunk), so every
level meets the same state of a shared machine. The levels:
  off      TIERLAB_CHECKS_OFF: no checksum or invariant (only bounds), the
           baseline; never used to serve queries
  default  TIERLAB_CHECKS_DEFAULT: what every query checks
  full     TIERLAB_CHECKS_FULL: `query run --verify` (every posting too)

What is reported
----------------
Per workload and level, over the repetitions, from each query's latency
(tierlab_query_stats.latency_ns: lookup to sorted hits):
  sum_of_min_ms      sum over queries of the query's fastest repetition
  sum_of_median_ms   sum over queries of the query's median repetition
  pass_median_ms     median over repetitions of the summed latency
and the ratios level / off of each (ratio_min, ratio_median, ratio_pass),
plus the median over queries of the per-query ratio of medians. The
fastest repetition of a query is the least disturbed by other work on the
machine, so ratio_min is the primary estimate (`overhead`, the ratio minus
1) and the others show the spread; every repetition's pass time is kept
(reps_ms) to judge the noise. The target: overhead of `default` <= 3 % on
SINGLE H and AND H.

JSON layout
-----------
{benchmark: "integrity", machine{..., loadavg_start, loadavg_end},
config{size_bytes, seed, rp, queries, codec, block_size, placement, k, reps,
levels, types, classes, chunk, primary}, corpus{...}, index{bytes, files{name: bytes},
blocks, postings}, workloads[{type, class, queries, results_identical,
levels{level: {sum_of_min_ms, sum_of_median_ms, pass_median_ms, reps_ms[],
ratio_min, ratio_median, ratio_pass, per_query_ratio_median}}}],
targets[{type, class, level, overhead, target, met}], errors[...]}.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import numpy as np

from tierlab.core import registry
from tierlab.core.errors import TierlabError
from tierlab.experiments.bench.index import (Inputs, build_index, corpus_record,
                                             inputs_config, load_line, machine_loaded,
                                             each_workload, make_inputs, make_work, pinned,
                                             scratch, validate_inputs)

LEVELS = ("off", "default", "full")
CHUNK = 10  # queries run at one level before the next level runs them
DEFAULT_CLASSES = ("H",)
TARGET = 0.03  # default checks: at most 3 % more query time on SINGLE H and AND H
TARGET_CLASSES = ("H",)


@dataclass(frozen=True)
class Config(Inputs):
    codec: str = "pfor-delta256"
    block_size: int = 256
    placement: str = "dram"
    k: int = 1024
    reps: int = 15
    classes: tuple = DEFAULT_CLASSES
    queries: dict = field(default_factory=lambda: {"H": 1000, "M": 2000, "L": 5000})


def validate(cfg: Config) -> None:
    validate_inputs(cfg)
    from tierlab.core import native

    native.codec(cfg.codec)  # a clear error listing the known codecs
    if cfg.reps < 3:
        raise TierlabError(f"--reps must be at least 3, got {cfg.reps}")
    if cfg.k < 1:
        raise TierlabError(f"--k must be at least 1, got {cfg.k}")
    bad = [c for c in cfg.classes if c not in ("H", "M", "L")]
    if bad or not cfg.classes:
        raise TierlabError(f"--class must be H, M or L, got {', '.join(bad) or 'none'}")


def _pass(ix, queries, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    stats, _, hits, nhits = ix.run_batch(queries, k=k, want_hits=True)
    return stats["latency_ns"].astype(np.float64), hits, nhits


def _same_hits(a, b) -> bool:
    (ha, na), (hb, nb) = a, b
    if not np.array_equal(na, nb):
        return False
    for i, n in enumerate(na):
        if not (np.array_equal(ha[i, :n]["did"], hb[i, :n]["did"])
                and np.array_equal(ha[i, :n]["score"], hb[i, :n]["score"])):
            return False
    return True


def measure(ix, queries, k: int, reps: int, chunk: int = CHUNK) -> dict:
    """Warm pass and identity check at every level, then `reps` interleaved
    repetitions; the `levels` record of one workload (see the module doc)."""
    first = {}
    for level in LEVELS:
        ix.set_checks(level)
        _, hits, nhits = _pass(ix, queries, k)
        first[level] = (hits, nhits)
    identical = all(_same_hits(first["off"], first[lv]) for lv in LEVELS[1:])
    lat = {lv: [np.zeros(len(queries)) for _ in range(reps)] for lv in LEVELS}
    turn = 0
    for r in range(reps):
        for a in range(0, len(queries), chunk):
            part = queries[a:a + chunk]
            shift = turn % len(LEVELS)
            order = LEVELS[shift:] + LEVELS[:shift]
            if (turn // len(LEVELS)) % 2:
                order = order[::-1]
            turn += 1
            for level in order:
                ix.set_checks(level)
                t, _, _ = _pass(ix, part, k)
                lat[level][r][a:a + len(part)] = t
    ix.set_checks("default")
    out = {}
    for level in LEVELS:
        a = np.vstack(lat[level])  # reps x queries
        out[level] = {
            "sum_of_min_ms": float(a.min(axis=0).sum() / 1e6),
            "sum_of_median_ms": float(np.median(a, axis=0).sum() / 1e6),
            "pass_median_ms": float(np.median(a.sum(axis=1)) / 1e6),
            "reps_ms": [round(float(x) / 1e6, 4) for x in a.sum(axis=1)],
            "_per_query_median": np.median(a, axis=0),
        }
    base = out["off"]
    for level in LEVELS:
        rec = out[level]
        rec["ratio_min"] = rec["sum_of_min_ms"] / base["sum_of_min_ms"]
        rec["ratio_median"] = rec["sum_of_median_ms"] / base["sum_of_median_ms"]
        rec["ratio_pass"] = rec["pass_median_ms"] / base["pass_median_ms"]
        rec["per_query_ratio_median"] = float(
            np.median(rec["_per_query_median"] / np.maximum(base["_per_query_median"], 1.0)))
    for level in LEVELS:
        del out[level]["_per_query_median"]
    return {"results_identical": identical, "levels": out}


def run(cfg: Config, out) -> dict:
    """Run the benchmark; returns the JSON document."""
    from tqdm import tqdm

    from tierlab.engine import index as index_mod

    validate(cfg)
    work = make_work(cfg, out, "integrity")
    load_start = os.getloadavg()
    combos = [(t, c) for t in registry.query_types() for c in cfg.classes]
    bar = tqdm(total=1 + 6 + 1 + len(combos), desc="bench integrity", unit="step",
               file=sys.stderr, disable=not cfg.progress, leave=False)
    errors: list[dict] = []
    records: list[dict] = []
    index_rec: dict = {}
    cman = None
    with scratch(cfg, work, "integrity", bar) as where:
        cpath, cman, workloads = make_inputs(work, cfg, bar=bar)
        ixpath = work / "index"
        index_rec = build_index(cpath, ixpath, cfg.codec, cfg.block_size, bar)
        with pinned(), index_mod.Index(ixpath, cfg.placement) as ix:
            def one(w, queries):
                rec = measure(ix, queries, cfg.k, cfg.reps)
                if not rec["results_identical"]:
                    rec["error"] = "the top-k differs between check levels"
                bar.update()
                return rec
            records, errors = each_workload(workloads, combos, one, bar)
    targets = []
    for rec in records:
        if rec["class"] in TARGET_CLASSES and "levels" in rec:
            over = rec["levels"]["default"]["ratio_min"] - 1.0
            targets.append({"type": rec["type"], "class": rec["class"], "level": "default",
                            "overhead": over, "target": TARGET, "met": over <= TARGET})
    machine = machine_loaded(load_start)
    return {
        "benchmark": "integrity",
        "machine": machine,
        "config": {**inputs_config(cfg, where["work"]), "codec": cfg.codec, "block_size": cfg.block_size,
                   "placement": cfg.placement, "k": cfg.k, "reps": cfg.reps,
                   "levels": list(LEVELS), "types": list(registry.query_types()),
                   "classes": list(cfg.classes), "chunk": CHUNK,
                   "primary": "ratio_min: sum of per-query fastest repetitions, level / off"},
        "corpus": corpus_record(cman, index_rec.get("postings")) if cman else None,
        "index": index_rec,
        "workloads": records,
        "targets": targets,
        "errors": errors,
    }


def format_table(doc: dict) -> str:
    lines = [f"{'workload':<10}{'queries':>8}  " + "".join(
        f"{lv + ' ms':>12}" for lv in LEVELS) + f"{'default/off':>13}{'full/off':>10}"
        f"{'(median)':>10}  same hits"]
    for r in doc["workloads"]:
        if "levels" not in r:
            lines.append(f"{r['type']} {r['class']:<6}  ERROR {r.get('error')}")
            continue
        lv = r["levels"]
        lines.append(
            f"{r['type'] + ' ' + r['class']:<10}{r['queries']:>8}  "
            + "".join(f"{lv[x]['sum_of_min_ms']:>12.2f}" for x in LEVELS)
            + f"{lv['default']['ratio_min']:>13.4f}{lv['full']['ratio_min']:>10.4f}"
            f"{lv['default']['ratio_median']:>10.4f}  {'yes' if r['results_identical'] else 'NO'}")
    lines.append("\nms: sum over queries of each query's fastest of "
                 f"{doc['config']['reps']} interleaved repetitions; (median): default/off from "
                 "each query's median repetition")
    for t in doc["targets"]:
        lines.append(f"target {t['type']} {t['class']}: default checks cost "
                     f"{100 * t['overhead']:+.2f} % (<= {100 * t['target']:.0f} %): "
                     + ("MET" if t["met"] else "MISSED"))
    lines.append(load_line(doc["machine"]))
    return "\n".join(lines)
