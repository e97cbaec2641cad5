"""The grid of `tierlab validate GRID.yaml`: its keys, defaults and checks
(a TierlabError names the key), and its rows (the cartesian product of the
listed keys), each one runtime run and one model run."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path


from tierlab.core import values
from tierlab.core import runspec
from tierlab.core.errors import TierlabError
from tierlab.engine import workload as wl
from tierlab.core.specs import REAL


GRID_KEYS = ("index", "workload", "config", "cache_bytes", "cache_fraction", "device", "cores",
             "segment_bytes", "lookahead", "dram_budget_bytes", "policy", "readahead_bytes", "k",
             "costs", "cpu", "repeats", "min_runs", "out")
WORKLOAD_KEYS = ("type", "class", "queries", "rp", "seed")
GENERATE_KEYS = ("size", "codec", "seed")
ROW_KEYS = ("config", "cache_bytes", "cache_fraction", "device", "cores", "segment_bytes",
            "lookahead", "dram_budget_bytes", "policy", "readahead_bytes", "k")
# the grid's own defaults; a run spec key not listed here has the run spec's
# (tierlab.core.runspec), and `lookahead: default` is the configuration's own
DEFAULTS = {"config": ["base", "base-prefetch", "hybrid", "hybrid-prefetch"],
            "lookahead": "default", "cache_bytes": None, "cache_fraction": None,
            "costs": "measure", "cpu": "measured",
            "repeats": 3, "min_runs": 2, "out": "validate-out"}
REPEAT_BELOW_S = 1.0  # runtime runs shorter than this are repeated (see Noise)
SPREAD_RERUN = 0.2    # ... and run SPREAD_EXTRA more times when their QPS lie further apart
SPREAD_EXTRA = 2      # (max - min) / median than this
LATE_SHARE = 0.02     # an emulated run whose device was late this share of its wall time
LATE_RETRIES = 2      # does not count and runs again, at most this many more times per row
# pause between the CPU trace (in this process) and the runtime run: the
# trace's DRAM copy of the index is freed and collected meanwhile, not during
# the run's first queries (a stall there can tip base-prefetch at a small
# cache into its thrashing state)
SETTLE_S = 0.3
# columns collect() adds to the cache_run rows (not of the result schema)
LABELS = ("row_id", "cell")


@dataclass
class Row:
    """One runtime run + one model run."""

    id: str
    cell: str          # the row without its configuration (ranking group)
    values: dict       # ROW_KEYS, normalised
    workload: dict     # type, class, queries, rp, seed

    def label(self) -> str:
        v = self.values
        cache = (f"{v['cache_fraction']:g}x" if v["cache_fraction"] is not None
                 else f"{v['cache_bytes']}B")
        return (f"{v['config']} {v['device']} {self.workload['type']} rp{self.workload['rp']:g} "
                f"cache {cache}")


@dataclass
class Grid:
    index: dict        # {"path": DIR} or {"generate": {size, codec, seed}}
    rows: list
    out: Path
    costs: str         # "measure" or a cost table file
    cpu: str = "measured"  # the model's CPU per query: "measured" (query run trace) or "table"
    repeats: int = 3       # runs of a short runtime row (the median-QPS run kept)
    min_runs: int = 2      # runs of every row at least (noise floor: `twin_run`)
    doc: dict = field(default_factory=dict)

    def workloads(self) -> list[dict]:
        seen, out = set(), []
        for r in self.rows:
            key = workload_name(r.workload)
            if key not in seen:
                seen.add(key)
                out.append(r.workload)
        return out


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def workload_name(w: dict) -> str:
    return f"{w['type']}-{w['class']}-n{w['queries']}-rp{w['rp']:g}-s{w['seed']}"


def _listed(key: str, v) -> list:
    if isinstance(v, list):
        if not v:
            raise TierlabError(f"grid: key '{key}' has an empty list")
        return v
    return [v]


def _size(key: str, v) -> int:
    return values.size(f"grid: {key}", v)


def _int(key: str, v, lo: int = 1) -> int:
    return values.whole(f"grid: {key}", v, lo)


def _index(x, check: bool = True) -> dict:
    if isinstance(x, (str, os.PathLike)):
        p = Path(x)
        from tierlab.engine.index import read_manifest

        try:
            if check:
                read_manifest(p)
        except TierlabError as e:
            raise TierlabError(f"grid: index: {e}") from None
        return {"path": str(p)}
    if not isinstance(x, dict) or set(x) != {"generate"} or not isinstance(x["generate"], dict):
        raise TierlabError(f"grid: index: an index folder or {{generate: {{size: 50MB, codec: "
                           f"pfor-delta256, seed: 0}}}}, got {x!r}")
    g = dict(x["generate"])
    unknown = [k for k in g if k not in GENERATE_KEYS]
    if unknown:
        raise TierlabError(f"grid: index.generate: unknown key '{unknown[0]}'; known: "
                           f"{', '.join(GENERATE_KEYS)}")
    from tierlab.core.native import codec as find_codec

    out = {"size": _size("index.generate.size", g.get("size", "50MB")),
           "codec": g.get("codec", "pfor-delta256"),
           "seed": _int("index.generate.seed", g.get("seed", 0), 0)}
    if not isinstance(out["codec"], str):
        raise TierlabError(f"grid: index.generate.codec: a codec name, got {out['codec']!r}")
    try:
        find_codec(out["codec"])
    except TierlabError as e:
        raise TierlabError(f"grid: index.generate.codec: {e}") from None
    return {"generate": out}


def workloads_of(w) -> list[dict]:
    """The workloads of a grid's `workload` mapping: the product of its lists, each
    checked (tierlab.engine.workload.check_generator), defaults filled."""
    if not isinstance(w, dict):
        raise TierlabError(f"grid: workload: a mapping {{{', '.join(WORKLOAD_KEYS)}}}, got {w!r}")
    unknown = [k for k in w if k not in WORKLOAD_KEYS]
    if unknown:
        raise TierlabError(f"grid: workload: unknown key '{unknown[0]}'; known: "
                           f"{', '.join(WORKLOAD_KEYS)}")
    base = {"type": "single", "class": "H", "queries": 500, "rp": 0.25, "seed": 0}
    base.update(w)
    axes = {k: _listed(f"workload.{k}", base[k]) for k in WORKLOAD_KEYS}
    out = []
    for combo in itertools.product(*axes.values()):
        try:
            out.append(wl.check_generator(dict(zip(WORKLOAD_KEYS, combo))))
        except TierlabError as e:
            raise TierlabError(f"grid: {e}") from None
    return out


def _row_values(r: dict) -> dict | None:
    """Check one combination as a run spec (tierlab.core.runspec; an error
    names the key); None when it is not a row (adaptive lookahead for
    base-prefetch). Rows that repeat another are dropped by the caller:
    parameters a configuration does not use are set to None here."""
    v = dict(r)
    cfg, la = v["config"], v["lookahead"]
    if la == "default":
        la = None
    if cfg in ("base", "hybrid"):
        if not (la in (None, "none", "adaptive") or _is_la(la)):
            _bad_la(la)
        la = None  # no lookahead: one row whatever the list holds
    elif la == "adaptive" and cfg != "hybrid-prefetch":
        return None  # base-prefetch has no adaptive lookahead: not a row
    elif la is not None and la != "adaptive" and not _is_la(la):
        _bad_la(la)
    v["lookahead"] = la
    doc = {k: x for k, x in v.items() if x is not None}
    try:
        spec = runspec.validate(doc, "grid")
    except TierlabError as e:
        raise TierlabError(f"grid: {e}") from None
    for k in ("segment_bytes", "dram_budget_bytes", "readahead_bytes", "cache_bytes"):
        if v[k] is not None:
            v[k] = spec[k]
    if v["cache_fraction"] is not None:
        v["cache_fraction"] = float(v["cache_fraction"])
    if not cfg.startswith("hybrid"):  # unused parameters: one row, not one per value
        v["segment_bytes"] = None
        v["dram_budget_bytes"] = None
    return v


def _is_la(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, int) and x >= 1


def _bad_la(x):
    raise TierlabError(f"grid: lookahead: default, adaptive or a number of queries >= 1, got {x!r}")


def parse(doc, where: str = "grid", check_index: bool = True) -> Grid:
    """Validate a grid document and expand it into rows; a TierlabError
    names the bad key. check_index=False: an index folder is taken as named
    (the workflow plans its rows before it builds the index)."""
    if not isinstance(doc, dict):
        raise TierlabError(f"{where}: a grid is a YAML mapping of keys to values or lists")
    unknown = [k for k in doc if k not in GRID_KEYS]
    if unknown:
        raise TierlabError(f"{where}: unknown key '{unknown[0]}'; known: {', '.join(GRID_KEYS)}")
    if "index" not in doc:
        raise TierlabError(f"{where}: index: give an index folder or {{generate: {{size: 50MB}}}}")
    if "workload" not in doc:
        raise TierlabError(f"{where}: workload: give {{type, class, queries, rp, seed}}")
    if doc.get("cache_bytes") is not None and doc.get("cache_fraction") is not None:
        raise TierlabError(f"{where}: cache_bytes and cache_fraction: give one of them, not both")
    if doc.get("cache_bytes") is None and doc.get("cache_fraction") is None:
        raise TierlabError(f"{where}: cache_fraction: give cache_fraction (of the index's DID + "
                           "freq bytes) or cache_bytes")
    index = _index(doc["index"], check_index)
    wls = workloads_of(doc["workload"])
    out = doc.get("out", DEFAULTS["out"])
    if not isinstance(out, (str, os.PathLike)):
        raise TierlabError(f"{where}: out: a folder, got {out!r}")
    costs = doc.get("costs", DEFAULTS["costs"])
    if not isinstance(costs, (str, os.PathLike)) or (costs != "measure"
                                                     and not Path(costs).is_file()):
        raise TierlabError(f"{where}: costs: 'measure' (tierlab query costs on the index) or a "
                           f"cost table file, got {costs!r}")
    cpu = doc.get("cpu", DEFAULTS["cpu"])
    if cpu not in ("measured", "table"):
        raise TierlabError(f"{where}: cpu: 'measured' (each query's CPU time from a tierlab "
                           f"query run of the workload in DRAM) or 'table' (the cost table's "
                           f"formula), got {cpu!r}")
    repeats = _int("repeats", doc.get("repeats", DEFAULTS["repeats"]))
    min_runs = _int("min_runs", doc.get("min_runs", DEFAULTS["min_runs"]))
    spec_defaults = runspec.defaults()
    vals = {k: _listed(k, doc.get(k, DEFAULTS.get(k, spec_defaults[k]))) for k in ROW_KEYS}
    rows, seen = [], set()
    for combo in itertools.product(*vals.values(), range(len(wls))):
        r = _row_values(dict(zip(ROW_KEYS, combo[:-1])))
        if r is None:
            continue
        w = wls[combo[-1]]
        # min_runs is not part of it: a row measured with fewer runs is still a
        # measurement, only without a twin for the noise floor
        key = {"row": r, "workload": w, "index": index, "cpu": cpu, "repeats": repeats,
               "cpu_trace": "per run"}
        if r["device"] == REAL:  # rows measured under the kernel's read-around are stale
            key["readahead"] = "runtime"
        rid = _digest(key)
        if rid in seen:
            continue
        seen.add(rid)
        group = {k: x for k, x in r.items() if k not in ("config", "lookahead", "segment_bytes",
                                                         "dram_budget_bytes")}
        cell = _digest({"cell": group, "workload": w, "index": index})
        rows.append(Row(rid, cell, r, w))
    return Grid(index=index, rows=rows, out=Path(out), costs=str(costs), cpu=cpu,
                repeats=repeats, min_runs=min_runs, doc=doc)


def load(path) -> Grid:
    return parse(values.read_yaml(path) or {}, str(path))


def cache_bytes(row: Row, index_bytes: int) -> int:
    v = row.values
    if v["cache_bytes"] is not None:
        return int(v["cache_bytes"])
    return max(int(round(v["cache_fraction"] * index_bytes)), 4096)
