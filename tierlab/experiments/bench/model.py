"""`tierlab bench model`: how fast the SimPy model is (issue 4 "Speed").

1. The reference grid (tierlab/experiments/reference.py `main`: 4 configurations x 8
   cache sizes x 3 RP x HDD/NVMe x SINGLE/AND, 1,000 H queries and 2 passes
   each, the reference scale = 384 runs) in a process pool: all of it with
   `full`, else a seeded random sample of round(fraction * 384) cells, and
   the wall time extrapolated to 384 runs. Simulated block requests per second = index
   blocks of every term access of every actor (query threads and workers,
   page cache or segment cache) / wall time; page requests likewise (the
   keys fed to the page cache's access_many).
2. Bookkeeping alone, side by side: the page-cache request trace of one
   reference run (HDD, base, 5 % cache: the most misses) replayed through
   the model's C LRU (model/cache.py, one access_many per term and file, as
   the model calls it) and through libCacheSim's LRU (its Python package,
   from the same requests written as an oracleGeneral trace), requests per
   second, and both miss ratios (they must agree).

Targets (issue 4): the grid in <= 600 s on this machine's 2 cores, and >= 5
million simulated block requests per second for the LRU bookkeeping.
"""
from __future__ import annotations

import json
import math
import platform
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError
from tierlab.core.files import scratch

GRID_TARGET_S = 600.0
BOOKKEEPING_TARGET = 5e6
FULL_CELLS = 384


@dataclass
class Config:
    fraction: float = 0.125
    full: bool = False
    workers: int = 2
    queries: int = 1000
    costs: str = "default"
    progress: bool = True
    work: Path | None = None


def validate(cfg: Config) -> None:
    if not cfg.full and not 0 < cfg.fraction <= 1:
        raise TierlabError(f"--fraction {cfg.fraction}: a share of the grid in (0, 1]")
    if cfg.workers < 1:
        raise TierlabError(f"--workers {cfg.workers}: at least 1")
    if cfg.queries < 1:
        raise TierlabError(f"--queries {cfg.queries}: at least 1")


def _grid(cfg: Config):
    from tierlab.experiments import reference, sweep

    cells = sweep.prepare(reference.grids(cfg.queries, cfg.costs)["main"], "reference grid")[0]
    if cfg.full:
        return cells
    n = max(1, round(cfg.fraction * len(cells)))
    pick = np.random.default_rng(0).choice(len(cells), size=n, replace=False)
    return [cells[i] for i in sorted(pick)]


def _bookkeeping(costs) -> dict:
    """The LRU bookkeeping rate of the model's C cache and libCacheSim's, on
    the page requests of one reference run."""
    from tierlab.model import config as cfgmod
    from tierlab.model import sim as simmod
    from tierlab.model.cache import Cache, write_oracle_general
    from tierlab.core import specs

    v = cfgmod.validate({"config": "base", "device": "hdd-7200", "cache_fraction": 0.05,
                         "passes": 2, "workload": {"type": "and", "class": "H",
                                                   "queries": 1000, "rp": 0.25}})
    meta = cfgmod.build_index(v["index"], v["workload"], v["seed"])
    tr = cfgmod.build_trace(meta, v["workload"], v["seed"])
    p = v.params(meta.index_bytes)
    s = simmod.Simulation(meta, tr, p, costs, specs.load("hdd-7200"), None)
    s.pc.record = []
    s.run()
    calls = s.pc.record
    keys = np.concatenate(calls)
    cap = s.pc.cache.capacity
    nkeys = s.pagemap.nkeys
    out = {"requests": int(keys.size), "calls": len(calls), "keys": int(nkeys),
           "capacity_pages": int(cap), "trace": "page requests of base, hdd-7200, 5 % cache, "
           "AND H RP 0.25, 2 passes (reference scale)"}
    best = math.inf
    for _ in range(3):
        c = Cache("lru", nkeys, cap)
        t = time.perf_counter()
        hits = [c.access_many(k) for k in calls]
        best = min(best, time.perf_counter() - t)
    ours_miss = 1 - float(np.concatenate(hits).mean())
    out["tierlab_lru"] = {"requests_per_s": keys.size / best, "seconds": best,
                          "miss_ratio": ours_miss, "how": "one access_many per term and file"}
    c = Cache("lru", nkeys, cap)
    t = time.perf_counter()
    c.access_many(keys)
    out["tierlab_lru_one_call"] = {"requests_per_s": keys.size / (time.perf_counter() - t)}
    try:
        import libcachesim as lcs
    except ImportError:
        out["libcachesim_lru"] = None
        out["libcachesim_note"] = "the libcachesim package is not installed"
        return out
    with scratch("bench-model") as tmp:
        path = write_oracle_general(tmp / "pages.oracleGeneral", keys)
        best, ratios = math.inf, None
        for _ in range(3):
            reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
            lru = lcs.LRU(cap)
            t = time.perf_counter()
            ratios = lru.process_trace(reader)
            best = min(best, time.perf_counter() - t)
    out["libcachesim_lru"] = {"requests_per_s": keys.size / best, "seconds": best,
                              "miss_ratio": float(ratios[0]),
                              "version": getattr(lcs, "__version__", None),
                              "how": "LRU(capacity).process_trace(TraceReader(oracleGeneral))"}
    out["miss_ratios_agree"] = abs(float(ratios[0]) - ours_miss) < 1e-9
    return out


def run(cfg: Config) -> dict:
    from tierlab.model import config as cfgmod
    from tierlab.experiments import sweep
    from tierlab.engine.query import machine

    validate(cfg)
    cells = _grid(cfg)
    costs = cfgmod.load_costs(cfg.costs)
    with scratch("bench-model", cfg.work) as work:
        t = time.perf_counter()
        df = sweep.run(cells, work, cfg.workers, progress=cfg.progress, costs=costs)
        wall = time.perf_counter() - t
    params = [json.loads(p) for p in df["params"]]
    blocks = sum(p["block_requests_all_passes"] for p in params)
    pages = sum(p["page_requests_all_passes"] for p in params)
    cpu = sum(p["model_wall_s"] for p in params)
    grid_s = wall * FULL_CELLS / len(cells)
    book = _bookkeeping(costs)
    doc = {
        "benchmark": "model",
        "machine": {**machine(), "platform": platform.platform(), "python": sys.version.split()[0],
                    "date": datetime.now(timezone.utc).isoformat(timespec="seconds")},
        "config": {"cells_run": len(cells), "grid_cells": FULL_CELLS, "full": cfg.full,
                   "fraction": 1.0 if cfg.full else len(cells) / FULL_CELLS,
                   "workers": cfg.workers, "queries": cfg.queries, "passes": 2,
                   "costs": cfgmod.describe_costs(costs)},
        "grid": {"wall_s": wall, "grid_wall_s_extrapolated": grid_s,
                 "run_s_mean": cpu / len(cells),
                 "block_requests": int(blocks), "block_requests_per_s": blocks / wall,
                 "page_requests": int(pages), "page_requests_per_s": pages / wall,
                 "simulated_queries": int(2 * cfg.queries * len(cells))},
        "bookkeeping": book,
        "targets": [
            {"what": "reference grid (384 runs) wall time, s", "value": grid_s,
             "target": GRID_TARGET_S, "met": grid_s <= GRID_TARGET_S,
             "note": None if cfg.full else "extrapolated from the cells run"},
            {"what": "LRU bookkeeping, simulated page (block) requests per s",
             "value": book["tierlab_lru"]["requests_per_s"], "target": BOOKKEEPING_TARGET,
             "met": book["tierlab_lru"]["requests_per_s"] >= BOOKKEEPING_TARGET},
        ],
    }
    return doc


def format_table(doc: dict) -> str:
    g, b = doc["grid"], doc["bookkeeping"]
    c = doc["config"]
    lines = [
        f"cells run            {c['cells_run']} of {c['grid_cells']} ({c['workers']} workers)",
        f"wall                 {g['wall_s']:.1f} s; full grid {g['grid_wall_s_extrapolated']:.0f} s"
        + ("" if c["full"] else " (extrapolated)"),
        f"block requests/s     {g['block_requests_per_s'] / 1e6:.2f} M (simulated, end to end)",
        f"page requests/s      {g['page_requests_per_s'] / 1e6:.2f} M (simulated, end to end)",
        f"LRU bookkeeping      {b['tierlab_lru']['requests_per_s'] / 1e6:.1f} M requests/s "
        f"(tierlab C LRU, per-term calls; one call "
        f"{b['tierlab_lru_one_call']['requests_per_s'] / 1e6:.1f} M/s)",
    ]
    if b.get("libcachesim_lru"):
        lines.append(f"libCacheSim LRU      {b['libcachesim_lru']['requests_per_s'] / 1e6:.1f} M "
                     f"requests/s; miss ratios {b['tierlab_lru']['miss_ratio']:.4f} vs "
                     f"{b['libcachesim_lru']['miss_ratio']:.4f}")
    for t in doc["targets"]:
        lines.append(f"{'MET   ' if t['met'] else 'MISSED'} {t['what']}: {t['value']:.4g} "
                     f"(target {t['target']:g})")
    return "\n".join(lines)
