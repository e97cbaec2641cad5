"""`tierlab validate GRID.yaml`: the SimPy model (model/) against the native
APCache runtime (kernels/src/apcache/, tierlab.apcache) on the same index,
workload files, devices and parameters, over a grid of cells; the errors,
rankings and diagnosis come from analysis/validation.py.

The grid file (every key may hold a list, except `index`, `workload` and
`out`; the keys of a generated `workload` may hold lists too; the rows are
the cartesian product, one runtime run and one model run each):

    index: {generate: {size: 50MB, codec: pfor-delta256, seed: 0}}  # or an index folder
    workload: {type: [single, and], class: H, queries: 500, rp: 0.25, seed: 1}
    config: [base, base-prefetch, hybrid, hybrid-prefetch]
    cache_fraction: [0.05, 0.2, 0.8]   # of the index's DID + freq bytes; or cache_bytes
    device: [hdd-7200, nvme-p4800x, real]
    cores: 1
    segment_bytes: 32KiB
    lookahead: default                 # each configuration's own; or N / adaptive
    dram_budget_bytes: 2MB
    policy: lru
    readahead_bytes: 128KiB
    k: 1024
    cpu: measured                      # or table
    repeats: 3                         # runs of a short row (median kept); 1 = once
    min_runs: 2                        # every row at least: a twin run for the noise floor
    out: validate-out

Calibration (never from the runtime results validated here): the cost
table of `tierlab query costs` measured once on the index
(OUT/costs.json); with `cpu: measured` (the default) each query's CPU time
as `tierlab query run` measured it on the same workload file with every
structure in DRAM, right before and right after the runtime run it is
compared with (ROW/measured/cpu.trace/, a trace the model replays, each
query's latency the mean of the two: no fit error, measured blocks per
term); the device specs of sim-configs/devices, and for the device `real`
a spec measured on this machine by a small probe (OUT/devices/real.yaml,
`probe_device`: the latency and bandwidth of reads through the runtime's
own read path, `runtime_reads`; one spec per page-cache cap the grid's real
rows plan, real-capN.yaml; and, since the disk's speed drifts, each real
row's own probe right before and after its run, ROW/measured/real.yaml,
which its model gets). Emulated rows are also charged the runtime's
page-cache hits, a base-prefetch worker's page copies and the bookkeeping of
a read (the table's page_hit_ns, page_touch_ns, page_miss_ns), and a waiting
thread spins as long as the runtime's did (handoff_spin_ns). On the real
device the base and hybrid rows' page cache is FIFO (page_cache_policy: the
kernel ignores accessed bits of the runtime's MADV_RANDOM mapping). The runtime's
segment cache lives in DRAM (`--slow-tier dram`), so the model's slow tier
is `ddr4-2666` (tier factor 1). Both do one cold pass.

Noise. The CPU speed of memory-bound code on this VM drifts by up to 60 %
over seconds (400 SINGLE H queries: 7.8-14.8 ms for the same query run,
in runs of similar values; a pure ALU loop stays within 1 %), so the CPU
trace is taken next to the run it calibrates rather than once per
workload. And a runtime run shorter than REPEAT_BELOW_S (an NVMe row: tens
of milliseconds) is run `repeats` times, the run with the median QPS kept
with its own CPU trace (all QPS in ROW/measured/repeats.json), and
SPREAD_EXTRA more times when their QPS lie more than SPREAD_RERUN of their
median apart (a noisy moment of the host: in one grid a base NVMe row ran
at 9,666 and 15,985 QPS and three runs between them were late); longer runs
average the noise themselves and run `min_runs` times (default 2). An
emulated run whose device was late for more than LATE_SHARE of its wall
time (its reads returned after their planned completion: the host did not
run the thread when due, which made 24 of 64 emulated runs 2-15 % late in one grid and 8 of 64 in
another an hour apart) did not emulate the spec's device and is run again,
at most LATE_RETRIES more times. Neither side sees the other's
results. The model resumes a woken thread after the cost table's median
wake-up: drawn wake-ups (model key wake_ups: drawn) reproduce the runtime's
occasional tipping into thrashing on a 10 % cache, but how often the long
wake-ups come was not stable enough on this VM to predict a given run.
Instead the model of each prefetch row is checked for a second steady state
(model key check_bistable: a second run with the worker started as far
ahead as it may go); the summary counts the bistable rows, names those whose
runtime settled in the other state, and shows the errors with that state's
prediction apart from the targets (which keep the prediction made).

Noise floor. Every row runs at least `min_runs` times, so each kept run has
a twin (`twin_run`: another run of the same row that kept its timing). The
twins are scored against the kept runs exactly as the model is (the same
targets, `noise_floor` in analysis/validation.py), beside the model's score
on the same rows: a target the runtime misses against itself lies below
this machine's run-to-run noise, and no prediction can be held to it here.

Layout of OUT: index/ (a generated index, with corpus/), workloads/,
costs.json, devices/real.yaml and real-capN.yaml (and probe-scratch.bin while it runs),
rows/<row id>/{measured,model}/ (the three
tables of each run, and measured/cpu.trace/; a row is finished when both
hold cache_run.parquet, and a rerun skips it), then measured.parquet, model.parquet, validation.csv,
validation.md, parity.png, summary.json.
"""
from __future__ import annotations

import gc
import hashlib
import itertools
import json
import mmap
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import yaml

from . import values
from .errors import TierlabError

GRID_KEYS = ("index", "workload", "config", "cache_bytes", "cache_fraction", "device", "cores",
             "segment_bytes", "lookahead", "dram_budget_bytes", "policy", "readahead_bytes", "k",
             "costs", "cpu", "repeats", "min_runs", "out")
WORKLOAD_KEYS = ("type", "class", "queries", "rp", "seed")
GENERATE_KEYS = ("size", "codec", "seed")
ROW_KEYS = ("config", "cache_bytes", "cache_fraction", "device", "cores", "segment_bytes",
            "lookahead", "dram_budget_bytes", "policy", "readahead_bytes", "k")
DEFAULTS = {"config": ["base", "base-prefetch", "hybrid", "hybrid-prefetch"],
            "device": "nvme-p4800x", "cores": 1, "segment_bytes": 32 * 1024,
            "lookahead": "default", "dram_budget_bytes": 50_000_000, "policy": "lru",
            "readahead_bytes": 128 * 1024, "k": 1024, "costs": "measure", "cpu": "measured",
            "repeats": 3, "min_runs": 2, "out": "validate-out"}
REPEAT_BELOW_S = 1.0  # runtime runs shorter than this are repeated (see Noise)
SPREAD_RERUN = 0.2    # ... and run SPREAD_EXTRA more times when their QPS lie further apart
SPREAD_EXTRA = 2      # (max - min) / median than this
LATE_SHARE = 0.02     # an emulated run whose device was late this share of its wall time
LATE_RETRIES = 2      # does not count and runs again, at most this many more times per row
# pause between the CPU trace (in this process) and the runtime run: the
# trace's 26 MB DRAM copy of the index is freed and collected meanwhile, not
# during the run's first queries (a ~1 ms stall there can tip base-prefetch
# at a small cache into its thrashing state; 2 of 6 runs did without it)
SETTLE_S = 0.3
RUNTIME_SLOW_TIER = "dram"         # tierlab.apcache's default segment-cache tier
MODEL_SLOW_TIER = "ddr4-2666"      # ... which the model reads as this memory spec
REAL = "real"
# columns collect() adds to the cache_run rows (not of the result schema)
LABELS = ("row_id", "cell", "device_label", "workload_type", "workload_class", "workload_rp",
          "grid_cache_bytes")
# PARAM_KEYS of analysis/validation.py that the two sides fill differently for
# the same run (real device name, 0 vs the page cap for unused parameters):
# set from the grid row on both sides before pairing.
NORMALISED = ("device", "cache_bytes", "segment_bytes", "lookahead", "dram_budget_bytes",
              "query_type", "query_class", "rp")


# --- the grid -----------------------------------------------------------------------

@dataclass
class Row:
    """One runtime run + one model run."""

    id: str
    cell: str          # the row without its configuration (ranking group)
    values: dict       # ROW_KEYS, normalised
    workload: dict     # type, class, queries, rp, seed

    def label(self) -> str:
        v = self.values
        cache = (f"{v['cache_fraction']:g}x" if v["cache_fraction"] is not None
                 else f"{v['cache_bytes']}B")
        return (f"{v['config']} {v['device']} {self.workload['type']} rp{self.workload['rp']:g} "
                f"cache {cache}")


@dataclass
class Grid:
    index: dict        # {"path": DIR} or {"generate": {size, codec, seed}}
    rows: list
    out: Path
    costs: str         # "measure" or a cost table file
    cpu: str = "measured"  # the model's CPU per query: "measured" (query run trace) or "table"
    repeats: int = 3       # runs of a short runtime row (the median-QPS run kept)
    min_runs: int = 2      # runs of every row at least (noise floor: `twin_run`)
    doc: dict = field(default_factory=dict)

    def workloads(self) -> list[dict]:
        seen, out = set(), []
        for r in self.rows:
            key = workload_name(r.workload)
            if key not in seen:
                seen.add(key)
                out.append(r.workload)
        return out


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def workload_name(w: dict) -> str:
    return f"{w['type']}-{w['class']}-n{w['queries']}-rp{w['rp']:g}-s{w['seed']}"


def _listed(key: str, v) -> list:
    if isinstance(v, list):
        if not v:
            raise TierlabError(f"grid: key '{key}' has an empty list")
        return v
    return [v]


def _size(key: str, v) -> int:
    return values.size(f"grid: {key}", v)


def _int(key: str, v, lo: int = 1) -> int:
    return values.whole(f"grid: {key}", v, lo)


def _index(x) -> dict:
    if isinstance(x, (str, os.PathLike)):
        p = Path(x)
        from .index import read_manifest

        try:
            read_manifest(p)
        except TierlabError as e:
            raise TierlabError(f"grid: index: {e}") from None
        return {"path": str(p)}
    if not isinstance(x, dict) or set(x) != {"generate"} or not isinstance(x["generate"], dict):
        raise TierlabError(f"grid: index: an index folder or {{generate: {{size: 50MB, codec: "
                           f"pfor-delta256, seed: 0}}}}, got {x!r}")
    g = dict(x["generate"])
    unknown = [k for k in g if k not in GENERATE_KEYS]
    if unknown:
        raise TierlabError(f"grid: index.generate: unknown key '{unknown[0]}'; known: "
                           f"{', '.join(GENERATE_KEYS)}")
    from .native import codec as find_codec

    out = {"size": _size("index.generate.size", g.get("size", "50MB")),
           "codec": g.get("codec", "pfor-delta256"),
           "seed": _int("index.generate.seed", g.get("seed", 0), 0)}
    if not isinstance(out["codec"], str):
        raise TierlabError(f"grid: index.generate.codec: a codec name, got {out['codec']!r}")
    try:
        find_codec(out["codec"])
    except TierlabError as e:
        raise TierlabError(f"grid: index.generate.codec: {e}") from None
    return {"generate": out}


def _workloads(w) -> list[dict]:
    if not isinstance(w, dict):
        raise TierlabError(f"grid: workload: a mapping {{{', '.join(WORKLOAD_KEYS)}}}, got {w!r}")
    unknown = [k for k in w if k not in WORKLOAD_KEYS]
    if unknown:
        raise TierlabError(f"grid: workload: unknown key '{unknown[0]}'; known: "
                           f"{', '.join(WORKLOAD_KEYS)}")
    base = {"type": "single", "class": "H", "queries": 500, "rp": 0.25, "seed": 0}
    base.update(w)
    axes = {k: _listed(f"workload.{k}", base[k]) for k in WORKLOAD_KEYS}
    out = []
    for combo in itertools.product(*axes.values()):
        g = dict(zip(WORKLOAD_KEYS, combo))
        if g["type"] not in ("single", "and"):
            raise TierlabError(f"grid: workload.type: {g['type']!r}; known: single, and")
        if str(g["class"]).upper() not in ("H", "M", "L"):
            raise TierlabError(f"grid: workload.class: {g['class']!r}; known: H, M, L")
        g["class"] = str(g["class"]).upper()
        g["queries"] = _int("workload.queries", g["queries"])
        rp = g["rp"]
        if isinstance(rp, bool) or not isinstance(rp, (int, float)) or not 0 <= rp <= 1:
            raise TierlabError(f"grid: workload.rp: a probability in [0, 1], got {rp!r}")
        g["rp"] = float(rp)
        g["seed"] = _int("workload.seed", g["seed"], 0)
        out.append(g)
    return out


def _device(v) -> str:
    from . import specs

    if v == REAL:
        return v
    if not isinstance(v, str):
        raise TierlabError(f"grid: device: a spec name of sim-configs/devices or 'real', got {v!r}")
    try:
        specs.load(v, kind="storage")
    except TierlabError as e:
        raise TierlabError(f"grid: device: {e}") from None
    return v


def _row_values(r: dict) -> dict | None:
    """Check one combination; None when it is not a row (adaptive lookahead
    for base-prefetch). Rows that repeat another are dropped by the caller."""
    from . import apcache

    v = dict(r)
    if v["config"] not in apcache.configs():
        raise TierlabError(f"grid: config: unknown configuration '{v['config']}'; known: "
                           f"{', '.join(apcache.configs())}")
    if v["policy"] not in apcache.policies():
        raise TierlabError(f"grid: policy: unknown policy '{v['policy']}'; known: "
                           f"{', '.join(apcache.policies())}")
    v["device"] = _device(v["device"])
    from .model.config import check_run_sizes

    check_run_sizes(v, "grid: ")
    if v["cache_bytes"] is not None:
        v["cache_bytes"] = _size("cache_bytes", v["cache_bytes"])
    else:
        f = v["cache_fraction"]
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f:
            raise TierlabError(f"grid: cache_fraction: a share of the index's DID + freq bytes "
                               f"> 0, got {f!r}")
        v["cache_fraction"] = float(f)
    la = v["lookahead"]
    cfg = v["config"]
    if cfg in ("base", "hybrid"):
        if not (la in ("default", None, "none", "adaptive") or _is_la(la)):
            _bad_la(la)
        v["lookahead"] = None  # no lookahead: one row whatever the list holds
    elif la in ("default", None):
        v["lookahead"] = None
    elif la == "adaptive":
        if cfg != "hybrid-prefetch":
            return None  # base-prefetch has no adaptive lookahead: not a row
    elif _is_la(la):
        v["lookahead"] = int(la)
    else:
        _bad_la(la)
    if not cfg.startswith("hybrid"):  # unused parameters: one row, not one per value
        v["segment_bytes"] = None
        v["dram_budget_bytes"] = None
    return v


def _is_la(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, int) and x >= 1


def _bad_la(x):
    raise TierlabError(f"grid: lookahead: default, adaptive or a number of queries >= 1, got {x!r}")


def parse(doc, where: str = "grid") -> Grid:
    """Validate a grid document and expand it into rows; a TierlabError
    names the bad key."""
    if not isinstance(doc, dict):
        raise TierlabError(f"{where}: a grid is a YAML mapping of keys to values or lists")
    unknown = [k for k in doc if k not in GRID_KEYS]
    if unknown:
        raise TierlabError(f"{where}: unknown key '{unknown[0]}'; known: {', '.join(GRID_KEYS)}")
    if "index" not in doc:
        raise TierlabError(f"{where}: index: give an index folder or {{generate: {{size: 50MB}}}}")
    if "workload" not in doc:
        raise TierlabError(f"{where}: workload: give {{type, class, queries, rp, seed}}")
    if doc.get("cache_bytes") is not None and doc.get("cache_fraction") is not None:
        raise TierlabError(f"{where}: cache_bytes and cache_fraction: give one of them, not both")
    if doc.get("cache_bytes") is None and doc.get("cache_fraction") is None:
        raise TierlabError(f"{where}: cache_fraction: give cache_fraction (of the index's DID + "
                           "freq bytes) or cache_bytes")
    index = _index(doc["index"])
    wls = _workloads(doc["workload"])
    out = doc.get("out", DEFAULTS["out"])
    if not isinstance(out, (str, os.PathLike)):
        raise TierlabError(f"{where}: out: a folder, got {out!r}")
    costs = doc.get("costs", DEFAULTS["costs"])
    if not isinstance(costs, (str, os.PathLike)) or (costs != "measure"
                                                     and not Path(costs).is_file()):
        raise TierlabError(f"{where}: costs: 'measure' (tierlab query costs on the index) or a "
                           f"cost table file, got {costs!r}")
    cpu = doc.get("cpu", DEFAULTS["cpu"])
    if cpu not in ("measured", "table"):
        raise TierlabError(f"{where}: cpu: 'measured' (each query's CPU time from a tierlab "
                           f"query run of the workload in DRAM) or 'table' (the cost table's "
                           f"formula), got {cpu!r}")
    repeats = _int("repeats", doc.get("repeats", DEFAULTS["repeats"]))
    min_runs = _int("min_runs", doc.get("min_runs", DEFAULTS["min_runs"]))
    vals = {k: _listed(k, doc.get(k, DEFAULTS.get(k))) for k in ROW_KEYS}
    rows, seen = [], set()
    for combo in itertools.product(*vals.values(), range(len(wls))):
        r = _row_values(dict(zip(ROW_KEYS, combo[:-1])))
        if r is None:
            continue
        w = wls[combo[-1]]
        # min_runs is not part of it: a row measured with fewer runs is still a
        # measurement, only without a twin for the noise floor
        key = {"row": r, "workload": w, "index": index, "cpu": cpu, "repeats": repeats,
               "cpu_trace": "per run"}
        if r["device"] == REAL:  # rows measured under the kernel's read-around are stale
            key["readahead"] = "runtime"
        rid = _digest(key)
        if rid in seen:
            continue
        seen.add(rid)
        group = {k: x for k, x in r.items() if k not in ("config", "lookahead", "segment_bytes",
                                                         "dram_budget_bytes")}
        cell = _digest({"cell": group, "workload": w, "index": index})
        rows.append(Row(rid, cell, r, w))
    return Grid(index=index, rows=rows, out=Path(out), costs=str(costs), cpu=cpu,
                repeats=repeats, min_runs=min_runs, doc=doc)


def load(path) -> Grid:
    return parse(values.read_yaml(path) or {}, str(path))


# --- inputs: index, workloads, costs, the real device -------------------------------------

def prepare_index(grid: Grid, log=print) -> Path:
    """The index folder: the given one, or generated once into OUT/index."""
    from . import corpus as corpus_mod
    from . import index as index_mod

    if "path" in grid.index:
        return Path(grid.index["path"])
    g = grid.index["generate"]
    idx = grid.out / "index"
    spec_file = grid.out / "index.json"
    if (idx / "manifest.json").exists():
        try:
            old = json.loads(spec_file.read_text())
        except (OSError, ValueError):
            old = None
        if old != g:
            raise TierlabError(f"{idx} was generated with {old}, the grid asks for {g}: give "
                               f"another out folder")
        return idx
    grid.out.mkdir(parents=True, exist_ok=True)
    cdir = grid.out / "corpus"
    cdir.mkdir(exist_ok=True)
    corpus = cdir / "corpus.txt"
    if not corpus.exists():
        log(f"generating a {g['size'] / 1e6:g} MB corpus (seed {g['seed']}) ...")
        corpus_mod.generate(corpus, corpus_mod.GenerateParams(size_bytes=g["size"],
                                                              seed=g["seed"]), progress=False)
    log(f"building the {g['codec']} index ...")
    if idx.exists():
        shutil.rmtree(idx)
    index_mod.build(corpus, idx, codec=g["codec"])
    spec_file.write_text(json.dumps(g) + "\n")
    return idx


def _term_table(grid: Grid, index: Path) -> tuple[dict, str]:
    """workload.generate's source: the generated corpus, or a term table
    written from the index's dictionary (postings; occurrences = postings)."""
    if "generate" in grid.index:
        return {"corpus": grid.out / "corpus" / "corpus.txt"}, "corpus"
    from .index import Index

    table = grid.out / "workloads" / "index-terms.tsv"
    with Index(index) as ix:
        docs = int(ix.info["docs"])
        if not table.exists():
            table.parent.mkdir(parents=True, exist_ok=True)
            t = ix.extents()[["term", "postings"]].copy()
            t["occurrences"] = t["postings"]
            t.to_csv(table, sep="\t", index=False)
    return {"terms": table, "documents": docs}, "index dictionary"


def prepare_workloads(grid: Grid, index: Path) -> dict:
    """One query file per workload of the grid (tierlab.workload.generate),
    read by the runtime and the model alike: {name: path}."""
    from . import workload as wl

    src, _ = _term_table(grid, index)
    d = grid.out / "workloads"
    d.mkdir(parents=True, exist_ok=True)
    out = {}
    for w in grid.workloads():
        name = workload_name(w)
        path = d / f"{name}.queries"
        if not path.exists() or not wl.stats_path(path).exists():
            wl.generate(path, cls=w["class"], qtype=w["type"], queries=w["queries"], rp=w["rp"],
                        seed=w["seed"], **src)
        out[name] = path
    return out


def cpu_trace(index: Path, workload: Path, k: int, out: Path) -> None:
    """A `tierlab query run` of the workload file with every structure in
    DRAM (2 passes, the warm one recorded) as a trace in the folder `out`."""
    from . import query

    out.mkdir(parents=True, exist_ok=True)
    query.run(index, workload, out / "queries.parquet", k=k, placement="dram", passes=2,
              trace=out)


def _median_latency(table: Path, runs: list) -> None:
    """Rewrite the trace table's latency_ns as each query's median over the
    runs (same workload, same query order; the mean of two)."""
    import numpy as np

    from .traces.schema import read_table, write_table

    name, q = read_table(table)
    q["latency_ns"] = np.median(np.vstack(runs), axis=0).round().astype(q["latency_ns"].dtype)
    write_table(name, q, table)


def prepare_costs(grid: Grid, index: Path, log=print):
    """The cost table: the grid's file, or `tierlab query costs` on the index
    (measured once, OUT/costs.json)."""
    from . import costs as costs_mod

    if grid.costs != "measure":
        return costs_mod.Costs.load(grid.costs), Path(grid.costs)
    path = grid.out / "costs.json"
    if path.exists():
        table = costs_mod.Costs.load(path)
        if table.missing():  # kept: the rows finished with it were calibrated by it
            log(f"note: {path}: {table.missing()}; the model charges nothing for what it lacks "
                f"(delete it to measure the table again)")
        return table, path
    log("calibrating: tierlab query costs on the index (CPU cost per query, block, posting) ...")
    table = costs_mod.measure(index)
    table.save(path)
    return table, path


# --- the real device: a probe ------------------------------------------------------------

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

    from .apcache import _binary

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
    the same line under each page-cache cap of `caps` (`runtime_lines`: on a
    2-vCPU VM a 128 KiB run through the kernel's page cache took ~260 us
    under a 1 MiB cap, ~335 us under 4 MiB and ~550 us uncapped in one
    measurement; in a later one the lines under 0.9, 1.0 and 4.4 MB caps
    agreed within ~15 %). The scratch file is removed, unless it is the
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
    ib = _index_bytes(index)
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
    probe_file.write_text(json.dumps(p, indent=1) + "\n")
    real.probe = p
    return real


SCRATCH_BYTES = 128 * 2**20


def _scratch_file(path: Path, nbytes: int = SCRATCH_BYTES) -> None:
    """A file of nbytes of random data for the probes to read (written
    and fsynced once, dropped from the page cache; kept if already there)."""
    if path.exists() and path.stat().st_size == nbytes:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        for _ in range(nbytes >> 20):
            f.write(os.urandom(2**20))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    os.replace(tmp, path)


# --- running -----------------------------------------------------------------------------

def _index_bytes(index: Path) -> int:
    """DID + freq bytes without the two file headers (the runtime's index_bytes)."""
    return sum((index / f).stat().st_size for f in ("dids.bin", "freqs.bin")) - 2 * 128


def cache_bytes(row: Row, index_bytes: int) -> int:
    v = row.values
    if v["cache_bytes"] is not None:
        return int(v["cache_bytes"])
    return max(int(round(v["cache_fraction"] * index_bytes)), 4096)


def _runtime_args(row: Row, cache: int) -> dict:
    v = row.values
    hybrid = v["config"].startswith("hybrid")
    kw = {"config": v["config"], "cache_size": cache, "policy": v["policy"],
          "cores": v["cores"], "k": v["k"], "readahead": v["readahead_bytes"],
          "device": v["device"], "slow_tier": RUNTIME_SLOW_TIER, "lookahead": v["lookahead"]}
    if hybrid:
        kw["segment_size"] = v["segment_bytes"]
        kw["dram_budget"] = v["dram_budget_bytes"]
    return kw


def _model_doc(row: Row, cache: int, index: Path, workload: Path, costs_path: Path,
               real: RealDevice | None, trace: Path | None = None,
               page_cap: int | None = None, spin_ns: int | None = None) -> dict:
    """The model's run configuration of a row. page_cap: the page-cache cap
    the runtime ran with on the real device, when its cgroup floor raised the
    grid's; spin_ns: how long its waiting threads spun before blocking (0
    unless it pinned them). Parameters of that run, not results."""
    v = row.values
    hybrid = v["config"].startswith("hybrid")
    is_real = v["device"] == REAL
    # the runtime applies readahead_bytes on the real device too (not the disk's read_ahead_kb)
    ra = v["readahead_bytes"]
    doc = {"config": v["config"], "policy": v["policy"],
           "device": str(real.spec(real_page_cap(row, cache))) if is_real else v["device"],
           "slow_tier": MODEL_SLOW_TIER, "index": str(index),
           "workload": ({"trace": str(trace), "cpu": "measured"} if trace is not None
                        else {"file": str(workload)}),
           "cache_bytes": cache, "readahead_bytes": ra, "cores": v["cores"],
           "k": v["k"], "passes": 1, "costs": str(costs_path), "name": f"validate {row.id}"}
    if hybrid:
        doc["segment_bytes"] = v["segment_bytes"]
        doc["dram_budget_bytes"] = v["dram_budget_bytes"]
    if is_real and page_cap:
        doc["dram_budget_bytes" if hybrid else "cache_bytes"] = page_cap
    if spin_ns is not None:
        doc["handoff_spin_ns"] = int(spin_ns)
    if is_real and v["config"] in ("base", "hybrid"):
        # every read of the index is through its MADV_RANDOM mapping, whose accessed bits
        # Linux (6.3 on: vma_has_recency) ignores: its page cache keeps these pages in FIFO
        # order; a prefetch worker's pread marks them accessed, as LRU assumes
        doc["page_cache_policy"] = "fifo"
    if not is_real:  # the runtime's emulated page cache: each block access costs a hit,
        doc["page_hit_ns"] = "table"  # each page a base-prefetch worker reads a touch,
        doc["page_touch_ns"] = "table"  # and each read its frames' bookkeeping
        doc["page_miss_ns"] = "table"
    if v["config"].endswith("prefetch"):  # which steady state a run settles in is chance
        doc["check_bistable"] = True
    if v["lookahead"] is not None:
        doc["lookahead"] = v["lookahead"]
    return doc


def _swap_in(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def row_dir(out: Path, row: Row) -> Path:
    return out / "rows" / row.id


def is_done(out: Path, row: Row) -> bool:
    d = row_dir(out, row)
    return all((d / side / "cache_run.parquet").exists() for side in ("measured", "model"))


def _measure(row: Row, index: Path, workload: Path, tmp: Path, cache: int, repeats: int,
             progress=None, cpu: bool = True, device_probe=None, min_runs: int = 1) -> None:
    """The runtime run of a row into `tmp`: min_runs times, or, when the
    first took less than REPEAT_BELOW_S, max(repeats, min_runs) times,
    SPREAD_EXTRA more when the QPS of those lie further apart than
    SPREAD_RERUN of their median, with the run of the median QPS kept
    (`median_run`); an emulated run late for more than LATE_SHARE of its wall
    time does not count and is run again, at most LATE_RETRIES more times
    (module docstring, Noise). tmp/repeats.json lists every run's QPS,
    whether it kept its timing and its metrics, the kept run and its twin
    (`twin_run`: the noise floor compares the two). cpu:
    a CPU trace before and after each run (tmp/cpu.trace/, `cpu_trace`).
    device_probe (the real device): called before and after each run, its
    reads kept in tmp/device-probe.json."""
    from . import apcache
    from .analysis.validation import METRICS
    from .traces.schema import read_table

    runs = []  # (qps, folder, kept timing)
    metrics = []  # per run: METRICS as measured
    try:
        # runs to keep the median of; a long run averages its noise itself and
        # runs min_runs times only
        want = base = max(repeats, min_runs)
        short = True
        i = 0
        while sum(ok for _, _, ok in runs) < want and i < want + LATE_RETRIES:
            rdir = tmp.with_name(f"{tmp.name}.{i}")
            shutil.rmtree(rdir, ignore_errors=True)
            runs.append((0.0, rdir, False))
            before = rdir.with_name(rdir.name + ".cpu")
            shutil.rmtree(before, ignore_errors=True)
            probed = {"before": device_probe()} if device_probe else None
            if cpu:
                cpu_trace(index, workload, row.values["k"], before)
                gc.collect()
                time.sleep(SETTLE_S)
            apcache.run(index, workload, rdir, progress=progress, **_runtime_args(row, cache))
            if probed is not None:
                probed["after"] = device_probe()
                (rdir / "device-probe.json").write_text(json.dumps(probed, indent=1) + "\n")
            if cpu:
                after = rdir / "cpu.trace"
                cpu_trace(index, workload, row.values["k"], after)
                _median_latency(after / "query.parquet",
                                [read_table(d / "query.parquet")[1]["latency_ns"].to_numpy()
                                 for d in (before, after)])
                shutil.rmtree(before)
            r = read_table(rdir / "cache_run.parquet")[1].iloc[0]
            runs[-1] = (float(r["qps"]), rdir, late_share(r) <= LATE_SHARE)
            metrics.append({k: _finite(r.get(k)) for k in METRICS})
            if i == 0 and float(r["wall_ns"]) >= REPEAT_BELOW_S * 1e9:
                want, short = min_runs, False
            kept = [q for q, _, ok in runs if ok]
            if short and 1 < want == base and len(kept) >= want and spread(kept) > SPREAD_RERUN:
                want += SPREAD_EXTRA  # a noisy moment: a median of more runs
            i += 1
        keep = median_run(runs)
        os.replace(keep[1], tmp)
        timed = [ok for _, _, ok in runs]
        (tmp / "repeats.json").write_text(json.dumps(
            {"qps": [q for q, _, _ in runs], "kept_timing": timed,
             "kept": runs.index(keep), "twin": twin_run(runs.index(keep), timed),
             "metrics": metrics,
             "rule": f"every row runs {min_runs} time(s) at least; runs shorter than "
                     f"{REPEAT_BELOW_S:g} s are repeated {base} times, "
                     f"{SPREAD_EXTRA} more when their QPS lie more than {SPREAD_RERUN:.0%} of "
                     f"their median apart; an emulated run whose device was late for more "
                     f"than {LATE_SHARE:.0%} of its wall time is run again (at most "
                     f"{LATE_RETRIES} more runs); the run with the median QPS among those that "
                     "kept their timing is kept"}) + "\n")
    finally:
        for _, rdir, _ in runs:
            shutil.rmtree(rdir, ignore_errors=True)
            shutil.rmtree(rdir.with_name(rdir.name + ".cpu"), ignore_errors=True)


def _finite(x) -> float | None:
    """A metric for JSON: a float, or None for what is missing or not finite."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def twin_run(kept: int, timed: list) -> int | None:
    """The run a row's kept run is compared with for the noise floor (the
    runtime against itself, scored like the model): another run that kept its
    timing (any other when none did), the nearest in order, the later of two;
    None for a row that ran once."""
    others = [i for i, ok in enumerate(timed) if i != kept and ok] or \
        [i for i in range(len(timed)) if i != kept]
    return min(others, key=lambda i: (abs(i - kept), i < kept)) if others else None


def spread(qps) -> float:
    """(max - min) / median of run QPS: the runtime's run-to-run noise."""
    import numpy as np

    m = float(np.median(qps))
    return (max(qps) - min(qps)) / m if m > 0 else 0.0


def median_run(runs: list):
    """The run (qps, folder, kept timing) to keep: among those that kept
    their timing (all when none did), the one nearest their median QPS; of
    an even number's two middle runs, the one nearer the median of all runs,
    late ones included (they still say where the row's QPS usually lies)."""
    import numpy as np

    clean = [x for x in runs if x[2]] or runs
    mid = float(np.median([q for q, _, _ in clean]))
    every = float(np.median([q for q, _, _ in runs]))
    return min(clean, key=lambda x: (abs(x[0] - mid), abs(x[0] - every)))


def run_row(row: Row, out: Path, *, index: Path, workload: Path, costs, costs_path: Path,
            real: RealDevice | None, index_bytes: int, progress=None, cpu: bool = True,
            repeats: int = 1, min_runs: int = 1) -> bool:
    """The runtime run (`_measure`), then the model run, of one row, each written to its
    folder at once (a temporary name renamed into place). A runtime run that
    fails (TierlabError) leaves ROW/failed.json and returns False; a rerun
    tries it again. cpu: the model replays the CPU trace taken with the
    kept runtime run (ROW/measured/cpu.trace), else the cost table."""
    from .model import config as cfgmod

    d = row_dir(out, row)
    d.mkdir(parents=True, exist_ok=True)
    (d / "row.json").write_text(json.dumps({"id": row.id, "cell": row.cell, **row.values,
                                            "workload": row.workload}, indent=1, default=str)
                                + "\n")
    cache = cache_bytes(row, index_bytes)
    if not (d / "measured" / "cache_run.parquet").exists():
        tmp = d / f".measured.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cap, ra = real_page_cap(row, cache), int(row.values["readahead_bytes"])

        def own_probe():  # the real device right before and after the run
            _scratch_file(real.scratch)
            return runtime_pair(real.scratch, ra, cap, ROW_PROBE_READS)
        try:
            _measure(row, index, workload, tmp, cache, repeats, progress, cpu,
                     own_probe if row.values["device"] == REAL and real else None,
                     min_runs=min_runs)
        except TierlabError as e:  # e.g. OOM-killed in its cgroup: a failed row, not the grid
            shutil.rmtree(tmp, ignore_errors=True)
            (d / "failed.json").write_text(json.dumps({"side": "measured", "error": str(e)})
                                           + "\n")
            return False
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _swap_in(tmp, d / "measured")
        (d / "failed.json").unlink(missing_ok=True)
    if not (d / "model" / "cache_run.parquet").exists():
        from .traces.schema import read_table

        run = read_table(d / "measured" / "cache_run.parquet")[1].iloc[0]
        page_cap = int(run["dram_budget_bytes"]) if row.values["device"] == REAL else None
        # whether the runtime's threads spun before blocking (only when it pinned them)
        spin = json.loads(run["params"]).get("handoff_spin_ns")
        trace = d / "measured" / "cpu.trace" if cpu else None
        if row.values["device"] == REAL and (d / "measured" / "device-probe.json").exists():
            own = _row_spec(d / "measured", real)
            real = replace(real, by_cap={**real.by_cap,
                                                     real_page_cap(row, cache): own})
        cfg = cfgmod.validate(_model_doc(row, cache, index, workload, costs_path, real,
                                         trace, page_cap, spin),
                              f"row {row.id}")
        res = cfgmod.run(cfg, costs=costs)
        tmp = d / f".model.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cfgmod.write(res, tmp)
        _swap_in(tmp, d / "model")
    return True


ROW_PROBE_READS = 300  # reads of each size through the runtime's path, before and after a real run


def _row_spec(measured: Path, real: RealDevice) -> Path:
    """measured/real.yaml: the real device's line through the mean read times
    the row's own probes took right before and after its kept run (the disk's
    speed drifted 2-3x within a minute on a VM: 4 KiB reads 118-294 us in six
    probes 5 s apart), else the grid's spec of its cap."""
    pr = json.loads((measured / "device-probe.json").read_text())
    small, big = ({**pr["before"][k], "mean_ns": (pr["before"][k]["mean_ns"]
                                                   + pr["after"][k]["mean_ns"]) / 2,
                   "reads": pr["before"][k]["reads"] + pr["after"][k]["reads"]}
                  for k in (0, 1))
    line = runtime_line(small, big)
    if not line:
        return real.default
    p = {**real.probe, "read_latency_ns": line[0], "read_bandwidth_bytes_per_s": line[1],
         "read_path": "runtime", "runtime_reads": [small, big]}
    return write_device_spec(p, measured / "real.yaml",
                             block_device=real.probe.get("block_device", ""))


def collect(grid: Grid) -> tuple:
    """(measured, model) cache_run DataFrames of the finished rows, with the
    columns row_id, cell, device_label, workload_{type,class,rp} and
    grid_cache_bytes (the runtime's cache_bytes: the model's differs on the
    real device when the runtime's cgroup floor raised the page cache)
    (LABELS) added."""
    import pandas as pd

    from .traces.schema import read_table

    meas, mod = [], []
    for r in grid.rows:
        if not is_done(grid.out, r):
            continue
        d = row_dir(grid.out, r)
        grid_cache = None
        for side, acc in (("measured", meas), ("model", mod)):
            _, df = read_table(d / side / "cache_run.parquet")
            grid_cache = df["cache_bytes"].iloc[0] if grid_cache is None else grid_cache
            df["grid_cache_bytes"] = grid_cache
            df["row_id"] = r.id
            df["cell"] = r.cell
            df["device_label"] = r.values["device"]
            for k in ("type", "class", "rp"):
                df[f"workload_{k}"] = r.workload[k]
            if side == "model":  # its second steady state, when it was checked for one
                pj = json.loads(df["params"].iloc[0])
                df["bistable"] = bool(pj.get("bistable", False))
                for k, x in (pj.get("head_start") or {}).items():
                    df[f"{k}_head_start"] = x
            acc.append(df)
    if not meas:
        return None, None
    return pd.concat(meas, ignore_index=True), pd.concat(mod, ignore_index=True)


def read_repeats(grid: Grid, row: Row) -> dict | None:
    """ROW/measured/repeats.json (`_measure`), or None before the row ran."""
    f = row_dir(grid.out, row) / "measured" / "repeats.json"
    return json.loads(f.read_text()) if f.exists() else None


def collect_twins(grid: Grid, measured):
    """The runtime's side of the noise floor: each finished row that ran more
    than once (repeats.json `twin`) as its measured row with the metrics of
    its twin run instead of the kept one; None when no row has a twin."""
    import pandas as pd

    from .analysis.validation import METRICS

    out = []
    by_id = dict(tuple(measured.groupby("row_id")))
    for r in grid.rows:
        rep = read_repeats(grid, r) if r.id in by_id else None
        t, runs = (rep.get("twin"), rep.get("metrics")) if rep else (None, None)
        if t is None or not runs or len(by_id[r.id]) != 1:
            continue
        row = by_id[r.id].copy()
        for k in METRICS:
            v = runs[t].get(k)
            row[k] = math.nan if v is None else v
        out.append(row)
    return pd.concat(out, ignore_index=True) if out else None


def _normalise(df):
    """The PARAM_KEYS the runtime and the model spell differently for one run,
    from the grid row (both sides alike); what each side reported is kept in
    <key>_reported."""
    out = df.copy()
    for k in NORMALISED:
        out[f"{k}_reported"] = out[k].astype(str)
    out["device"] = out["device_label"]
    out["cache_bytes"] = out["grid_cache_bytes"]
    # a replayed trace (cpu: measured) does not know its workload's RP
    out["query_type"] = out["workload_type"]
    out["query_class"] = out["workload_class"]
    out["rp"] = out["workload_rp"].astype(float)
    hybrid = out["config"].str.startswith("hybrid")
    out["segment_bytes"] = out["segment_bytes"].where(hybrid, 0)
    out["dram_budget_bytes"] = out["dram_budget_bytes"].where(hybrid, 0)
    out["lookahead"] = out["lookahead"].astype(str)
    return out


def param_mismatches(measured, model) -> list[str]:
    """Rows where the runtime and the model report different parameters for
    the same run (after the spelling differences of NORMALISED)."""
    from .analysis.validation import PARAM_KEYS

    a = _normalise(measured).set_index("row_id")
    b = _normalise(model).set_index("row_id")
    out = []
    for k in PARAM_KEYS:
        x, y = a[k].astype(str), b[k].reindex(a.index).astype(str)
        bad = x[x != y]
        for rid in bad.index[:3]:
            out.append(f"row {rid}: {k} measured {x[rid]} vs model {y[rid]}")
    return out


def analyse(grid: Grid, measured, model, extra_notes=()) -> dict:
    """Pair, summarise and write the tables, the plot and the summary."""
    from .analysis import validation as val
    from .traces.schema import write_table

    out = grid.out
    schema_cols = [c for c in measured.columns if c not in LABELS]
    write_table("cache_run", measured[schema_cols], out / "measured.parquet")
    write_table("cache_run", model[schema_cols], out / "model.parquet")
    m, p = _normalise(measured), _normalise(model)
    keys = val.PARAM_KEYS + ["cell", "row_id"]
    paired = val.pair(m, p, keys=keys)
    summary, cells = val.summarise(paired, cell_keys=["cell"])
    # the runtime against itself: a second run of each row scored like the model
    twins = collect_twins(grid, measured)
    if twins is not None:
        twins = _normalise(twins)
        twins = val.pair(m[m["row_id"].isin(twins["row_id"])], twins, keys=keys)

    def floor_of(rows):  # the noise floor over those of `rows` (paired) that have twins
        tw = None if twins is None else twins[twins["row_id"].isin(rows["row_id"])]
        return None if tw is None or tw.empty else val.noise_floor(
            rows[rows["row_id"].isin(tw["row_id"])], tw, cell_keys=["cell"])

    floor = floor_of(paired)
    # the same targets without the real device (emulated devices only), when both exist
    emulated = emulated_floor = None
    if (paired["device"] == REAL).any() and (paired["device"] != REAL).any():
        emulated, _ = val.summarise(paired[paired["device"] != REAL], cell_keys=["cell"])
        emulated_floor = floor_of(paired[paired["device"] != REAL])
    paired = paired.sort_values(["device", "query_type", "cache_bytes", "config"])
    tmp = out / f".validation.csv.tmp-{os.getpid()}"
    paired.to_csv(tmp, index=False)
    os.replace(tmp, out / "validation.csv")
    (out / "validation.md").write_text(val.format_markdown(paired, summary, floor))
    val.parity_plot(paired, out / "parity.png")
    mism = param_mismatches(measured, model)
    doc = {"rows": summary.rows, "cells": summary.cells, "met": summary.met,
           "targets": {k: {"value": c["value"], "threshold": c["target"], "met": bool(c["met"])}
                       for k, c in summary.checks.items()},
           "diagnosis": {str(k): int(n) for k, n in
                         paired.loc[paired["diagnosis"] != "ok", "diagnosis"].value_counts()
                         .items()},
           "bistable": val.bistable_summary(paired),
           "by_device": val.by_group(paired, "device"),
           "by_config": val.by_group(paired, "config"),
           "noise_floor": floor,
           "targets_emulated_devices_only": None if emulated is None else {
               k: {"value": c["value"], "threshold": c["target"], "met": bool(c["met"])}
               for k, c in emulated.checks.items()},
           "noise_floor_emulated_devices_only": emulated_floor,
           "param_mismatches": mism, "notes": list(extra_notes),
           "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (out / "summary.json").write_text(json.dumps(doc, indent=1, default=_json) + "\n")
    text = val.format_summary(summary, paired)
    if floor is not None:
        text += "\n" + val.format_floor(floor)
    if emulated is not None:
        text += "\nwithout the real device (emulated devices only):\n" + "\n".join(
            val.format_summary(emulated, paired[paired["device"] != REAL]).splitlines()[:7])
        if emulated_floor is not None:
            text += "\n" + "\n".join(val.format_floor(emulated_floor).splitlines()[:-1])
    return {"summary": summary, "paired": paired, "cells": cells, "doc": doc, "text": text}


def real_cap_notes(measured) -> list[str]:
    """How the runtime capped the page cache on the real device (a cgroup,
    raised below 4 MiB, or not at all), counted over the real-device runs."""
    import re

    lim = measured.loc[measured["device_mode"] == "real", "memory_limit_enforced"].astype(str)
    if not len(lim):
        return []
    # numbers -> N so runs group by how they were capped (not "v1" or "v2")
    kinds = lim.map(lambda t: re.sub(r"\(/.*\)$", "",
                                     re.sub(r"(?<![A-Za-z])[0-9]+", "N", t)).strip())
    out = []
    for k, n in kinds.value_counts().items():
        out.append(f"real device page-cache cap, {n} run(s): {k}")
    raised = lim.str.contains("raised from").sum()
    if raised:
        out.append(f"real device: {raised} run(s) had their page-cache cap raised by the runtime "
                   "(smaller cgroup caps get it OOM-killed); the model ran with the raised cap")
    return out



def late_share(run) -> float:
    """The share of a runtime run's wall time its emulated device was late
    (params.device_late_ns: reads returned after their planned completion);
    0 on the real device."""
    p = json.loads(run["params"]) if isinstance(run["params"], str) else {}
    return float(p.get("device_late_ns") or 0) / max(float(run["wall_ns"]), 1.0)


def emulation_notes(measured) -> list[str]:
    """How well the emulated devices kept their timing: a read that returns
    after its planned completion (device_late_ns in the run's params: the
    thread was not running when it was due, e.g. its vCPU preempted by the
    host) makes the run slower than the device of the spec would. Flags the
    runs late for more than LATE_SHARE of their wall time."""
    emu = measured[measured["device_mode"] == "emulated"]
    if not len(emu):
        return []
    share = [late_share(r) for _, r in emu.iterrows()]
    late = [x for x in share if x > LATE_SHARE]
    if not late:
        return [f"emulated devices kept their timing: no run was late for more than "
                f"{LATE_SHARE:.0%} of its wall time (max {max(share):.1%})"]
    return [f"emulated devices: {len(late)} of {len(share)} run(s) were late for more than "
            f"{LATE_SHARE:.0%} of their wall time (max {max(share):.1%}; reads returned after "
            f"their planned completion, the thread not running when due): those runs are "
            f"slower than the spec's device"]


def _json(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:
        pass
    return str(x)


def spread_notes(grid: Grid) -> list[str]:
    """The runtime's own run-to-run noise, per device: over the finished rows
    run more than once (REPEAT_BELOW_S), the spread (max - min) / median of
    the QPS of their runs that kept their timing (repeats.json). The model's
    errors cannot be told from noise below it."""
    import numpy as np

    by_dev: dict = {}
    for r in grid.rows:
        rep = read_repeats(grid, r)
        if rep is None:
            continue
        ok = rep.get("kept_timing") or [True] * len(rep["qps"])
        qps = [q for q, k in zip(rep["qps"], ok) if k]
        if len(qps) >= 2 and np.median(qps) > 0:
            by_dev.setdefault(r.values["device"], []).append(spread(qps))
    if not by_dev:
        return []
    parts = [f"{d} median {np.median(v):.1%}, p90 {np.percentile(v, 90):.1%} ({len(v)} rows)"
             for d, v in sorted(by_dev.items())]
    return ["run-to-run spread of the runtime's QPS, (max - min) / median over the runs of a "
            "row that kept their timing: " + "; ".join(parts)]


def run(grid: Grid, *, progress: bool = True, log=None) -> dict | None:
    """Prepare the inputs, run every unfinished row (runtime then model),
    then analyse all finished rows. Ctrl-C keeps the finished rows (and
    analyses them) and re-raises."""
    from tqdm import tqdm

    log = log or (lambda msg: print(msg, file=sys.stderr))
    grid.out.mkdir(parents=True, exist_ok=True)
    (grid.out / "grid.yaml").write_text(yaml.safe_dump(grid.doc, sort_keys=False,
                                                       default_flow_style=None))
    index = prepare_index(grid, log)
    wfiles = prepare_workloads(grid, index)
    costs, costs_path = prepare_costs(grid, index, log)
    real = prepare_real(grid, index, log)
    probe = real.probe if real else {}
    notes = []
    if probe:
        notes.append(
            f"real device {probe.get('block_device', '')}: 4 KiB random read median "
            f"{probe['read_4k_median_ns'] / 1e3:.1f} us, sequential "
            f"{probe['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s, queue depth "
            f"{probe['queue_depth']} (O_DIRECT {probe['o_direct']}); spec {real.default}")
        if probe.get("read_path") == "runtime":
            small, big = probe["runtime_reads"]
            notes.append(
                f"real device: the runtime's read path ({small['how']}; rows under other "
                f"page-cache caps get the line under their own, below): "
                f"mean {small['mean_ns'] / 1e3:.1f} us for 4 KiB, {big['mean_ns'] / 1e3:.1f} us "
                f"for {big['run_bytes'] >> 10} KiB -> {probe['read_latency_ns'] / 1e3:.1f} us + "
                f"{probe['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s")
            for cap, at in (probe.get("runtime_lines") or {}).items():
                notes.append(f"real device under a {int(cap):,}-byte page-cache cap (the grid's "
                             f"real rows): {at['read_latency_ns'] / 1e3:.1f} us + "
                             f"{at['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s")
        elif probe.get("runtime_reads_unused"):
            notes.append(f"real device: the O_DIRECT line is the model's "
                         f"({probe['runtime_reads_unused']})")
        ra = probe.get("read_ahead_kb")
        if ra:
            notes.append(f"real device: the disk's read_ahead_kb is {ra}; the runtime turns the "
                         f"kernel's read-around off for the index files and reads ahead "
                         f"readahead_bytes itself, as the model and the emulated devices do")
        if probe["host_caching_suspected"]:
            notes.append("real device: 4 KiB reads at about memory speed; the host caches the "
                         "disk, so the real device cannot be modelled as a disk honestly")
    ib = _index_bytes(index)
    load0 = os.getloadavg()
    t_start = time.time()
    todo = [r for r in grid.rows if not is_done(grid.out, r)]
    bar = tqdm(total=len(grid.rows), initial=len(grid.rows) - len(todo), unit="row",
               desc="validate", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    interrupted = False
    failed = []
    try:
        for r in todo:
            bar.set_postfix_str(r.label(), refresh=True)
            ok = run_row(r, grid.out, index=index, workload=wfiles[workload_name(r.workload)],
                    costs=costs, costs_path=costs_path, real=real, index_bytes=ib,
                    cpu=grid.cpu == "measured", repeats=grid.repeats,
                    min_runs=grid.min_runs)
            if not ok:
                err = json.loads((row_dir(grid.out, r) / "failed.json").read_text())["error"]
                failed.append(f"{r.label()} (row {r.id}): {err}")
                log(f"row failed, continuing: {failed[-1]}")
            bar.update()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
        if real:
            real.scratch.unlink(missing_ok=True)
    if todo:
        notes.append(f"this run: {len(todo)} row(s) in {time.time() - t_start:.0f} s; load "
                     f"average before {load0[0]:.2f}, after {os.getloadavg()[0]:.2f} (the "
                     f"runtime's QPS is timing-sensitive: other work on the CPUs slows it)")
    measured, model = collect(grid)
    res = None
    if measured is not None:
        notes += real_cap_notes(measured) + emulation_notes(measured) + spread_notes(grid)
        notes += [f"FAILED runtime run, row left out: {f}" for f in failed]
        res = analyse(grid, measured, model, notes)
        res["failed"] = failed
    if interrupted:
        raise KeyboardInterrupt
    return res


__all__ = ["Grid", "Row", "parse", "load", "run", "probe_device", "write_device_spec",
           "host_caching_suspected", "analyse", "collect"]
