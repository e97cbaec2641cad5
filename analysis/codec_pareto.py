"""Codec size vs decode speed: bits/int against decode ns/int for DIDs, one
panel per dataset (columns) and regime (rows). tierlab's codecs are filled
and labelled, peers hollow grey (one marker shape each, named in the legend),
memcpy is a dashed horizontal line, and the Pareto front of tierlab's codecs
(none of ours is both smaller and faster than a point on it) is a staircase.

Input: the `records` of `tierlab bench codecs` JSON as a DataFrame (columns
codec, peer, dataset, list, regime, bits_per_int, decode_ns_per_int, error).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from the CLI and from workflow rules
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from tierlab.core.files import save_figure  # noqa: E402

REGIME_ORDER = ("per-block", "whole-list")
DATASET_ORDER = ("clustered", "uniform")
PEER_MARKERS = ("s", "^", "D", "v", "P", "X", "h", "<", ">")
LABEL_PT = 8.5


def pareto_front(points: pd.DataFrame) -> pd.DataFrame:
    """Rows not dominated in (bits_per_int, decode_ns_per_int), both minimised,
    sorted by bits_per_int."""
    pts = points.sort_values(["bits_per_int", "decode_ns_per_int"])
    keep, best = [], np.inf
    for idx, ns in zip(pts.index, pts["decode_ns_per_int"]):
        if ns < best:
            keep.append(idx)
            best = ns
    return pts.loc[keep]


def _ordered(values, preferred) -> list:
    present = list(dict.fromkeys(values))
    return [v for v in preferred if v in present] + [v for v in present if v not in preferred]


def _place_labels(ax, points, avoid, hlines=()) -> None:
    """Label points [(x, y, text, colour)] near their marker without two labels
    (or a label and a marker in `avoid`, or a horizontal line at a y in
    `hlines`) overlapping: try a few offsets around the marker and keep the
    first free one. Sizes are estimated in pixels."""
    fig = ax.figure
    px_per_pt = fig.dpi / 72.0
    h = LABEL_PT * 1.25 * px_per_pt
    taken = []  # boxes (x0, y0, x1, y1) in display pixels
    r = 5 * px_per_pt
    for x, y in avoid:
        X, Y = ax.transData.transform((x, y))
        taken.append((X - r, Y - r, X + r, Y + r))
    for y in hlines:
        Y = ax.transData.transform((0, y))[1]
        taken.append((ax.bbox.x0, Y - 2, ax.bbox.x1, Y + 2))
    for x, y, text, colour in sorted(points, key=lambda p: p[1]):
        X, Y = ax.transData.transform((x, y))
        w = 0.62 * LABEL_PT * px_per_pt * len(text)
        g = 5 * px_per_pt
        options = [(g, g * 0.3), (g, -h - g * 0.3), (-w - g, g * 0.3), (-w - g, -h - g * 0.3),
                   (g, h), (g, -2 * h), (-w / 2, g + 2), (-w / 2, -h - g - 2)]
        x0_ax, y0_ax, x1_ax, y1_ax = ax.bbox.extents

        def cost(off):  # overlap area with what is taken; leaving the axes is worse
            b0, b1 = X + off[0], Y + off[1]
            box = (b0, b1, b0 + w, b1 + h)
            area = sum(max(0.0, min(box[2], t[2]) - max(box[0], t[0]))
                       * max(0.0, min(box[3], t[3]) - max(box[1], t[1])) for t in taken)
            outside = box[0] < x0_ax or box[2] > x1_ax or box[1] < y0_ax or box[3] > y1_ax
            return area + (1e9 if outside else 0.0)

        chosen = min(options, key=cost)  # min keeps the first of equal costs
        dx, dy = chosen
        taken.append((X + dx, Y + dy, X + dx + w, Y + dy + h))
        ax.annotate(text, (x, y), xytext=(dx / px_per_pt, dy / px_per_pt),
                    textcoords="offset points", ha="left", va="bottom", fontsize=LABEL_PT,
                    fontweight="bold", color=colour, zorder=6)


def plot_codec_pareto(records: pd.DataFrame, path, dpi: int = 130) -> Path:
    """Draw the figure to `path` (PNG, written atomically) and return the path."""
    df = records[(records["list"] == "dids") & records["decode_ns_per_int"].notna()].copy()
    if "error" in df:
        df = df[df["error"].isna()]
    df["peer"] = df["peer"].astype(bool)
    datasets = _ordered(df["dataset"], DATASET_ORDER) or ["(no data)"]
    regimes = _ordered(df["regime"], REGIME_ORDER) or ["(no data)"]
    is_memcpy = df["codec"] == "memcpy"
    ours_names = list(dict.fromkeys(df.loc[~df["peer"] & ~is_memcpy, "codec"]))
    peer_names = list(dict.fromkeys(df.loc[df["peer"] & ~is_memcpy, "codec"]))
    colours = dict(zip(ours_names, plt.get_cmap("tab10").colors))
    markers = dict(zip(peer_names, PEER_MARKERS))
    ns = df["decode_ns_per_int"].astype(float)
    ylim = (ns.min() / 1.8, ns.max() * 1.8) if len(ns) else (0.1, 10)
    xmax = max(34.0, float(df["bits_per_int"].max() if len(df) else 0) + 2)

    fig, axes = plt.subplots(len(regimes), len(datasets), squeeze=False, sharey=True,
                             figsize=(6.4 * len(datasets), 4.6 * len(regimes) + 0.8))
    to_label = []  # placed after the layout is final: placement works in pixels
    for i, regime in enumerate(regimes):
        for j, dataset in enumerate(datasets):
            ax = axes[i][j]
            ax.set_yscale("log")
            ax.set_xlim(0, xmax)
            ax.set_ylim(*ylim)
            ax.set_title(f"{dataset} DIDs, {regime}", fontsize=11)
            ax.grid(True, which="both", alpha=0.25)
            cell = df[(df["dataset"] == dataset) & (df["regime"] == regime)]
            memcpy = cell[cell["codec"] == "memcpy"]
            rest = cell[cell["codec"] != "memcpy"]
            ours, peers = rest[~rest["peer"]], rest[rest["peer"]]
            if not memcpy.empty:
                y = float(memcpy["decode_ns_per_int"].iloc[0])
                ax.axhline(y, color="black", lw=1, ls="--", zorder=1)
                ax.annotate(f"memcpy {y:.2f} ns/int", (0.5, y), xycoords=("axes fraction", "data"),
                            xytext=(0, -3), textcoords="offset points", ha="center", va="top",
                            fontsize=8)
            if len(ours) > 1:
                front = pareto_front(ours)
                ax.plot(front["bits_per_int"], front["decode_ns_per_int"], drawstyle="steps-post",
                        color="tab:blue", alpha=0.3, lw=3, zorder=2)
            for _, r in peers.iterrows():
                ax.scatter(r["bits_per_int"], r["decode_ns_per_int"], s=60, zorder=3,
                           marker=markers[r["codec"]], facecolor="none", edgecolor="dimgray",
                           lw=1.3)
            for _, r in ours.iterrows():
                ax.scatter(r["bits_per_int"], r["decode_ns_per_int"], s=60, zorder=4,
                           color=colours[r["codec"]], edgecolor="black", lw=0.6)
            to_label.append((ax, [(r["bits_per_int"], r["decode_ns_per_int"], r["codec"], "black")
                                  for _, r in ours.iterrows()],
                             list(zip(rest["bits_per_int"], rest["decode_ns_per_int"])),
                             list(memcpy["decode_ns_per_int"])))
            if i == len(regimes) - 1:
                ax.set_xlabel("bits per integer (smaller is better)")
            if j == 0:
                ax.set_ylabel("decode ns per integer (log; lower is better)")

    handles = [Line2D([], [], marker=markers[p], ls="none", markerfacecolor="none",
                      markeredgecolor="dimgray", markersize=8, label=p) for p in peer_names]
    handles += [Line2D([], [], color="tab:blue", alpha=0.3, lw=3, label="Pareto front of tierlab"),
                Line2D([], [], color="black", ls="--", lw=1, label="memcpy of the decoded bytes")]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 4), fontsize=8.5,
               frameon=False, title="peers (hollow) and references; tierlab codecs are filled",
               title_fontsize=9)
    fig.suptitle("Codecs: size vs decode speed for DIDs (filled: tierlab, hollow: peers)",
                 fontsize=12)
    fig.tight_layout(rect=(0, 0.8 / fig.get_figheight(), 1, 1))
    for ax, points, avoid, hlines in to_label:
        _place_labels(ax, points, avoid, hlines)

    try:  # readers never see half a PNG
        return save_figure(fig, path, dpi=dpi, format="png")
    finally:
        plt.close(fig)
