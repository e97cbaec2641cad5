"""A real query log's term popularity against the RP generator's on the same
terms: left, slots per term by rank (log-log); right, the share of all term
slots taken by the top ranks. The legend gives each side's share of repeated
queries. Up-left on the right panel means a few terms take most slots.

Input: the `report` of `tierlab workload from-log`'s W.json
(tierlab.engine.querylog.popularity_report).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: called from the CLI
import matplotlib.pyplot as plt  # noqa: E402

from tierlab.analysis.model_qps_vs_cache import _save  # noqa: E402

SIDES = (("log", "query log", "tab:blue", "-"), ("rp_generator", "RP generator", "tab:grey", "--"))


def plot_popularity(report: dict, path, title: str = "", dpi: int = 130) -> Path:
    """Draw the figure to `path` (PNG, written atomically); returns the path."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.2), dpi=dpi)
    for key, name, colour, style in SIDES:
        side = report[key]
        if not side.get("curve"):
            continue
        rank = [p[0] for p in side["curve"]]
        rep = side["repeated_queries_share"]
        label = name + (f" (RP {side['rp']:g})" if "rp" in side else "") + \
            (f": {100 * rep:.1f} % repeated queries" if rep is not None else "")
        left.loglog(rank, [p[1] for p in side["curve"]], style, color=colour, label=label)
        right.semilogx([r / side["terms"] for r in rank], [100 * p[2] for p in side["curve"]],
                       style, color=colour, label=label)
    left.set_xlabel("term rank")
    left.set_ylabel("term slots (queries holding the term)")
    left.set_title("popularity by rank")
    right.set_xlabel("top fraction of terms")
    right.set_ylabel("% of all term slots")
    right.set_ylim(0, 100)
    right.set_title("share taken by the most popular terms")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower right", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, Path(path))
