"""The memory-side stream the simulator back-ends replay: records of
`tierlab_mem_request` (kernels/include/tierlab.h), 24 bytes each, little-endian,
in the order the cache filter emitted them.

A stream file is either the bare records or the records after a header that
starts with MAGIC (the cache filter's output format, when it has one: the
header length is read from the header itself). `synthetic()` makes the two
reference streams of the cross-validation (sequential and random reads)
without a query run.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError

# tierlab_mem_request, field for field (tierlab.h): addr, query, gap, kind,
# region, pad, pad2.
DTYPE = np.dtype([("addr", "<u8"), ("query", "<u4"), ("gap", "<u4"), ("kind", "u1"),
                  ("region", "u1"), ("pad", "<u2"), ("pad2", "<u4")])
assert DTYPE.itemsize == 24

READ, WRITEBACK, PREFETCH = 0, 1, 2  # TIERLAB_REQ_*
KINDS = {READ: "read", WRITEBACK: "writeback", PREFETCH: "prefetch"}
LINE = 64  # bytes per request: the cache line of the filter's machines
# A stream file with a header starts with these 8 bytes, then a uint32 header
# length in bytes (counting the magic); the records follow the header.
MAGIC = b"TLMEMREQ"
PATTERNS = ("sequential", "random")
MAX_SYNTHETIC = 50_000_000  # 1.2 GB of records


def read(path: str | os.PathLike) -> np.ndarray:
    """The records of a stream file (bare or with a MAGIC header)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TierlabError(f"{path}: cannot read the memory stream ({e.strerror or e})") from None
    start = 0
    if raw[:len(MAGIC)] == MAGIC:
        if len(raw) < len(MAGIC) + 4:
            raise TierlabError(f"{path}: memory stream header is cut short")
        start = struct.unpack_from("<I", raw, len(MAGIC))[0]
        if start < len(MAGIC) + 4 or start > len(raw):
            raise TierlabError(f"{path}: memory stream header length {start} is not valid")
    body = len(raw) - start
    if body % DTYPE.itemsize:
        raise TierlabError(f"{path}: not a memory stream: {body} bytes of records is not a "
                           f"multiple of {DTYPE.itemsize} (tierlab_mem_request, tierlab.h)")
    recs = np.frombuffer(raw, DTYPE, offset=start)
    if len(recs) == 0:
        raise TierlabError(f"{path}: the memory stream holds no requests")
    bad = recs["kind"] > PREFETCH
    if bad.any():
        i = int(np.argmax(bad))
        raise TierlabError(f"{path}: request {i} has kind {int(recs['kind'][i])}; kinds are "
                           "0 read, 1 writeback, 2 prefetch")
    return recs


def write(path: str | os.PathLike, recs: np.ndarray) -> Path:
    """Write bare records (the caller renames the file into place)."""
    path = Path(path)
    np.ascontiguousarray(recs, dtype=DTYPE).tofile(path)
    return path


def synthetic(pattern: str, count: int, *, span_bytes: int = 1 << 30, seed: int = 0,
              gap: int = 0, base: int = 0) -> np.ndarray:
    """`count` line reads: `sequential` from `base` up, or `random` lines drawn
    uniformly (seeded) from [base, base + span_bytes). `gap` is every request's
    gap (accesses served by the caches in between)."""
    if pattern not in PATTERNS:
        raise TierlabError(f"--pattern: one of {', '.join(PATTERNS)}, got {pattern!r}")
    if not 1 <= count <= MAX_SYNTHETIC:
        raise TierlabError(f"--count: 1..{MAX_SYNTHETIC}, got {count}")
    if seed < 0:
        raise TierlabError(f"--seed: a whole number >= 0, got {seed}")
    if not 0 <= gap < 2**32:
        raise TierlabError(f"--gap: 0..{2**32 - 1} accesses, got {gap}")
    if span_bytes < LINE or base < 0 or base + span_bytes > 2**62:
        raise TierlabError(f"--span: {LINE} bytes .. 2^62, got {span_bytes}")
    lines = max(1, span_bytes // LINE)
    recs = np.zeros(count, DTYPE)
    if pattern == "sequential":
        idx = np.arange(count, dtype=np.uint64) % np.uint64(lines)
    else:
        idx = np.random.default_rng(seed).integers(0, lines, count, dtype=np.uint64)
    recs["addr"] = np.uint64(base) + idx * np.uint64(LINE)
    recs["gap"] = gap
    recs["kind"] = READ
    return recs


def from_trace(path: str | os.PathLike, machine: str = "xeon-gold-6252n", *,
               prefetch: bool = True) -> np.ndarray:
    """The memory-side stream of a recorded memory trace (`tierlab trace
    memory`, traces/memtrace.md): its accesses through the cache filter of
    the machine spec (tierlab.engine.memsim.Filter), in order."""
    from tierlab.engine.memsim import Filter
    from tierlab.traces import memtrace

    _, records = memtrace.read(path)
    if len(records) == 0:
        raise TierlabError(f"{path}: the memory trace holds no accesses")
    out = Filter(machine, prefetch=prefetch).run(records)
    return out.view(DTYPE) if out.dtype != DTYPE else out


def select(recs: np.ndarray, regions: list[int] | None) -> np.ndarray:
    """The requests of the given region numbers (all when None)."""
    if not regions:
        return recs
    return recs[np.isin(recs["region"], np.asarray(regions, dtype=np.uint8))]


def compact(recs: np.ndarray, *, granule: int = 1 << 12, limit: int = 1 << 33) -> np.ndarray:
    """The same stream with its addresses packed below `limit` bytes: each
    distinct `granule`-sized page keeps its offset and is renumbered in order of
    first use, so row-buffer and page locality are kept while virtual addresses
    (up to 2^47) fit a simulated device of a few GiB."""
    addr = recs["addr"].astype(np.uint64)
    if len(addr) == 0 or int(addr.max()) < limit:
        return recs
    page = addr // np.uint64(granule)
    uniq, first = np.unique(page, return_index=True)
    order = np.argsort(first)  # pages in order of first use
    rank = np.empty(len(uniq), np.uint64)
    rank[order] = np.arange(len(uniq), dtype=np.uint64)
    newpage = rank[np.searchsorted(uniq, page)]
    if int(newpage.max() + 1) * granule > limit:
        raise TierlabError(f"the stream touches {len(uniq)} pages of {granule} bytes, more than "
                           f"the {limit >> 30} GiB a simulated device holds here")
    out = recs.copy()
    out["addr"] = newpage * np.uint64(granule) + addr % np.uint64(granule)
    return out
