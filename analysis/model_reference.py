"""The APCache trend figures of `tierlab model reference` beyond QPS vs cache
size (model_qps_vs_cache.py): fixed vs adaptive lookahead at small caches,
QPS against the DRAM each configuration needs, and multicore scaling.
Each is a function from cache_run tables (DataFrames; any source) to a PNG.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from the CLI and from workflow rules
import matplotlib.pyplot as plt  # noqa: E402

from tierlab.analysis.model_qps_vs_cache import _save  # noqa: E402


def _frac(df):
    return (df["cache_bytes"] / df["index_bytes"]).round(4)


def plot_lookahead(la, path, config: str = "hybrid-prefetch") -> Path:
    """QPS vs cache size per lookahead (16, 64, adaptive, ...), one panel per
    device and query type."""
    d = la[la["config"] == config].assign(frac=lambda x: _frac(x))
    panels = sorted(set(zip(d["device"], d["query_type"])))
    fig, axes = plt.subplots(1, max(1, len(panels)), squeeze=False,
                             figsize=(4.6 * max(1, len(panels)), 4))
    for ax, (dev, qt) in zip(axes[0], panels):
        sub = d[(d["device"] == dev) & (d["query_type"] == qt)]
        for v in sorted(sub["lookahead"].unique(), key=lambda x: (not x.isdigit(), x.zfill(6))):
            c = sub[sub["lookahead"] == v].groupby("frac")["qps"].mean()
            ax.plot(100 * c.index, c.values, marker="o", label=f"LA {v}")
        ax.set_xscale("log")
        ax.set_title(f"{config}, {dev}, {qt.upper()}", fontsize=8)
        ax.set_xlabel("segment cache (% of the index)")
        ax.set_ylabel("QPS")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_dram(main, path, configs=("base", "hybrid-prefetch"), query_type: str = "single",
              rp: float = 0.25) -> Path:
    """QPS against peak DRAM per configuration, one panel per device."""
    d = main[(main["query_type"] == query_type) & (main["rp"] == rp)]
    devices = sorted(d["device"].unique())
    fig, axes = plt.subplots(1, max(1, len(devices)), squeeze=False,
                             figsize=(5.2 * max(1, len(devices)), 4))
    for ax, dev in zip(axes[0], devices):
        g = d[d["device"] == dev]
        for cfg in configs:
            s = g[g["config"] == cfg].sort_values("cache_bytes")
            ax.plot(s["peak_dram_bytes"] / 2**30, s["qps"], marker="o", label=cfg)
        ax.set_xscale("symlog", linthresh=0.05)
        ax.set_title(f"{dev}, {query_type.upper()}, RP {rp:g}: QPS vs peak DRAM", fontsize=9)
        ax.set_xlabel("peak DRAM (GiB)")
        ax.set_ylabel("QPS")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def plot_multicore(mc, path) -> Path:
    """QPS and p99 latency against cores, one line per configuration, device and
    cache size."""
    fig, axes = plt.subplots(1, 2, figsize=(10.5, 4), squeeze=False)
    for ax, metric, label in ((axes[0][0], "qps", "QPS (all cores)"),
                              (axes[0][1], "latency_p99_ns", "p99 latency (ms)")):
        for (cfg, dev, frac), g in mc.assign(frac=_frac(mc)).groupby(
                ["config", "device", "frac"]):
            g = g.sort_values("cores")
            y = g[metric] / (1e6 if metric != "qps" else 1)
            ax.plot(g["cores"], y, marker="o", label=f"{cfg}, {dev}, {frac:.0%} cache")
        ax.set_xlabel("cores (one shard and worker each)")
        ax.set_ylabel(label)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def plot_all(main, la, mc, out: Path) -> list:
    """The figures of `tierlab model reference` (PNG) in `out`, from its three
    grids' cache_run tables (main, lookahead, multicore)."""
    from tierlab.analysis.model_qps_vs_cache import plot_qps_vs_cache

    out = Path(out)
    return [plot_qps_vs_cache(main, out / "qps_vs_cache.png", where={"rp": 0.25},
                              title="Model, reference scale: QPS vs cache size (RP 0.25)"),
            plot_lookahead(la, out / "lookahead.png"),
            plot_dram(main, out / "dram.png"),
            plot_multicore(mc, out / "multicore.png")]
