"""A query workload's memory accesses, synthesised from the index's layout and
the queries' own counts, for the cache filter and the tier-timing model
(tierlab.engine.memsim; docs/tiers.md "The memory-tier model").

A recorded trace (`tierlab trace memory`, tierlab.traces.memtrace) is the
measured stream; this module builds the stream from what every query run
reports (tierlab_query_stats: blocks decoded per term, freq blocks, postings
scored) and where each term's bytes lie (Index.extents), so that every
codec, index and placement has a stream without a tracing build. What is
exact and what is assumed:

- dictionary (exact path): the binary search over dict.bin's sorted 40-byte
  entries (docs/engine.md), one 16-byte load per probe, the probes of the
  term's own search in order;
- skip list: the term's 32-byte skip entries, one per block, read in order
  (a SINGLE query walks them all; an AND query's cursors move forward through
  them, so all entries up to its last block are read: taken as all);
- DID and freq blocks: which blocks an AND query decoded is not reported,
  only how many per term: they are taken as evenly spaced through the list
  (an assumption); a block's bytes are the term's bytes split evenly over
  its blocks (the true sizes vary around that), read in 16-byte loads; freq
  blocks decoded are spread over the terms in proportion to their DID
  blocks;
- blocks of the terms of one AND query interleave by their position in the
  DID space (block i of B at i / B), as the cursors leapfrog;
- per block: 32 stores of 32 bytes into the 1 KiB decode buffer (DIDs, then
  freqs into the next KiB), reads of the decoded postings the query scores
  (32 bytes per 8 postings) and, per 16 postings scored, one 16-byte access
  at a seeded random slot of the top-k heap (16 bytes x k).
Regions sit at disjoint bases ((region + 1) << 36) plus the file offsets, so
the filter sees each file's real layout.

Units: bytes. The number of accesses is what the timing model's
cpu_ns_per_access is calibrated against (tierlab.engine.memcosts).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tierlab.core.errors import TierlabError
from tierlab.engine import memsim

DICT_ENTRY_BYTES = 40
FILE_HEADER_BYTES = 128
SKIP_ENTRY_BYTES = 32
SKIP_HEADER_BYTES = 16
BLOCK_LOAD_BYTES = 16
DECODE_STORE_BYTES = 32
POSTING_BYTES = 4
HEAP_ENTRY_BYTES = 16


def region_base(name: str) -> int:
    return (memsim.region_id(name) + 1) << 36


@dataclass
class WorkloadStream:
    """The synthesised stream of a workload: `records` (memsim.RECORD, query
    ids 0..n-1), and per query: type ('single'/'and'), blocks decoded, freq
    blocks decoded, postings scored, results, accesses, latency_ns measured."""

    records: np.ndarray
    qtype: np.ndarray
    blocks: np.ndarray
    freq_blocks: np.ndarray
    postings: np.ndarray
    results: np.ndarray
    accesses: np.ndarray
    latency_ns: np.ndarray
    block_postings: int
    codec: str
    queries: list | None = None   # the queries, as term tuples
    source: str = "synthesised"   # or "recorded: <trace file>"


def _expand(base, count, stride, size, kind, region, query) -> np.ndarray:
    """Records of runs: run i is count[i] accesses base[i] + j * stride[i]."""
    count = np.asarray(count, dtype=np.int64)
    keep = count > 0
    base, count, stride = (np.asarray(base, dtype=np.uint64)[keep], count[keep],
                           np.asarray(stride, dtype=np.uint64)[keep])
    size, kind, region, query = (np.asarray(size)[keep], np.asarray(kind)[keep],
                                 np.asarray(region)[keep], np.asarray(query)[keep])
    n = int(count.sum())
    out = np.zeros(n, dtype=memsim.RECORD)
    if not n:
        return out
    starts = np.cumsum(count) - count
    j = np.arange(n, dtype=np.int64) - np.repeat(starts, count)
    out["addr"] = np.repeat(base, count) + j.astype(np.uint64) * np.repeat(stride, count)
    out["size"] = np.repeat(size, count)
    out["kind"] = np.repeat(kind, count)
    out["region"] = np.repeat(region, count)
    out["query"] = np.repeat(query, count)
    return out


def _dict_probes(pos: int, n: int) -> list[int]:
    """Entries a binary search over n sorted entries probes to find entry pos."""
    lo, hi, out = 0, n, []
    while lo < hi:
        mid = (lo + hi) // 2
        out.append(mid)
        if mid == pos:
            break
        if mid < pos:
            lo = mid + 1
        else:
            hi = mid
    return out


def build(ext, queries, stats, *, k: int, block_postings: int, codec: str = "",
          seed: int = 0) -> WorkloadStream:
    """The stream of `queries` (term tuples) given the index's extents table
    (Index.extents) and the queries' stats (Index.run_batch)."""
    rng = np.random.default_rng(seed)
    row = {t: i for i, t in enumerate(ext["term"])}
    nterms = len(row)
    cols = {c: ext[c].to_numpy(dtype=np.uint64) for c in
            ("blocks", "did_offset", "did_bytes", "freq_offset", "freq_bytes", "skip_offset")}
    R = {r: memsim.region_id(r) for r in ("dictionary", "skip", "did", "freq",
                                            "decode_buffer", "topk_heap")}
    B = {r: region_base(r) for r in R}
    heap_slots = max(1, k)
    runs = []  # (base, count, stride, size, kind, region, query)
    L, S = memsim.LOAD, memsim.STORE
    for q, terms in enumerate(queries):
        st = stats[q]
        ids = [row.get(t) for t in terms]
        for i in ids:  # dictionary lookups first
            if i is None:
                continue
            for p in _dict_probes(i, nterms):
                runs.append((B["dictionary"] + FILE_HEADER_BYTES + p * DICT_ENTRY_BYTES, 1, 0,
                             16, L, R["dictionary"], q))
        if st["unknown_terms"]:
            continue
        dec = [int(st["term_blocks_decoded"][j]) for j in range(len(terms))]
        total_dec = sum(dec)
        fb_total = int(st["freq_blocks_decoded"])
        scored = int(st["postings_scored"])
        per_block_scored = scored / total_dec if total_dec else 0.0
        # (position, term slot, block index) of every decoded block
        order = []
        for j, (i, d) in enumerate(zip(ids, dec)):
            nb = int(cols["blocks"][i])
            if not d or not nb:
                continue
            idx = np.minimum(((np.arange(d) + 0.5) * nb / d).astype(np.int64), nb - 1)
            order += [(b / nb, j, int(b)) for b in idx]
        order.sort()
        fb_left = fb_total
        for n_done, (_, j, b) in enumerate(order):
            i = ids[j]
            nb = int(cols["blocks"][i])
            runs.append((B["skip"] + int(cols["skip_offset"][i]) + SKIP_HEADER_BYTES +
                         b * SKIP_ENTRY_BYTES, 1, 0, SKIP_ENTRY_BYTES, L, R["skip"], q))
            dl = -(-int(cols["did_bytes"][i]) // nb)
            doff = int(cols["did_offset"][i]) + b * int(cols["did_bytes"][i]) // nb
            runs.append((B["did"] + (doff & ~15), -(-dl // BLOCK_LOAD_BYTES), BLOCK_LOAD_BYTES,
                         BLOCK_LOAD_BYTES, L, R["did"], q))
            nst = block_postings * POSTING_BYTES // DECODE_STORE_BYTES
            runs.append((B["decode_buffer"], nst, DECODE_STORE_BYTES, DECODE_STORE_BYTES, S,
                         R["decode_buffer"], q))
            # freq blocks: spread over the decoded blocks in order
            want_f = round(fb_total * (n_done + 1) / total_dec) - (fb_total - fb_left)
            if want_f > 0 and fb_left > 0:
                fb_left -= 1
                fl = -(-int(cols["freq_bytes"][i]) // nb)
                foff = int(cols["freq_offset"][i]) + b * int(cols["freq_bytes"][i]) // nb
                runs.append((B["freq"] + (foff & ~15), -(-fl // BLOCK_LOAD_BYTES),
                             BLOCK_LOAD_BYTES, BLOCK_LOAD_BYTES, L, R["freq"], q))
                runs.append((B["decode_buffer"] + block_postings * POSTING_BYTES, nst,
                             DECODE_STORE_BYTES, DECODE_STORE_BYTES, S, R["decode_buffer"], q))
            ns = int(round(per_block_scored * POSTING_BYTES * 2 / DECODE_STORE_BYTES))
            runs.append((B["decode_buffer"], ns, DECODE_STORE_BYTES, DECODE_STORE_BYTES, L,
                         R["decode_buffer"], q))
            nh = int(round(per_block_scored / 16))
            if nh:
                slot = int(rng.integers(0, heap_slots))
                runs.append((B["topk_heap"] + slot * HEAP_ENTRY_BYTES, nh, 0, HEAP_ENTRY_BYTES,
                             S, R["topk_heap"], q))
    if runs:
        cols_ = list(zip(*runs))
        rec = _expand(*cols_)
    else:
        rec = np.zeros(0, dtype=memsim.RECORD)
    nq = len(queries)
    acc = np.bincount(rec["query"], minlength=nq)[:nq] if len(rec) else np.zeros(nq, np.int64)
    return WorkloadStream(
        records=rec,
        qtype=np.array(["single" if len(t) == 1 else "and" for t in queries]),
        blocks=stats["blocks_decoded"].astype(np.int64),
        freq_blocks=stats["freq_blocks_decoded"].astype(np.int64),
        postings=stats["postings_scored"].astype(np.int64),
        results=stats["results"].astype(np.int64),
        accesses=acc.astype(np.int64), latency_ns=stats["latency_ns"].astype(np.float64),
        block_postings=block_postings, codec=codec, queries=list(queries))


def workload_stream(index: str | os.PathLike, workload, *, k: int = 1024,
                    max_queries: int | None = None) -> WorkloadStream:
    """Run the workload once on the index (DRAM placement, for its counts) and
    build its stream. workload: a query file or a list of term tuples."""
    from tierlab.engine.index import Index
    from tierlab.engine.workload import read_queries

    queries = read_queries(workload) if isinstance(workload, (str, os.PathLike)) else \
        list(workload)
    if max_queries is not None:
        queries = queries[:max_queries]
    if not queries:
        raise TierlabError(f"{workload}: no queries")
    with Index(index, "dram") as ix:
        ext = ix.extents()
        stats, _, _, _ = ix.run_batch(queries, k=k)
        codec = str(ix.info.get("codec", ""))
        bp = int(ix.info.get("block_size", 256))
        kept = ix.kept(k)
    return build(ext, queries, stats, k=kept, block_postings=bp, codec=codec)


def recorded(index: str | os.PathLike, workload, trace: str | os.PathLike, *,
             k: int | None = None) -> WorkloadStream:
    """The measured stream: the records of a `tierlab trace memory` trace
    (a memtrace.bin file, or the folder holding it) of `workload` on `index`,
    with each traced query's counts from a run of the same queries (index in
    DRAM). Query ids are renumbered 0..n-1 over the traced queries, in order;
    the trace's k is used unless k is given."""
    from pathlib import Path

    from tierlab.engine.index import Index
    from tierlab.engine.workload import read_queries
    from tierlab.traces import memtrace

    path = Path(trace)
    if path.is_dir():
        path = path / "memtrace.bin"
    h, rec = memtrace.read(path)
    queries = read_queries(workload) if isinstance(workload, (str, os.PathLike)) else \
        list(workload)
    ords, qid = np.unique(np.asarray(rec["query"]), return_inverse=True)
    if len(ords) and int(ords[-1]) >= len(queries):
        raise TierlabError(f"{path}: query {int(ords[-1])} traced, but {workload} has "
                           f"{len(queries)} queries: not a trace of this workload")
    picked = [queries[int(o)] for o in ords]
    if not picked:
        raise TierlabError(f"{path}: no traced queries")
    with Index(index, "dram") as ix:
        stats, _, _, _ = ix.run_batch(picked, k=k or h.k or 1024)
        bp = int(ix.info.get("block_size", 256))
    out = np.zeros(len(rec), dtype=memsim.RECORD)
    for f in ("addr", "size", "kind", "region"):
        out[f] = rec[f]
    out["query"] = qid
    n = len(picked)
    return WorkloadStream(
        records=out, qtype=np.array(["single" if len(t) == 1 else "and" for t in picked]),
        blocks=stats["blocks_decoded"].astype(np.int64),
        freq_blocks=stats["freq_blocks_decoded"].astype(np.int64),
        postings=stats["postings_scored"].astype(np.int64),
        results=stats["results"].astype(np.int64),
        accesses=np.bincount(qid, minlength=n)[:n].astype(np.int64),
        latency_ns=stats["latency_ns"].astype(np.float64), block_postings=bp, codec=h.codec,
        queries=picked, source=f"recorded: {path} ({h.sampling()})")
