"""Memory costs of a query workload on memory tiers: the stream of each query
(tierlab.engine.memstream) through the cache filter of a machine and the
tier-timing model (tierlab.engine.memsim), for placements of the index's
structures on memory specs (docs/tiers.md "The memory-tier model").

`stalls` returns each query's memory stall per region under each placement;
`section` condenses them into the cost table's `memory` section (per tier,
per query type, per structure: the stall over the machine's own DRAM per
query and per block decoded), which `tierlab query costs --tier` writes and
the model's `tier_rule: trace` charges (model/costs.py, model/sim.py).

The core's time between memory requests is calibrated per query type: the
queries' CPU time (given: the cost table's prediction, or measured) over the
accesses of their streams. One filter runs the whole workload in order, so
the caches are warm across queries as on a core that runs them back to
back; the last level is this core's alone (the other cores' use of a
shared LLC is not modelled). `cores` cores share each tier's bandwidth.
"""
from __future__ import annotations

import numpy as np

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.engine import memsim

# Structures a placement moves, by the name of the run key (place_dict, ...)
# and the memory region their accesses carry.
STRUCTURES = {"dict": "dictionary", "skip": "skip", "did": "did", "freq": "freq"}


def cpu_per_access(stream, cpu_ns) -> dict:
    """ns of core time per access, per query type: CPU time / accesses."""
    out = {}
    for t in np.unique(stream.qtype):
        m = stream.qtype == t
        acc = float(stream.accesses[m].sum())
        out[str(t)] = float(np.asarray(cpu_ns)[m].sum()) / acc if acc else 0.0
    return out


def requests(stream, machine) -> np.ndarray:
    """The memory-side stream of the workload through the machine's caches."""
    return memsim.Filter(machine).run(stream.records)


def stalls(stream, cpu_ns, placements: dict, *, machine="xeon-gold-6252n", cores: int = 1,
           req: np.ndarray | None = None) -> dict:
    """{label: (queries x regions) stall ns} for each placement {label: {region:
    memory spec}}; regions not named stay on the machine's DRAM."""
    nq = len(stream.qtype)
    if len(cpu_ns) != nq:
        raise TierlabError(f"cpu_ns: {len(cpu_ns)} values for {nq} queries")
    req = requests(stream, machine) if req is None else req
    cpa = cpu_per_access(stream, cpu_ns)
    qt = stream.qtype[req["query"]] if len(req) else np.array([], dtype=stream.qtype.dtype)
    out = {}
    for label, place in placements.items():
        total = np.zeros((nq, len(memsim.regions())))
        for t, c in cpa.items():
            tm = memsim.Timing(place, machine, cores=cores, cpu_ns_per_access=c)
            total += tm.run(req[qt == t], queries=nq)
        out[label] = total
    return out


def placement_labels(tiers, structures=tuple(STRUCTURES)) -> dict:
    """Placements that put each structure alone, and all of them, on each tier."""
    out = {"base": {}}
    for spec in tiers:
        for s in structures:
            out[f"{spec}|{s}"] = {STRUCTURES[s]: spec}
        out[f"{spec}|all"] = {STRUCTURES[s]: spec for s in structures}
    return out


def section(stream, cpu_ns, tiers, *, machine="xeon-gold-6252n", cores: int = 1,
            what: str = "") -> dict:
    """The cost table's `memory` section (see the module docstring)."""
    m = memsim.machine_spec(machine)
    for spec in tiers:
        specs.load(spec, kind="memory")
    res = stalls(stream, cpu_ns, placement_labels(tiers), machine=m, cores=cores)
    base = res["base"].sum(axis=1)
    out = {"rule": "trace", "machine": m.name, "cores": cores,
           "baseline": m.memory, "stream": what or "synthesised (tierlab.engine.memstream)",
           "cpu_ns_per_access": cpu_per_access(stream, cpu_ns), "tiers": {}}
    for spec in tiers:
        per_type = {}
        for t in np.unique(stream.qtype):
            q = stream.qtype == t
            blocks = max(float(stream.blocks[q].sum()), 1.0)
            row = {}
            for s in (*STRUCTURES, "all"):
                extra = res[f"{spec}|{s}"].sum(axis=1)[q] - base[q]
                st = res[f"{spec}|{s}"][q]
                row[s] = {"extra_ns_per_query": float(extra.mean()),
                          "extra_ns_per_block": float(extra.sum() / blocks),
                          "stall_ns_per_query": float(st.sum(axis=1).mean()),
                          "stall_ns_per_block": float(st.sum() / blocks),
                          # the stall by region (this placement; all regions on their tiers)
                          "stall_ns_per_block_by_region": {
                              r: float(v) for r, v in zip(memsim.regions(), st.sum(axis=0) / blocks)
                              if v}}
            per_type[str(t)] = row
        out["tiers"][spec] = per_type
    return out
