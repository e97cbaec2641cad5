"""The figures of the workflow's report that put the runtime (source
measured) and the model (source model) of the same APCache cells side by
side, and the validation's error table. Inputs are result tables only
(cache_run, cache_timeline of traces/schema.yaml; the validation's
summary.json); each function writes one PNG or CSV atomically and returns
its path.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from workflow rules
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FormatStrFormatter, NullLocator  # noqa: E402

from tierlab.analysis.model_qps_vs_cache import CONFIG_ORDER, _save  # noqa: E402

SIDES = {"measured": "-", "model": "--"}  # line style per source


def _configs(df) -> list:
    return [c for c in CONFIG_ORDER if c in set(df["config"])] + \
        sorted(set(df["config"]) - set(CONFIG_ORDER))


def _by_device(runs, metrics, ylabels, path, title, log=(True,)) -> Path:
    """One row of panels per device, one column per metric: each
    configuration's curve over cache size (% of the index), the runtime
    solid and the model dashed in the same colour."""
    # two significant digits: the model's index_bytes may count the files'
    # headers, the runtime's not, and the same cell must share its x
    pct = (100.0 * runs["cache_bytes"] / runs["index_bytes"]).map(lambda x: float(f"{x:.2g}"))
    d = runs.assign(cache_pct=pct)
    devices = sorted(d["device"].unique())
    configs = _configs(d)
    colours = dict(zip(configs, plt.get_cmap("tab10").colors))
    fig, axes = plt.subplots(len(devices), len(metrics), squeeze=False,
                             figsize=(max(5.0 * len(metrics), 8.0), 3.6 * len(devices) + 0.8))
    for i, dev in enumerate(devices):
        for j, (metric, ylabel) in enumerate(zip(metrics, ylabels)):
            ax = axes[i][j]
            sub = d[d["device"] == dev]
            for c in configs:
                for side, ls in SIDES.items():
                    s = sub[(sub["config"] == c) & (sub["source"] == side)]
                    s = s.groupby("cache_pct")[metric].mean().dropna()
                    if len(s):
                        ax.plot(s.index, s.values, ls=ls, marker="o", ms=3.5,
                                color=colours[c], label=f"{c} ({side})")
            if log[j % len(log)]:
                ax.set_yscale("log")
            ax.set_xscale("log")
            ax.set_xticks(sorted(sub["cache_pct"].unique()))
            ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
            ax.set_title(f"{dev}: {ylabel}", fontsize=10)
            ax.set_xlabel("cache size (% of the index)")
            ax.set_ylabel(ylabel)
            ax.grid(True, which="both", alpha=0.3)
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 0.97))
    return _save(fig, path)


def plot_cache_curves(runs, path) -> Path:
    """QPS and p99 latency against cache size per configuration and device,
    runtime (solid) and model (dashed) of the same cells on one plot."""
    r = runs.assign(latency_p99_ms=runs["latency_p99_ns"] / 1e6)
    return _by_device(r, ["qps", "latency_p99_ms"], ["QPS", "p99 latency (ms)"], path,
                      "QPS and p99 vs cache size: runtime (solid) and model (dashed)")


def miss_rate(runs):
    """The miss rate of each run's own cache: the page cache for the base
    configurations, the segment cache for the hybrid ones."""
    hybrid = runs["config"].str.startswith("hybrid")
    return runs["segment_cache_miss_rate"].where(hybrid, runs["page_cache_miss_rate"])


def plot_miss_rate(runs, path) -> Path:
    r = runs.assign(miss_pct=100.0 * miss_rate(runs))
    return _by_device(r, ["miss_pct"], ["miss rate (%)"], path,
                      "Miss rate vs cache size: runtime (solid) and model (dashed)", log=(False,))


def plot_lookahead_timeline(runs, timelines, path) -> Path:
    """Queries the prefetcher was ahead of the query thread over the run, for
    each prefetch configuration at the smallest and largest cache, runtime
    and model; one panel per device."""
    d = runs[runs["config"].str.endswith("prefetch")]
    if d.empty:
        raise ValueError("no prefetch configuration among the runs: no lookahead to draw")
    devices = sorted(d["device"].unique())
    fig, axes = plt.subplots(1, len(devices), squeeze=False, figsize=(5.4 * len(devices), 4))
    configs = _configs(d)
    colours = dict(zip(configs, plt.get_cmap("tab10").colors[1::2] + plt.get_cmap("tab10").colors))
    for ax, dev in zip(axes[0], devices):
        sub = d[d["device"] == dev]
        caches = sorted(sub["cache_bytes"].unique())
        for c in configs:
            for cache, marker in zip(sorted({caches[0], caches[-1]}), ("", ".")):
                for side, ls in SIDES.items():
                    run = sub[(sub["config"] == c) & (sub["cache_bytes"] == cache)
                              & (sub["source"] == side)]
                    if run.empty:
                        continue
                    rid = run["run_id"].iloc[0]
                    t = timelines[(timelines["run_id"] == rid)].sort_values("t_ns")
                    if t.empty:
                        continue
                    pct = 100.0 * cache / float(run["index_bytes"].iloc[0])
                    ax.plot(t["t_ns"] / 1e9, t["lookahead_queries"], ls=ls, marker=marker,
                            ms=3, lw=1, color=colours[c],
                            label=f"{c}, cache {pct:.2g} % ({side})")
        ax.set_title(f"{dev}: lookahead over time", fontsize=10)
        ax.set_xlabel("time from run start (s)")
        ax.set_ylabel("queries ahead of the query thread")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def plot_dram_saved(numbers: dict, path) -> Path:
    """The DRAM base needs to reach hybrid-prefetch's best QPS, over the DRAM
    hybrid-prefetch uses (the `dram_saved` trend of
    tierlab.experiments.reference), runtime and model side by side per
    device and query type; a base that never reaches it is marked."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    labels, width = [], 0.38
    for k, (side, rows) in enumerate(numbers.items()):
        xs, ys = [], []
        for i, r in enumerate(rows):
            if k == 0:
                labels.append(f"{r['device']}\n{r['query_type']}")
            xs.append(i + (k - 0.5) * width)
            ys.append(r["dram_ratio"] if r["dram_ratio"] is not None else math.nan)
        bars = ax.bar(xs, [0 if math.isnan(y) else y for y in ys], width, label=side)
        for x, y, bar in zip(xs, ys, bars):
            ax.text(x, bar.get_height(), "never" if math.isnan(y) else f"{y:.2g}x",
                    ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("base's DRAM / hybrid-prefetch's DRAM at equal QPS")
    ax.set_title("DRAM saved by hybrid-prefetch at equal QPS", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def error_table(summary: dict, path) -> Path:
    """The validation's targets (summary.json) as a CSV: each target's value,
    threshold and whether it is met, with the runtime against itself (the
    noise floor) beside it where it was measured."""
    import pandas as pd

    floor = (summary.get("noise_floor") or {}).get("targets", {})
    rows = []
    for name, t in summary["targets"].items():
        f = floor.get(name, {})
        rows.append({"target": name, "model": t["value"], "threshold": t["threshold"],
                     "met": t["met"], "runtime_vs_itself": f.get("runtime_vs_itself"),
                     "noise_allows_it": f.get("noise_allows_it")})
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    pd.DataFrame(rows).to_csv(tmp, index=False)
    tmp.replace(path)
    return path
