"""`tierlab workload from-log`: real query logs (TREC `N:query`, TSV, plain,
gzip) into workloads, on logs the tests write themselves."""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "index"))
from index_helpers import random_corpus, write  # noqa: E402

from tierlab.cli import main  # noqa: E402
from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine import querylog  # noqa: E402
from tierlab.engine.index import Index, build  # noqa: E402
from tierlab.engine.workload import Thresholds, read_queries  # noqa: E402

H, L = 200, 3  # posting-count thresholds: `every` is H, `rare` (5 documents) M


@pytest.fixture(scope="module")
def idx(tmp_path_factory):
    d = tmp_path_factory.mktemp("qlog")
    c = write(d / "c.txt", random_corpus(seed=7, docs=1200))
    build(c, d / "idx")
    with Index(d / "idx") as ix:
        ext = ix.extents()
    return d / "idx", dict(zip(ext["term"], ext["postings"].astype(int)))


QUERIES = ["every", "Rare EVERY", "t1, t2 -- t3", "nosuchterm t1", "every", "rare every",
           "t1 t1 t1", "zz\u00e9qq t5"]


def _log(path: Path, fmt: str, queries=QUERIES, gz: bool = False) -> Path:
    lines = []
    for i, q in enumerate(queries):
        lines.append({"trec": f"{i + 1}:{q}", "tsv": f"q{i}\t{q}", "plain": q}[fmt])
        if i == 2:
            lines.append("")  # blank lines are skipped but counted as lines
    data = ("\n".join(lines) + "\n").encode()
    if gz:
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("fmt,gz", [("trec", False), ("tsv", False), ("plain", False),
                                    ("trec", True)])
def test_formats_types_classes(idx, tmp_path, fmt, gz):
    ix, post = idx
    log = _log(tmp_path / ("log.gz" if gz else "log"), fmt, gz=gz)
    assert querylog.detect(log) == fmt
    out = tmp_path / "w.queries"
    doc = querylog.from_log(log, ix, out, h=H, l=L)
    assert read_queries(out) == [("every",), ("rare", "every"), ("t1", "t2", "t3"),
                                 ("nosuchterm", "t1"), ("every",), ("rare", "every"), ("t1",),
                                 ("zz", "qq", "t5")]
    rows = (tmp_path / "w.queries.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["line", "type", "class", "unknown", "rarest_postings", "terms"]
    rows = [r.split("\t") for r in rows[1:]]
    assert [r[0] for r in rows] == ["1", "2", "3", "5", "6", "7", "8", "9"]  # log lines
    assert [r[1] for r in rows] == ["single", "and", "and", "and", "single", "and", "single",
                                    "and"]
    thr = Thresholds.resolve(H, L)
    # the class of the rarest known term, `workload generate`'s thresholds
    assert rows[1][2] == thr.classify(min(post["rare"], post["every"])) == "M"
    assert rows[0][2] == "H"
    assert rows[2][2] == thr.classify(min(post["t1"], post["t2"], post["t3"]))
    assert rows[3][3] == "1" and rows[3][2] == thr.classify(post["t1"])  # unknown term counted
    assert rows[7][3] == "2"  # non-ASCII letters separate: zz, qq (not in the index)
    fl = doc["from_log"]
    assert fl["log_format"] == fmt and fl["log_queries"] == 8 and fl["kept"] == 8
    assert fl["with_unknown_terms"] == 2 and fl["h_min_postings"] == H
    assert fl["by_type_class"]["single:H"] == 3  # every, every, t1
    rep = doc["report"]
    assert rep["log"]["repeated_queries_share"] == pytest.approx(2 / 8)  # every, rare every
    assert rep["rp_generator"]["queries"] == rep["log"]["slots"] == 15
    saved = json.loads((tmp_path / "w.queries.json").read_text())
    assert saved["stats"]["queries"] == 8 and saved["report"] == rep


def test_bad_lines_name_log_line(idx, tmp_path):
    ix, _ = idx
    long_q = " ".join(f"t{i}" for i in range(17))
    qs = ["t1"] * 4100 + [long_q, "t2", "...", "t3"]
    log = _log(tmp_path / "log", "plain", qs)
    out = tmp_path / "w"
    with pytest.raises(TierlabError, match=rf"^{log}:4102: 17 terms: a query has at most 16"):
        querylog.from_log(log, ix, out)  # 4,102: the blank line after the third query
    assert not out.exists()
    doc = querylog.from_log(log, ix, out, skip_bad=True)
    assert doc["from_log"]["bad"] == {"not_utf8": 0, "malformed": 0, "no_terms": 1,
                                      "too_many_terms": 1}
    assert doc["from_log"]["kept"] == 4102
    doc = querylog.from_log(log, ix, out, max_terms=16, skip_bad=True)
    assert doc["from_log"]["cut"] == 1 and doc["from_log"]["bad"]["too_many_terms"] == 0
    assert len(read_queries(out)[4100]) == 16
    trec = tmp_path / "t.log"
    trec.write_bytes(b"1:every\n2:rare\nnot a trec line\n")
    with pytest.raises(TierlabError, match=rf"^{trec}:3: not a TREC"):
        querylog.from_log(trec, ix, out, fmt="trec")
    utf = tmp_path / "u.log"
    utf.write_bytes(b"every\nrare \xff\xfe\n")
    with pytest.raises(TierlabError, match=rf"^{utf}:2: invalid UTF-8 at byte 6"):
        querylog.from_log(utf, ix, out)


def test_filters(idx, tmp_path):
    ix, _ = idx
    log = _log(tmp_path / "log", "trec")
    out = tmp_path / "w"
    doc = querylog.from_log(log, ix, out, known_only=True, h=H, l=L)
    assert doc["from_log"]["filtered"]["unknown_terms"] == 2 and doc["from_log"]["kept"] == 6
    doc = querylog.from_log(log, ix, out, qtype="single", h=H, l=L)
    assert set(read_queries(out)) == {("every",), ("t1",)}
    doc = querylog.from_log(log, ix, out, classes=["M"], h=H, l=L)
    assert read_queries(out) == [("rare", "every"), ("rare", "every")]
    with pytest.raises(TierlabError, match="no queries kept"):
        querylog.from_log(log, ix, out, classes=["L"], qtype="single", h=H, l=L)
    with pytest.raises(TierlabError, match="--max-terms must be 1..16"):
        querylog.from_log(log, ix, out, max_terms=17)


def test_repetition_and_popularity():
    qs = [("a",), ("b", "a"), ("a",), ("a", "b"), ("c",)]
    assert querylog.repetition(qs) == pytest.approx(2 / 5)
    rep = querylog.popularity_report(qs, rp=0.5, seed=1)
    assert rep["log"]["terms"] == 3 and rep["log"]["slots"] == 7
    assert rep["log"]["top_share"]["0.1"] == pytest.approx(4 / 7)  # `a` of a, b, c
    assert rep["log"]["curve"][-1] == [3, 1, 1.0]
    gen = rep["rp_generator"]
    assert gen["queries"] == 7 and gen["rp"] == 0.5 and gen["curve"][-1][2] == 1.0


def test_cli_report_and_plot(idx, tmp_path, capsys):
    ix, _ = idx
    log = _log(tmp_path / "log.gz", "tsv", gz=True)
    out, png = tmp_path / "w.queries", tmp_path / "pop.png"
    rc = main(["workload", "from-log", str(log), "--index", str(ix), "--out", str(out),
               "--plot", str(png), "--h", str(H), "--l", str(L), "--quiet"])
    assert rc == 0 and png.read_bytes()[:4] == b"\x89PNG"
    assert capsys.readouterr().out == ""
    main(["workload", "from-log", str(log), "--index", str(ix), "--out", str(out)])
    text = capsys.readouterr().out
    assert "8 of 8 queries (tsv log" in text and "repeated queries" in text
    bad = _log(tmp_path / "bad", "plain", ["every", "..."])
    assert main(["workload", "from-log", str(bad), "--index", str(ix), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: no terms" in err and "Traceback" not in err


def test_query_run_names_the_line_of_an_overlong_query(idx, tmp_path, capsys):
    """`query run` refuses a 17-term query at its file line, not at a position
    inside a batch (the TREC log case of issue 24)."""
    ix, _ = idx
    w = tmp_path / "w.queries"
    w.write_text("t1\n" * 4100 + " ".join(f"t{i}" for i in range(17)) + "\n")
    rc = main(["query", "run", str(ix), str(w), "--out", str(tmp_path / "r.csv"), "--quiet"])
    assert rc == 2
    assert f"{w}:4101: 17 terms: a query has at most 16" in capsys.readouterr().err
