"""The query stream the model replays: per query its type and postings
scored, per term occurrence the (materialised) term id and the blocks the
query decodes of it. Sources (docs/workload.md):

- `generate`: the RP generator of tierlab.engine.workload (single_stream /
  and_stream, the same seeded draws as `tierlab workload generate`) over the
  index's terms of one frequency class;
- `from_workload_file`: a query file (one query per line);
- `from_query_trace`: a trace directory of `tierlab query run --trace`, whose
  query and term tables give the measured postings_scored and per-term
  blocks_decoded (a replay of measured work).

Work of a query that was not measured (generated or from a file):
- SINGLE: every block decoded, every posting scored;
- AND (k terms, shortest list first, p1 <= p2 <= ...): all blocks of the
  shortest list; of every other list i, the blocks that hold at least one of
  the p1 candidates, blocks_i * (1 - exp(-p1 / blocks_i)) (candidates spread
  uniformly over the document ids); postings scored = the expected size of
  the intersection of independent lists, p1 * prod_i (p_i / documents).
Terms not in the index are dropped from their query (they hold no postings;
an AND query with one becomes empty and costs only its fixed CPU time).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tierlab.core import registry
from tierlab.core.errors import TierlabError

from tierlab.model.indexmeta import IndexMeta


@dataclass
class Replay:
    name: str
    qtype: np.ndarray            # per query: 0 single, 1 and
    qfirst: np.ndarray           # per query: first occurrence; len = queries + 1
    term: np.ndarray             # per occurrence: term id in the IndexMeta
    blocks_decoded: np.ndarray   # per occurrence
    postings_scored: np.ndarray  # per query
    query_type: str = ""         # single, and, or mixed
    query_class: str = ""
    rp: float = math.nan
    unknown_terms: int = 0
    info: dict = field(default_factory=dict)
    # per query: the CPU time `tierlab query run` measured for it (a replay of
    # an all-DRAM run; None otherwise), charged instead of the cost table's
    # formula when the workload says cpu: measured
    cpu_ns: np.ndarray | None = None

    @property
    def queries(self) -> int:
        return len(self.qtype)

    @property
    def occurrences(self) -> int:
        return len(self.term)

    def blocks_per_query(self) -> np.ndarray:
        """Blocks decoded per query (sum over its occurrences)."""
        out = np.zeros(self.queries, np.int64)
        if self.occurrences:
            q = np.repeat(np.arange(self.queries), np.diff(self.qfirst))
            np.add.at(out, q, self.blocks_decoded)
        return out

    def repeated(self, passes: int) -> "Replay":
        """The trace run `passes` times back to back (one workload per pass)."""
        if passes == 1:
            return self
        n = self.occurrences
        qfirst = np.concatenate([self.qfirst[:-1] + p * n for p in range(passes)] + [[passes * n]])
        return Replay(self.name, np.tile(self.qtype, passes), qfirst.astype(np.int64),
                     np.tile(self.term, passes), np.tile(self.blocks_decoded, passes),
                     np.tile(self.postings_scored, passes), self.query_type, self.query_class,
                     self.rp, self.unknown_terms, dict(self.info, passes=passes),
                     None if self.cpu_ns is None else np.tile(self.cpu_ns, passes))


def _qtype_name(qtype: np.ndarray) -> str:
    kinds = sorted(set(int(x) for x in qtype))
    return registry.query_types()[kinds[0]] if len(kinds) == 1 else ("mixed" if kinds else "")


def from_term_ids(meta: IndexMeta, queries: list, *, name: str, query_class: str = "",
                  rp: float = math.nan, unknown: int = 0, kinds: list | None = None) -> Replay:
    """A trace from queries given as lists of term ids, with the estimated work
    of the module docstring."""
    docs = float(meta.documents or max(1, int(meta.postings.max(initial=1))))
    qtype = np.zeros(len(queries), np.int8)
    qfirst = np.zeros(len(queries) + 1, np.int64)
    terms, blocks, scored = [], [], np.zeros(len(queries), np.int64)
    for i, q in enumerate(queries):
        qtype[i] = kinds[i] if kinds is not None else int(len(q) > 1)
        qfirst[i + 1] = qfirst[i] + len(q)
        if not q:
            continue
        p = [int(meta.postings[t]) for t in q]
        if len(q) == 1:
            terms.append(q[0])
            blocks.append(int(meta.blocks[q[0]]))
            scored[i] = p[0]
            continue
        p1 = min(p)
        inter = float(p1)
        shortest = p.index(p1)
        for j, t in enumerate(q):
            b = int(meta.blocks[t])
            terms.append(t)
            if j == shortest:
                blocks.append(b)
            else:
                blocks.append(min(b, int(math.ceil(b * -math.expm1(-p1 / b)))))
                inter *= p[j] / docs
        scored[i] = int(round(inter))
    return Replay(name, qtype, qfirst, np.asarray(terms, np.int64), np.asarray(blocks, np.int64),
                 scored, _qtype_name(qtype), query_class, rp, unknown)


def _ids(meta: IndexMeta, queries, where: str) -> tuple[list, int]:
    out, unknown = [], 0
    for q in queries:
        ids = []
        dead = False
        for t in q:
            i = meta.term_id(t)
            if i is None:
                unknown += 1
                dead = dead or len(q) > 1
            else:
                ids.append(i)
        out.append([] if dead else ids)
    if unknown and unknown == sum(len(q) for q in queries):
        raise TierlabError(f"{where}: none of its terms is in the index {meta.source}")
    return out, unknown


def _generator(path) -> tuple[str, float]:
    """(class, rp) of a query file from the `<file>.json` `tierlab workload
    generate` wrote next to it; ("", nan) without one."""
    import json

    from tierlab.engine.workload import stats_path

    try:
        gen = json.loads(stats_path(path).read_text()).get("generator", {})
        return str(gen.get("class", "")), float(gen.get("rp", math.nan))
    except (OSError, ValueError, AttributeError, TypeError):
        return "", math.nan


def from_workload_file(meta: IndexMeta, path: str | os.PathLike) -> Replay:
    """A query file (tierlab.engine.workload.read_queries); class and rp from its
    `<file>.json` when `tierlab workload generate` wrote one."""
    from tierlab.engine.workload import read_queries

    queries = read_queries(path)
    ids, unknown = _ids(meta, queries, str(path))
    kinds = [int(len(q) > 1) for q in queries]
    cls, rp = _generator(path)
    return from_term_ids(meta, ids, name=str(path), query_class=cls, rp=rp, unknown=unknown,
                         kinds=kinds)


def class_terms(meta: IndexMeta, cls: str, h: float, l: float) -> list[str]:
    """Names of the index's terms of class cls (thresholds as in tierlab.engine.workload)."""
    from tierlab.engine.workload import Thresholds

    t = Thresholds.resolve(h, l, meta.documents or None)
    p = meta.postings
    mask = {"H": p >= t.h_min, "L": p < t.l_below, "M": (p >= t.l_below) & (p < t.h_min)}[cls]
    return [meta.names[i] for i in np.flatnonzero(mask)]


def generate(meta: IndexMeta, *, qtype: str, cls: str, queries: int, rp: float, seed: int = 0,
             h: float | None = None, l: float | None = None, repeat_queue: int | None = None
             ) -> Replay:
    """docs/workload.md's RP workload over the index's class-`cls` terms."""
    from tierlab.engine import workload as wl

    cls = str(cls).upper()
    if cls not in wl.CLASSES:
        raise TierlabError(f"workload: unknown class '{cls}'; known: {', '.join(wl.CLASSES)}")
    h = wl.DEFAULT_H if h is None else h
    l = wl.DEFAULT_L if l is None else l
    names = class_terms(meta, cls, h, l)
    if not names:
        raise TierlabError(f"workload: the index {meta.source} has no class-{cls} terms")
    qs, _ = wl.generate_queries(names, n=queries, qtype=qtype, rp=rp, seed=seed,
                                capacity=repeat_queue or wl.REPEAT_QUEUE)
    ids = [[meta.term_id(t) for t in q] for q in qs]
    name = f"generated:{qtype}-{cls}-rp{rp:g}-n{queries}-seed{seed}"
    tr = from_term_ids(meta, ids, name=name, query_class=cls, rp=float(rp))
    tr.info.update({"class_terms": len(names), "generator": "tierlab.engine.workload.generate_queries"})
    return tr


def from_query_trace(meta: IndexMeta, trace_dir: str | os.PathLike,
                     cpu: str = "table") -> Replay:
    """Replay of a `tierlab query run --trace DIR` run: its queries in order,
    with the measured blocks_decoded per term and postings_scored per query.
    cpu "measured": also each query's measured latency as its CPU time; the
    run must have placed every structure in DRAM (with storage placement the
    latencies hold page faults, which the model adds itself)."""
    from tierlab.traces.runs import read_trace

    t = read_trace(trace_dir)
    if "query" not in t or "term" not in t:
        raise TierlabError(f"{trace_dir}: a replay needs query.parquet and term.parquet")
    if cpu == "measured":
        run = t.get("run")
        place = str(run["placement"].iloc[0]) if run is not None and len(run) else "?"
        if any(x.split("=")[-1] != "dram" for x in place.split(",")):
            raise TierlabError(f"{trace_dir}: cpu: measured needs a run with every structure "
                               f"in DRAM (tierlab query run --place dram), this one has "
                               f"placement '{place}'")
    q = t["query"].sort_values("query_id")
    tt = t["term"].sort_values(["query_id", "term_pos"])
    by_q = {qid: g for qid, g in tt.groupby("query_id", sort=True)}
    qtype = np.zeros(len(q), np.int8)
    qfirst = np.zeros(len(q) + 1, np.int64)
    terms, blocks, unknown = [], [], 0
    for i, (qid, kind) in enumerate(zip(q["query_id"], q["query_type"])):
        qtype[i] = 1 if kind == "and" else 0
        g = by_q.get(qid)
        n = 0
        if g is not None:
            for name, b in zip(g["term"], g["blocks_decoded"]):
                tid = meta.term_id(name)
                if tid is None:
                    unknown += 1
                    continue
                terms.append(tid)
                blocks.append(int(b))
                n += 1
        qfirst[i + 1] = qfirst[i] + n
    if terms == [] and len(q):
        raise TierlabError(f"{trace_dir}: none of its terms is in the index {meta.source}")
    cls = str(q["query_class"].iloc[0]) if len(q) else ""
    rp = math.nan  # the query file's, when it is still where the run read it
    run = t.get("run")
    if run is not None and len(run) and "workload" in run:
        gcls, rp = _generator(str(run["workload"].iloc[0]))
        cls = cls or gcls
    cpu_ns = q["latency_ns"].to_numpy(np.float64) if cpu == "measured" else None
    return Replay(str(Path(trace_dir)), qtype, qfirst, np.asarray(terms, np.int64),
                 np.asarray(blocks, np.int64), q["postings_scored"].to_numpy(np.int64),
                 _qtype_name(qtype), cls, rp, unknown, {"replay": True, "cpu": cpu},
                 cpu_ns)


def next_uses(term: np.ndarray) -> np.ndarray:
    """Per occurrence, the position of the same term's next occurrence
    (2**64 - 1, TIERLAB_NEVER, if none): what Belady reads."""
    never = np.iinfo(np.uint64).max
    out = np.full(len(term), never, np.uint64)
    if len(term) == 0:
        return out
    order = np.lexsort((np.arange(len(term)), term))
    same = term[order][1:] == term[order][:-1]
    out[order[:-1][same]] = order[1:][same].astype(np.uint64)
    return out
