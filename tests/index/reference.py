"""An independent pure-Python reference of the index and its queries
(docs/engine.md; tierlab.h's index section): tokenising, postings, BM25 and top-k
with the DID tie-break, SINGLE and AND. It shares no code with the C kernels,
and it reads the index files with its own parser of kernels/formats/index.md,
so the format document is tested too. Blocks are decoded by default with the
pure-Python decoders of the codec documents (tests/format_decoders.py)."""
from __future__ import annotations

import math
import re
import struct
from collections import Counter
from pathlib import Path

K1 = 1.2
_TOKEN = re.compile(rb"[A-Za-z0-9]+")


def tokenize(line: bytes) -> list[bytes]:
    return [t.lower() for t in _TOKEN.findall(line)]


def documents(corpus: bytes, doc_bytes: int = 1024) -> list[bytes]:
    lines = corpus.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:doc_bytes] for line in lines]


def postings(corpus: bytes, doc_bytes: int = 1024) -> tuple[dict[bytes, list[tuple[int, int]]], int]:
    """term -> [(did, freq)] in DID order, and the number of documents."""
    out: dict[bytes, list[tuple[int, int]]] = {}
    docs = documents(corpus, doc_bytes)
    for did, doc in enumerate(docs):
        for term, f in Counter(tokenize(doc)).items():
            out.setdefault(term, []).append((did, f))
    return out, len(docs)


def idf(n_docs: int, n_t: int) -> float:
    return math.log(1.0 + (n_docs - n_t + 0.5) / (n_t + 0.5))


def weight(idf_t: float, f: int) -> float:
    x = float(f)
    return idf_t * (x * (K1 + 1.0)) / (x + K1)


def top_k(scored: dict[int, float], k: int) -> list[tuple[int, float]]:
    return sorted(scored.items(), key=lambda ds: (-ds[1], ds[0]))[:k]


def query(post: dict, n_docs: int, terms: list[bytes], k: int) -> list[tuple[int, float]]:
    """SINGLE for one term, AND for several; unknown terms give []."""
    lists = [post.get(t) for t in terms]
    if any(lst is None for lst in lists):
        return []
    maps = [dict(lst) for lst in lists]
    common = set(maps[0])
    for m in maps[1:]:
        common &= set(m)
    idfs = [idf(n_docs, len(lst)) for lst in lists]
    scored = {}
    for d in common:
        s = 0.0
        for i, m in enumerate(maps):
            s += weight(idfs[i], m[d])
        scored[d] = s
    return top_k(scored, k)


# ---- CRC-32C (Castagnoli; RFC 3720): the checksum of every region ----
def _crc_table() -> list[int]:
    out = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        out.append(c)
    return out


_CRC = _crc_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C of data appended to a message whose CRC is crc (0: start)."""
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ _CRC[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


# ---- an independent reader of the files (kernels/formats/index.md) ----
HDR = struct.Struct("<8sII32sQQQQQQIII12sQ")
DICT_ENTRY = struct.Struct("<QQQIIII")  # 40 bytes
SKIP_HEAD = struct.Struct("<II")        # 8 bytes
SKIP_ENTRY = struct.Struct("<IIQQII")   # 32 bytes


def read_header(path: Path) -> dict:
    raw = Path(path).read_bytes()[:128]
    (magic, version, block, codec, build_id, file_bytes, docs, terms, postings_, blocks,
     doc_bytes, kind, body_crc, _res, hhash) = HDR.unpack(raw)
    return dict(magic=magic, version=version, block_size=block,
                codec=codec.rstrip(b"\0").decode(), build_id=build_id, file_bytes=file_bytes,
                docs=docs, terms=terms, postings=postings_, blocks=blocks, doc_bytes=doc_bytes,
                kind=kind, body_crc=body_crc, header_hash=hhash)


def blocks(path: Path):
    """The file structure of an index directory (kernels/formats/index.md), in
    one place, every checksum of the format checked on the way (file headers
    and bodies, dictionary entries and terms, skip records, the running CRCs
    of a term's blocks): yields, per term in dictionary order, (term,
    postings, [block, ...], last DID) with each block a dict of n, prev,
    first_did, did (its encoded DID bytes) and freq (its encoded freq
    bytes), after checking the dictionary (sorted, prefixes), the skip
    records (counts, the sentinel, back-to-back blocks) and the tiling of
    the files."""
    path = Path(path)
    h = read_header(path / "dict.bin")
    B = h["block_size"]
    files = {f: (path / f).read_bytes() for f in ("dict.bin", "skip.bin", "dids.bin", "freqs.bin")}
    for f, raw in files.items():
        fh = read_header(path / f)
        assert fh["header_hash"] == xxh64(raw[:120]), f
        assert fh["body_crc"] == crc32c(raw[128:]), f
        assert fh["file_bytes"] == len(raw), f
    dct, skip, dids, freqs = (files[f] for f in ("dict.bin", "skip.bin", "dids.bin", "freqs.bin"))
    pool = 128 + DICT_ENTRY.size * h["terms"]
    prev_term = None
    ends = (128, 128, 128)  # where the previous term's skip record, DID and freq blocks end
    for i in range(h["terms"]):
        at = 128 + DICT_ENTRY.size * i
        prefix, skip_off, term_off, term_len, n_post, term_crc, entry_crc = DICT_ENTRY.unpack_from(
            dct, at)
        assert entry_crc == crc32c(dct[at:at + 36])
        term = dct[pool + term_off: pool + term_off + term_len]
        assert term_crc == crc32c(term)
        assert prefix == int.from_bytes(term[:8].ljust(8, b"\0"), "big")
        assert prev_term is None or prev_term < term  # sorted, distinct
        prev_term = term
        p, nb = SKIP_HEAD.unpack_from(skip, skip_off)
        assert p == n_post and nb == -(-p // B)
        rec_len = SKIP_HEAD.size + SKIP_ENTRY.size * (nb + 1)
        ents = [SKIP_ENTRY.unpack_from(skip, skip_off + 8 + SKIP_ENTRY.size * b)
                for b in range(nb + 1)]
        first, last_did, d_end, f_end, zero, rec_crc = ents[-1]
        assert first == 0xFFFFFFFF and zero == 0
        assert rec_crc == crc32c(skip[skip_off:skip_off + rec_len - 4])
        assert (skip_off, ents[0][2], ents[0][3]) == ends  # the files are tiled, no gaps
        ends = (skip_off + rec_len, d_end, f_end)
        out = []
        for b in range(nb):
            first, prev, doff, foff, did_upto, freq_upto = ents[b]
            dend, fend = ents[b + 1][2], ents[b + 1][3]
            # running CRCs: of the term's blocks 0 .. b
            assert did_upto == crc32c(dids[ents[0][2]:dend])
            assert freq_upto == crc32c(freqs[ents[0][3]:fend])
            out.append(dict(n=B if b < nb - 1 else p - B * (nb - 1), prev=prev, first_did=first,
                            did=dids[doff:dend], freq=freqs[foff:fend]))
        yield term, p, out, last_did
    assert ends == (len(skip), len(dids), len(freqs))


def python_decoder(codec: str):
    """decode(kind, data, n, prev) with the independent decoders of
    tests/format_decoders.py (kind 'did' or 'freq'); every block must use
    all its bytes."""
    import format_decoders as fd

    names = {"did": codec, "freq": fd.FREQ[codec]}

    def decode(kind, data, n, prev):
        vals, used = fd.decode(names[kind], data, n, prev)
        assert used == len(data), (kind, used, len(data))
        return vals
    return decode


def read_index(path: Path, decode=None) -> tuple[dict[bytes, list[tuple[int, int]]], dict]:
    """All postings of an index directory. decode(kind, data, n, prev) -> list of
    n ints, kind 'did' or 'freq'; by default the pure-Python decoders of the
    format documents (python_decoder), so nothing of the C kernels is used."""
    path = Path(path)
    h = read_header(path / "dict.bin")
    decode = decode or python_decoder(h["codec"])
    out = {}
    for term, p, blks, last_did in blocks(path):
        lst = []
        for blk in blks:
            d = decode("did", blk["did"], blk["n"], blk["prev"])
            f = decode("freq", blk["freq"], blk["n"], 0)
            assert d[0] == blk["first_did"]
            assert blk["prev"] == (lst[-1][0] if lst else 0)
            lst.extend(zip(d, f))
        assert last_did == lst[-1][0] and len(lst) == p
        out[term] = lst
    return out, h


# ---- XXH64 (the header checksum and the build digest; public xxHash spec) ----
_M = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                           9650029242287828579, 2870177450012600261)


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc, lane):
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed, (seed - _P1) & _M]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for j in range(4):
            h = ((h ^ _round(0, v[j])) * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def reseal(path: Path, **fields) -> None:
    """Rewrite header fields of an index file and fix its checksum (for tests
    that need a well-formed header with, say, another format version)."""
    raw = bytearray(Path(path).read_bytes())
    offsets = {"version": (8, "<I"), "block_size": (12, "<I"), "build_id": (48, "<Q"),
               "file_bytes": (56, "<Q"), "docs": (64, "<Q"), "terms": (72, "<Q"),
               "body_crc": (104, "<I")}
    for k, v in fields.items():
        off, fmt = offsets[k]
        struct.pack_into(fmt, raw, off, v)
    struct.pack_into("<Q", raw, 120, xxh64(bytes(raw[:120])))
    Path(path).write_bytes(bytes(raw))
