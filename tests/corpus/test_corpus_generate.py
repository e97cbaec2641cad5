"""The seeded generator (kernels/src/corpus/generate.c via tierlab.engine.corpus):
determinism, fixed-size documents, Heaps' and Zipf's laws, an exact term table."""
from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from tierlab.engine import corpus
from tierlab.engine.corpus import GenerateParams, generate, read_terms, tokenize
from tierlab.core.errors import TierlabError


def gen(path, **kw):
    return generate(path, GenerateParams(**kw), progress=False)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = gen(tmp_path / "a.txt", docs=300, seed=7)
    b = gen(tmp_path / "b.txt", docs=300, seed=7)
    c = gen(tmp_path / "c.txt", docs=300, seed=8)
    assert a["digest"] == b["digest"] == corpus.file_digest(tmp_path / "a.txt")
    assert (tmp_path / "a.txt.terms.tsv").read_bytes() == (tmp_path / "b.txt.terms.tsv").read_bytes()
    assert c["digest"] != a["digest"]


@pytest.mark.parametrize("doc_bytes", [16, 100, 1024])
def test_documents_are_filled_to_within_one_word(tmp_path, doc_bytes):
    m = gen(tmp_path / "c.txt", docs=400, doc_bytes=doc_bytes, seed=3)
    data = (tmp_path / "c.txt").read_bytes()
    assert data.endswith(b"\n")
    lines = data[:-1].split(b"\n")
    assert len(lines) == m["documents"] == 400
    assert m["bytes"] == len(data)
    for line in lines:
        assert re.fullmatch(rb"[a-z]+( [a-z]+)*", line)
        # the next word (at most 12 letters and a space) did not fit
        assert doc_bytes - 13 <= len(line) <= doc_bytes


def test_size_target_stops_after_the_document_that_reaches_it(tmp_path):
    m = gen(tmp_path / "c.txt", size_bytes=200_000)
    lines = (tmp_path / "c.txt").read_bytes().split(b"\n")[:-1]
    assert m["bytes"] >= 200_000
    assert m["bytes"] - len(lines[-1]) - 1 < 200_000


def test_term_table_matches_a_python_recount(tmp_path):
    m = gen(tmp_path / "c.txt", docs=200, doc_bytes=128, seed=11)
    occ, post = Counter(), Counter()
    for line in (tmp_path / "c.txt").read_bytes().splitlines():
        toks = tokenize(line)
        occ.update(toks)
        post.update(set(toks))
    df = read_terms(tmp_path / "c.txt.terms.tsv")
    got = {t: (p, o) for t, p, o in df.itertuples(index=False)}
    assert got == {t.decode(): (post[t], o) for t, o in occ.items()}
    assert m["vocabulary_terms"] == len(got)
    assert m["tokens"] == sum(occ.values())
    assert m["max_postings"] == max(post.values())


def test_ingesting_a_generated_corpus_gives_the_same_bytes_and_terms(tmp_path):
    from tierlab.engine.ingest import ingest

    g = gen(tmp_path / "g.txt", docs=500, seed=5)
    i = ingest([tmp_path / "g.txt"], tmp_path / "i.txt", progress=False)
    assert i["digest"] == g["digest"]
    a = read_terms(tmp_path / "g.txt.terms.tsv").sort_values("term").reset_index(drop=True)
    b = read_terms(tmp_path / "i.txt.terms.tsv").sort_values("term").reset_index(drop=True)
    assert a.equals(b)


def test_vocabulary_grows_like_heaps_law(tmp_path):
    v1 = gen(tmp_path / "a.txt", size_bytes=1_000_000)["vocabulary_terms"]
    v4 = gen(tmp_path / "b.txt", size_bytes=4_000_000)["vocabulary_terms"]
    beta = math.log(v4 / v1) / math.log(4)
    assert 0.35 < beta < 0.7, (v1, v4, beta)


@pytest.mark.parametrize("s", [0.8, 1.0, 1.3])
def test_fitted_zipf_exponent_is_close_to_the_parameter(tmp_path, s):
    m = gen(tmp_path / "c.txt", size_bytes=2_000_000, zipf_s=s, seed=2)
    assert m["zipf_exponent"] == pytest.approx(s, abs=0.03)
    assert m["zipf_fit"]["ranks_to"] > 1000


def test_single_zipf_law_when_tail_equals_head(tmp_path):
    m = gen(tmp_path / "c.txt", size_bytes=1_000_000, zipf_s=1.2, tail_s=1.2, knee=100,
            vocab_max=1_000_000)
    assert m["zipf_exponent"] == pytest.approx(1.2, abs=0.03)


def test_words_are_distinct_short_first_and_lower_case():
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    buf = ffi.new("char[]", lib.TIERLAB_CORPUS_MAX_WORD + 1)

    def word(r):
        n = lib.tierlab_corpus_word(r, buf)
        return ffi.string(buf).decode() if n else ""

    ranks = list(range(1, 20_001)) + list(range(313_000, 316_000)) + [2**31 - 5, 2**31]
    words = [word(r) for r in ranks]
    assert len(set(words)) == len(words)
    assert all(re.fullmatch(r"[a-z]{2,12}", w) for w in words)
    assert all(len(word(r)) == 2 for r in range(1, 81))
    assert word(0) == "" and word(2**31 + 1) == ""


def test_bad_parameters_are_clear_errors(tmp_path):
    with pytest.raises(TierlabError, match="doc-bytes"):
        gen(tmp_path / "c.txt", docs=10, doc_bytes=8)
    with pytest.raises(TierlabError, match="knee"):
        gen(tmp_path / "c.txt", docs=10, knee=100, vocab_max=50)
    with pytest.raises(TierlabError, match="zipf-s"):
        gen(tmp_path / "c.txt", docs=10, zipf_s=0)
    (tmp_path / "file").write_text("")
    with pytest.raises(TierlabError, match="cannot create"):
        gen(tmp_path / "file" / "c.txt", docs=10)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_missing_output_directories_are_created(tmp_path):
    gen(tmp_path / "a" / "b" / "c.txt", docs=10)
    assert (tmp_path / "a" / "b" / "c.txt").exists()


def test_ctrl_c_leaves_nothing_behind(tmp_path, monkeypatch):
    import tqdm

    def interrupt(self, n=1):
        raise KeyboardInterrupt

    monkeypatch.setattr(tqdm.tqdm, "update", interrupt)
    # 9 MB: the progress callback runs (every 4 MiB) while documents are written
    with pytest.raises(KeyboardInterrupt):
        gen(tmp_path / "c.txt", size_bytes=9_000_000)
    assert list(tmp_path.iterdir()) == []
