"""CIFF, the Common Index File Format (Lin et al., "Supporting Interoperability
Between Open-Source Search Engines with the Common Index File Format",
arXiv:2003.08276; github.com/osirrc/ciff, CommonIndexFileFormat.proto): export
a tierlab index to CIFF and import a CIFF file as a tierlab index, so indexes
move to and from PISA, Anserini/Lucene, Terrier, JASS and others.

A CIFF file is a sequence of length-delimited protobuf messages (each preceded
by its byte length as a varint): one Header, then Header.num_postings_lists
PostingsList messages, then Header.num_doc_records DocRecord messages. The
messages, written here by hand (the encoding is small, no protobuf package):

  Header       1 version int32, 2 num_postings_lists int32, 3 num_doc_records
               int32, 4 total_postings_lists int32, 5 total_docs int32,
               6 total_terms_in_collection int64, 7 average_doclength double,
               8 description string
  PostingsList 1 term string, 2 df int64, 3 cf int64, 4 postings repeated Posting
  Posting      1 docid int32 (the first absolute, then gaps), 2 tf int32
  DocRecord    1 docid int32, 2 collection_docid string, 3 doclength int32

Export writes tierlab's DIDs as CIFF docids, its terms in dictionary (byte)
order, and one DocRecord per document: collection_docid is the DID (the
corpus line number) and doclength the sum of the document's term frequencies.
Import takes the CIFF docids as DIDs and total_docs as N; terms are kept as
they are (queries are lower-cased, so upper-case CIFF terms never match);
document lengths are not used (tierlab's BM25 has a constant length term).
Unknown fields are skipped, as protobuf readers do.

Reading goes through CiffFile, which streams a file's PostingsLists (a chunk
of lists at a time, decoded in one numpy pass when they are in the canonical
layout export writes, else posting by posting) and then its DocRecords;
import_ and the PISA converter (tierlab/experiments/bench/pisa_engine.py) use it.
"""
from __future__ import annotations

import mmap
import os
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tierlab import __version__
from tierlab.core import signals
from tierlab.core.errors import TierlabError
from tierlab.core.files import atomic_outputs
from tierlab.core.native import cstr

CIFF_VERSION = 1
_BYTE = [bytes((i,)) for i in range(0x80)]  # the one-byte varints


# ---- encoding ----

def _varint(n: int) -> bytes:
    if n < 0x80:
        return _BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field_varint(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n) if n else b""  # proto3 omits zeros


def _field_bytes(field: int, data: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(data)) + data if data else b""


def _varint_columns(v: np.ndarray):
    """(n, 5) uint8 varint bytes of v (< 2^35) and their lengths."""
    v = v.astype(np.uint64)
    lens = 1 + sum((v >= (1 << (7 * i))).astype(np.int64) for i in range(1, 5))
    cols = np.empty((len(v), 5), dtype=np.uint8)
    for i in range(5):
        cont = (lens > i + 1).astype(np.uint64) << np.uint64(7)
        cols[:, i] = (((v >> np.uint64(7 * i)) & np.uint64(0x7F)) | cont).astype(np.uint8)
    return cols, lens


def _encode_postings(dids: np.ndarray, freqs: np.ndarray,
                     counts: np.ndarray) -> tuple[bytes, np.ndarray]:
    """The repeated Posting fields (tag 4) of several lists back to back
    (counts[i] postings in list i), vectorised: per posting 0x22 LEN [0x08
    gap] 0x10 tf, the gap field omitted when 0; a list's first gap is its
    first docid. Returns the bytes and where each list's bytes end."""
    counts = np.asarray(counts, dtype=np.int64)
    gaps = np.diff(dids.astype(np.int64), prepend=0)
    first = (np.cumsum(counts) - counts)[counts > 0]
    gaps[first] = dids[first]
    g, gl = _varint_columns(gaps)
    t, tl = _varint_columns(freqs)
    has_g = gaps > 0
    n = len(dids)
    body = has_g * (1 + gl) + 1 + tl  # < 128: its length is one byte
    m = np.zeros((n, 14), dtype=np.uint8)
    keep = np.zeros((n, 14), dtype=bool)
    m[:, 0] = 0x22
    m[:, 1] = body.astype(np.uint8)
    m[:, 2] = 0x08
    m[:, 3:8] = g
    m[:, 8] = 0x10
    m[:, 9:14] = t
    keep[:, 0:2] = True
    keep[:, 2] = has_g
    keep[:, 3:8] = has_g[:, None] & (np.arange(5) < gl[:, None])
    keep[:, 8] = True
    keep[:, 9:14] = np.arange(5) < tl[:, None]
    ends = np.concatenate(([0], np.cumsum(2 + body)))[np.cumsum(counts)]
    return m[keep].tobytes(), ends


def _postings_bytes(dids: np.ndarray, freqs: np.ndarray) -> bytes:
    """The repeated Posting fields of one list (see _encode_postings)."""
    return _encode_postings(dids, freqs, [len(dids)])[0]


def _delimited(msg: bytes) -> bytes:
    return _varint(len(msg)) + msg


EXPORT_CHUNK = 1 << 20  # postings (doc records) export encodes per pass


def export(index: str | os.PathLike, out: str | os.PathLike, description: str | None = None,
           progress=None) -> dict:
    """Write the index as a CIFF file (atomically). Returns counts."""
    from tierlab.engine.index import Index
    from tierlab.core.native import ffi_lib
    from tierlab.core.values import output_file

    ffi, lib = ffi_lib()
    out = output_file(out, "--ciff")
    if Path(out).resolve().parent == Path(index).resolve():
        raise TierlabError(f"--ciff {out}: inside the index being exported; write it elsewhere")
    with Index(index) as ix, atomic_outputs(out) as (tmp,):
        m = ix.manifest
        n_docs, n_terms = int(ix.info["docs"]), int(ix.info["terms"])
        if n_docs >= 2 ** 31 or n_terms >= 2 ** 31:
            raise TierlabError("CIFF counts are int32: this index is too large to export")
        tokens = int(m.get("tokens", 0))
        desc = description or (f"tierlab {__version__} index {m.get('build_id')} (codec "
                               f"{m.get('codec')}, corpus {m.get('corpus', {}).get('digest')}); "
                               f"tokens: runs of ASCII [A-Za-z0-9], lower-cased")
        header = (_field_varint(1, CIFF_VERSION) + _field_varint(2, n_terms)
                  + _field_varint(3, n_docs) + _field_varint(4, n_terms)
                  + _field_varint(5, n_docs) + _field_varint(6, tokens)
                  + (b"\x39" + struct.pack("<d", tokens / n_docs) if n_docs and tokens else b"")
                  + _field_bytes(8, desc.encode()))
        doclen = np.zeros(n_docs, dtype=np.int64)
        term_p, term_len, post = ffi.new("char **"), ffi.new("uint32_t *"), ffi.new("uint32_t *")
        term_pc = ffi.cast("const char **", term_p)
        cap = EXPORT_CHUNK
        dids = np.zeros(cap, dtype=np.uint32)
        freqs = np.zeros(cap, dtype=np.uint32)
        err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
        cf_total = 0
        pending: list[tuple[bytes, int]] = []  # (term, postings) of the lists in dids/freqs
        fill = 0

        def flush(f, done):
            """Write the pending lists, their postings encoded in one pass."""
            nonlocal cf_total, fill
            d, fr = dids[:fill], freqs[:fill]
            counts = np.array([p for _, p in pending], dtype=np.int64)
            body, ends = _encode_postings(d, fr, counts)
            cum = np.concatenate(([0], np.cumsum(fr, dtype=np.int64)))
            cfs = cum[np.cumsum(counts)] - cum[np.cumsum(counts) - counts]
            doclen[:] += np.bincount(d, weights=fr, minlength=n_docs).astype(np.int64)
            cf_total += int(cfs.sum())
            msgs, a = [], 0
            for (term, p), e, cf in zip(pending, ends.tolist(), cfs.tolist()):
                msgs.append(_delimited(_field_bytes(1, term) + _field_varint(2, p)
                                       + _field_varint(3, cf) + body[a:e]))
                a = e
            f.write(b"".join(msgs))
            pending.clear()
            fill = 0
            if progress:
                progress(done, n_terms)

        with open(tmp, "wb") as f:
            f.write(_delimited(header))
            for i in range(n_terms):
                if lib.tierlab_index_term_at(ix._ix, i, term_pc, term_len, post) != 0:
                    raise TierlabError(f"{index}: corrupt dictionary entry {i}")
                term = ffi.buffer(term_p[0], term_len[0])[:]
                p = int(post[0])
                if pending and fill + p > cap:
                    flush(f, i)
                if p > cap:
                    cap = p
                    dids = np.zeros(cap, dtype=np.uint32)
                    freqs = np.zeros(cap, dtype=np.uint32)
                got = lib.tierlab_index_postings(
                    ix._ix, i, ffi.from_buffer("uint32_t[]", dids[fill:fill + p]),
                    ffi.from_buffer("uint32_t[]", freqs[fill:fill + p]), err,
                    lib.TIERLAB_ERRMSG)
                if got < 0:
                    raise TierlabError(ffi.string(err).decode(errors="replace"))
                pending.append((term, p))
                fill += p
            if pending:
                flush(f, n_terms)
            for a in range(0, n_docs, EXPORT_CHUNK):
                f.write(b"".join(_delimited(_field_varint(1, d)
                                            + _field_bytes(2, str(d).encode())
                                            + _field_varint(3, n))
                                 for d, n in enumerate(doclen[a:a + EXPORT_CHUNK].tolist(), a)))
            f.flush()
            os.fsync(f.fileno())
    return {"postings_lists": n_terms, "doc_records": n_docs, "terms_in_collection": cf_total,
            "bytes": out.stat().st_size}


# ---- decoding ----

class _Reader:
    """Varints and length-delimited fields over a buffer."""

    def __init__(self, buf, path):
        self.buf, self.path = buf, path

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        buf, shift, n = self.buf, 0, 0
        while True:
            if pos >= end or shift > 63:
                raise TierlabError(f"{self.path}: truncated or malformed varint at byte {pos}")
            b = buf[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return n, pos
            shift += 7

    def fields(self, pos: int, end: int):
        """Yield (field, wire type, value or (start, stop), offset of the
        field's key) of one message."""
        buf = self.buf
        while pos < end:
            at = pos
            key = buf[pos]  # one byte for fields 1-15, as in CIFF
            if key < 0x80:
                pos += 1
            else:
                key, pos = self.varint(pos, end)
            field, wire = key >> 3, key & 7
            if wire == 0:
                if pos < end and buf[pos] < 0x80:
                    v, pos = buf[pos], pos + 1
                else:
                    v, pos = self.varint(pos, end)
                yield field, wire, v, at
            elif wire == 2:
                n, pos = self.varint(pos, end)
                if pos + n > end:
                    raise TierlabError(f"{self.path}: field {field} runs past its message")
                yield field, wire, (pos, pos + n), at
                pos += n
            elif wire == 1:
                if pos + 8 > end:
                    raise TierlabError(f"{self.path}: truncated fixed64 field")
                yield field, wire, bytes(self.buf[pos:pos + 8]), at
                pos += 8
            elif wire == 5:
                if pos + 4 > end:
                    raise TierlabError(f"{self.path}: truncated fixed32 field")
                yield field, wire, bytes(self.buf[pos:pos + 4]), at
                pos += 4
            else:
                raise TierlabError(f"{self.path}: unsupported protobuf wire type {wire} at byte {pos}")

    def message(self, pos: int) -> tuple[int, int]:
        n, pos = self.varint(pos, len(self.buf))
        if pos + n > len(self.buf):
            raise TierlabError(f"{self.path}: message at byte {pos} runs past the end of the file")
        return pos, pos + n

    def list_head(self, a: int, b: int) -> tuple[bytes, int, int]:
        """(term, df, offset of the first Posting field) of the PostingsList
        in [a, b). Reads no further than the first Posting once the term is
        known (df is 0 when it is not given before that)."""
        buf = self.buf
        if a < b and buf[a] == 0x0A:  # the canonical layout, read directly: term [df] [cf] Posting
            n, p = self.varint(a + 1, b)
            if p + n < b:
                term, p, df = bytes(buf[p:p + n]), p + n, 0
                if buf[p] == 0x10:
                    df, p = self.varint(p + 1, b)
                if p < b and buf[p] == 0x18:
                    p = self.varint(p + 1, b)[1]
                if p < b and buf[p] == 0x22:
                    return term, df, p
        term, df, first = None, 0, None
        for field, wire, v, at in self.fields(a, b):
            if field == 4 and wire == 2:
                first = at if first is None else first
                if term is not None:
                    break
            elif field == 1 and wire == 2:
                term = bytes(self.buf[v[0]:v[1]])
                if first is not None:
                    break
            elif field == 2 and wire == 0:
                df = v
        if term is None:
            raise TierlabError(f"{self.path}: the PostingsList at byte {a} has no term")
        if first is None:
            raise TierlabError(f"{self.path}: term {term!r} (the PostingsList at byte {a}) "
                               f"has no postings")
        return term, df, first


def read_header(path: str | os.PathLike) -> dict:
    """The Header of a CIFF file as a dict."""
    with open(path, "rb") as f:
        buf = f.read(1 << 16)
    r = _Reader(buf, path)
    a, b = r.message(0)
    return _header(r, a, b)


def _header(r: _Reader, a: int, b: int) -> dict:
    names = {1: "version", 2: "num_postings_lists", 3: "num_doc_records",
             4: "total_postings_lists", 5: "total_docs", 6: "total_terms_in_collection"}
    h = {v: 0 for v in names.values()}
    h.update(average_doclength=0.0, description="")
    for field, wire, v, _ in r.fields(a, b):
        if field in names and wire == 0:
            h[names[field]] = v
        elif field == 7 and wire == 1:
            h["average_doclength"] = struct.unpack("<d", v)[0]
        elif field == 8 and wire == 2:
            h["description"] = bytes(r.buf[v[0]:v[1]]).decode(errors="replace")
    return h


CHUNK_POSTINGS = 1 << 22  # postings decoded per numpy pass of CiffFile.postings


@dataclass
class PostingsChunk:
    """Consecutive PostingsLists of a CIFF file: list i has the term
    terms[i], its message starts at byte at[i] of the file and it holds
    dfs[i] postings. dids (absolute, increasing within each list) and freqs
    (at least 1) hold the postings of the lists back to back, as int64."""
    terms: list[bytes]
    at: list[int]
    dfs: np.ndarray
    dids: np.ndarray
    freqs: np.ndarray
    parsed_slowly: int  # lists of the chunk not in the canonical layout, read posting by posting


class CiffFile:
    """A CIFF file open for reading: memory-mapped, its Header read (`header`,
    as read_header gives it) and its version checked. `postings()` streams the
    PostingsLists in file order, `doc_records()` the DocRecords; `lists()`
    gives where each list is without decoding it. A context manager."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            f = open(self.path, "rb")
        except OSError as e:
            raise TierlabError(f"{self.path}: cannot open ({e.strerror or e})") from None
        with f:
            if os.fstat(f.fileno()).st_size == 0:
                raise TierlabError(f"{self.path}: empty file, not CIFF")
            self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._u8 = None
        self._records_at = None  # where the DocRecords start, once the lists are read
        self.reader = _Reader(self.buf, self.path)
        try:
            a, self._lists_at = self.reader.message(0)
            self.header = _header(self.reader, a, self._lists_at)
            if self.header["version"] != CIFF_VERSION:
                raise TierlabError(f"{self.path}: CIFF version {self.header['version']}, tierlab "
                                   f"reads version {CIFF_VERSION} (or this is not a CIFF file)")
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "CiffFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._u8 = None
        try:
            self.buf.close()
        except BufferError:  # a view still held (by a traceback): unmapped once it goes
            pass

    @property
    def documents(self) -> int:
        """The header's document count: total_docs, else num_doc_records (0: neither)."""
        return self.header["total_docs"] or self.header["num_doc_records"]

    def lists(self):
        """Yield (term, df, message start, first Posting, message end) of every
        PostingsList, in file order (df as the list gives it, or 0)."""
        r, pos = self.reader, self._lists_at
        for _ in range(self.header["num_postings_lists"]):
            a, b = r.message(pos)
            term, df, first = r.list_head(a, b)
            yield term, df, a, first, b
            pos = b
        self._records_at = pos

    def postings(self, chunk_postings: int = CHUNK_POSTINGS):
        """Yield the PostingsLists in file order as PostingsChunks of about
        chunk_postings postings (whole lists). A chunk in the canonical layout
        is decoded in one numpy pass (_decode_canonical), any other list by
        list, posting by posting."""
        pending, n = [], 0
        for head in self.lists():
            pending.append(head)
            n += head[1]
            if n >= chunk_postings:
                yield self._chunk(pending)
                pending, n = [], 0
        if pending:
            yield self._chunk(pending)

    def _chunk(self, heads: list) -> PostingsChunk:
        if self._u8 is None:
            self._u8 = np.frombuffer(self.buf, dtype=np.uint8)
        terms, at = [h[0] for h in heads], [h[2] for h in heads]
        got = _decode_canonical(self._u8, [(first, b, df) for _, df, _, first, b in heads])
        if got is not None:
            return PostingsChunk(terms, at, np.array([h[1] for h in heads], dtype=np.int64),
                                 *got, parsed_slowly=0)
        parts = [_postings(self.reader, a, b, self.path) for _, _, a, _, b in heads]
        for a, (_, fr) in zip(at, parts):
            if fr.min() < 1:
                raise TierlabError(f"{self.path}: the list at byte {a} has a frequency below 1")
        return PostingsChunk(terms, at, np.array([len(d) for d, _ in parts], dtype=np.int64),
                             np.concatenate([d for d, _ in parts]).astype(np.int64),
                             np.concatenate([f for _, f in parts]).astype(np.int64),
                             parsed_slowly=len(heads))

    def doc_records(self):
        """Yield (docid, collection_docid or None, doclength) of every
        DocRecord, in file order."""
        r, pos = self.reader, self._records_at
        if pos is None:  # the lists were not read: step over them
            pos = self._lists_at
            for _ in range(self.header["num_postings_lists"]):
                pos = r.message(pos)[1]
        for _ in range(self.header["num_doc_records"]):
            a, b = r.message(pos)
            docid, name, length = 0, None, 0
            for field, wire, v, _ in r.fields(a, b):
                if field == 1 and wire == 0:
                    docid = v
                elif field == 2 and wire == 2:
                    name = bytes(self.buf[v[0]:v[1]])
                elif field == 3 and wire == 0:
                    length = v
            yield docid, name, length
            pos = b


def _postings(r: _Reader, a: int, b: int, path) -> tuple[np.ndarray, np.ndarray]:
    """The postings of the PostingsList in [a, b), posting by posting: any
    valid protobuf layout. (dids, freqs) as uint32; dids must increase."""
    dids, freqs = [], []
    for field, wire, v, _ in r.fields(a, b):
        if field == 4 and wire == 2:
            d = t = 0
            for f2, w2, v2, _ in r.fields(v[0], v[1]):
                if f2 == 1 and w2 == 0:
                    d = v2
                elif f2 == 2 and w2 == 0:
                    t = v2
            dids.append(d)
            freqs.append(t)
    if not dids:
        raise TierlabError(f"{path}: an empty postings list at byte {a}")
    d = np.cumsum(np.array(dids, dtype=np.int64))
    if d[-1] >= 2 ** 32 - 1 or (np.diff(d) <= 0).any():
        raise TierlabError(f"{path}: docids of the list at byte {a} do not increase")
    return d.astype(np.uint32), np.array(freqs, dtype=np.uint32)


def _decode_canonical(u8: np.ndarray, spans: list[tuple[int, int, int]]):
    """Decode the postings of several lists at once, assuming the canonical
    layout (_encode_postings'): each Posting is 0x22 LEN [0x08 gap] 0x10 tf,
    the gap field left out only when it is 0 (the first posting, docid 0).
    spans: (start, end, df) of each list's postings bytes in u8, in file
    order. Returns (docids, freqs) int64 arrays, lists concatenated, or None
    when the bytes are not in that layout, a df is wrong, docids repeat or a
    frequency is 0 (every chunk is checked, never misread)."""
    starts = np.array([s for s, _, _ in spans], dtype=np.int64)
    ends = np.array([e for _, e, _ in spans], dtype=np.int64)
    dfs = np.array([d for _, _, d in spans], dtype=np.int64)
    blen = ends - starts
    if (blen <= 0).any():
        return None
    lo, hi = int(starts[0]), int(ends[-1])
    mark = np.zeros(hi - lo + 1, dtype=np.int32)
    np.add.at(mark, starts - lo, 1)
    np.add.at(mark, ends - lo, -1)
    keep = np.cumsum(mark[:-1]) > 0
    raw = u8[lo:hi][keep]  # the lists' postings bytes, back to back
    bend = np.cumsum(blen)  # end of each list in raw
    if raw[bend - 1].max() >= 0x80:
        return None  # a list ends inside a varint
    tok_end = np.flatnonzero(raw < 0x80)  # every byte < 0x80 ends one varint
    tok_start = np.empty_like(tok_end)
    tok_start[0] = 0
    tok_start[1:] = tok_end[:-1] + 1
    tok_len = tok_end - tok_start + 1
    if tok_len.max() > 5:
        return None
    val = np.zeros(len(tok_end), dtype=np.int64)
    for j in range(5):
        m = tok_len > j
        val[m] |= (raw[tok_start[m] + j].astype(np.int64) & 0x7F) << (7 * j)
    # Tokens of each list; the first posting may lack its gap field (4 tokens).
    first_tok = np.searchsorted(tok_end, np.concatenate(([0], bend[:-1])), side="left")
    ntok = np.diff(np.append(first_tok, len(tok_end)))
    short = ntok == 6 * dfs - 2
    if not np.all(short | (ntok == 6 * dfs)):
        return None
    if short.any():
        at = np.repeat(first_tok[short] + 2, 2)
        val = np.insert(val, at, np.tile(np.array([0x08, 0], dtype=np.int64), int(short.sum())))
        tok_len = np.insert(tok_len, at, 0)
    v = val.reshape(-1, 6)
    ln = tok_len.reshape(-1, 6)
    if not (np.all(v[:, 0] == 0x22) and np.all(v[:, 2] == 0x08) and np.all(v[:, 4] == 0x10)
            and np.all(ln[:, 0] == 1) and np.all(v[:, 1] == ln[:, 2:].sum(axis=1))):
        return None
    gaps, freqs = v[:, 3], v[:, 5]
    first = np.zeros(len(gaps), dtype=bool)
    first[np.concatenate(([0], np.cumsum(dfs)[:-1]))] = True
    if np.any(gaps[~first] < 1) or np.any(freqs < 1):
        return None  # repeated docids or tf 0: let the list-by-list path report it
    c = np.cumsum(gaps)
    base = c[first] - gaps[first]
    return c - np.repeat(base, dfs), freqs


def import_(ciff: str | os.PathLike, out: str | os.PathLike, *, codec: str = "base",
            block_size: int = 256, overwrite: bool = False, progress=None) -> dict:
    """Build a tierlab index from a CIFF file (through tierlab_index_writer).
    Returns the new index's manifest."""
    from tierlab.core.native import codec as find_codec

    find_codec(codec)
    with CiffFile(ciff) as cf:
        return _import(cf, out, codec, block_size, overwrite, progress)


def _import(cf: CiffFile, out, codec, block_size, overwrite, progress):
    from tierlab.engine.index import committing, leftovers, read_manifest
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    ciff, r = cf.path, cf.reader
    # Pass 1: where each postings list is and its term (lists may come in any order).
    lists = sorted((term, a, b) for term, _, a, _, b in cf.lists())
    for (t1, _, _), (t2, _, _) in zip(lists, lists[1:]):
        if t1 == t2:
            raise TierlabError(f"{ciff}: term {t1!r} has two postings lists")
    n_docs = cf.documents
    if not n_docs:  # no document count: one past the largest docid
        n_docs = 1 + max((int(_postings(r, a, b, ciff)[0][-1]) for _, a, b in lists), default=-1)
    p = ffi.new("tierlab_build_params *")
    lib.tierlab_build_params_default(p)
    cname = ffi.new("char[]", cstr(codec, "codec"))
    p.codec = cname
    p.block_size = block_size
    p.overwrite = 1 if overwrite else 0
    w = ffi.new("tierlab_index_writer **")
    err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
    digest = _digest(ciff)
    for line in leftovers(out):
        print(f"tierlab: removed {line}, left by a killed import", file=sys.stderr)
    rc = lib.tierlab_index_writer_open(os.fsencode(out), p, n_docs, os.fsencode(ciff.resolve()),
                                       digest.encode(), w, err, lib.TIERLAB_ERRMSG)
    if rc != 0:
        raise TierlabError(ffi.string(err).decode(errors="replace"))
    ok = False
    try:
        for i, (term, a, b) in enumerate(lists):
            dids, freqs = _postings(r, a, b, ciff)
            rc = lib.tierlab_index_writer_add(w[0], term, len(term),
                                              ffi.from_buffer("uint32_t[]", dids),
                                              ffi.from_buffer("uint32_t[]", freqs), len(dids))
            if rc != 0:
                raise TierlabError(f"{ciff}: " + ffi.string(
                    lib.tierlab_index_writer_error(w[0])).decode(errors="replace"))
            if progress:
                progress(i + 1, len(lists))
        ok = True
    finally:
        with signals.held(committing(out)) as h:  # the commit runs whole, and says so
            rc = lib.tierlab_index_writer_close(w[0], 1 if ok else 0, ffi.NULL, err,
                                                lib.TIERLAB_ERRMSG)
            if rc != 0 or not ok:
                h.note = None
    if rc != 0:
        raise TierlabError(ffi.string(err).decode(errors="replace"))
    return read_manifest(out)


def _digest(path: Path) -> str:
    """A digest of the CIFF file for the manifest and the build id."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"blake2b-64:{h.hexdigest()}"
