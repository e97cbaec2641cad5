"""`tierlab workload generate|stats` end to end on a tiny generated corpus."""
from __future__ import annotations

import json

import pytest

from tierlab.cli import main
from tierlab.engine.workload import read_queries


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    # ~1 MB: with the default thresholds all three classes are non-empty
    assert main(["corpus", "generate", "--docs", "1000", "--quiet", "--out", str(d / "s.txt")]) == 0
    return d / "s.txt"


@pytest.mark.parametrize("cls,qtype", [("H", "single"), ("M", "single"), ("L", "single"),
                                       ("h", "and"), ("L", "and")])
def test_every_class_and_type_with_the_defaults(synth, tmp_path, capsys, cls, qtype):
    out = tmp_path / "w.txt"
    assert main(["workload", "generate", "--corpus", str(synth), "--class", cls, "--type", qtype,
                 "--queries", "200", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"class {cls.upper()}" in text and "index blocks" in text
    qs = read_queries(out)
    assert len(qs) == 200 and all(len(q) == (2 if qtype == "and" else 1) for q in qs)
    doc = json.loads((tmp_path / "w.txt.json").read_text())
    assert doc["generator"]["documents"] == 1000
    assert (doc["generator"]["h_min_postings"], doc["generator"]["l_below_postings"]) == (7, 2)
    by_class = doc["stats"]["unique_terms_by_class"]
    assert by_class[cls.upper()] == doc["stats"]["unique_terms"]


def test_default_sizes_follow_the_reference(synth, tmp_path):
    assert main(["workload", "generate", "--corpus", str(synth), "--class", "H", "--quiet",
                 "--out", str(tmp_path / "w.txt")]) == 0
    assert len(read_queries(tmp_path / "w.txt")) == 1000


def test_terms_table_with_absolute_thresholds(synth, tmp_path):
    table = f"{synth}.terms.tsv"
    assert main(["workload", "generate", "--terms", table, "--h", "500", "--l", "3",
                 "--class", "M", "--queries", "10", "--quiet", "--out", str(tmp_path / "w.txt")]) == 0
    doc = json.loads((tmp_path / "w.txt.json").read_text())
    assert (doc["generator"]["h_min_postings"], doc["generator"]["l_below_postings"]) == (500, 3)


def test_empty_class_is_a_clear_error(synth, tmp_path, capsys):
    assert main(["workload", "generate", "--corpus", str(synth), "--class", "H", "--h", "5000",
                 "--out", str(tmp_path / "w.txt")]) == 2
    err = capsys.readouterr().err
    assert "class H is empty" in err and "postings >= 5000" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_stats_of_a_hand_written_workload(synth, tmp_path, capsys):
    first = (f"{synth}.terms.tsv")
    terms = [line.split("\t")[0] for line in open(first).read().splitlines()[1:4]]
    q = tmp_path / "mine.txt"
    q.write_text(f"# my queries\n{terms[0]}\n{terms[1]} AND {terms[2]}\n{terms[0]}\nunknownterm\n")
    assert main(["workload", "stats", str(q), "--corpus", str(synth), "--json",
                 "--out", str(tmp_path / "s.json")]) == 0
    doc = json.loads(capsys.readouterr().out)
    st = doc["stats"]
    assert (st["queries"], st["unique_terms"], st["repeated_queries"]) == (4, 4, 1)
    assert st["terms_not_in_table"] == 1
    assert json.loads((tmp_path / "s.json").read_text()) == doc
    q.write_text("Bad Query\n")
    assert main(["workload", "stats", str(q), "--corpus", str(synth)]) == 2
    assert "mine.txt:1: 'Bad' is not a term" in capsys.readouterr().err


def test_fractions_need_a_document_count(tmp_path, capsys):
    (tmp_path / "t.tsv").write_text("term\tpostings\toccurrences\na\t5\t5\n")
    assert main(["workload", "generate", "--terms", str(tmp_path / "t.tsv"), "--class", "H",
                 "--out", str(tmp_path / "w.txt")]) == 2
    assert "fraction of the documents" in capsys.readouterr().err
