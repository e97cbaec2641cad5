"""QPS against compressed postings size, one panel per query type (rows:
SINGLE, AND) and term class (columns: H, M, L): the reference study's central
figure. x = DID + freq block bytes of the index (MiB), y = QPS of the warm
pass (log); one filled, labelled marker per codec (the same colour in every
panel). Up and left is better: a smaller index that answers faster.

Input: the JSON document of `tierlab bench index` (a dict).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from the CLI and from workflow rules
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from tierlab.analysis.codec_pareto import _place_labels  # noqa: E402
from tierlab.core.files import save_figure  # noqa: E402

TYPE_TITLES = {"single": "SINGLE", "and": "AND"}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h", "<", ">")


def plot_qps_vs_size(doc: dict, path, dpi: int = 130) -> Path:
    """Draw the figure to `path` (PNG, written atomically) and return the path."""
    types = doc["config"]["types"]
    classes = doc["config"]["classes"]
    rows = [r for r in doc["codecs"] if not r.get("error") and r.get("postings_bytes")]
    names = [r["codec"] for r in rows]
    colours = dict(zip(names, plt.get_cmap("tab10").colors))
    markers = dict(zip(names, MARKERS))
    mib = {r["codec"]: r["postings_bytes"] / 2**20 for r in rows}
    xs = list(mib.values()) or [1.0]
    xpad = (max(xs) - min(xs)) * 0.12 or max(xs) * 0.1
    size_mb = doc["corpus"]["bytes"] / 1e6

    fig, axes = plt.subplots(len(types), len(classes), squeeze=False,
                             figsize=(max(5.0 * len(classes), 12.0), 4.2 * len(types) + 0.9))
    to_label = []
    for i, qtype in enumerate(types):
        for j, cls in enumerate(classes):
            ax = axes[i][j]
            pts = []
            for r in rows:
                q = next((x for x in r["queries"]
                          if x["type"] == qtype and x["class"] == cls), None)
                if q is None or not q.get("qps"):
                    continue
                pts.append((mib[r["codec"]], q["qps"], r["codec"]))
            ax.set_yscale("log")
            ax.set_xlim(max(0.0, min(xs) - xpad), max(xs) + xpad)
            if pts:
                lo = min(p[1] for p in pts)
                hi = max(p[1] for p in pts)
                ax.set_ylim(lo / 1.6, hi * 1.6)
            n = next((w["queries"] for w in doc.get("workloads", [])
                      if w["type"] == qtype and w["class"] == cls), None)
            ax.set_title(f"{TYPE_TITLES.get(qtype, qtype)} x {cls}"
                         + (f"  ({n:,} queries)" if n else ""), fontsize=11)
            ax.grid(True, which="both", alpha=0.25)
            for x, y, name in pts:
                ax.scatter(x, y, s=70, zorder=4, marker=markers[name], color=colours[name],
                           edgecolor="black", lw=0.6)
            to_label.append((ax, [(x, y, name, "black") for x, y, name in pts],
                             [(x, y) for x, y, _ in pts]))
            if i == len(types) - 1:
                ax.set_xlabel("DID + freq blocks, MiB (smaller is better)")
            if j == 0:
                ax.set_ylabel("queries per second (log; higher is better)")

    ident = "results identical across codecs" if doc.get("results_identical") \
        else "RESULTS DIFFER ACROSS CODECS"
    fig.suptitle(f"Index: QPS vs compressed size per codec ({size_mb:.0f} MB corpus, "
                 f"block {doc['config']['block_size']}, warm pass; {ident})", fontsize=12)
    handles = [Line2D([], [], marker=markers[n], ls="none", color=colours[n],
                      markeredgecolor="black", markersize=8, label=n) for n in names]
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=9,
                   frameon=False)
    fig.tight_layout(rect=(0, 0.55 / fig.get_figheight(), 1, 1))
    for ax, points, avoid in to_label:
        _place_labels(ax, points, avoid)

    try:  # readers never see half a PNG
        return save_figure(fig, path, dpi=dpi, format="png")
    finally:
        plt.close(fig)
