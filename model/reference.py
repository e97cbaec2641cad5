"""`tierlab model reference`: the APCache reference grids at the reference's
scale (model/indexmeta.py `reference`) and the trends of APCACHE.md
"Reference behaviour", each computed from the results with the numbers
behind it and whether it holds.

Grids (every cell: 1,000 H queries, 2 passes with the warm second one
reported as in WORKLOAD.md's protocol, the Optane PM slow tier, the
machine's default cost table):
- main: 4 configurations x 8 cache sizes (5-100 % of the index) x RP
  {0, 0.25, 0.5} x {hdd-7200, nvme-p4800x} x {SINGLE, AND} = 384 runs;
- lookahead: hybrid-prefetch with LA 16, 64 and adaptive, base-prefetch with
  LA 16 and 64, at caches of 1-20 %, both devices, SINGLE and AND, RP 0.25;
- multicore: base-prefetch and hybrid-prefetch on 1-4 cores at a 20 %
  cache, on hdd-7200, sas-ssd and nvme-p4800x, SINGLE, RP 0.25.

Trends (each a function of the cache_run table; `check_all` runs them):
- saturation: QPS does not fall as the cache grows (steps >= -3 %), and is
  flat (within 5 % of its maximum) once the cache holds the workload's
  working set (the bytes of its distinct terms, x 1.25 for the page cache's
  page rounding and readahead); base rises by >= 10 % over the range.
- prefetch_hides_nvme: base-prefetch at the smallest cache reaches >= 90 %
  of its QPS at the full cache on NVMe; on HDD it beats base at the
  smallest cache but stays < 80 % of its full-cache QPS.
- fixed_lookahead_fragile: hybrid-prefetch with LA 64 is >= 10 % slower
  than with LA 16 at the smallest cache, the gap shrinks as the cache
  grows, and adaptive lookahead is within 5 % of the better fixed one at
  every cache size.
- dram_saved: the DRAM `base` needs (its page cache, interpolated on the
  grid) to match hybrid-prefetch's QPS with the 50 MB budget is >= 10x that
  budget.
- multicore: on HDD, 2 cores give less QPS than 1 (seeks); on the SSDs QPS
  grows from 1 to 4 cores with shrinking increments and p99 latency rises.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

FRACTIONS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0]
SMALL = [0.01, 0.02, 0.05, 0.1, 0.2]
CONFIGS = ["base", "base-prefetch", "hybrid", "hybrid-prefetch"]
DEVICES = ["hdd-7200", "nvme-p4800x"]
SSDS = ["sas-ssd", "nvme-p4800x"]

COMMON = {"index": "reference", "slow_tier": "optane-dcpmm-g1", "passes": 2, "costs": "default",
          "policy": "lru", "seed": 0}


def grids(queries: int = 1000, costs="default") -> dict:
    """The three grid documents (model/sweep.py format)."""
    common = dict(COMMON, costs=costs)
    w = {"class": "H", "queries": queries}
    return {
        "main": dict(common, config=CONFIGS, cache_fraction=FRACTIONS, device=DEVICES,
                     workload=dict(w, type=["single", "and"], rp=[0.0, 0.25, 0.5])),
        "lookahead": [
            dict(common, config="hybrid-prefetch", lookahead=[16, 64, "adaptive"],
                 cache_fraction=SMALL, device=DEVICES,
                 workload=dict(w, type=["single", "and"], rp=0.25)),
            dict(common, config="base-prefetch", lookahead=[16, 64], cache_fraction=SMALL,
                 device=DEVICES, workload=dict(w, type=["single", "and"], rp=0.25)),
        ],
        "multicore": dict(common, config=["base-prefetch", "hybrid-prefetch"], cores=[1, 2, 3, 4],
                          cache_fraction=0.2, device=["hdd-7200"] + SSDS,
                          workload=dict(w, type="single", rp=0.25)),
    }


def _frac(df):
    return (df["cache_bytes"] / df["index_bytes"]).round(4)


def _curve(df, **eq):
    d = df
    for k, v in eq.items():
        d = d[d[k] == v]
    d = d.assign(frac=_frac(d)).groupby("frac")["qps"].mean().sort_index()
    return d


def _param(row, *path):
    p = json.loads(row["params"])
    for k in path:
        p = p.get(k, {}) if isinstance(p, dict) else {}
    return p


def working_set_fraction(df) -> dict:
    """Distinct-term bytes / index bytes per (query_type, rp), from the runs'
    params (model `trace.working_set_bytes`)."""
    out = {}
    for _, r in df.iterrows():
        ws = _param(r, "working_set_bytes")
        if isinstance(ws, (int, float)) and ws:
            out[(r["query_type"], float(r["rp"]))] = ws / r["index_bytes"]
    return out


def saturation(main) -> dict:
    ws = working_set_fraction(main)
    curves, bad = [], []
    for (cfg, dev, qt, rp), g in main.groupby(["config", "device", "query_type", "rp"]):
        c = _curve(g)
        if len(c) < 3:
            continue
        q = c.values
        steps = q[1:] / q[:-1] - 1
        w = ws.get((qt, float(rp)), math.nan) * 1.25
        beyond = c[c.index >= w] if not math.isnan(w) else c.iloc[-1:]
        flat = bool(len(beyond) == 0 or (beyond >= 0.95 * q.max()).all())
        monotone = bool((steps >= -0.03).all())
        rises = bool(q.max() >= 1.10 * q[0]) if cfg == "base" else True
        ok = flat and monotone and rises
        rec = {"config": cfg, "device": dev, "query_type": qt, "rp": float(rp),
               "working_set_fraction": round(w / 1.25, 4) if not math.isnan(w) else None,
               "qps_smallest": float(q[0]), "qps_largest": float(q[-1]),
               "qps_max": float(q.max()), "min_step": float(steps.min()), "flat_beyond_ws": flat,
               "monotone": monotone, "rises": rises, "holds": ok}
        curves.append(rec)
        if not ok:
            bad.append(rec)
    share = sum(r["holds"] for r in curves) / len(curves) if curves else 0.0
    return {"trend": "QPS rises with cache size until the cache holds the working set, then "
                     "is flat", "curves": len(curves), "curves_holding": share,
            "holds": bool(curves) and share >= 0.9, "exceptions": bad[:12],
            "numbers": [{k: r[k] for k in ("config", "device", "query_type", "rp",
                                           "working_set_fraction", "qps_smallest", "qps_largest")}
                        for r in curves if r["rp"] == 0.25]}


def prefetch_hides_nvme(main) -> dict:
    rows = []
    ok = True
    for qt in sorted(main["query_type"].unique()):
        for rp in sorted(main["rp"].unique()):
            bp = {d: _curve(main, config="base-prefetch", device=d, query_type=qt, rp=rp)
                  for d in DEVICES}
            b = {d: _curve(main, config="base", device=d, query_type=qt, rp=rp) for d in DEVICES}
            nv, hd = bp["nvme-p4800x"], bp["hdd-7200"]
            if nv.empty or hd.empty:
                continue
            nvme_ratio = float(nv.iloc[0] / nv.iloc[-1])
            hdd_ratio = float(hd.iloc[0] / hd.iloc[-1])
            hdd_gain = float(hd.iloc[0] / b["hdd-7200"].iloc[0])
            holds = bool(nvme_ratio >= 0.9 and hdd_ratio < 0.8 and hdd_gain > 1.0)
            ok &= holds
            rows.append({"query_type": qt, "rp": float(rp),
                         "nvme_smallest_over_full": round(nvme_ratio, 3),
                         "hdd_smallest_over_full": round(hdd_ratio, 3),
                         "hdd_prefetch_over_base_smallest": round(hdd_gain, 3), "holds": holds})
    return {"trend": "prefetching hides NVMe latency even with small caches; on HDD it helps "
                     "but cannot hide latency at small caches",
            "holds": bool(rows) and ok, "numbers": rows}


def fixed_lookahead_fragile(la) -> dict:
    rows, ok = [], True
    hp = la[la["config"] == "hybrid-prefetch"]
    for (dev, qt), _ in hp.groupby(["device", "query_type"]):
        c = {v: _curve(hp, device=dev, query_type=qt, lookahead=v)
             for v in ("16", "64", "adaptive")}
        if any(x.empty for x in c.values()):
            continue
        drop = (c["64"] / c["16"]).values
        adaptive_vs_best = (c["adaptive"] / np.maximum(c["16"], c["64"])).values
        holds = bool(drop[0] <= 0.9 and drop[-1] >= drop[0] and (adaptive_vs_best >= 0.95).all())
        ok &= holds
        rows.append({"device": dev, "query_type": qt, "cache_fractions": list(c["16"].index),
                     "qps_la16": [round(x, 2) for x in c["16"].values],
                     "qps_la64": [round(x, 2) for x in c["64"].values],
                     "qps_adaptive": [round(x, 2) for x in c["adaptive"].values],
                     "la64_over_la16": [round(x, 3) for x in drop],
                     "adaptive_over_best_fixed": [round(x, 3) for x in adaptive_vs_best],
                     "holds": holds})
    bp = la[la["config"] == "base-prefetch"]
    extra = []
    for (dev, qt), _ in bp.groupby(["device", "query_type"]):
        c16 = _curve(bp, device=dev, query_type=qt, lookahead="16")
        c64 = _curve(bp, device=dev, query_type=qt, lookahead="64")
        if len(c16) and len(c64):
            extra.append({"device": dev, "query_type": qt, "base_prefetch_la64_over_la16":
                          [round(x, 3) for x in (c64 / c16).values]})
    return {"trend": "fixed lookahead is fragile: LA 64 drops QPS at small caches; adaptive "
                     "lookahead needs no tuning", "holds": bool(rows) and ok, "numbers": rows,
            "base_prefetch": extra}


def _cache_needed(curve, target):
    """Smallest cache (fraction) at which the curve reaches target (linear
    interpolation between grid points); inf if never."""
    xs, ys = list(curve.index), list(curve.values)
    if ys[0] >= target:
        return xs[0]
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if y1 >= target:
            return x0 + (x1 - x0) * (target - y0) / (y1 - y0) if y1 > y0 else x1
    return math.inf


def dram_saved(main) -> dict:
    rows, ok = [], True
    for (dev, qt), g in main[main["rp"] == 0.25].groupby(["device", "query_type"]):
        hp = g[g["config"] == "hybrid-prefetch"]
        base = _curve(g, config="base")
        if hp.empty or base.empty:
            continue
        best = hp.loc[hp["qps"].idxmax()]
        idx_bytes = float(best["index_bytes"])
        need = _cache_needed(base, float(best["qps"]))
        base_dram = need * idx_bytes
        hp_dram = float(best["peak_dram_bytes"]) or float(best["dram_budget_bytes"])
        ratio = base_dram / hp_dram if hp_dram else math.inf
        holds = bool(ratio >= 10)
        ok &= holds
        rows.append({"device": dev, "query_type": qt, "hybrid_prefetch_qps": round(float(
            best["qps"]), 2), "hybrid_prefetch_segment_cache_fraction": round(float(
                best["cache_bytes"]) / idx_bytes, 3), "hybrid_prefetch_dram_bytes": int(hp_dram),
            "base_dram_bytes_for_equal_qps": None if math.isinf(base_dram) else int(base_dram),
            "base_never_reaches_it": math.isinf(base_dram),
            "dram_ratio": None if math.isinf(ratio) else round(ratio, 1), "holds": holds})
    return {"trend": "hybrid-prefetch reaches base-with-a-large-page-cache QPS with a small "
                     "fixed DRAM budget", "holds": bool(rows) and ok, "numbers": rows}


def multicore(mc) -> dict:
    rows, ok = [], True
    for (cfg, dev), g in mc.groupby(["config", "device"]):
        g = g.sort_values("cores")
        q = g["qps"].to_numpy()
        p99 = g["latency_p99_ns"].to_numpy()
        if len(q) < 2:
            continue
        if dev.startswith("hdd"):
            holds = bool(q[1] < q[0])
        else:
            inc = np.diff(q)
            holds = bool((inc > 0).all() and (np.diff(inc) <= 0.02 * q[0]).all()
                         and p99[-1] > p99[0])
        ok &= holds
        rows.append({"config": cfg, "device": dev, "cores": g["cores"].tolist(),
                     "qps": [round(x, 2) for x in q], "p99_ms": [round(x / 1e6, 2) for x in p99],
                     "holds": holds})
    return {"trend": "multicore: HDD collapses from 1 to 2 cores; SSDs scale with diminishing "
                     "returns and rising tail latency", "holds": bool(rows) and ok,
            "numbers": rows}


def check_all(main, la, mc) -> dict:
    return {"saturation": saturation(main), "prefetch_hides_nvme": prefetch_hides_nvme(main),
            "fixed_lookahead_fragile": fixed_lookahead_fragile(la),
            "dram_saved": dram_saved(main), "multicore": multicore(mc)}


def format_trends(trends: dict) -> str:
    lines = []
    for name, t in trends.items():
        lines.append(f"[{'HOLDS' if t['holds'] else 'DOES NOT HOLD'}] {name}: {t['trend']}")
        for r in t.get("numbers", [])[:16]:
            lines.append("    " + json.dumps(r, default=str))
        for r in t.get("base_prefetch", []):
            lines.append("    " + json.dumps(r, default=str))
        if name == "saturation":
            lines.append(f"    curves holding: {t['curves_holding']:.0%} of {t['curves']}")
            for r in t["exceptions"][:6]:
                lines.append("    exception: " + json.dumps(r, default=str))
    return "\n".join(lines)


def plot_all(main, la, mc, out: Path) -> list:
    """The trend figures (PNG) in `out` (analysis/model_*.py draws them)."""
    from tierlab.analysis.model_qps_vs_cache import plot_qps_vs_cache
    from tierlab.analysis.model_reference import plot_dram, plot_lookahead, plot_multicore

    out = Path(out)
    return [plot_qps_vs_cache(main, out / "qps_vs_cache.png", where={"rp": 0.25},
                              title="Model, reference scale: QPS vs cache size (RP 0.25)"),
            plot_lookahead(la, out / "lookahead.png"),
            plot_dram(main, out / "dram.png"),
            plot_multicore(mc, out / "multicore.png")]
