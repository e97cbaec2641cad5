"""Small, hand-made inputs for the model tests: an index of terms of given
sizes, a trace of given queries, fixed costs and storage specs."""
from __future__ import annotations

import numpy as np

from tierlab.model.costs import CostModel
from tierlab.model.indexmeta import IndexMeta
from tierlab.model.replay import Replay


class Spec(dict):
    """A storage spec as the model reads it (spec[key], spec.get, spec.name)."""

    def __init__(self, name="test-device", **values):
        super().__init__(values)
        self.name = name


def fast_device(**over) -> Spec:
    v = dict(read_bandwidth_bytes_per_s=1e9, read_latency_ns=1000.0, queue_depth=1)
    v.update(over)
    return Spec(**v)


class Costs(CostModel):
    """query_ns + block_ns * blocks + posting_ns * postings, one set for both
    types; every other part of the cost model (model/costs.py CostModel)
    neutral, as for a table that measured nothing else. Tests override one
    method to give it a value."""

    def __init__(self, query_ns=0.0, block_ns=0.0, posting_ns=0.0):
        self.c = (query_ns, block_ns, posting_ns)

    def query_cpu_ns(self, qtype, blocks_decoded, postings_scored):
        q, b, p = self.c
        return q + b * blocks_decoded + p * postings_scored

    def extra_cpu_ns(self, qtype, results, candidates):
        return 0.0

    def decode_block_ns(self):
        return None

    def handoff(self):
        return 0.0, 0.0

    def wake_samples(self):
        return None

    def copy_rate(self):
        return None

    def cpu_factor(self, cores):
        return 1.0, "one core" if cores <= 1 else "none: the test's cost table"

    def page_hit_ns(self):
        return 0.0

    def page_touch_ns(self):
        return 0.0

    def page_miss_ns(self):
        return 0.0

    def describe(self):
        return {"from": "test", "costs": list(self.c)}


def index_of(term_bytes, blocks=None, postings=None, gap=0) -> IndexMeta:
    """Terms laid out one after another (DID bytes = freq bytes = half of
    each term's bytes), `gap` bytes apart, one block each unless given."""
    tb = np.asarray(term_bytes, np.int64)
    n = len(tb)
    blocks = np.ones(n, np.int64) if blocks is None else np.asarray(blocks, np.int64)
    postings = blocks * 256 if postings is None else np.asarray(postings, np.int64)
    did = tb // 2
    frq = tb - did
    did_off = np.concatenate([[0], np.cumsum(did + gap)[:-1]])
    frq_off = np.concatenate([[0], np.cumsum(frq + gap)[:-1]])
    return IndexMeta(source="test", names=[f"t{i}" for i in range(n)], postings=postings,
                     blocks=blocks, did_offset=did_off, did_bytes=did, freq_offset=frq_off,
                     freq_bytes=frq, did_file_bytes=int((did + gap).sum()),
                     freq_file_bytes=int((frq + gap).sum()), documents=1_000_000,
                     total_postings=int(postings.sum()), total_blocks=int(blocks.sum()),
                     vocabulary=n)


def segment_sized(segments, segment_bytes=1024) -> IndexMeta:
    """An index whose term i occupies exactly segments[i] segments (one block:
    bytes + 8 = segments * segment_bytes)."""
    return index_of([s * segment_bytes - 8 for s in segments])


def trace_of(queries, blocks=None, postings=None) -> Replay:
    """Queries as lists of term ids; blocks decoded per occurrence default 1."""
    qfirst = np.concatenate([[0], np.cumsum([len(q) for q in queries])]).astype(np.int64)
    term = np.asarray([t for q in queries for t in q], np.int64)
    b = np.ones(len(term), np.int64) if blocks is None else np.asarray(blocks, np.int64)
    p = np.zeros(len(queries), np.int64) if postings is None else np.asarray(postings, np.int64)
    qtype = np.asarray([int(len(q) > 1) for q in queries], np.int8)
    return Replay("test", qtype, qfirst, term, b, p, "single", "", float("nan"))
