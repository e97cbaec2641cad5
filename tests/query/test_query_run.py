"""`tierlab query run|terms` end to end: the per-query table (the result
schema's `query` table, Parquet or CSV), the summary, the top-k TSV, the
page-cache drop and the placement report."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "index"))
import reference as ref  # noqa: E402
from index_helpers import random_corpus, write  # noqa: E402

from tierlab.cli import main  # noqa: E402
from tierlab.engine.index import build  # noqa: E402

from tierlab.traces import schema  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    data = random_corpus(seed=4, docs=1500)
    c = write(d / "c.txt", data)
    build(c, d / "idx")
    wl = d / "w.queries"
    wl.write_text("t0\nevery AND rare\nt1 t2\n# a comment\n\nnosuchterm\nt3\n")
    return d, ref.postings(data)


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_run_writes_table_summary_and_hits(setup, tmp_path, capsys, ext):
    d, (post, n) = setup
    out = tmp_path / f"r.{ext}"
    hits = tmp_path / "hits.tsv"
    rc = main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out", str(out),
               "--k", "5", "--passes", "2", "--drop-caches", "fadvise", "--results", str(hits),
               "--place", f"dict=dram,skip=pm:{tmp_path}", "--quiet"])
    assert rc == 0
    name, t = schema.read_table(out)
    assert name == "query" and list(t.columns) == schema.columns("query")
    assert list(t["query_type"]) == ["single", "and", "and", "single", "single"]
    assert [list(x) for x in t["terms"]] == [["t0"], ["every", "rare"], ["t1", "t2"],
                                             ["nosuchterm"], ["t3"]]
    assert list(t["unknown_terms"]) == [0, 0, 0, 1, 0]
    assert (t["latency_ns"] > 0).all()
    s = json.loads((tmp_path / "r.summary.json").read_text())
    assert set(t["run_id"]) == {s["run_id"]} and set(t["source"]) == {"measured"}
    if ext == "csv":  # a plain CSV: the terms space-separated
        plain = pd.read_csv(out, keep_default_na=False)
        assert list(plain["terms"]) == ["t0", "every rare", "t1 t2", "nosuchterm", "t3"]
    for key in ("qps", "latency_mean_ns", "latency_p50_ns", "latency_p99_ns", "latency_p999_ns"):
        assert s[key] > 0
    assert s["queries"] == 5 and s["unknown_queries"] == 1 and len(s["per_pass"]) == 2
    assert s["cache_drop"]["method"] == "posix_fadvise_dontneed"
    assert set(s["cache_drop"]["resident_bytes_after"]) == {"dict.bin", "skip.bin", "dids.bin",
                                                            "freqs.bin"}
    assert s["placement"]["dict"]["tier"] == "dram"
    assert "pm emulated" in s["placement"]["skip"]["detail"]
    assert s["machine"]["kernel"]
    rows = [line.split("\t") for line in hits.read_text().splitlines()[1:]]
    queries = [[b"t0"], [b"every", b"rare"], [b"t1", b"t2"], [b"nosuchterm"], [b"t3"]]
    for qid, q in enumerate(queries):
        want = ref.query(post, n, q, 5)
        got = [(int(r[2]), float(r[3])) for r in rows if int(r[0]) == qid]
        assert [g[0] for g in got] == [w[0] for w in want]
        assert [g[1] for g in got] == pytest.approx([w[1] for w in want], rel=1e-12)


def test_terms_prints_hits(setup, capsys):
    d, _ = setup
    assert main(["query", "terms", str(d / "idx"), "every", "AND", "rare", "--k", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("and every AND rare: ") and "did" in out


def test_run_errors(setup, tmp_path, capsys):
    d, _ = setup
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(tmp_path / "r.txt")]) == 2
    assert ".parquet or .csv" in capsys.readouterr().err
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(tmp_path / "r.csv"), "--place", "numa:77", "--quiet"]) == 2
    assert "no such NUMA node" in capsys.readouterr().err
