"""A model run (`tierlab model run SPEC.yaml`): the run spec
(tierlab.core.runspec, the keys of `tierlab list keys`) resolved for the
model, its inputs built (index metadata, trace, costs, device and tier specs)
and the run turned into the result tables.

Inputs are cached per process (an index synthesised at the reference scale
takes seconds), so a sweep's worker builds each index once.
"""
from __future__ import annotations

import dataclasses

import json
import math
import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from tierlab.core import registry, runspec, specs, values
from tierlab.core.errors import TierlabError

from tierlab.engine import workload as wl
from tierlab.model import indexmeta, sim
from tierlab.model import replay
from tierlab.model.costs import CostModel

# where a replayed trace's CPU time per query comes from: the cost table, or the
# latency `tierlab query run` measured for each query (an all-DRAM run)
CPU_SOURCES = ("table", "measured")
COST_KEYS = ("query_ns", "block_ns", "posting_ns")
# CPU of the runtime's emulated page cache that a DRAM query run lacks: each a
# number of ns, or "table" (the cost table's threads section, tierlab.model.costs)
PAGE_COST_KEYS = ("page_hit_ns", "page_touch_ns", "page_miss_ns")
# check_bistable: a prefetch configuration is run a second time with the query
# thread starting once its worker is as far ahead as it may go (Params.head_start);
# QPS apart by more than this share means the configuration has two steady states
# here (a small page cache under a fixed lookahead: the worker's reads evict pages
# the query thread has not used yet, it rereads them and falls further behind),
# and which one a real run settles in depends on its first milliseconds
BISTABLE_QPS_CHANGE = 0.10


# --- values ------------------------------------------------------------------------

_int, _num = values.whole, values.number


@dataclass
class RunConfig:
    """A validated configuration: the run spec (tierlab.core.runspec) with the
    model's own values resolved (index, workload, costs, handoff_spin_ns)."""

    values: dict
    spec: runspec.RunSpec

    def __getitem__(self, k):
        return self.values[k]

    def params(self, index_bytes: int) -> sim.Params:
        v = self.values
        return sim.Params(config=v["config"], policy=v["policy"], cores=v["cores"],
                          cache_bytes=self.spec.cache_size(index_bytes),
                          segment_bytes=v["segment_bytes"],
                          lookahead=v["lookahead"], dram_budget_bytes=v["dram_budget_bytes"],
                          readahead_bytes=v["readahead_bytes"], tier_factor=v["tier_factor"],
                          tier_rule=v["tier_rule"], placement=placed_structures(v),
                          page_cache_policy=v["page_cache_policy"],
                          passes=v["passes"], sample_ns=v["sample_ns"], k=v["k"],
                          handoff_spin_ns=v["handoff_spin_ns"])


def placed_structures(v) -> tuple:
    """((structure, place), ...) of the place_* keys that put a structure off
    DRAM (pm:PATH or numa:N): what the model charges (sim.memory_cost); empty,
    dram and storage cost nothing extra here."""
    out = []
    for s in ("dict", "skip", "did", "freq"):
        where = str(v.get(f"place_{s}") or "")
        if where.startswith(("pm:", "numa:")) or where in ("pm", "numa"):
            out.append((s, where))
    return tuple(out)


def runtime_spin_ns() -> int:
    """How long the native runtime's waiting threads spin before they block
    when each has a CPU of its own (TIERLAB_APCACHE_HANDOFF_SPIN_NS), the
    model's default: the model gives every thread a CPU of its own."""
    from tierlab.core.native import ffi_lib

    return int(ffi_lib()[1].TIERLAB_APCACHE_HANDOFF_SPIN_NS)


def validate(doc: dict, where: str = "config") -> RunConfig:
    """Check a run spec for the model (tierlab.core.runspec: every key, its
    default and its check), then resolve what only the model reads."""
    spec = runspec.validate(doc, where)
    if spec["device"] == specs.REAL:
        raise TierlabError("device: the model needs a storage spec; `real` is the runtime's own "
                           "device (`tierlab validate` probes it and writes a spec)")
    v = dict(spec)
    if v["handoff_spin_ns"] == "runtime":
        v["handoff_spin_ns"] = runtime_spin_ns()
    v["index"] = _check_index(v["index"])
    v["workload"] = _check_workload(v["workload"])
    v["costs"] = _check_costs(v["costs"])
    return RunConfig(v, spec)


def _check_index(x):
    if x == "reference":
        return {"preset": "reference"}
    if isinstance(x, str):
        return {"path": x}
    if not isinstance(x, dict):
        raise TierlabError(f"index: 'reference', an index folder, {{path: DIR}} or synthetic "
                           f"statistics {{{', '.join(indexmeta.SYNTHETIC_KEYS)}}}; got {x!r}")
    x = dict(x)
    if "path" in x:
        if set(x) != {"path"}:
            extra = sorted(set(x) - {"path"})
            raise TierlabError(f"index: with 'path', no other key (got {extra})")
        return x
    if x.get("preset") is not None:
        if x["preset"] != "reference":
            raise TierlabError(f"index.preset: unknown preset '{x['preset']}'; known: reference")
        extra = set(x) - {"preset", "seed", "materialise_min_postings"}
        if extra:
            raise TierlabError(f"index: unknown key '{sorted(extra)[0]}' for the reference preset "
                               "(seed and materialise_min_postings may be set)")
        return x
    st = {k: x[k] for k in x}
    indexmeta._check_stats(st)  # names the bad key
    return {"synthetic": st}


def _check_workload(w):
    if isinstance(w, (str, os.PathLike)):
        return {"file": str(w)}
    if not isinstance(w, dict):
        raise TierlabError(f"workload: a query file, {{file: F}}, {{trace: DIR}} or "
                           f"{{{', '.join(wl.GENERATOR_KEYS)}}}; got {w!r}")
    if "trace" in w:
        extra = [k for k in w if k not in ("trace", "cpu")]
        if extra:
            raise TierlabError(f"workload: 'trace' takes only 'cpu', not '{extra[0]}'")
        if w.get("cpu", "table") not in CPU_SOURCES:
            raise TierlabError(f"workload.cpu: {w['cpu']!r}; known: {', '.join(CPU_SOURCES)}")
        return dict(w)
    if "file" in w:
        if len(w) != 1:
            raise TierlabError("workload: 'file' alone (cpu: measured needs a trace)")
        return dict(w)
    g = {"type": "single", "class": "H", "queries": 1000, "rp": 0.25, "seed": None}
    g.update(w)
    return wl.check_generator(g)


def _check_costs(c):
    if c == "default" or isinstance(c, (str, os.PathLike)):
        return str(c)
    if not isinstance(c, dict):
        raise TierlabError(f"costs: 'default', a cost table file (tierlab query costs), or "
                           f"{{single: {{{', '.join(COST_KEYS)}}}, and: {{...}}}}; got {c!r}")
    for t in c:
        if t == "memory":  # the memory section, as `tierlab query costs --tier` writes it
            if not isinstance(c[t], dict) or not isinstance(c[t].get("tiers"), dict):
                raise TierlabError("costs.memory: a mapping with `tiers` (the memory section "
                                   "of `tierlab query costs --tier`)")
            continue
        if t not in registry.query_types():
            raise TierlabError(f"costs: unknown query type '{t}'; known: "
                               f"{', '.join(registry.query_types())} (and memory)")
    for t in registry.query_types():
        part = c.get(t)
        if not isinstance(part, dict):
            raise TierlabError(f"costs.{t}: a mapping {{{', '.join(COST_KEYS)}}}")
        for k in part:
            if k not in COST_KEYS:
                raise TierlabError(f"costs.{t}: unknown key '{k}'; known: {', '.join(COST_KEYS)}")
        for k in COST_KEYS:
            _num(f"costs.{t}.{k}", part.get(k, 0.0), 0.0)
    return c


def load(path: str | os.PathLike | None, overrides: dict | None = None) -> RunConfig:
    """A run spec file (or none) with `overrides` on top, validated for the model."""
    doc = runspec.read(path) if path is not None else {}
    doc.update(overrides or {})
    return validate(doc, str(path) if path is not None else "run spec")


# --- inputs ------------------------------------------------------------------------

class InlineCosts(CostModel):
    """Costs given in the configuration: per query type query_ns, block_ns,
    posting_ns (the formula of model/costs.py). Nothing else is measured, so
    every other part of the cost model is neutral: no result or candidate
    terms, no decode timing, free hand-offs and copies (at the tier's own
    speed), cores that do not slow each other, no page-cache costs."""

    def __init__(self, table: dict):
        table = dict(table)
        # a `memory` section as `tierlab query costs --tier` writes it (tier_rule,
        # place_*): CostModel.memory_extra_ns reads it from self.extra
        self.extra = {"memory": table.pop("memory")} if "memory" in table else {}
        self.table = {t: {k: float(table[t].get(k, 0.0)) for k in COST_KEYS} for t in table}

    def query_cpu_ns(self, qtype: str, blocks_decoded, postings_scored) -> float:
        c = self.table[qtype]
        return c["query_ns"] + c["block_ns"] * blocks_decoded + c["posting_ns"] * postings_scored

    def extra_cpu_ns(self, qtype, results, candidates):
        return 0.0

    def decode_block_ns(self) -> None:
        return None

    def handoff(self) -> tuple[float, float]:
        return 0.0, 0.0

    def wake_samples(self) -> None:
        return None

    def copy_rate(self) -> None:
        return None

    def cpu_factor(self, cores: int) -> tuple[float, str]:
        if cores <= 1:
            return 1.0, "one core"
        return 1.0, ("none: costs given inline have no 'cores' section; cores do not slow "
                     "each other down here")

    def page_hit_ns(self) -> float:
        return 0.0

    def page_touch_ns(self) -> float:
        return 0.0

    def page_miss_ns(self) -> float:
        return 0.0

    def describe(self) -> dict:
        return {"from": "config", **self.table}


def load_costs(c):
    from tierlab.model import costs as costs_mod

    if isinstance(c, dict):
        return InlineCosts(c)
    if c == "default":
        return costs_mod.default()
    return costs_mod.Costs.load(c)


def describe_costs(costs: CostModel) -> dict:
    return costs.describe()


def _materialise_floor(w: dict, documents: int) -> int | None:
    """Smallest posting count a generated workload of class w['class'] can
    query: only those terms need to be materialised."""
    if "class" not in w:
        return None
    t = wl.Thresholds.resolve(w.get("h", wl.DEFAULT_H), w.get("l", wl.DEFAULT_L), documents)
    return {"H": t.h_min, "M": t.l_below, "L": 1}[w["class"]]


def build_index(spec: dict, workload: dict, seed: int):
    key = json.dumps({"index": spec, "floor_for": workload.get("class"),
                      "h": workload.get("h"), "l": workload.get("l"), "seed": seed},
                     sort_keys=True, default=str)
    return _build_index(key)


@lru_cache(maxsize=4)
def _build_index(key: str):
    d = json.loads(key)
    spec, seed = d["index"], d["seed"]
    w = {k: d[k] for k in ("h", "l") if d.get(k) is not None}
    if d.get("floor_for"):
        w["class"] = d["floor_for"]
    if "path" in spec:
        return indexmeta.from_index(spec["path"])
    if "preset" in spec:
        st = dict(indexmeta.REFERENCE, seed=spec.get("seed", seed))
        name = "reference"
        if spec.get("materialise_min_postings"):
            st["materialise_min_postings"] = spec["materialise_min_postings"]
    else:
        st = dict(spec["synthetic"])
        st.setdefault("seed", seed)
        name = "custom"
    if "materialise_min_postings" not in st and w.get("class"):
        st["materialise_min_postings"] = _materialise_floor(w, int(st["documents"]))
    return indexmeta.synthesise(st, name=name)


def build_trace(meta, w: dict, seed: int):
    if "file" in w:
        return replay.from_workload_file(meta, w["file"])
    if "trace" in w:
        return replay.from_query_trace(meta, w["trace"], w.get("cpu", "table"))
    return replay.generate(meta, qtype=w["type"], cls=w["class"], queries=w["queries"],
                              rp=w["rp"], seed=seed if w.get("seed") is None else w["seed"],
                              h=w.get("h"), l=w.get("l"), repeat_queue=w.get("repeat_queue"))


@dataclass
class Result:
    """One run: the cache_run row (a dict) and the per-query and timeline
    columns; `sim` is the finished Simulation."""

    run: dict
    query: dict
    timeline: dict
    sim: object


def run(cfg: RunConfig, *, log: list | None = None, costs=None) -> Result:
    """Run one configuration; nothing is written (see write)."""
    from tierlab import __version__
    from tierlab.engine.query import machine

    v = cfg.values
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    meta = build_index(v["index"], v["workload"], v["seed"])
    p = cfg.params(meta.index_bytes)
    w = v["workload"]
    if "queries" in w:  # a generated workload: its size is known before it is built
        n = w["queries"]
        sim.check_memory(p, n, n * (1 if w["type"] == "single" else 2), generated=n)
    tr = build_trace(meta, w, v["seed"])
    costs = costs if costs is not None else load_costs(v["costs"])
    def page_cost(key):  # ns, or the cost table's measurement (0 for a table without it)
        if v[key] != "table":
            return float(v[key])
        return getattr(costs, key)()  # page_hit_ns, page_touch_ns, page_miss_ns: CostModel's

    p = dataclasses.replace(p, **{key: page_cost(key) for key in PAGE_COST_KEYS})
    dev = specs.load(v["device"], kind="storage")
    tier = specs.load(v["slow_tier"], kind="memory")
    def simulate(params, log=None):
        return sim.Simulation(meta, tr, params, costs, dev, tier if params.hybrid else None,
                              log=log, seed=v["seed"], place_spec=tier,
                              drawn_wake_ups=v["wake_ups"] == "drawn").run()

    s = simulate(p, log)
    m = s.metrics()
    bistable = {}
    if v["check_bistable"] and p.config in ("base-prefetch", "hybrid-prefetch"):
        ahead = simulate(dataclasses.replace(p, head_start=True))
        bistable = head_start_check(m, s.tail_qps(), ahead.metrics(), ahead.tail_qps(),
                                    ahead.elapsed_ns)
    wall = time.perf_counter() - t0
    params = {
        "name": v["name"], "passes": p.passes, "reported_pass": "last",
        "readahead_bytes": p.readahead_bytes, "page_cache_policy": p.page_cache_policy,
        "sample_ns": p.sample_ns, "seed": v["seed"],
        "k": p.k, "planned_bytes": s.planned_bytes, "thread_wake_ns": s.wake_ns, "thread_signal_ns": s.signal_ns,
        "wake_ups": v["wake_ups"], "handoff_spin_ns": p.handoff_spin_ns,
        **{key: getattr(p, key) for key in PAGE_COST_KEYS},
        "thread_wakes_drawn_from": 0 if s._wakes is None else len(s._wakes),
        "device_spec": dev.as_dict(), "slow_tier_spec": tier.as_dict() if p.hybrid else None,
        "tier_factor": s.tier_factor,
        "tier_factor_source": s.tier.factor_source if s.tier else None,
        "tier_serving": (None if s.tier is None else
                         "factor" if s.tier.factor is not None else
                         "trace" if s.trace_block_ns is not None else "access"),
        "tier_rule": p.tier_rule, "placed": s.placed,
        "decode_ns_per_block": s.decode_ns,
        "costs": describe_costs(costs), "index": meta.stats, "workload": v["workload"],
        "trace": {"name": tr.name, "queries": tr.queries, "occurrences": tr.occurrences,
                  "unknown_terms": tr.unknown_terms, **tr.info},
        "working_set_bytes": int(meta.term_bytes[s.ref].sum()) if len(s.ref) else 0,
        "cache_fraction": v["cache_fraction"], "model_wall_s": round(wall, 3),
        "spec": cfg.spec.as_dict(),
        **s.extra(), **bistable,
    }
    run_row = {
        "run_id": uuid.uuid4().hex, "source": "model", "started_at": started,
        "tierlab_version": __version__, **runspec.run_columns(cfg.spec, p.cache_bytes),
        "device_mode": "model", "index_path": meta.source, "index_bytes": meta.index_bytes,
        "workload": tr.name, "query_type": tr.query_type, "query_class": tr.query_class,
        "rp": float(tr.rp), "memory_limit_enforced": "model", **m,
        "params": json.dumps(params, sort_keys=True, default=_jsonable),
        "machine": json.dumps(machine(), sort_keys=True),
    }
    return Result(run_row, s.query_rows(), s.timeline_rows(), s)


HEAD_START_COLUMNS = ("qps", "latency_p99_ns", "page_cache_miss_rate", "segment_cache_miss_rate",
                      "storage_bytes_read", "lookahead_mean")


def head_start_check(m: dict, tail: float, m_ahead: dict, tail_ahead: float,
                     elapsed_ahead: int) -> dict:
    """params of a run checked for a second steady state (check_bistable):
    `head_start`, the metrics of the run whose query thread started once its
    worker was as far ahead as it may go (its QPS over the whole simulated
    time, the worker's head start included, as the runtime's clock starts
    with both threads), and `bistable`: the two runs' QPS over their second
    halves (Simulation.tail_qps: the head start's transient gone) apart by
    more than BISTABLE_QPS_CHANGE."""
    ahead = {k: m_ahead[k] for k in HEAD_START_COLUMNS}
    ahead["qps"] = m_ahead["queries"] / (elapsed_ahead / 1e9) if elapsed_ahead else math.nan
    ahead["tail_qps"], change = tail_ahead, (tail_ahead / tail - 1.0 if tail else 0.0)
    return {"head_start": ahead, "tail_qps": tail,
            "bistable": bool(abs(change) > BISTABLE_QPS_CHANGE)}


def _jsonable(x):
    import numpy as np

    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def write(result: Result, out: str | os.PathLike) -> dict:
    """cache_run / cache_query / cache_timeline .parquet in folder `out`."""
    from tierlab.traces.schema import write_table

    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TierlabError(f"out: cannot create {out} ({e.strerror})") from None
    rid = result.run["run_id"]
    write_table("cache_run", {k: [x] for k, x in result.run.items()}, out / "cache_run.parquet")
    n = len(result.query["core"])
    write_table("cache_query", {"run_id": [rid] * n, "source": ["model"] * n, **result.query},
                out / "cache_query.parquet")
    n = len(result.timeline["core"])
    write_table("cache_timeline", {"run_id": [rid] * n, "source": ["model"] * n,
                                   **result.timeline}, out / "cache_timeline.parquet")
    return {t: out / f"{t}.parquet" for t in ("cache_run", "cache_query", "cache_timeline")}
