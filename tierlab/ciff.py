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
"""
from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

import numpy as np

from . import __version__
from .errors import TierlabError

CIFF_VERSION = 1


# ---- encoding ----

def _varint(n: int) -> bytes:
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


def _postings_bytes(dids: np.ndarray, freqs: np.ndarray) -> bytes:
    """The repeated Posting fields (tag 4) of one list, vectorised: per
    posting 0x22 LEN [0x08 gap] 0x10 tf, the gap field omitted when 0."""
    gaps = np.diff(dids.astype(np.int64), prepend=0)
    g, gl = _varint_columns(gaps)
    t, tl = _varint_columns(freqs)
    has_g = gaps > 0
    n = len(dids)
    m = np.zeros((n, 14), dtype=np.uint8)
    keep = np.zeros((n, 14), dtype=bool)
    m[:, 0] = 0x22
    m[:, 1] = (has_g * (1 + gl) + 1 + tl).astype(np.uint8)  # < 128: one byte
    m[:, 2] = 0x08
    m[:, 3:8] = g
    m[:, 8] = 0x10
    m[:, 9:14] = t
    keep[:, 0:2] = True
    keep[:, 2] = has_g
    keep[:, 3:8] = has_g[:, None] & (np.arange(5) < gl[:, None])
    keep[:, 8] = True
    keep[:, 9:14] = np.arange(5) < tl[:, None]
    return m[keep].tobytes()


def _delimited(msg: bytes) -> bytes:
    return _varint(len(msg)) + msg


def export(index: str | os.PathLike, out: str | os.PathLike, description: str | None = None,
           progress=None) -> dict:
    """Write the index as a CIFF file (atomically). Returns counts."""
    from .index import Index
    from .native import ffi_lib

    ffi, lib = ffi_lib()
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    with Index(index) as ix:
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
        cap = 1
        dids = np.zeros(cap, dtype=np.uint32)
        freqs = np.zeros(cap, dtype=np.uint32)
        err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
        cf_total = 0
        try:
            with open(tmp, "wb") as f:
                f.write(_delimited(header))
                for i in range(n_terms):
                    if lib.tierlab_index_term_at(ix._ix, i, ffi.cast("const char **", term_p),
                                                 term_len, post) != 0:
                        raise TierlabError(f"{index}: corrupt dictionary entry {i}")
                    term = ffi.buffer(term_p[0], term_len[0])[:]
                    p = int(post[0])
                    if p > cap:
                        cap = max(p, 2 * cap)
                        dids = np.zeros(cap, dtype=np.uint32)
                        freqs = np.zeros(cap, dtype=np.uint32)
                    got = lib.tierlab_index_postings(ix._ix, i, ffi.from_buffer("uint32_t[]", dids),
                                                     ffi.from_buffer("uint32_t[]", freqs), err,
                                                     lib.TIERLAB_ERRMSG)
                    if got < 0:
                        raise TierlabError(ffi.string(err).decode(errors="replace"))
                    d, fr = dids[:p], freqs[:p]
                    np.add.at(doclen, d, fr)
                    cf = int(fr.sum())
                    cf_total += cf
                    msg = (_field_bytes(1, term) + _field_varint(2, p) + _field_varint(3, cf)
                           + _postings_bytes(d, fr))
                    f.write(_delimited(msg))
                    if progress:
                        progress(i + 1, n_terms)
                for d in range(n_docs):
                    f.write(_delimited(_field_varint(1, d) + _field_bytes(2, str(d).encode())
                                       + _field_varint(3, int(doclen[d]))))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, out)
        finally:
            if tmp.exists():
                tmp.unlink()
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
        """Yield (field, wire type, value or (start, stop)) of one message."""
        while pos < end:
            key, pos = self.varint(pos, end)
            field, wire = key >> 3, key & 7
            if wire == 0:
                v, pos = self.varint(pos, end)
                yield field, wire, v
            elif wire == 2:
                n, pos = self.varint(pos, end)
                if pos + n > end:
                    raise TierlabError(f"{self.path}: field {field} runs past its message")
                yield field, wire, (pos, pos + n)
                pos += n
            elif wire == 1:
                if pos + 8 > end:
                    raise TierlabError(f"{self.path}: truncated fixed64 field")
                yield field, wire, bytes(self.buf[pos:pos + 8])
                pos += 8
            elif wire == 5:
                if pos + 4 > end:
                    raise TierlabError(f"{self.path}: truncated fixed32 field")
                yield field, wire, bytes(self.buf[pos:pos + 4])
                pos += 4
            else:
                raise TierlabError(f"{self.path}: unsupported protobuf wire type {wire} at byte {pos}")

    def message(self, pos: int) -> tuple[int, int]:
        n, pos = self.varint(pos, len(self.buf))
        if pos + n > len(self.buf):
            raise TierlabError(f"{self.path}: message at byte {pos} runs past the end of the file")
        return pos, pos + n


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
    for field, wire, v in r.fields(a, b):
        if field in names and wire == 0:
            h[names[field]] = v
        elif field == 7 and wire == 1:
            h["average_doclength"] = struct.unpack("<d", v)[0]
        elif field == 8 and wire == 2:
            h["description"] = bytes(r.buf[v[0]:v[1]]).decode(errors="replace")
    return h


def import_(ciff: str | os.PathLike, out: str | os.PathLike, *, codec: str = "base",
            block_size: int = 256, overwrite: bool = False, progress=None) -> dict:
    """Build a tierlab index from a CIFF file (through tierlab_index_writer).
    Returns the new index's manifest."""
    from .index import read_manifest
    from .native import codec as find_codec
    from .native import ffi_lib

    ffi, lib = ffi_lib()
    find_codec(codec)
    ciff = Path(ciff)
    try:
        f = open(ciff, "rb")
    except OSError as e:
        raise TierlabError(f"{ciff}: cannot open ({e.strerror or e})") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise TierlabError(f"{ciff}: empty file, not CIFF")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return _import(buf, ciff, out, codec, block_size, overwrite, progress, ffi, lib,
                           read_manifest)
        finally:
            buf.close()


def _import(buf, ciff, out, codec, block_size, overwrite, progress, ffi, lib, read_manifest):
    r = _Reader(buf, ciff)
    a, pos = r.message(0)
    h = _header(r, a, pos)
    if h["version"] != CIFF_VERSION:
        raise TierlabError(f"{ciff}: CIFF version {h['version']}, tierlab reads version "
                           f"{CIFF_VERSION} (or this is not a CIFF file)")
    n_lists = h["num_postings_lists"]
    # Pass 1: where each postings list is and its term (lists may come in any order).
    lists = []
    for _ in range(n_lists):
        a, b = r.message(pos)
        term = None
        for field, wire, v in r.fields(a, b):
            if field == 1 and wire == 2:
                term = bytes(buf[v[0]:v[1]])
                break
        if term is None:
            raise TierlabError(f"{ciff}: a PostingsList at byte {a} has no term")
        lists.append((term, a, b))
        pos = b
    n_docs = h["total_docs"] or h["num_doc_records"]
    lists.sort()
    for (t1, _, _), (t2, _, _) in zip(lists, lists[1:]):
        if t1 == t2:
            raise TierlabError(f"{ciff}: term {t1!r} has two postings lists")
    if not n_docs:  # no document count: one past the largest docid
        n_docs = 1 + max((int(_postings(r, a, b, ciff)[0][-1]) for _, a, b in lists), default=-1)
    p = ffi.new("tierlab_build_params *")
    lib.tierlab_build_params_default(p)
    cname = ffi.new("char[]", codec.encode())
    p.codec = cname
    p.block_size = block_size
    p.overwrite = 1 if overwrite else 0
    w = ffi.new("tierlab_index_writer **")
    err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
    digest = _digest(ciff)
    rc = lib.tierlab_index_writer_open(str(out).encode(), p, n_docs, str(ciff.resolve()).encode(),
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
        rc = lib.tierlab_index_writer_close(w[0], 1 if ok else 0, ffi.NULL, err,
                                            lib.TIERLAB_ERRMSG)
    if rc != 0:
        raise TierlabError(ffi.string(err).decode(errors="replace"))
    return read_manifest(out)


def _postings(r: _Reader, a: int, b: int, path) -> tuple[np.ndarray, np.ndarray]:
    dids, freqs = [], []
    for field, wire, v in r.fields(a, b):
        if field == 4 and wire == 2:
            d = t = 0
            for f2, w2, v2 in r.fields(v[0], v[1]):
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


def _digest(path: Path) -> str:
    """A digest of the CIFF file for the manifest and the build id."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"blake2b-64:{h.hexdigest()}"
