"""`tierlab model reference --compare DIR`: the model against the reference
study's measured p99 grids, cell by cell, at the reference's own scale
(issue 21). The statistics, steps and figures come from
analysis/reference_compare.py; this module reads the reference tables, runs
the model's cells and calibrates its CPU.

Reference tables: Thai, APCache, ANU honours thesis 2025, Tables 8.1 (HDD)
and 8.2 (Optane P4800X NVMe), p99 latency of AND/SINGLE H queries, 4
configurations x 8 cache sizes (5-100 % of the index) x RP {0, 25, 50} %:
192 cells each. The repository keeps a copy (DEFAULT_DIR, its README gives
the source); DIR may be any folder of CSV files with the columns of
COLUMNS (one row per cell), or one such file.

Protocol (issue 21 "The protocol"):
1. Calibration, on the fully cached cells only (cache_pct 100: no I/O
   there, both tables): each runs once with the unscaled cost table; the
   CPU scale of a query type is the geometric mean of measured / model p99
   over its cells (one number per type, `calibrate`). Nothing is fitted to
   any other cell; device and tier parameters come from their specs.
2. The cost table with every per-query-type coefficient multiplied by its
   type's scale (`scaled_costs`; the decode timing, which is not per type,
   by the geometric mean of the two scales) is written to OUT and every
   cell of both tables runs with it.
Every cell is the setting of the reference (its README): the `reference`
index with the head derived from the reference's working sets (K ~ 1,800 H
terms, model/indexmeta.py REFERENCE_DERIVED_HEAD), 1,000 generated H queries at the cell's RP, 2 passes with the warm
second one reported, one core, 32 KiB segments, the configurations'
default lookahead (16 fixed for base-prefetch, adaptive for hybrid-prefetch),
a 50 MB DRAM budget for the hybrid ones, the Optane PM slow tier.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from tierlab.core import registry
from tierlab.core.errors import TierlabError

DEFAULT_DIR = Path(__file__).parent / "data" / "apcache-ch8"
COLUMNS = ("table", "device", "config", "cache_pct", "query_type", "rp_pct", "p99_s")
# the thesis's configuration names and query types as tierlab spells them
CONFIG_NAMES = {"Base": "base", "BasePrefetch": "base-prefetch", "Hybrid": "hybrid",
                "HybridPrefetch": "hybrid-prefetch"}
QUERY_TYPES = {"AND": "and", "SINGLE": "single"}
FULL_CACHE_PCT = 100
# the reference's setting (module docstring); costs filled in by `cells`
COMMON = {"index": {"preset": "reference", "head": "derived"}, "slow_tier": "optane-dcpmm-g1",
          "passes": 2, "policy": "lru", "seed": 0, "cores": 1, "segment_bytes": 32768,
          "dram_budget_bytes": 50_000_000}
CURVE = ["table", "device", "config", "query_type", "rp_pct"]  # one curve: p99 vs cache
# the spec the model runs a reference device as: the HDD with its drive's read cache
# (model/device.py DriveCache); `compare(devices=...)` overrides
MODEL_DEVICES = {"hdd-7200": "hdd-7200-readcache"}


def _read_one(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError) as e:
        raise TierlabError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") \
            from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise TierlabError(f"{path}: not a CSV table ({str(e).splitlines()[0]})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TierlabError(f"{path}: no column '{missing[0]}' (a reference table has "
                           f"{', '.join(COLUMNS)})")
    devices = set(registry.devices())
    out = []
    for i, r in enumerate(df[list(COLUMNS)].itertuples(index=False), start=2):
        where = f"{path}:{i}"
        if r.device not in devices:
            raise TierlabError(f"{where}: unknown device '{r.device}'; known: "
                               f"{', '.join(sorted(devices))}")
        if r.config not in CONFIG_NAMES:
            raise TierlabError(f"{where}: unknown config '{r.config}'; known: "
                               f"{', '.join(CONFIG_NAMES)}")
        if r.query_type not in QUERY_TYPES:
            raise TierlabError(f"{where}: unknown query_type '{r.query_type}'; known: "
                               f"{', '.join(QUERY_TYPES)}")
        nums = {}
        for key, lo, hi in (("cache_pct", 0.0, 100.0), ("rp_pct", 0.0, 100.0),
                            ("p99_s", 0.0, math.inf)):
            try:
                v = float(getattr(r, key))
            except ValueError:
                v = math.nan
            if not (lo < v <= hi if key != "rp_pct" else lo <= v < hi):
                raise TierlabError(f"{where}: {key} {getattr(r, key)!r} is not a number in "
                                   f"{'(' if key != 'rp_pct' else '['}{lo:g}, {hi:g}"
                                   f"{']' if key != 'rp_pct' else ')'}")
            nums[key] = v
        out.append({"table": r.table, "device": r.device, "config": CONFIG_NAMES[r.config],
                    "query_type": QUERY_TYPES[r.query_type], **nums})
    if not out:
        raise TierlabError(f"{path}: no rows")
    return pd.DataFrame(out)


def load_reference(path: str | Path | None = None) -> pd.DataFrame:
    """The reference cells of every CSV file in folder `path` (default
    DEFAULT_DIR), or of the one file `path`: columns COLUMNS, config and
    query_type in tierlab's spelling. A bad file: TierlabError naming it
    (and the line)."""
    path = Path(path) if path is not None else DEFAULT_DIR
    if path.is_dir():
        files = sorted(path.glob("*.csv"))
        if not files:
            raise TierlabError(f"{path}: no *.csv reference tables in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise TierlabError(f"{path}: no such file or folder (the reference tables)")
    ref = pd.concat([_read_one(f) for f in files], ignore_index=True)
    dup = ref.duplicated(CURVE + ["cache_pct"])
    if dup.any():
        r = ref[dup].iloc[0]
        raise TierlabError(f"{path}: cell {r['table']} {r['config']} {r['query_type']} RP "
                           f"{r['rp_pct']:g} % cache {r['cache_pct']:g} % appears twice")
    full = ref.groupby(CURVE)["cache_pct"].max()
    if not (full == FULL_CACHE_PCT).any():
        raise TierlabError(f"{path}: no fully cached cells (cache_pct {FULL_CACHE_PCT}): the "
                           f"CPU calibration needs them")
    return ref


def cell_doc(row, costs: str, queries: int, devices: dict | None = None) -> dict:
    """The model run of one reference cell (module docstring); its device
    is the spec `devices` maps the table's device to (default MODEL_DEVICES)."""
    devices = MODEL_DEVICES if devices is None else devices
    return dict(COMMON, costs=costs, config=row["config"],
                device=devices.get(row["device"], row["device"]),
                cache_fraction=float(row["cache_pct"]) / 100.0,
                workload={"type": row["query_type"], "class": "H", "queries": int(queries),
                          "rp": float(row["rp_pct"]) / 100.0})


def _model_cells(ref: pd.DataFrame) -> pd.DataFrame:
    """The distinct model runs the reference cells need (a cell's table is
    decided by its device)."""
    return ref.drop_duplicates(["device", "config", "cache_pct", "query_type", "rp_pct"])


def run_cells(ref: pd.DataFrame, out: Path, *, costs: str, queries: int, workers: int,
              progress: bool, devices: dict | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run the model for every distinct cell of `ref` (a sweep into `out`);
    returns (`ref` with the model's columns, p99_model_s and the run's
    metrics, joined on; the runs' cache_run rows, `device` the reference's
    name and `model_device` the spec the model ran)."""
    from tierlab.experiments import sweep

    devices = MODEL_DEVICES if devices is None else devices
    docs = [cell_doc(r, costs, queries, devices) for _, r in _model_cells(ref).iterrows()]
    cells = []
    for d in docs:
        cells += sweep.prepare(d, "reference comparison")[0]
    df = sweep.run(cells, out, workers, progress=progress)
    ids = {cid for cid, _ in cells}
    df = df[df["params"].map(lambda p: json.loads(p).get("cell_id") in ids)]
    back = {v: k for k, v in devices.items()}  # the rows under the reference's device names
    df = df.assign(model_device=df["device"], device=df["device"].map(lambda d: back.get(d, d)))
    return join(ref, df), df


MODEL_COLUMNS = ("qps", "latency_mean_ns", "latency_p50_ns", "latency_p99_ns",
                 "page_cache_miss_rate", "segment_cache_miss_rate", "storage_reads",
                 "storage_bytes_read", "query_wait_ns", "device_utilisation", "wall_ns")


def join(ref: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The reference cells with the model runs (cache_run rows) of the same
    device, configuration, cache size, query type and RP."""
    r = runs.assign(cache_pct=(100.0 * runs["cache_bytes"] / runs["index_bytes"]).round(1),
                    rp_pct=(100.0 * runs["rp"]).round(1))
    r = r.drop_duplicates(["device", "config", "cache_pct", "query_type", "rp_pct"], keep="last")
    keep = ["device", "config", "cache_pct", "query_type", "rp_pct", *MODEL_COLUMNS]
    out = ref.assign(cache_pct=ref["cache_pct"].round(1), rp_pct=ref["rp_pct"].round(1)).merge(
        r[keep], on=["device", "config", "cache_pct", "query_type", "rp_pct"], how="left")
    out["p99_model_s"] = out["latency_p99_ns"] / 1e9
    return out


def calibrate(full: pd.DataFrame) -> dict:
    """CPU scale per query type from the fully cached cells (`join`ed, with
    the unscaled table): the geometric mean of measured / model p99, with
    the cells it rests on."""
    out = {}
    for qt, g in full.groupby("query_type"):
        ratio = (g["p99_s"] / g["p99_model_s"]).to_numpy(np.float64)
        ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
        if not len(ratio):
            raise TierlabError(f"calibration: no fully cached {qt.upper()} cell with a model p99")
        out[qt] = {"scale": float(np.exp(np.log(ratio).mean())), "cells": int(len(ratio)),
                   "ratio_min": float(ratio.min()), "ratio_max": float(ratio.max())}
    return out


def scaled_costs(costs, scales: dict[str, float], out_dir: Path) -> Path:
    """A copy of cost table `costs` (model/costs.py Costs) with each query
    type's coefficients times its scale and the decode timing times the
    geometric mean of the scales; written to out_dir under a name holding
    the scales (so a cell run with other scales is another sweep cell)."""
    from tierlab.model.costs import Costs

    d = costs.to_dict()
    for qt, s in scales.items():
        d[qt] = {k: (v * s if isinstance(v, (int, float)) and v is not None else v)
                 for k, v in d[qt].items()}
    g = float(np.exp(np.mean(np.log(list(scales.values())))))
    d["decode"] = {k: (v * g if k.endswith("_ns") and isinstance(v, (int, float)) else v)
                   for k, v in (d.get("decode") or {}).items()}
    d["cpu_scale"] = {"per_query_type": scales, "decode": g,
                      "why": "issue 21 protocol: calibrated on the reference's fully cached "
                             "cells only (tierlab/experiments/reference_compare.py)"}
    tag = "-".join(f"{qt}{s:.4f}" for qt, s in sorted(scales.items()))
    path = Path(out_dir) / f"costs-calibrated-{tag}.json"
    Costs.from_dict(d, str(path)).save(path)
    return path


def compare(ref: pd.DataFrame, out: Path, *, costs: str = "default", queries: int = 1000,
            workers: int = 2, progress: bool = True, log=print, devices: dict | None = None
            ) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """The whole protocol (module docstring): (cells, calibration, runs).
    cells is `ref` joined with the calibrated model's runs (`join`), runs
    their cache_run rows."""
    from tierlab.experiments.reference import reference_costs
    from tierlab.model.config import load_costs

    out = Path(out)
    base = str(reference_costs()) if costs == "default" else str(costs)
    table = load_costs(base)
    if not hasattr(table, "to_dict"):
        raise TierlabError(f"--costs {costs}: a cost table file (tierlab query costs)")
    full = ref[ref["cache_pct"] == FULL_CACHE_PCT]
    log(f"calibration: {len(_model_cells(full))} fully cached cells with the unscaled table "
        f"({base})")
    devices = MODEL_DEVICES if devices is None else devices
    cal_cells, _ = run_cells(full, out / "calibration", costs=base, queries=queries,
                             workers=workers, progress=progress, devices=devices)
    cal = calibrate(cal_cells)
    scales = {qt: c["scale"] for qt, c in cal.items()}
    path = scaled_costs(table, scales, out)
    for qt, c in cal.items():
        log(f"calibration: {qt.upper()} CPU x {c['scale']:.4f} (geometric mean of measured / "
            f"model p99 over {c['cells']} fully cached cells, ratios {c['ratio_min']:.3f}-"
            f"{c['ratio_max']:.3f})")
    log(f"all {len(_model_cells(ref))} cells with {path}")
    cells, runs = run_cells(ref, out / "model", costs=str(path), queries=queries,
                            workers=workers, progress=progress, devices=devices)
    calibration = {"base_costs": base, "calibrated_costs": str(path), "query_types": cal,
                   "cells_used": "cache_pct == 100 only (both tables)",
                   "model_devices": {d: devices.get(d, d) for d in sorted(ref["device"].unique())}}
    return cells, calibration, runs
