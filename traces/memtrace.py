"""Memory traces of the query kernels (traces/memtrace.md): the reader, a
writer (tests and synthetic traces), and the per query x region summary
(the `memtrace_summary` table of traces/schema.yaml).

A trace file is a 256-byte header (HEADER, C `tierlab_memtrace_header`) and
then `records` fixed 16-byte records (RECORD, C `tierlab_memtrace_record`),
both in kernels/include/tierlab.h, little-endian. The tracing build of the
kernels writes it (`tierlab trace memory`, tierlab.engine.memtrace);
`write` here writes the same format from numpy. Records are in program
order, so the query ordinals never decrease along the file.

Regions are numbers (TIERLAB_REGION_*); their names come from the C registry
(tierlab.core.registry.memory_regions, `tierlab list memory-regions`).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError

MAGIC = b"TLMTRACE"
VERSION = 1
HEADER_BYTES = 256
RECORD_BYTES = 16
LOAD, STORE = 0, 1         # TIERLAB_ACCESS_LOAD / _STORE
BUDGET_HIT = 1             # TIERLAB_MEMTRACE_BUDGET_HIT, a header flag

# tierlab_memtrace_record: addr, query, size, kind, region (tests/traces check
# the offsets against the C header through cffi).
RECORD = np.dtype({"names": ["addr", "query", "size", "kind", "region"],
                   "formats": ["<u8", "<u4", "<u2", "u1", "u1"],
                   "offsets": [0, 8, 12, 14, 15], "itemsize": RECORD_BYTES})

# tierlab_memtrace_header, field by field.
HEADER = np.dtype([
    ("magic", "S8"), ("version", "<u4"), ("header_bytes", "<u4"), ("record_bytes", "<u4"),
    ("every", "<u4"), ("max_bytes", "<u8"), ("records", "<u8"), ("queries", "<u8"),
    ("queries_sampled", "<u8"), ("queries_traced", "<u8"), ("index_build_id", "<u8"),
    ("workload_digest", "<u8"), ("stack_lo", "<u8"), ("stack_hi", "<u8"), ("k", "<u4"),
    ("flags", "<u4"), ("line_bytes", "<u4"), ("checks", "<u4"), ("codec", "S32"),
    ("placement", "S64"), ("reserved", "V48")])
assert HEADER.itemsize == HEADER_BYTES


@dataclass(frozen=True)
class Header:
    """A trace's header. The sampling: queries whose ordinal is a multiple of
    `every` were run (`queries_sampled` of the workload's `queries`), and the
    first `queries_traced` of them are in the file; `budget_hit` says the
    byte budget `max_bytes` (0: none) stopped it there."""

    version: int
    every: int
    max_bytes: int
    records: int
    queries: int
    queries_sampled: int
    queries_traced: int
    index_build_id: int
    workload_digest: int
    stack_lo: int
    stack_hi: int
    k: int
    flags: int
    line_bytes: int
    checks: int
    codec: str
    placement: str
    trace_id: str = ""     # digest of the header's 256 bytes: names the trace

    @property
    def budget_hit(self) -> bool:
        return bool(self.flags & BUDGET_HIT)

    def sampling(self) -> str:
        """The sampling in words, as the CLI prints it and the summary holds it."""
        nth = "every query" if self.every == 1 else f"every {_ordinal(self.every)} query"
        budget = ("no byte budget" if not self.max_bytes else
                  f"byte budget {self.max_bytes:,} B")
        cut = ", stopped by the budget" if self.budget_hit else ""
        return (f"{nth}, {budget}: {self.queries_traced:,} of {self.queries_sampled:,} sampled "
                f"queries traced ({self.queries:,} in the workload){cut}")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _header(raw: bytes, where: str) -> Header:
    if len(raw) < HEADER_BYTES:
        raise TierlabError(f"{where}: not a memory trace ({len(raw)} bytes, the header alone "
                           f"is {HEADER_BYTES})")
    h = np.frombuffer(raw[:HEADER_BYTES], dtype=HEADER)[0]
    if bytes(h["magic"]) != MAGIC:
        raise TierlabError(f"{where}: not a memory trace (magic {bytes(h['magic'])!r}, "
                           f"want {MAGIC!r})")
    if int(h["version"]) != VERSION:
        raise TierlabError(f"{where}: memory trace version {int(h['version'])}; this tierlab "
                           f"reads version {VERSION}")
    if int(h["header_bytes"]) != HEADER_BYTES or int(h["record_bytes"]) != RECORD_BYTES:
        raise TierlabError(f"{where}: header of {int(h['header_bytes'])} bytes and records of "
                           f"{int(h['record_bytes'])}; version {VERSION} has "
                           f"{HEADER_BYTES} and {RECORD_BYTES}")
    kw = {f.name: int(h[f.name]) for f in fields(Header)
          if f.name not in ("codec", "placement", "trace_id")}
    return Header(**kw, codec=h["codec"].decode("utf-8", "replace"),
                  placement=h["placement"].decode("utf-8", "replace"),
                  trace_id=hashlib.blake2b(raw[:HEADER_BYTES], digest_size=8).hexdigest())


def read_header(path: str | os.PathLike) -> Header:
    """The header of the trace at `path`, checked against the file's size;
    a TierlabError (one line, naming the file) when it is not a trace of this
    version or is cut short."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER_BYTES)
        size = path.stat().st_size
    except OSError as e:
        raise TierlabError(f"{path}: cannot read ({e.strerror or e})") from None
    h = _header(raw, str(path))
    want = HEADER_BYTES + h.records * RECORD_BYTES
    if size != want:
        raise TierlabError(f"{path}: {size:,} bytes, the header says {h.records:,} records "
                           f"({want:,} bytes): cut short or still being written")
    return h


def read(path: str | os.PathLike) -> tuple[Header, np.ndarray]:
    """(header, records): the records as a read-only numpy structured array of
    dtype RECORD, mapped from the file (not read into memory)."""
    h = read_header(path)
    if h.records == 0:
        return h, np.zeros(0, dtype=RECORD)
    return h, np.memmap(path, dtype=RECORD, mode="r", offset=HEADER_BYTES, shape=(h.records,))


def header_bytes(**values) -> bytes:
    """The 256 header bytes of a trace with these fields (HEADER's names;
    magic, version and sizes filled in, the rest zero unless given)."""
    h = np.zeros(1, dtype=HEADER)
    h["magic"], h["version"] = MAGIC, VERSION
    h["header_bytes"], h["record_bytes"], h["line_bytes"], h["every"] = (
        HEADER_BYTES, RECORD_BYTES, 64, 1)
    for name, v in values.items():
        if name not in HEADER.names or name in ("magic", "reserved"):
            raise TierlabError(f"memory trace header has no field '{name}'")
        h[name] = v.encode() if isinstance(v, str) else v
    return h.tobytes()


def write(path: str | os.PathLike, records, **header) -> Path:
    """Write a trace file: `records` (anything np.asarray takes as RECORD) and
    the header fields in `header` (records and, unless given, queries,
    queries_sampled and queries_traced follow from the records). Atomic: a
    temporary name renamed into place. For tests and synthetic traces; the
    tracing build writes real ones."""
    path = Path(path)
    rec = np.ascontiguousarray(records, dtype=RECORD)
    if len(rec) and np.any(np.diff(rec["query"].astype(np.int64)) < 0):
        raise TierlabError("memory trace records must be in query order")
    n_q = len(np.unique(rec["query"]))
    header = {"queries": n_q, "queries_sampled": n_q, "queries_traced": n_q, **header,
              "records": len(rec)}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(header_bytes(**header))
            f.write(rec.tobytes())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


# --- the per query x region summary ------------------------------------------------------------

SUMMARY_COUNTS = ("accesses", "loads", "stores", "bytes", "distinct_lines", "stack_accesses")


def _query_bounds(q: np.ndarray) -> np.ndarray:
    """Start offsets of each query's run of records, and the end."""
    if len(q) == 0:
        return np.zeros(1, dtype=np.int64)
    starts = np.flatnonzero(np.diff(q.astype(np.int64))) + 1
    return np.concatenate(([0], starts, [len(q)])).astype(np.int64)


def summarise_records(h: Header, rec: np.ndarray, chunk: int = 1 << 22) -> dict[str, np.ndarray]:
    """Per (query, region) with any access: query_id, region (number) and
    SUMMARY_COUNTS as columns. distinct_lines counts the `line_bytes` lines
    any byte of an access touched; stack_accesses those inside the traced
    thread's stack [stack_lo, stack_hi) (region other). Reads `chunk` records
    at a time, whole queries, so a trace larger than memory is fine."""
    out: dict[str, list] = {k: [] for k in ("query_id", "region", *SUMMARY_COUNTS)}
    shift = int(h.line_bytes).bit_length() - 1
    if h.line_bytes < 64 or (1 << shift) != h.line_bytes:
        raise TierlabError(f"memory trace: line_bytes {h.line_bytes} is not a power of two "
                           f">= 64")
    if len(rec) and int(rec["region"].max()) >= 64:
        raise TierlabError(f"memory trace: region {int(rec['region'].max())} out of range")
    nreg = 64
    lo = 0
    while lo < len(rec):
        hi = min(len(rec), lo + chunk)
        if hi < len(rec):  # end on a query boundary
            last = rec["query"][hi - 1]
            hi = lo + int(np.searchsorted(rec["query"][lo:], last, side="right"))
        part = np.asarray(rec[lo:hi])
        bounds = _query_bounds(part["query"])
        for a, z in zip(bounds[:-1], bounds[1:]):
            r = part[a:z]
            reg = r["region"].astype(np.int64)
            size = r["size"].astype(np.int64)
            addr = r["addr"].astype(np.uint64)
            store = r["kind"] == STORE
            acc = np.bincount(reg, minlength=nreg)
            stores = np.bincount(reg, weights=store, minlength=nreg)
            nbytes = np.bincount(reg, weights=size, minlength=nreg)
            in_stack = (addr >= np.uint64(h.stack_lo)) & (addr < np.uint64(h.stack_hi))
            stack = np.bincount(reg, weights=in_stack, minlength=nreg)
            first = addr >> np.uint64(shift)
            last = (addr + np.maximum(size, 1).astype(np.uint64) - np.uint64(1)) >> np.uint64(shift)
            span = (last - first).astype(np.int64) + 1
            if np.any(span > 1):  # accesses crossing lines: every line they touch
                idx = np.repeat(np.arange(len(r)), span)
                step = np.arange(len(idx)) - np.repeat(np.cumsum(span) - span, span)
                lines, lreg = first[idx] + step.astype(np.uint64), reg[idx]
            else:
                lines, lreg = first, reg
            # one key per (region, line): lines of 64 B or more fit 58 bits
            keys = np.unique((lreg.astype(np.uint64) << np.uint64(58)) | lines)
            distinct = np.bincount((keys >> np.uint64(58)).astype(np.int64), minlength=nreg)
            for g in np.flatnonzero(acc):
                out["query_id"].append(int(r["query"][0]))
                out["region"].append(int(g))
                out["accesses"].append(int(acc[g]))
                out["stores"].append(int(stores[g]))
                out["loads"].append(int(acc[g] - stores[g]))
                out["bytes"].append(int(nbytes[g]))
                out["distinct_lines"].append(int(distinct[g]))
                out["stack_accesses"].append(int(stack[g]))
        lo = hi
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def summary_rows(path: str | os.PathLike, query_types: list[str] | None = None) -> dict:
    """The `memtrace_summary` table of the trace at `path` as columns
    (traces/schema.yaml): one row per query x region with any access.
    query_types[i]: the type of workload query i ("" when not given)."""
    from tierlab.core.registry import memory_regions

    h, rec = read(path)
    s = summarise_records(h, rec)
    names = memory_regions()
    n = len(s["query_id"])
    return {
        "trace_id": [h.trace_id] * n,
        "codec": [h.codec] * n,
        "placement": [h.placement] * n,
        "k": [h.k] * n,
        "every": [h.every] * n,
        "max_bytes": [h.max_bytes] * n,
        "sampling": [h.sampling()] * n,
        "query_id": s["query_id"],
        "query_type": [query_types[q] if query_types else "" for q in s["query_id"]],
        "region": [names[g] if g < len(names) else str(g) for g in s["region"]],
        **{c: s[c] for c in SUMMARY_COUNTS},
        "line_bytes": [h.line_bytes] * n,
    }
