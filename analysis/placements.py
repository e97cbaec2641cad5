"""Predicted QPS of each structure placed on each memory tier (issue 20: "the
model predicts QPS for CXL and remote memory placements of each structure"):
one panel per workload, groups of bars per structure (dict, skip, did, freq),
one bar per tier, the all-DRAM QPS as a dashed line; the roofline rule's QPS
as a marker where it applies (DID and freq).

Input: the table of tierlab.experiments.tiers.structure_grid (DataFrame with
workload, structure, tier, qps, qps_dram, qps_roofline, machine, cores).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from the CLI and from workflow rules
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from tierlab.core.files import save_figure  # noqa: E402


def plot_placements(df, path, dpi: int = 130) -> Path:
    """Draw the figure to `path` (PNG, written atomically); returns the path."""
    if df.empty:
        raise ValueError("no rows to plot")
    workloads = list(dict.fromkeys(df["workload"]))
    structures = list(dict.fromkeys(df["structure"]))
    tiers = list(dict.fromkeys(df["tier"]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.8 * len(workloads), 4.2),
                             squeeze=False)
    width = 0.8 / len(tiers)
    colours = plt.get_cmap("tab10")
    for ax, w in zip(axes[0], workloads):
        d = df[df["workload"] == w]
        x = np.arange(len(structures))
        for i, t in enumerate(tiers):
            dt = d[d["tier"] == t].set_index("structure").reindex(structures)
            ax.bar(x + (i - (len(tiers) - 1) / 2) * width, dt["qps"], width, label=t,
                   color=colours(i))
            roof = dt["qps_roofline"].to_numpy(dtype=float)
            ok = np.isfinite(roof)
            if ok.any():
                ax.plot((x + (i - (len(tiers) - 1) / 2) * width)[ok], roof[ok], "k_",
                        markersize=8, label="roofline rule" if i == 0 else None)
        ax.axhline(float(d["qps_dram"].iloc[0]), color="grey", ls="--", lw=1,
                   label="all in DRAM")
        ax.set_xticks(x, structures)
        ax.set_title(f"{w} ({d['codec'].iloc[0]})", fontsize=10)
        ax.set_ylabel("predicted QPS")
        ax.set_ylim(bottom=0.0)  # bars from zero: their heights are the QPS ratios
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=min(len(lab), 4), fontsize=8)
    r = df.iloc[0]
    fig.suptitle(f"one structure on a tier, the rest in DRAM\n{r['machine']}, "
                 f"{int(r['cores'])} cores sharing each tier", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 0.92))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return save_figure(fig, path, dpi=dpi)
    finally:
        plt.close(fig)
