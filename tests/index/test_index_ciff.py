"""CIFF export and import (tierlab.engine.ciff): a round trip through CIFF keeps
every posting and every query result; a CIFF file written by hand (the
protobuf bytes spelled out from CommonIndexFileFormat.proto) imports as
expected; malformed files are refused."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import reference as ref  # noqa: E402
from index_helpers import random_corpus, write  # noqa: E402

from tierlab.engine.ciff import CiffFile, export, import_, read_header  # noqa: E402
from tierlab.cli import main  # noqa: E402
from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine.index import Index, build  # noqa: E402


def test_round_trip(tmp_path):
    data = random_corpus(seed=9, docs=1200)
    c = write(tmp_path / "c.txt", data)
    src = build(c, tmp_path / "src").manifest
    info = export(tmp_path / "src", tmp_path / "x.ciff")
    assert info["postings_lists"] == src["terms"] and info["doc_records"] == src["documents"]
    h = read_header(tmp_path / "x.ciff")
    assert (h["version"], h["num_postings_lists"], h["num_doc_records"], h["total_docs"]) == \
        (1, src["terms"], src["documents"], src["documents"])
    assert h["total_terms_in_collection"] == src["tokens"] == info["terms_in_collection"]
    assert h["average_doclength"] == pytest.approx(src["tokens"] / src["documents"])
    m = import_(tmp_path / "x.ciff", tmp_path / "dst", block_size=128)
    assert m["input"] == "postings" and m["documents"] == src["documents"]
    want, _ = ref.read_index(tmp_path / "src")
    got, _ = ref.read_index(tmp_path / "dst")
    assert got == want
    with Index(tmp_path / "src") as a, Index(tmp_path / "dst") as b:
        for q in (["t0"], ["t3"], ["every", "rare"], ["t1", "t2", "t4"]):
            assert a.query(q)[0] == b.query(q)[0]
    # and back out again: the same CIFF after the header (whose description names the index)
    export(tmp_path / "dst", tmp_path / "y.ciff")
    x, y = (tmp_path / "x.ciff").read_bytes(), (tmp_path / "y.ciff").read_bytes()
    assert _after_header(x) == _after_header(y)


def _after_header(b: bytes) -> bytes:
    n, shift, i = 0, 0, 0
    while True:
        n |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return b[i + n:]


def _delim(msg: bytes) -> bytes:
    assert len(msg) < 128
    return bytes([len(msg)]) + msg


HEADER = _delim(bytes.fromhex("0801 1002 2002 2804"))  # version 1, 2 lists, 2 total, 4 docs
LIST_B = _delim(bytes.fromhex("0a0162 1002 1803 2204 0801 1001 2204 0802 1002"))  # b: 1, 3(tf 2)
LIST_A = _delim(bytes.fromhex("0a0161 1001 1801 2202 1001"))  # a: doc 0 (docid omitted), tf 1


def test_hand_written_ciff(tmp_path):
    f = tmp_path / "toy.ciff"
    f.write_bytes(HEADER + LIST_B + LIST_A)  # lists out of byte order: import sorts them
    m = import_(f, tmp_path / "idx")
    assert (m["documents"], m["terms"], m["postings"]) == (4, 2, 3)
    got, _ = ref.read_index(tmp_path / "idx")
    assert got == {b"a": [(0, 1)], b"b": [(1, 1), (3, 2)]}
    with Index(tmp_path / "idx") as ix:
        hits, _ = ix.query("b")
        assert [d for d, _ in hits] == [3, 1]  # tf 2 first


def test_ciff_file_streams_lists_and_records(tmp_path):
    c = write(tmp_path / "c.txt", random_corpus(seed=5, docs=400))
    build(c, tmp_path / "src")
    export(tmp_path / "src", tmp_path / "x.ciff")
    want, _ = ref.read_index(tmp_path / "src")
    with CiffFile(tmp_path / "x.ciff") as cf:
        chunks = list(cf.postings(chunk_postings=500))
        records = list(cf.doc_records())
        n_docs = cf.documents
    assert len(chunks) > 1 and not any(ch.parsed_slowly for ch in chunks)
    got = {}
    for ch in chunks:
        for term, e, n in zip(ch.terms, np.cumsum(ch.dfs).tolist(), ch.dfs.tolist()):
            got[term] = list(zip(ch.dids[e - n:e].tolist(), ch.freqs[e - n:e].tolist()))
    assert got == want
    lengths = [0] * n_docs
    for postings in want.values():
        for d, f in postings:
            lengths[d] += f
    assert records == [(d, str(d).encode(), lengths[d]) for d in range(n_docs)]


def test_ciff_file_reads_any_field_order(tmp_path):
    f = tmp_path / "odd.ciff"
    odd_a = _delim(bytes.fromhex("2204 0802 1003 0a0161"))  # a: its Posting before the term, no df
    f.write_bytes(HEADER + LIST_B + odd_a)
    with CiffFile(f) as cf:
        [ch] = list(cf.postings())
    assert ch.terms == [b"b", b"a"] and ch.parsed_slowly == 2  # the chunk, list by list
    assert (ch.dfs.tolist(), ch.dids.tolist(), ch.freqs.tolist()) == ([2, 1], [1, 3, 2], [1, 2, 3])


@pytest.mark.parametrize("case, match", [
    ("truncated", "past the end|truncated"),
    ("version", "CIFF version 2"),
    ("duplicate", "two postings lists"),
    ("docid-too-big", "must increase and be < 4"),
    ("empty", "empty file"),
])
def test_bad_ciff_refused(tmp_path, case, match):
    f = tmp_path / "bad.ciff"
    if case == "truncated":
        f.write_bytes((HEADER + LIST_B + LIST_A)[:-3])
    elif case == "version":
        f.write_bytes(_delim(bytes.fromhex("0802 1001 2001 2804")) + LIST_A)
    elif case == "duplicate":
        f.write_bytes(HEADER + LIST_A + LIST_A)
    elif case == "docid-too-big":
        f.write_bytes(_delim(bytes.fromhex("0801 1001 2001 2804")) +
                      _delim(bytes.fromhex("0a0161 1001 1801 2204 0809 1001")))
    else:
        f.write_bytes(b"")
    with pytest.raises(TierlabError, match=match):
        import_(f, tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    assert not list(tmp_path.glob("idx.tmp-*"))


def test_cli(tmp_path, capsys):
    c = write(tmp_path / "c.txt", random_corpus(seed=3, docs=300))
    build(c, tmp_path / "idx")
    assert main(["index", "export", str(tmp_path / "idx"), "--ciff", str(tmp_path / "i.ciff")]) == 0
    assert "postings lists" in capsys.readouterr().out
    assert main(["index", "import", "--ciff", str(tmp_path / "i.ciff"), "--out",
                 str(tmp_path / "back"), "--block-size", "128"]) == 0
    assert "documents" in capsys.readouterr().out
    assert main(["index", "import", "--ciff", str(tmp_path / "i.ciff"), "--out",
                 str(tmp_path / "back")]) == 2
    assert "exists" in capsys.readouterr().err


def test_export_never_writes_into_the_index(tmp_path):
    """`index export IDX --ciff IDX/dids.bin` would rename the CIFF over a file
    of the index it reads (the CLI fuzz drew it): refused, the index intact."""
    c = write(tmp_path / "c.txt", random_corpus(seed=2, docs=200))
    build(c, tmp_path / "idx")
    before = (tmp_path / "idx" / "dids.bin").read_bytes()
    for name in ("dids.bin", "new.ciff"):
        with pytest.raises(TierlabError, match="inside the index being exported"):
            export(tmp_path / "idx", tmp_path / "idx" / name)
    assert (tmp_path / "idx" / "dids.bin").read_bytes() == before
    assert not (tmp_path / "idx" / "new.ciff").exists()
