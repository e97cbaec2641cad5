"""`tierlab sim compare`: the cross-validation of issue 22. The same streams on
every back-end at hand (the embedded timing model, and Ramulator 2, VANS and
gem5 where their binaries are set), for each memory spec, in both modes; the
embedded model's unloaded mean read latency, unloaded total time and
saturated bandwidth against each simulator's, and its speed against each
simulator's on the same trace in the same run.

JSON: {benchmark: "sims", tierlab_version, started_at, load_before, load_after,
machine, config{specs, streams, backends, not_run{backend: why}}, records[sim_run
rows], comparisons[{spec, stream, against, latency_rel_error,
total_time_rel_error, bandwidth_rel_error, speedup, target_rel, met}],
errors[]}. Targets (issue 22): within 10 % of Ramulator 2 (DRAM and
Optane-like tiers), 15 % of VANS; embedded at least 20x faster than
Ramulator 2.
"""
from __future__ import annotations

import json
import math
import os
import platform
from datetime import datetime, timezone
from pathlib import Path

from tierlab import __version__
from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import embedded, run, stream as st

TARGET_REL = {"ramulator2": 0.10, "vans": 0.15, "gem5": 0.10}
TARGET_SPEEDUP = 20.0


def _rel(a: float, b: float) -> float:
    return (a - b) / b if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def backends_at_hand(binaries: dict) -> tuple[list[str], dict]:
    """The back-ends that can run here, and why the others cannot."""
    have, why = [], {}
    if embedded.available():
        have.append("embedded")
    else:
        why["embedded"] = "the tier-timing model (kernels/src/memsim/timing.c) is not built"
    for b in ("ramulator2", "vans", "gem5"):
        try:
            binaries[b] = run.binary(b, binaries.get(b))
            have.append(b)
        except TierlabError as e:
            why[b] = str(e)
    return have, why


def compare(spec_names, streams: dict, work: Path, *, binaries=None, progress=None) -> dict:
    """Run every stream ({name: path}) on every back-end at hand for every
    spec; the document described in the module docstring."""
    binaries = dict(binaries or {})
    have, why = backends_at_hand(binaries)
    doc = {"benchmark": "sims", "tierlab_version": __version__,
           "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "load_before": os.getloadavg(),
           "machine": {"cpu": platform.processor() or platform.machine(),
                       "cores": os.cpu_count()},
           "config": {"specs": list(spec_names), "streams": {k: str(v) for k, v in
                                                               streams.items()},
                      "backends": have, "not_run": why},
           "records": [], "comparisons": [], "errors": []}
    for spec in spec_names:
        for sname, path in streams.items():
            by = {}
            for b in have:
                if b == "vans" and specs.load(spec).tier != "pm":
                    continue
                try:
                    rows = run.run(b, spec, path, work / f"{spec}-{sname}-{b}",
                                   binary_path=binaries.get(b), progress=progress,
                                   embedded=embedded.model())
                except TierlabError as e:
                    doc["errors"].append(f"{b} {spec} {sname}: {e}")
                    continue
                rows = [r for r in rows if r["region"] in ("all",) or b != "embedded"]
                for r in rows:
                    r["stream_name"] = sname
                doc["records"].extend(rows)
                by[b] = {r["mode"]: r for r in rows}
            emb = by.get("embedded")
            if not emb:
                continue
            for b, modes in by.items():
                if b == "embedded":
                    continue
                un, sat = modes.get("unloaded"), modes.get("saturated")
                c = {"spec": spec, "stream": sname, "against": b}
                if un:
                    c["latency_rel_error"] = _rel(emb["unloaded"]["read_latency_mean_ns"],
                                                  un["read_latency_mean_ns"])
                    c["total_time_rel_error"] = _rel(emb["unloaded"]["total_ns"],
                                                     un["total_ns"])
                    c["speedup"] = (un["wall_s"] / emb["unloaded"]["wall_s"]
                                    if emb["unloaded"]["wall_s"] > 0 else math.inf)
                if sat:
                    c["bandwidth_rel_error"] = _rel(emb["saturated"]["read_bandwidth_bytes_per_s"],
                                                    sat["read_bandwidth_bytes_per_s"])
                c["target_rel"] = TARGET_REL[b]
                c["met"] = all(abs(c.get(k, math.nan)) <= TARGET_REL[b] for k in
                               ("latency_rel_error", "total_time_rel_error"))
                if b == "ramulator2" and "speedup" in c:
                    c["speedup_met"] = c["speedup"] >= TARGET_SPEEDUP
                doc["comparisons"].append(c)
    doc["load_after"] = os.getloadavg()
    return doc


def default_streams(folder: Path, count: int) -> dict:
    """Sequential and random line reads (`tierlab sim stream`), written to folder."""
    run.mkdir(folder)
    out = {}
    for pattern in st.PATTERNS:
        p = folder / f"{pattern}-{count}.memreq"
        try:
            st.write(p, st.synthetic(pattern, count))
        except OSError as e:
            raise TierlabError(f"cannot write {p}: {e.strerror or e}") from None
        out[pattern] = p
    return out


def dumps(doc: dict) -> str:
    def clean(x):
        if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x
    return json.dumps(clean(doc), indent=1, default=str)
