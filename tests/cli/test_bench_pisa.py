"""`tierlab bench pisa` end to end on a tiny corpus, the CIFF -> PISA
converter, and the handling of bad input. The runs that need PISA skip when
the pyterrier-pisa wheel is not installed."""
import json
import struct

import numpy as np
import pytest

from tierlab.experiments.bench import pisa as bench
from tierlab.experiments.bench import pisa_engine as pe
from tierlab.engine.ciff import (_decode_canonical, _delimited, _field_bytes, _field_varint,
                          _postings_bytes, _varint)
from tierlab.core.errors import TierlabError

PISA_OK, PISA_WHY = pe.available()
needs_pisa = pytest.mark.skipif(not PISA_OK, reason=f"PISA not usable: {PISA_WHY}")
COMBOS = [(t, c) for t in ("single", "and") for c in ("H", "M", "L")]


@pytest.fixture(scope="module")
def run(run_bench):
    if not PISA_OK:
        pytest.skip(f"PISA not usable: {PISA_WHY}")
    return run_bench("pisa", "--size", "2MB", "--queries-h", "20", "--queries-m", "30",
                     "--queries-l", "30", "--reps", "2", "--check-queries", "10")


def test_json_shape(run):
    rc, doc, _ = run
    assert rc == 0 and doc["errors"] == []
    assert doc["benchmark"] == "pisa"
    c = doc["config"]
    assert c["codec"] == "pfor-delta256" and c["k"] == [1024, 10]
    assert c["pisa_encodings"] == ["block_simdbp", "block_optpfor"]
    assert c["bm25"]["k1"] == 1.2 and c["bm25"]["b"] == 0.0
    assert c["and_algorithm"] == "ranked_and" and c["single_algorithm"] == "ranked_or"
    assert doc["pisa"]["version"] and doc["pisa"]["conversion"]["postings"] == doc["corpus"]["postings"]
    for enc in c["pisa_encodings"]:
        assert doc["pisa"]["encodings"][enc]["index_bytes"] > 0
    assert doc["ciff"]["bytes"] > 0
    assert len(doc["tierlab_native"]["blake2b_64"]) == 16
    got = {(r["type"], r["class"], r["k"]) for r in doc["results"]}
    assert got == {(t, cl, k) for t, cl in COMBOS for k in (1024, 10)}
    engines = {"tierlab:pfor-delta256", "tierlab:base", "pisa:block_simdbp", "pisa:block_optpfor"}
    for r in doc["results"]:
        assert set(r["engines"]) == engines
        for e in r["engines"].values():
            assert e["ms_per_query"] > 0 and len(e["reps_ms"]) == 2
        for p in ("pisa:block_simdbp", "pisa:block_optpfor"):
            assert r["ratio"][p]["raw"] > 0
        assert "decode_share" in r["split"]
    assert {(t["type"], t["class"]) for t in doc["targets"]} == {("and", "H"), ("single", "H")}
    assert {(x["type"], x["engine"]) for x in doc["calibration"]} >= {
        ("single", "pisa:block_simdbp"), ("and", "tierlab:pfor-delta256")}


def test_agreement(run):
    """Both engines return exactly their BM25 top-10 (ties aside); SINGLE ranks
    the same under both IDFs, so the DIDs agree up to ties."""
    _, doc, _ = run
    assert {(a["type"], a["class"]) for a in doc["agreement"]} == set(COMBOS)
    for a in doc["agreement"]:
        assert a["queries"] == 10 and a["k"] == 10
        assert a["tierlab_exact"] == 1.0 and a["pisa_exact"] == 1.0
        assert a["pisa_encodings_identical"] is True
        if a["type"] == "single":
            assert a["overlap_tie_aware_mean"] == 1.0
        assert 0 <= a["overlap_mean"] <= a["overlap_tie_aware_mean"] <= 1


def test_table_and_scratch(run):
    _, doc, out = run
    table = bench.format_table(doc)
    assert "pisa:block_simdbp" in table and "target AND H" in table
    assert [p.name for p in out.parent.iterdir()] == ["pisa.json"]
    bad = json.loads(json.dumps(doc))
    bad["errors"] = [{"stage": "agreement", "type": "and", "class": "H", "query": 3,
                      "error": "PISA top-10 differs from its BM25 recomputed from the postings"}]
    assert "ERRORS" in bench.format_table(bad)


@pytest.fixture(scope="module")
def on_files(tmp_path_factory, run_bench):
    """bench pisa on an existing index and two query files (one mixed)."""
    if not PISA_OK:
        pytest.skip(f"PISA not usable: {PISA_WHY}")
    from tierlab.engine.index import build

    d = tmp_path_factory.mktemp("pisa-files")
    (d / "c.txt").write_text("".join(f"every t{i % 7} t{i % 3}" + (" rare" if i % 50 == 0 else "")
                                     + "\n" for i in range(400)))
    build(d / "c.txt", d / "idx", codec="svbyte-delta")
    (d / "mixed.q").write_text("t1\nevery AND t2\nevery\nnosuchterm\n")
    (d / "and.q").write_text("every rare\nt1 t4\n")
    return run_bench("pisa", "--index", str(d / "idx"), "--workload", str(d / "mixed.q"),
                     "--workload", str(d / "and.q"), "--single-algorithm", "ranked_or",
                     "--single-algorithm", "block_max_wand", "--and-algorithm", "ranked_and",
                     "--and-algorithm", "block_max_ranked_and", "--pisa-encoding",
                     "block_simdbp", "--k", "10", "--reps", "1", "--target", "5")


def test_any_index_and_workloads(on_files):
    rc, doc, _ = on_files
    assert rc == 0 and doc["errors"] == []
    c = doc["config"]
    assert c["codec"] == "svbyte-delta" and c["split"] is False and c["index"]
    assert c["single_algorithms"] == ["ranked_or", "block_max_wand"]
    assert {(r["type"], r["class"], r["queries"]) for r in doc["results"]} == {
        ("single", "mixed.q", 3), ("and", "mixed.q", 1), ("and", "and.q", 2)}
    for r in doc["results"]:
        alg = "block_max_wand" if r["type"] == "single" else "block_max_ranked_and"
        assert set(r["engines"]) == {"tierlab:svbyte-delta", "pisa:block_simdbp",
                                     f"pisa:block_simdbp:{alg}"}
        b = r["best_pisa"]
        fastest = min((n for n in r["engines"] if n.startswith("pisa:")),
                      key=lambda n: r["engines"][n]["ms_per_query"])
        assert b["engine"] == fastest and b["target"] == 5
        assert b["ratio_raw"] == r["ratio"][fastest]["raw"]
        assert b["met"] == (b["ratio_raw"] <= 5)
    assert doc["corpus"]["documents"] == 400
    assert "best PISA engine per row" in bench.format_table(doc)


# ---- the converter ----

def _ciff(lists, n_docs, posting_bytes=None) -> bytes:
    """A CIFF file of (term, dids, freqs) lists; posting_bytes(dids, freqs)
    writes the Posting fields (default: the canonical encoder)."""
    enc = posting_bytes or (lambda d, f: _postings_bytes(np.array(d), np.array(f)))
    out = _delimited(_field_varint(1, 1) + _field_varint(2, len(lists)) + _field_varint(3, n_docs)
                     + _field_varint(4, len(lists)) + _field_varint(5, n_docs))
    for term, d, f in lists:
        out += _delimited(_field_bytes(1, term) + _field_varint(2, len(d))
                          + _field_varint(3, sum(f)) + enc(d, f))
    for d in range(n_docs):
        out += _delimited(_field_varint(1, d) + _field_bytes(2, f"doc{d}".encode())
                          + _field_varint(3, 7))
    return out


def _odd_postings(d, f) -> bytes:
    """Valid protobuf a canonical decoder cannot take: tf before docid, an
    explicit zero gap field, and an unknown fixed32 field."""
    out, last = b"", 0
    for did, tf in zip(d, f):
        body = (b"\x10" + _varint(tf) + b"\x08" + _varint(did - last)
                + b"\x1d" + struct.pack("<I", 7))
        out += b"\x22" + _varint(len(body)) + body
        last = did
    return out


def _lists(rng, n_docs=5000, n_terms=40):
    out = []
    for i in range(n_terms):
        n = int(rng.integers(1, 600))
        d = np.sort(rng.choice(n_docs, size=n, replace=False))
        if i % 3 == 0:
            d[0] = 0  # the first posting without a gap field
        d = np.unique(d)
        f = rng.integers(1, 300, size=len(d))
        out.append((f"t{i:03d}".encode(), d.tolist(), f.tolist()))
    return out


def _read_seqs(path) -> list[list[int]]:
    a = np.fromfile(path, dtype=np.uint32)
    out, i = [], 0
    while i < len(a):
        n = int(a[i])
        out.append(a[i + 1:i + 1 + n].tolist())
        i += 1 + n
    return out


def test_fast_decoder_matches_the_postings():
    rng = np.random.default_rng(7)
    lists = _lists(rng)
    lists.append((b"wide", [0, 2 ** 31 - 5], [1, 2 ** 20]))  # 5-byte varints
    buf = b"".join(_postings_bytes(np.array(d), np.array(f)) for _, d, f in lists)
    spans, pos = [], 0
    for _, d, f in lists:
        n = len(_postings_bytes(np.array(d), np.array(f)))
        spans.append((pos, pos + n, len(d)))
        pos += n
    got = _decode_canonical(np.frombuffer(buf, dtype=np.uint8), spans)
    assert got is not None
    dids, freqs = got
    assert dids.tolist() == [x for _, d, _ in lists for x in d]
    assert freqs.tolist() == [x for _, _, f in lists for x in f]
    # A non-canonical chunk is refused, not misread.
    odd = b"".join(_odd_postings(d, f) for _, d, f in lists[:3])
    spans, pos = [], 0
    for _, d, f in lists[:3]:
        n = len(_odd_postings(d, f))
        spans.append((pos, pos + n, len(d)))
        pos += n
    assert _decode_canonical(np.frombuffer(odd, dtype=np.uint8), spans) is None


@needs_pisa
def test_converter_canonical_and_odd_give_the_same_collection(tmp_path):
    rng = np.random.default_rng(3)
    lists = _lists(rng)
    (tmp_path / "a.ciff").write_bytes(_ciff(lists, 5000))
    (tmp_path / "b.ciff").write_bytes(_ciff(lists, 5000, _odd_postings))
    ra = pe.ciff_to_pisa(tmp_path / "a.ciff", tmp_path / "a")
    rb = pe.ciff_to_pisa(tmp_path / "b.ciff", tmp_path / "b")
    assert ra["lists_parsed_slowly"] == 0 and rb["lists_parsed_slowly"] == len(lists)
    for f in ("inv.docs", "inv.freqs", "inv.sizes", "fwd.terms", "fwd.documents"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    seqs = _read_seqs(tmp_path / "a" / "inv.docs")
    assert seqs[0] == [5000] and seqs[1:] == [d for _, d, _ in lists]
    assert _read_seqs(tmp_path / "a" / "inv.freqs") == [f for _, _, f in lists]
    assert _read_seqs(tmp_path / "a" / "inv.sizes") == [[7] * 5000]
    assert (tmp_path / "a" / "fwd.terms").read_text().split() == [t.decode() for t, _, _ in lists]
    # PISA finds the postings: a SINGLE query returns every posting of its term.
    o = pe.open_index(tmp_path / "a", "block_simdbp", k1=1.2, b=0.0)
    term, d, f = lists[5]
    _, counts, hits = pe.retrieve(o, "ranked_or", pe.pretokenised([(term.decode(),)]), 10_000,
                                  want_hits=True)
    assert counts.tolist() == [len(d)]
    assert sorted(int(name[3:]) for name, _ in hits[0]) == d


@needs_pisa
def test_converter_refuses_unsorted_terms(tmp_path):
    lists = [(b"b", [1], [1]), (b"a", [2], [1])]
    (tmp_path / "u.ciff").write_bytes(_ciff(lists, 3))
    with pytest.raises(TierlabError, match="byte order"):
        pe.ciff_to_pisa(tmp_path / "u.ciff", tmp_path / "u")


# ---- bad input ----

def test_missing_pisa_is_a_clear_error(tmp_path, bench_fails, monkeypatch):
    monkeypatch.setattr(pe, "_native", None)
    monkeypatch.setattr(pe, "find", lambda: (None, "pyterrier-pisa is not installed (test)"))
    assert "pyterrier-pisa is not installed" in bench_fails("pisa", "--size", "1MB")
    assert list(tmp_path.iterdir()) == []  # no scratch folder either


@pytest.mark.parametrize("args, words", [
    (["--codec", "nope"], "nope"),
    (["--reps", "0"], "--reps"),
    (["--pisa-encoding", "zip"], "--pisa-encoding"),
    (["--and-algorithm", "magic"], "--and-algorithm"),
    (["--size", "lots"], "--size"),
])
def test_bad_options_exit_2(bench_fails, args, words):
    assert words in bench_fails("pisa", *args)


def test_unknown_names_never_reach_pisa():
    with pytest.raises(TierlabError, match="unknown PISA encoding"):
        pe.open_index("/nonexistent", "zip", k1=1.2, b=0.0)
    with pytest.raises(TierlabError, match="unknown PISA algorithm"):
        pe.retrieve(None, "magic", [], 10)
