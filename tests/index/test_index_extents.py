"""Per-term extents (tierlab_index_term_extent(s), Index.extents) and the
lookup by term bytes (tierlab_index_find, Index.find): the extents tile the
files, add up to the manifest, and the bytes at an extent decode, with the
codec alone, to the term's postings — for every codec of the registry."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from index_helpers import codec_names, random_corpus, write  # noqa: E402

from tierlab.core import native  # noqa: E402
from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine.index import Index, build  # noqa: E402

HEADER = 128
DOC_BYTES = 300
SKIP_HEAD, SKIP_ENTRY = 8, 32


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    return write(d / "c.txt", random_corpus(seed=3, docs=3000, doc_bytes=DOC_BYTES))


def _read(path: Path, offset: int, n: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, n, offset)
    finally:
        os.close(fd)


def _decode_span(codec, data: bytes, postings: int, block: int) -> np.ndarray:
    """Decode a term's blocks back to back from its span alone: each block's
    length is what decode consumed, a delta codec's prev the last value."""
    out, pos, prev = [], 0, 0
    for b in range(-(-postings // block)):
        n = min(block, postings - b * block)
        # decode must not read past its block: give it only the rest of the span
        vals, used = codec.decode(data[pos:], n, prev)
        out.append(vals.copy())
        pos += used
        prev = int(vals[-1]) if codec.delta else 0
    assert pos == len(data), "the span holds exactly the term's blocks"
    return np.concatenate(out)


@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("codec", codec_names())
def test_extents_tile_sum_and_decode(tmp_path, corpus, codec, block):
    idx = tmp_path / "idx"
    m = build(corpus, idx, codec=codec, block_size=block, doc_bytes=DOC_BYTES).manifest
    with Index(idx) as ix:
        ext = ix.extents()
        assert list(ext.columns) == ["term", "postings", "blocks", "did_offset", "did_bytes",
                                     "freq_offset", "freq_bytes", "skip_offset", "skip_bytes"]
        assert len(ext) == m["terms"]
        assert list(ext.term) == sorted(ext.term, key=str.encode)
        # tiling: sorted by offset, each term starts where the previous ended,
        # the first after the header, the last at the end of the file
        for col, f in (("did", "dids.bin"), ("freq", "freqs.bin"), ("skip", "skip.bin")):
            e = ext.sort_values(f"{col}_offset")
            start = e[f"{col}_offset"].to_numpy(np.int64)
            end = start + e[f"{col}_bytes"].to_numpy(np.int64)
            assert start[0] == HEADER
            assert (start[1:] == end[:-1]).all(), f"{f}: gap or overlap between terms"
            assert end[-1] == (idx / f).stat().st_size == m["files"][f]
            assert (e.index.to_numpy() == np.arange(len(e))).all(), "dictionary order"
        assert int(ext.did_bytes.sum()) == m["did_block_bytes"]
        assert int(ext.freq_bytes.sum()) == m["freq_block_bytes"]
        assert int(ext.blocks.sum()) == m["blocks"]
        assert int(ext.postings.sum()) == m["postings"]
        p = ext.postings.to_numpy(np.int64)
        assert (ext.blocks.to_numpy(np.int64) == (p + block - 1) // block).all()
        assert (ext.skip_bytes == SKIP_HEAD + SKIP_ENTRY * (ext.blocks + 1)).all()
        assert (ext.did_bytes > 0).all() and (ext.freq_bytes > 0).all()

        dc = native.codec(codec)
        fc = dc.freq
        # the most frequent terms (many blocks), the rarest, and a spread between
        pick = sorted(set(ext.postings.nlargest(5).index) | set(ext.postings.nsmallest(5).index)
                      | set(range(0, len(ext), max(1, len(ext) // 40))))
        for i in pick:
            r = ext.iloc[i]
            assert ix.find(r.term) == i
            dids, freqs = ix.postings(i)
            got_d = _decode_span(dc, _read(idx / "dids.bin", int(r.did_offset),
                                           int(r.did_bytes)), int(r.postings), block)
            got_f = _decode_span(fc, _read(idx / "freqs.bin", int(r.freq_offset),
                                           int(r.freq_bytes)), int(r.postings), block)
            assert np.array_equal(got_d, dids), f"{codec}: DIDs of {r.term}"
            assert np.array_equal(got_f, freqs), f"{codec}: freqs of {r.term}"
            head = np.frombuffer(_read(idx / "skip.bin", int(r.skip_offset), 8), "<u4")
            assert tuple(head) == (r.postings, r.blocks)


def test_extent_single_and_batch_agree(tmp_path, corpus):
    idx = tmp_path / "idx"
    build(corpus, idx, codec="pfor-delta256", doc_bytes=DOC_BYTES)
    ffi, lib = native.ffi_lib()
    with Index(idx) as ix:
        ext = ix.extents()
        n = len(ext)
        one = ffi.new("tierlab_term_extent *")
        for i in (0, n // 2, n - 1):
            assert lib.tierlab_index_term_extent(ix._ix, i, one) == 0
            assert [getattr(one, k) for k in ext.columns[1:]] == [int(v) for v in
                                                                 ext.iloc[i, 1:]]
        part = ffi.new("tierlab_term_extent[]", 3)
        assert lib.tierlab_index_term_extents(ix._ix, n - 3, 3, part) == 3
        assert part[2].did_offset == int(ext.did_offset.iloc[-1])
        # out of range: refused, nothing read
        assert lib.tierlab_index_term_extent(ix._ix, n, one) == lib.TIERLAB_EINVAL
        assert lib.tierlab_index_term_extents(ix._ix, n - 2, 3, part) == lib.TIERLAB_EINVAL
        assert lib.tierlab_index_term_extents(ix._ix, n, 0, ffi.NULL) == 0
        assert lib.tierlab_index_term_extents(ix._ix, 2**64 - 1, 2, part) == lib.TIERLAB_EINVAL


def test_find(tmp_path, corpus):
    idx = tmp_path / "idx"
    build(corpus, idx, codec="base", doc_bytes=DOC_BYTES)
    with Index(idx) as ix:
        terms = ix.terms()
        assert [ix.find(t) for t in terms[:50]] == list(range(min(50, len(terms))))
        assert ix.find(terms[-1]) == len(terms) - 1
        assert ix.find("every") is not None and ix.lookup("every") is not None
        for missing in ("nosuchterm", "", terms[0][:-1] + "~", terms[-1] + "x"):
            assert missing not in terms
            assert ix.find(missing) is None
    with pytest.raises(TierlabError, match="closed"):
        ix.extents()


def test_corrupt_skip_record_is_refused(tmp_path, corpus):
    idx = tmp_path / "idx"
    build(corpus, idx, codec="vbyte-delta", doc_bytes=DOC_BYTES)
    with Index(idx) as ix:
        ext = ix.extents()
    # point the end sentinel of the last term's DID blocks past the file end
    # (the body of skip.bin is not covered by the header checksum)
    last = ext.iloc[-1]
    sentinel = int(last.skip_offset) + SKIP_HEAD + SKIP_ENTRY * int(last.blocks)
    with open(idx / "skip.bin", "r+b") as f:
        f.seek(sentinel + 8)
        f.write(np.uint64(1 << 40).tobytes())
    with Index(idx) as ix:
        with pytest.raises(TierlabError, match="corrupt skip list"):
            ix.extents()
