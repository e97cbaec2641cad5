"""Run configurations of `tierlab model run CONFIG.yaml` (every key, with its
default, is documented in model/README.md): parsing, validation (a
TierlabError naming the bad key and value), building the inputs (index
metadata, trace, costs, specs) and running one configuration into the
result tables.

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

from tierlab.core import values
from tierlab.core.errors import TierlabError

from tierlab.model import indexmeta, sim
from tierlab.model import trace as trace_mod

POLICIES = ("lru", "fifo", "clock", "s3fifo", "belady")

DEFAULTS = {
    "config": "hybrid-prefetch",
    "policy": "lru",
    "page_cache_policy": "lru",
    "device": "nvme-p4800x",
    "slow_tier": "optane-dcpmm-g1",
    "index": "reference",
    "workload": {"type": "single", "class": "H", "queries": 1000, "rp": 0.25},
    "cache_bytes": None,
    "cache_fraction": None,
    "segment_bytes": sim.DEFAULT_SEGMENT,
    "lookahead": None,
    "dram_budget_bytes": sim.DEFAULT_DRAM_BUDGET,
    "readahead_bytes": sim.DEFAULT_READAHEAD,
    "cores": 1,
    "k": sim.DEFAULT_K,
    "passes": 1,
    "costs": "default",
    "tier_factor": None,
    "sample_ns": sim.DEFAULT_SAMPLE_NS,
    "seed": 0,
    "wake_ups": "median",
    "handoff_spin_ns": "runtime",
    "page_hit_ns": 0,
    "page_touch_ns": 0,
    "page_miss_ns": 0,
    "check_bistable": False,
    "out": "model-out",
    "name": "",
}
KEYS = tuple(DEFAULTS)
WORKLOAD_KEYS = ("type", "class", "queries", "rp", "seed", "repeat_queue", "h", "l")
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
# the OS page cache's replacement: LRU, or FIFO as Linux (6.3 on) keeps pages touched
# only through a MADV_RANDOM mapping (its accessed bits are ignored: vma_has_recency)
PAGE_CACHE_POLICIES = ("lru", "fifo")
# a thread's wake-up after its signal: the cost table's median, or each drawn
# from its measured wake-ups (seeded by `seed`)
WAKE_UPS = ("median", "drawn")


def policies() -> tuple:
    """The segment cache's policies: the registry of model/cache.py."""
    try:
        from tierlab.model.cache import POLICIES as reg

        return tuple(reg)
    except ImportError:
        return POLICIES


# --- values ------------------------------------------------------------------------

_size, _int, _num = values.size, values.whole, values.number


@dataclass
class RunConfig:
    """A validated configuration (values as in DEFAULTS, normalised)."""

    values: dict

    def __getitem__(self, k):
        return self.values[k]

    def params(self, index_bytes: int) -> sim.Params:
        v = self.values
        cache = v["cache_bytes"]
        if cache is None:
            cache = int(round(v["cache_fraction"] * index_bytes))
        p = sim.Params(config=v["config"], policy=v["policy"], cores=v["cores"],
                       cache_bytes=int(cache), segment_bytes=v["segment_bytes"],
                       lookahead=v["lookahead"], dram_budget_bytes=v["dram_budget_bytes"],
                       readahead_bytes=v["readahead_bytes"], tier_factor=v["tier_factor"],
                       page_cache_policy=v["page_cache_policy"],
                       passes=v["passes"], sample_ns=v["sample_ns"], k=v["k"],
                       handoff_spin_ns=v["handoff_spin_ns"])
        if p.hybrid and p.cache_bytes // p.cores < p.segment_bytes:
            key = "cache_bytes" if v["cache_bytes"] is not None else "cache_fraction"
            raise TierlabError(f"{key}: {p.cache_bytes} bytes is less than one "
                               f"{p.segment_bytes}-byte segment per core ({p.cores} cores)")
        if not p.hybrid and p.cache_bytes < 4096:
            key = "cache_bytes" if v["cache_bytes"] is not None else "cache_fraction"
            raise TierlabError(f"{key}: {p.cache_bytes} bytes; the page cache must hold one "
                               f"4096-byte page")
        return p


def runtime_spin_ns() -> int:
    """How long the native runtime's waiting threads spin before they block
    when each has a CPU of its own (TIERLAB_APCACHE_HANDOFF_SPIN_NS), the
    model's default: the model gives every thread a CPU of its own."""
    from tierlab.core.native import ffi_lib

    return int(ffi_lib()[1].TIERLAB_APCACHE_HANDOFF_SPIN_NS)


def check_run_sizes(v: dict, prefix: str = "") -> None:
    """Check and normalise, in place, the parameters a model run shares with a
    runtime run (`tierlab validate` checks its grid rows with this too)."""
    v["segment_bytes"] = _size(prefix + "segment_bytes", v["segment_bytes"])
    if v["segment_bytes"] < 64 or v["segment_bytes"] % 8:
        raise TierlabError(f"{prefix}segment_bytes: a multiple of 8 bytes, at least 64, got "
                           f"{v['segment_bytes']}")
    v["dram_budget_bytes"] = _size(prefix + "dram_budget_bytes", v["dram_budget_bytes"])
    v["readahead_bytes"] = _size(prefix + "readahead_bytes", v["readahead_bytes"])
    if not 4096 <= v["readahead_bytes"] <= 2**20:
        raise TierlabError(f"{prefix}readahead_bytes: 4 KiB .. 1 MiB, got "
                           f"{v['readahead_bytes']}")
    v["cores"] = _int(prefix + "cores", v["cores"])
    v["k"] = _int(prefix + "k", v["k"])


def validate(doc: dict, where: str = "config") -> RunConfig:
    """Check every key of a run configuration; fill the defaults."""
    from tierlab.core import specs

    if not isinstance(doc, dict):
        raise TierlabError(f"{where}: a configuration is a YAML mapping of keys to values")
    unknown = [k for k in doc if k not in DEFAULTS]
    if unknown:
        raise TierlabError(f"{where}: unknown key '{unknown[0]}'; known: {', '.join(KEYS)}")
    v = dict(DEFAULTS)
    v.update(doc)
    if v["config"] not in sim.CONFIGS:
        raise TierlabError(f"config: unknown configuration '{v['config']}'; known: "
                           f"{', '.join(sim.CONFIGS)}")
    pols = policies()
    if v["policy"] not in pols:
        raise TierlabError(f"policy: unknown policy '{v['policy']}'; known: {', '.join(pols)}")
    if v["page_cache_policy"] not in PAGE_CACHE_POLICIES:
        raise TierlabError(f"page_cache_policy: '{v['page_cache_policy']}'; one of "
                           f"{', '.join(PAGE_CACHE_POLICIES)}")
    for key, kind in (("device", "storage"), ("slow_tier", "memory")):
        if not isinstance(v[key], str):
            raise TierlabError(f"{key}: a spec name of sim-configs/devices or a .yaml path, "
                               f"got {v[key]!r}")
        try:
            specs.load(v[key], kind=kind)
        except TierlabError as e:
            raise TierlabError(f"{key}: {e}") from None
    if doc.get("cache_bytes") is not None and doc.get("cache_fraction") is not None:
        raise TierlabError("cache_bytes and cache_fraction: give one of them, not both")
    if v["cache_bytes"] is not None:
        v["cache_bytes"] = _size("cache_bytes", v["cache_bytes"])
    elif v["cache_fraction"] is not None:
        v["cache_fraction"] = _num("cache_fraction", v["cache_fraction"], 0.0, None,
                                   open_lo=True)
    else:
        raise TierlabError("cache_bytes: give cache_bytes (e.g. 4GB) or cache_fraction "
                           "(of the index's bytes, e.g. 0.2)")
    check_run_sizes(v)
    v["passes"] = _int("passes", v["passes"])
    v["sample_ns"] = _int("sample_ns", v["sample_ns"])
    v["seed"] = _int("seed", v["seed"], 0)
    if v["wake_ups"] not in WAKE_UPS:
        raise TierlabError(f"wake_ups: {v['wake_ups']!r}; one of {', '.join(WAKE_UPS)}")
    if v["handoff_spin_ns"] == "runtime":
        v["handoff_spin_ns"] = runtime_spin_ns()
    elif isinstance(v["handoff_spin_ns"], bool) or not isinstance(v["handoff_spin_ns"], int) \
            or v["handoff_spin_ns"] < 0:
        raise TierlabError(f"handoff_spin_ns: 'runtime' or whole ns >= 0 (0: a waiting thread "
                           f"blocks at once), not {v['handoff_spin_ns']!r}")
    for key in PAGE_COST_KEYS:  # a number, or "table": the cost table's
        if v[key] != "table":
            v[key] = _num(key, v[key], 0.0)
    if not isinstance(v["check_bistable"], bool):
        raise TierlabError(f"check_bistable: true or false, not {v['check_bistable']!r}")
    if v["tier_factor"] is not None:
        v["tier_factor"] = _num("tier_factor", v["tier_factor"], 0.0, open_lo=True)
    la = v["lookahead"]
    if v["config"] in ("base", "hybrid"):
        if la not in (None, "none"):
            raise TierlabError(f"lookahead: {la!r}, but only base-prefetch and hybrid-prefetch "
                               "look ahead")
        v["lookahead"] = None
    elif la is not None:
        if la == "adaptive":
            if v["config"] != "hybrid-prefetch":
                raise TierlabError("lookahead: adaptive lookahead is hybrid-prefetch's; give "
                                   "base-prefetch a number of queries (default 16)")
        else:
            v["lookahead"] = _int("lookahead", la)
    v["index"] = _check_index(v["index"])
    v["workload"] = _check_workload(v["workload"])
    v["costs"] = _check_costs(v["costs"])
    if not isinstance(v["out"], (str, os.PathLike)):
        raise TierlabError(f"out: a folder, got {v['out']!r}")
    v["name"] = str(v["name"] or "")
    return RunConfig(v)


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
                           f"{{{', '.join(WORKLOAD_KEYS)}}}; got {w!r}")
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
    unknown = [k for k in w if k not in WORKLOAD_KEYS]
    if unknown:
        raise TierlabError(f"workload: unknown key '{unknown[0]}'; known: "
                           f"{', '.join(WORKLOAD_KEYS)} (or file / trace)")
    g = {"type": "single", "class": "H", "queries": 1000, "rp": 0.25, "seed": None}
    g.update(w)
    if g["type"] not in trace_mod.QTYPES:
        raise TierlabError(f"workload.type: unknown query type {g['type']!r}; known: "
                           f"{', '.join(trace_mod.QTYPES)}")
    if str(g["class"]).upper() not in ("H", "M", "L"):
        raise TierlabError(f"workload.class: {g['class']!r}; known: H, M, L")
    g["class"] = str(g["class"]).upper()
    g["queries"] = _int("workload.queries", g["queries"])
    g["rp"] = _num("workload.rp", g["rp"], 0.0, 1.0)
    if g["seed"] is not None:
        g["seed"] = _int("workload.seed", g["seed"], 0)
    for k in ("h", "l"):
        if k in g:
            g[k] = _num(f"workload.{k}", g[k], 0.0, open_lo=True)
    if "repeat_queue" in g:
        g["repeat_queue"] = _int("workload.repeat_queue", g["repeat_queue"])
    return g


def _check_costs(c):
    if c == "default" or isinstance(c, (str, os.PathLike)):
        return str(c)
    if not isinstance(c, dict):
        raise TierlabError(f"costs: 'default', a cost table file (tierlab query costs), or "
                           f"{{single: {{{', '.join(COST_KEYS)}}}, and: {{...}}}}; got {c!r}")
    for t in c:
        if t not in trace_mod.QTYPES:
            raise TierlabError(f"costs: unknown query type '{t}'; known: single, and")
    for t in trace_mod.QTYPES:
        part = c.get(t)
        if not isinstance(part, dict):
            raise TierlabError(f"costs.{t}: a mapping {{{', '.join(COST_KEYS)}}}")
        for k in part:
            if k not in COST_KEYS:
                raise TierlabError(f"costs.{t}: unknown key '{k}'; known: {', '.join(COST_KEYS)}")
        for k in COST_KEYS:
            _num(f"costs.{t}.{k}", part.get(k, 0.0), 0.0)
    return c


def load(path: str | os.PathLike, overrides: dict | None = None) -> RunConfig:
    path = Path(path)
    doc = values.read_yaml(path) or {}
    if overrides:
        if not isinstance(doc, dict):
            raise TierlabError(f"{path}: a configuration is a YAML mapping")
        doc = {**doc, **overrides}
    return validate(doc, str(path))


# --- inputs ------------------------------------------------------------------------

class InlineCosts:
    """Costs given in the configuration: per query type query_ns, block_ns,
    posting_ns (the formula of model/costs.py)."""

    def __init__(self, table: dict):
        self.table = {t: {k: float(table[t].get(k, 0.0)) for k in COST_KEYS} for t in table}

    def query_cpu_ns(self, qtype: str, blocks, postings) -> float:
        c = self.table[qtype]
        return c["query_ns"] + c["block_ns"] * blocks + c["posting_ns"] * postings

    def describe(self) -> dict:
        return {"from": "config", **self.table}


def load_costs(c):
    from tierlab.model import costs as costs_mod

    if isinstance(c, dict):
        return InlineCosts(c)
    if c == "default":
        return costs_mod.default()
    return costs_mod.Costs.load(c)


def describe_costs(costs) -> dict:
    if isinstance(costs, InlineCosts):
        return costs.describe()
    return {"from": getattr(costs, "index", None) or "table", "codec": costs.codec,
            "single": costs.single.as_dict(), "and": costs.and_.as_dict(),
            "created_at": costs.created_at}


def _materialise_floor(w: dict, documents: int) -> int | None:
    """Smallest posting count a generated workload of class w['class'] can
    query: only those terms need to be materialised."""
    from tierlab.engine import workload as wl

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
        return trace_mod.from_workload_file(meta, w["file"])
    if "trace" in w:
        return trace_mod.from_query_trace(meta, w["trace"], w.get("cpu", "table"))
    return trace_mod.generate(meta, qtype=w["type"], cls=w["class"], queries=w["queries"],
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
    from tierlab.core import specs
    from tierlab.engine.query import machine

    v = cfg.values
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    meta = build_index(v["index"], v["workload"], v["seed"])
    tr = build_trace(meta, v["workload"], v["seed"])
    p = cfg.params(meta.index_bytes)
    costs = costs if costs is not None else load_costs(v["costs"])
    def page_cost(key):  # ns, or the cost table's measurement (0 for a table without it)
        if v[key] != "table":
            return float(v[key])
        return getattr(costs, key)() if hasattr(costs, key) else 0.0

    p = dataclasses.replace(p, **{key: page_cost(key) for key in PAGE_COST_KEYS})
    dev = specs.load(v["device"], kind="storage")
    tier = specs.load(v["slow_tier"], kind="memory")
    def simulate(params, log=None):
        return sim.Simulation(meta, tr, params, costs, dev, tier if params.hybrid else None,
                              log=log, seed=v["seed"],
                              drawn_wake_ups=v["wake_ups"] == "drawn").run()

    s = simulate(p, log)
    m = s.metrics()
    bistable = {}
    if v["check_bistable"] and p.config in ("base-prefetch", "hybrid-prefetch"):
        ahead = simulate(dataclasses.replace(p, head_start=True))
        bistable = head_start_check(m, s.tail_qps(), ahead.metrics(), ahead.tail_qps(),
                                    ahead.elapsed_ns)
    wall = time.perf_counter() - t0
    la = p.lookahead_value()
    params = {
        "name": v["name"], "passes": p.passes, "reported_pass": "last",
        "readahead_bytes": p.readahead_bytes, "page_cache_policy": p.page_cache_policy,
        "sample_ns": p.sample_ns, "seed": v["seed"],
        "k": p.k, "thread_wake_ns": s.wake_ns, "thread_signal_ns": s.signal_ns,
        "wake_ups": v["wake_ups"], "handoff_spin_ns": p.handoff_spin_ns,
        **{key: getattr(p, key) for key in PAGE_COST_KEYS},
        "thread_wakes_drawn_from": 0 if s._wakes is None else len(s._wakes),
        "device_spec": dev.as_dict(), "slow_tier_spec": tier.as_dict() if p.hybrid else None,
        "tier_factor": s.tier_factor,
        "tier_factor_source": s.tier.factor_source if s.tier else None,
        "tier_serving": (None if s.tier is None else
                         "factor" if s.tier.factor is not None else "access"),
        "decode_ns_per_block": s.decode_ns,
        "costs": describe_costs(costs), "index": meta.stats, "workload": v["workload"],
        "trace": {"name": tr.name, "queries": tr.queries, "occurrences": tr.occurrences,
                  "unknown_terms": tr.unknown_terms, **tr.info},
        "working_set_bytes": int(meta.term_bytes[s.ref].sum()) if len(s.ref) else 0,
        "cache_fraction": v["cache_fraction"], "model_wall_s": round(wall, 3),
        **s.extra(), **bistable,
    }
    run_row = {
        "run_id": uuid.uuid4().hex, "source": "model", "started_at": started,
        "tierlab_version": __version__, "config": p.config, "policy": p.policy,
        "device": dev.name, "device_mode": "model",
        "slow_tier": tier.name if p.hybrid else "none",
        "index_path": meta.source, "index_bytes": meta.index_bytes,
        "workload": tr.name, "query_type": tr.query_type, "query_class": tr.query_class,
        "rp": float(tr.rp), "cores": p.cores,
        "cache_bytes": p.cache_bytes, "segment_bytes": p.segment_bytes if p.hybrid else 0,
        "lookahead": str(la), "dram_budget_bytes": p.dram_budget_bytes if p.hybrid else 0,
        "memory_limit_enforced": "model", **m,
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
