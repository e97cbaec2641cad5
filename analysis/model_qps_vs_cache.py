"""QPS against cache size, one line per APCache configuration, one panel per
device (rows) and query type (columns): the reference study's main figure
(docs/apcache.md "Reference behaviour"). x = cache size as a share of the index
(cache_bytes / index_bytes, %), y = QPS (log).

Input: a cache_run table (DataFrame; any source). Rows that differ in other
parameters (rp, cores, lookahead, policy, ...) are averaged per point,
unless `where` picks them (e.g. where={"rp": 0.25}); the figure says which
values it averaged over.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from the CLI and from workflow rules
import matplotlib.pyplot as plt  # noqa: E402
from tierlab.core.files import save_figure  # noqa: E402

CONFIG_ORDER = ("base", "base-prefetch", "hybrid", "hybrid-prefetch")
OTHER_KEYS = ("rp", "cores", "lookahead", "policy", "query_class", "segment_bytes",
              "dram_budget_bytes", "slow_tier")


def _save(fig, path) -> Path:
    try:
        return save_figure(fig, path)
    finally:
        plt.close(fig)


def plot_qps_vs_cache(df, path, where: dict | None = None, title: str = "",
                      dpi: int = 130) -> Path:
    """Draw the figure to `path` (PNG, written atomically); returns the path."""
    d = df.copy()
    for k, v in (where or {}).items():
        d = d[d[k] == v]
    if d.empty:
        raise ValueError("no rows to plot" + (f" for {where}" if where else ""))
    d["cache_pct"] = 100.0 * d["cache_bytes"] / d["index_bytes"]
    devices = sorted(d["device"].unique())
    types = [t for t in ("single", "and") if t in set(d["query_type"])] or \
        sorted(d["query_type"].unique())
    configs = [c for c in CONFIG_ORDER if c in set(d["config"])] + \
        sorted(set(d["config"]) - set(CONFIG_ORDER))
    colours = dict(zip(configs, plt.get_cmap("tab10").colors))
    point = ["device", "query_type", "config", "cache_pct"]
    averaged = {k: sorted(map(str, d[k].unique())) for k in OTHER_KEYS
                if k in d and (d.groupby(point)[k].nunique() > 1).any()}
    fig, axes = plt.subplots(len(devices), len(types), squeeze=False, dpi=dpi,
                             figsize=(5.2 * len(types), 3.8 * len(devices) + 0.8))
    for i, dev in enumerate(devices):
        for j, qt in enumerate(types):
            ax = axes[i][j]
            sub = d[(d["device"] == dev) & (d["query_type"] == qt)]
            for c in configs:
                s = sub[sub["config"] == c].groupby("cache_pct")["qps"].mean()
                if len(s):
                    ax.plot(s.index, s.values, marker="o", ms=3.5, color=colours[c], label=c)
            ax.set_yscale("log")
            ax.set_title(f"{dev} - {qt.upper()}", fontsize=10)
            ax.set_xlabel("cache size (% of the index)")
            ax.set_ylabel("QPS")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    note = "; ".join(f"mean over {k} {', '.join(v)}" for k, v in averaged.items())
    fig.suptitle(title or "QPS vs cache size per configuration", fontsize=11)
    if note:
        fig.text(0.5, 0.005, note, ha="center", fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    return _save(fig, path)
