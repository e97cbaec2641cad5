"""`tierlab model reference`: the APCache reference grids at the reference's
scale (model/indexmeta.py `reference`) and the trends of docs/apcache.md
"Reference behaviour", each computed from the results with the numbers
behind it and whether it holds.

Grids (every cell: 1,000 H queries, 2 passes with the warm second one
reported as in docs/workload.md's protocol, the Optane PM slow tier, the
reference cost table `reference_costs`):
- main: 4 configurations x 8 cache sizes (5-100 % of the index) x RP
  {0, 0.25, 0.5} x {hdd-7200, nvme-p4800x} x {SINGLE, AND} = 384 runs;
- lookahead: hybrid-prefetch with LA 16, 64 and adaptive, base-prefetch with
  LA 16 and 64, at caches of 1-20 %, both devices, SINGLE and AND, RP 0.25;
- multicore: base-prefetch and hybrid-prefetch on 1-4 cores at 5 % and 20 %
  caches (at 20 % one core's working set fits and it does no I/O; at 5 % one
  core is I/O-bound too), on hdd-7200, sas-ssd and nvme-p4800x, SINGLE, RP
  0.25; the trend is checked per cache size.

Cost table. `costs="default"` is this machine's table measured (tierlab.model.costs
.measure) on a generated 1 GB corpus (~1 M documents, H lists of 6 k-1 M
postings), measured once and cached next to tierlab.model.costs.default's. The
24 MB default index has H lists of at most ~23 k postings: its fit lets
per-query and per-result costs land on posting_ns, which overcharges the
reference's far longer H lists and made every reference run CPU-bound.

Trends (each a function of the cache_run table; `check_all` runs them).
"Exposed I/O" of a run is the share of its wall time the query thread
waits for storage: device busy time / wall time for base and hybrid (one
core: the query thread's reads are synchronous), query_wait_ns / wall time
for the prefetch configurations.
- saturation: on every curve QPS does not fall as the cache grows (steps
  >= -3 %) and is flat (within 5 % of its maximum) once the cache holds 1.25x
  the workload's working set (distinct-term bytes; x 1.25 for page rounding
  and readahead), on >= 90 % of the curves; and every curve with >= 20 %
  exposed I/O at the smallest cache rises by >= 10 % (curves without
  exposed I/O, e.g. CPU-bound NVMe, have nothing to rise from). At least one
  curve must have exposed I/O.
- prefetch_hides_nvme: base-prefetch at the smallest cache reaches >= 90 %
  of its full-cache QPS on NVMe and is not slower than base there; on HDD it
  beats base at the smallest cache but stays < 80 % of its full-cache QPS.
  base's own NVMe loss (the latency there is to hide) is reported.
- fixed_lookahead_fragile: for each fixed-lookahead configuration
  (base-prefetch, hybrid-prefetch), in at least one (device, type) panel LA
  64 is >= 10 % slower than LA 16 at some cache below the largest (1-20 %)
  and within 3 % at the largest (the drop is a small-cache effect); and
  adaptive hybrid-prefetch is within 5 % of the better fixed LA at every
  cache size in every panel.
- dram_saved: hybrid-prefetch's best QPS (50 MB DRAM) is >= 90 % of base's
  best, and the DRAM `base` needs to match it (its page cache, interpolated
  on the grid) is >= 10x hybrid-prefetch's.
- multicore: on HDD, 2 cores give less QPS than 1 (seeks between the
  shards: the share of reads that position is reported); on the SSDs QPS
  grows at every step, with increments that do not grow, a 4-core
  efficiency QPS(4) / (4 QPS(1)) <= 0.9, and p99 at 4 cores >= 1.1x p99 at 1.
  On the SSDs the cores share the device and, through the cost table's
  measured cores.cpu_factor, the memory side (model/README.md); 3 and 4
  cores are extrapolated from the cores this machine has.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from tierlab.core import registry
from tierlab.core.files import scratch

FRACTIONS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1.0]
SMALL = [0.01, 0.02, 0.05, 0.1, 0.2]
DEVICES = ["hdd-7200", "nvme-p4800x"]
SSDS = ["sas-ssd", "nvme-p4800x"]
SSD_EFFICIENCY_MAX = 0.9  # multicore: QPS(n) / (n QPS(1)) at the most cores, on the SSDs
# the reference platform: the multicore grid derives core contention from it
# (model/contention.py), not from this host's measured factor
MACHINE = "apcache-2x-xeon-gold-6252n"

COMMON = {"index": "reference", "slow_tier": "optane-dcpmm-g1", "passes": 2, "costs": "default",
          "policy": "lru", "seed": 0}


REFERENCE_CORPUS_BYTES = 1_000_000_000  # generated corpus of the reference cost table


def reference_costs_path(codec: str = "pfor-delta256") -> Path:
    """Where the reference cost table of this machine is cached."""
    from tierlab.model import costs as costs_mod

    p = costs_mod.default_path(codec)
    return p.with_name(p.name.replace("costs-", "costs-1GB-", 1))


def reference_costs(codec: str = "pfor-delta256", *, refresh: bool = False, log=None) -> Path:
    """The reference cost table (module docstring): cached, else measured now
    on a generated 1 GB corpus (a few minutes, ~1.2 GB of temporary disk)."""
    import sys

    from tierlab.engine import corpus as corpus_mod
    from tierlab.model import costs as costs_mod
    from tierlab.engine import index as index_mod

    path = reference_costs_path(codec)
    log = log or (lambda m: print(m, file=sys.stderr))
    if path.exists() and not refresh:
        why = costs_mod.Costs.load(path).missing()  # a clear error if it is broken
        if not why:
            return path
        log(f"tierlab: {path}: {why}")
    log(f"tierlab: measuring the reference cost table ({REFERENCE_CORPUS_BYTES // 10**6} MB "
        f"generated corpus, {codec}); cached as {path}")
    with scratch("costs-reference") as tmp:
        corpus_mod.generate(tmp / "corpus.txt",
                            corpus_mod.GenerateParams(size_bytes=REFERENCE_CORPUS_BYTES))
        index_mod.build(tmp / "corpus.txt", tmp / "idx", codec=codec)
        table = costs_mod.measure(tmp / "idx")
    table.index = f"generated: {REFERENCE_CORPUS_BYTES // 10**6} MB corpus (seed 0), {codec}"
    table.save(path)
    return path


def grids(queries: int = 1000, costs="default") -> dict:
    """The three grid documents (tierlab/experiments/sweep.py format). costs "default" is
    the reference cost table (`reference_costs`)."""
    if costs == "default":
        costs = str(reference_costs())
    common = dict(COMMON, costs=costs)
    w = {"class": "H", "queries": queries}
    return {
        "main": dict(common, config=list(registry.configs()), cache_fraction=FRACTIONS,
                     device=DEVICES,
                     workload=dict(w, type=list(registry.query_types()), rp=[0.0, 0.25, 0.5])),
        "lookahead": [
            dict(common, config="hybrid-prefetch", lookahead=[16, 64, "adaptive"],
                 cache_fraction=SMALL, device=DEVICES,
                 workload=dict(w, type=list(registry.query_types()), rp=0.25)),
            dict(common, config="base-prefetch", lookahead=[16, 64], cache_fraction=SMALL,
                 device=DEVICES, workload=dict(w, type=list(registry.query_types()), rp=0.25)),
        ],
        "multicore": dict(common, config=["base-prefetch", "hybrid-prefetch"], cores=[1, 2, 3, 4],
                          machine=MACHINE,
                          cache_fraction=[0.05, 0.2], device=["hdd-7200"] + SSDS,
                          workload=dict(w, type="single", rp=0.25)),
    }


def _frac(df):
    return (df["cache_bytes"] / df["index_bytes"]).round(4)


def _where(df, **eq):
    """The rows of df whose columns equal the given values."""
    for k, v in eq.items():
        df = df[df[k] == v]
    return df


def _curve(df, **eq):
    d = _where(df, **eq)
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


def _queue_depth(row) -> float:
    qd = _param(row, "device_spec", "queue_depth")
    qd = qd.get("value") if isinstance(qd, dict) else qd
    return float(qd) if isinstance(qd, (int, float)) and qd else 1.0


def exposed_io(row) -> float:
    """Share of a run's wall time its query thread waits for storage (module
    docstring)."""
    wall = float(row["wall_ns"]) if "wall_ns" in row and row["wall_ns"] else 0.0
    if not wall:
        return math.nan
    if str(row["config"]).endswith("prefetch"):
        return float(row.get("query_wait_ns", 0.0) or 0.0) / wall / float(row.get("cores", 1))
    busy = float(row.get("device_utilisation", 0.0) or 0.0) * _queue_depth(row)
    return min(1.0, busy / float(row.get("cores", 1)))


def _smallest(g):
    g = g.assign(frac=_frac(g))
    return g[g["frac"] == g["frac"].min()]


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
        io = float(np.nanmean([exposed_io(r) for _, r in _smallest(g).iterrows()]))
        io_bound = bool(io >= 0.2)
        rises = bool(q.max() >= 1.10 * q[0])
        rec = {"config": cfg, "device": dev, "query_type": qt, "rp": float(rp),
               "working_set_fraction": round(w / 1.25, 4) if not math.isnan(w) else None,
               "exposed_io_smallest": round(io, 3), "qps_smallest": round(float(q[0]), 2),
               "qps_largest": round(float(q[-1]), 2), "qps_max": round(float(q.max()), 2),
               "min_step": round(float(steps.min()), 3), "flat_beyond_ws": flat,
               "monotone": monotone, "io_bound": io_bound, "rises": rises,
               "holds": flat and monotone and (rises or not io_bound)}
        curves.append(rec)
        if not rec["holds"]:
            bad.append(rec)
    shape = [r["flat_beyond_ws"] and r["monotone"] for r in curves]
    share = sum(shape) / len(shape) if shape else 0.0
    io_curves = [r for r in curves if r["io_bound"]]
    rising = all(r["rises"] for r in io_curves)
    return {"trend": "QPS rises with cache size until the cache holds the working set, then "
                     "is flat",
            "definition": "every curve: steps >= -3 % and within 5 % of its max beyond 1.25x "
                          "the working set (>= 90 % of curves); every curve with >= 20 % exposed "
                          "I/O at the smallest cache rises >= 10 %",
            "curves": len(curves), "curves_monotone_and_flat": share,
            "io_bound_curves": len(io_curves), "io_bound_curves_rising":
                sum(r["rises"] for r in io_curves),
            "holds": bool(curves) and share >= 0.9 and bool(io_curves) and rising,
            "exceptions": bad[:12],
            "numbers": [{k: r[k] for k in ("config", "device", "query_type", "rp",
                                           "working_set_fraction", "exposed_io_smallest",
                                           "qps_smallest", "qps_largest", "holds")}
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
            if nv.empty or hd.empty or b["nvme-p4800x"].empty or b["hdd-7200"].empty:
                continue
            nvme_ratio = float(nv.iloc[0] / nv.iloc[-1])
            nvme_base = float(b["nvme-p4800x"].iloc[0] / b["nvme-p4800x"].iloc[-1])
            nvme_gain = float(nv.iloc[0] / b["nvme-p4800x"].iloc[0])
            hdd_ratio = float(hd.iloc[0] / hd.iloc[-1])
            hdd_gain = float(hd.iloc[0] / b["hdd-7200"].iloc[0])
            # the share of its wall time base-prefetch's query thread waits for the HDD
            # at the smallest cache: what the query's CPU leaves unhidden
            small = _smallest(_where(main, config="base-prefetch", device="hdd-7200",
                                     query_type=qt, rp=rp))
            hdd_wait = float(np.nanmean([exposed_io(r) for _, r in small.iterrows()]))
            holds = bool(nvme_ratio >= 0.9 and nvme_gain >= 1.0 and hdd_ratio < 0.8
                         and hdd_gain > 1.0)
            ok &= holds
            rows.append({"query_type": qt, "rp": float(rp),
                         "nvme_prefetch_smallest_over_full": round(nvme_ratio, 3),
                         "nvme_base_smallest_over_full": round(nvme_base, 3),
                         "nvme_prefetch_over_base_smallest": round(nvme_gain, 3),
                         "hdd_prefetch_smallest_over_full": round(hdd_ratio, 3),
                         "hdd_prefetch_over_base_smallest": round(hdd_gain, 3),
                         "hdd_prefetch_waits_smallest": round(hdd_wait, 3), "holds": holds})
    return {"trend": "prefetching hides NVMe latency even with small caches; on HDD it helps "
                     "but cannot hide latency at small caches",
            "holds": bool(rows) and ok, "numbers": rows}


def _ebu(df, **eq):
    """evicted_before_use (params) per cache fraction."""
    d = _where(df, **eq)
    v = d.assign(frac=_frac(d), ebu=[_param(r, "evicted_before_use") or 0
                                     for _, r in d.iterrows()])
    return v.groupby("frac")["ebu"].mean().sort_index()


def fixed_lookahead_fragile(la) -> dict:
    panels, adaptive_ok, fragile = [], True, {}
    for cfg in ("hybrid-prefetch", "base-prefetch"):
        d = la[la["config"] == cfg]
        fragile[cfg] = False
        for (dev, qt), _ in d.groupby(["device", "query_type"]):
            c = {v: _curve(d, device=dev, query_type=qt, lookahead=v)
                 for v in ("16", "64", "adaptive")}
            if c["16"].empty or c["64"].empty:
                continue
            drop = (c["64"] / c["16"]).values
            # drops by >= 10 % below the largest cache, and has recovered at it
            shows = bool(drop[:-1].min() <= 0.9 and drop[-1] >= 0.97)
            fragile[cfg] |= shows
            rec = {"config": cfg, "device": dev, "query_type": qt,
                   "cache_fractions": list(c["16"].index),
                   "qps_la16": [round(x, 2) for x in c["16"].values],
                   "qps_la64": [round(x, 2) for x in c["64"].values],
                   "la64_over_la16": [round(x, 3) for x in drop],
                   "la64_evicted_before_use": [int(x) for x in
                                               _ebu(d, device=dev, query_type=qt,
                                                    lookahead="64").values],
                   "la64_fragile_here": shows}
            if not c["adaptive"].empty:
                avb = (c["adaptive"] / np.maximum(c["16"], c["64"])).values
                rec["qps_adaptive"] = [round(x, 2) for x in c["adaptive"].values]
                rec["adaptive_over_best_fixed"] = [round(x, 3) for x in avb]
                rec["adaptive_ok"] = bool((avb >= 0.95).all())
                adaptive_ok &= rec["adaptive_ok"]
            panels.append(rec)
    has_adaptive = any("adaptive_ok" in r for r in panels)
    holds = bool(panels) and has_adaptive and adaptive_ok and all(fragile.values())
    return {"trend": "fixed lookahead is fragile: LA 64 drops QPS at small caches; adaptive "
                     "lookahead needs no tuning",
            "definition": "per fixed-LA configuration, in >= 1 panel LA 64 <= 0.9x LA 16 at "
                          "some cache below the largest and >= 0.97x at the largest; adaptive "
                          ">= 0.95x the better fixed LA everywhere",
            "fragile_somewhere": fragile, "adaptive_within_5pct_everywhere": adaptive_ok,
            "holds": holds, "numbers": panels}


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


def dram_saved(main, rp: float = 0.25) -> dict:
    rows, ok = [], True
    for (dev, qt), g in main[main["rp"] == rp].groupby(["device", "query_type"]):
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
        reaches = float(best["qps"]) / float(base.max())
        holds = bool(ratio >= 10 and reaches >= 0.9)
        ok &= holds
        rows.append({"device": dev, "query_type": qt, "hybrid_prefetch_qps": round(float(
            best["qps"]), 2), "base_best_qps": round(float(base.max()), 2),
            "hybrid_prefetch_over_base_best": round(reaches, 3),
            "hybrid_prefetch_segment_cache_fraction": round(float(
                best["cache_bytes"]) / idx_bytes, 3), "hybrid_prefetch_dram_bytes": int(hp_dram),
            "base_dram_bytes_for_equal_qps": None if math.isinf(base_dram) else int(base_dram),
            "base_never_reaches_it": math.isinf(base_dram),
            "dram_ratio": None if math.isinf(ratio) else round(ratio, 1), "holds": holds})
    return {"trend": "hybrid-prefetch reaches base-with-a-large-page-cache QPS with a small "
                     "fixed DRAM budget", "holds": bool(rows) and ok, "numbers": rows}


def _positioned_share(row) -> float:
    """Share of a run's reads that paid positioning (not sequential)."""
    spec = _param(row, "device_spec")
    val = {k: (v.get("value") if isinstance(v, dict) else v) for k, v in spec.items()} \
        if isinstance(spec, dict) else {}
    reads = float(row.get("storage_reads", 0) or 0)
    pos = float(val.get("read_latency_ns") or 0) + float(val.get("seek_ns") or 0)
    bw = float(val.get("read_bandwidth_bytes_per_s") or 0)
    if not reads or not pos or not bw:
        return math.nan
    busy = float(row["device_utilisation"]) * _queue_depth(row) * float(row["wall_ns"])
    moving = busy - float(row["storage_bytes_read"]) * 1e9 / bw
    return max(0.0, min(1.0, moving / pos / reads))


def multicore(mc) -> dict:
    rows, ok = [], True
    for (cfg, dev, frac), g in mc.assign(frac=_frac(mc)).groupby(["config", "device", "frac"]):
        g = g.sort_values("cores")
        q = g["qps"].to_numpy()
        p99 = g["latency_p99_ns"].to_numpy()
        if len(q) < 2:
            continue
        rec = {"config": cfg, "device": dev, "cache_fraction": frac, "cores": g["cores"].tolist(),
               "qps": [round(x, 2) for x in q], "p99_ms": [round(x / 1e6, 2) for x in p99],
               "exposed_io": [round(exposed_io(r), 3) for _, r in g.iterrows()]}
        if "storage_reads" in g:
            rec["positioned_read_share"] = [round(_positioned_share(r), 3)
                                            for _, r in g.iterrows()]
        # what the SSDs' scaling rests on where their I/O is hidden: the cost
        # table's measured slowdown of a query's CPU with n cores busy
        rec["cpu_factor"] = [round(float(_param(r, "cores_cpu_factor") or 1.0), 3)
                             for _, r in g.iterrows()]
        if dev.startswith("hdd"):
            holds = bool(q[1] < q[0])
        else:
            inc = np.diff(q)
            eff = float(q[-1] / (g["cores"].iloc[-1] * q[0]))
            rec["efficiency_last"] = round(eff, 3)
            holds = bool((inc > 0).all() and (np.diff(inc) <= 0.02 * q[0]).all()
                         and eff <= SSD_EFFICIENCY_MAX and p99[-1] >= 1.1 * p99[0])
        ok &= holds
        rec["holds"] = holds
        rows.append(rec)
    out = {"trend": "multicore: HDD collapses from 1 to 2 cores; SSDs scale with diminishing "
                    "returns and rising tail latency", "holds": bool(rows) and ok,
           "numbers": rows}
    # SSDs whose runs never wait for storage (below their bandwidth, prefetch
    # hiding their reads): their scaling is the cost table's cpu_factor alone
    ssd = [r for r in rows if not r["device"].startswith("hdd")]
    waiting = {r["device"] for r in ssd if max(r["exposed_io"]) >= 0.05}
    cpu_bound = sorted({r["device"] for r in ssd} - waiting)
    if cpu_bound:
        top = int(mc["cores"].max())
        src = _param(mc.loc[mc["cores"].idxmax()], "cores_cpu_factor_source")
        need = 1 / SSD_EFFICIENCY_MAX  # the factor at `top` cores; linear in between
        out["cpu_bound_ssds"] = (
            f"{', '.join(cpu_bound)}: the runs wait for storage < 5 % of their time at every "
            f"core count, so their scaling is the cost table's cores.cpu_factor alone ({src}); "
            f"a {top}-core efficiency <= {SSD_EFFICIENCY_MAX} needs cpu_factor >= {need:.3f} at "
            f"{top} cores (>= {1 + (need - 1) / (top - 1):.3f} at 2, extrapolated linearly)")
    return out


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
        if name == "saturation":
            lines.append(f"    curves monotone and flat: {t['curves_monotone_and_flat']:.0%} of "
                         f"{t['curves']}; I/O-bound curves rising: {t['io_bound_curves_rising']}"
                         f" of {t['io_bound_curves']}")
            for r in t["exceptions"][:6]:
                lines.append("    exception: " + json.dumps(r, default=str))
        if t.get("cpu_bound_ssds"):
            lines.append("    " + t["cpu_bound_ssds"])
    return "\n".join(lines)

