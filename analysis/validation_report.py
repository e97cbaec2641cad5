"""The validation report of `tierlab validate`: the measured and the modelled
cache_run tables of a grid's rows (with the grid's label columns row_id and
cell) paired, scored against the targets and against the
runtime's own noise floor (its twin runs), plotted and summarised."""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path

from tierlab.core.files import write_atomic
from tierlab.core.specs import REAL
from tierlab.traces.schema import columns

def param_mismatches(measured, model) -> list[str]:
    """Rows where the runtime and the model report different parameters for
    the same run: both run one run spec, so any is a bug."""
    from tierlab.analysis.validation import PARAM_KEYS

    a = measured.set_index("row_id")
    b = model.set_index("row_id")
    out = []
    for k in PARAM_KEYS:
        x, y = a[k].astype(str), b[k].reindex(a.index).astype(str)
        bad = x[x != y]
        for rid in bad.index[:3]:
            out.append(f"row {rid}: {k} measured {x[rid]} vs model {y[rid]}")
    return out


def analyse(out, measured, model, twins=None, extra_notes=(), targets=None) -> dict:
    """Pair, summarise and write into folder `out` the tables
    (measured.parquet and model.parquet: cache_run; validation.csv: the
    schema's validation table), validation.md, the parity plot and
    summary.json; return them with the printed text. targets: the
    validation.Targets scored against (default: replay mode's)."""
    from tierlab.analysis import validation as val
    from tierlab.traces.schema import write_table

    targets = targets or val.Targets()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    schema_cols = [c for c in measured.columns if c in columns("cache_run")]
    write_table("cache_run", measured[schema_cols], out / "measured.parquet")
    write_table("cache_run", model[schema_cols], out / "model.parquet")
    m, p = measured, model
    keys = val.PARAM_KEYS + ["cell", "row_id"]
    paired = val.pair(m, p, keys=keys)
    summary, cells = val.summarise(paired, targets, cell_keys=["cell"])
    # the runtime against itself: a second run of each row scored like the model
    if twins is not None:
        twins = val.pair(m[m["row_id"].isin(twins["row_id"])], twins, keys=keys)

    def floor_of(rows):  # the noise floor over those of `rows` (paired) that have twins
        tw = None if twins is None else twins[twins["row_id"].isin(rows["row_id"])]
        return None if tw is None or tw.empty else val.noise_floor(
            rows[rows["row_id"].isin(tw["row_id"])], tw, cell_keys=["cell"])

    floor = floor_of(paired)
    # the same targets without the real device (emulated devices only), when both exist
    emulated = emulated_floor = None
    if (paired["device"] == REAL).any() and (paired["device"] != REAL).any():
        emulated, _ = val.summarise(paired[paired["device"] != REAL], targets,
                                    cell_keys=["cell"])
        emulated_floor = floor_of(paired[paired["device"] != REAL])
    paired = paired.sort_values(["device", "query_type", "cache_bytes", "config"])
    write_table("validation", validation_table(paired), out / "validation.csv")
    (out / "validation.md").write_text(val.format_markdown(paired, summary, floor))
    val.parity_plot(paired, out / "parity.png")
    mism = param_mismatches(measured, model)
    doc = {"rows": summary.rows, "cells": summary.cells, "met": summary.met,
           "targets": {k: {"value": c["value"], "threshold": c["target"], "met": bool(c["met"])}
                       for k, c in summary.checks.items()},
           "diagnosis": {str(k): int(n) for k, n in
                         paired.loc[paired["diagnosis"] != "ok", "diagnosis"].value_counts()
                         .items()},
           "bistable": val.bistable_summary(paired),
           "by_device": val.by_group(paired, "device"),
           "by_config": val.by_group(paired, "config"),
           "noise_floor": floor,
           "targets_emulated_devices_only": None if emulated is None else {
               k: {"value": c["value"], "threshold": c["target"], "met": bool(c["met"])}
               for k, c in emulated.checks.items()},
           "noise_floor_emulated_devices_only": emulated_floor,
           "param_mismatches": mism, "notes": list(extra_notes),
           "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    write_atomic(out / "summary.json", json.dumps(doc, indent=1, default=_json) + "\n")
    text = val.format_summary(summary, paired)
    if floor is not None:
        text += "\n" + val.format_floor(floor)
    if emulated is not None:
        text += "\nwithout the real device (emulated devices only):\n" + "\n".join(
            val.format_summary(emulated, paired[paired["device"] != REAL]).splitlines()[:7])
        if emulated_floor is not None:
            text += "\n" + "\n".join(val.format_floor(emulated_floor).splitlines()[:-1])
    return {"summary": summary, "paired": paired, "cells": cells, "doc": doc, "text": text}


def validation_table(paired):
    """The paired rows as the schema's validation table: a model run not
    checked for a second steady state is not bistable and has no head-start
    metrics (NaN)."""
    t = paired.copy()
    if "bistable" not in t:
        t["bistable"] = False
    t["bistable"] = t["bistable"].fillna(False).astype(bool)
    for c in columns("validation"):
        if c not in t:
            t[c] = math.nan
    return t[columns("validation")]


def _json(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:
        pass
    return str(x)
