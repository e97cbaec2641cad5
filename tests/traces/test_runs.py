"""A measured query run written as a trace: the tables agree with each other,
the run's --out table is the trace's query table, and all pass the schema
check on the way back."""
import pandas as pd
import pytest

from tierlab.cli import main
from tierlab.core.errors import TierlabError
from tierlab.traces import schema
from tierlab.traces.runs import read_trace


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    c, idx, wl = d / "c.txt", d / "idx", d / "w.txt"
    assert main(["corpus", "generate", "--docs", "400", "--out", str(c), "--quiet"]) == 0
    assert main(["index", "build", str(c), "--codec", "pfor-delta256", "--out", str(idx),
                 "--quiet"]) == 0
    assert main(["workload", "generate", "--corpus", str(c), "--class", "M", "--type", "and",
                 "--queries", "50", "--out", str(wl), "--quiet"]) == 0
    assert main(["query", "run", str(idx), str(wl), "--out", str(d / "r.parquet"),
                 "--trace", str(d / "trace"), "--quiet"]) == 0
    return d


def test_tables_agree(traced_run):
    t = read_trace(traced_run / "trace")
    run, query, term = t["run"], t["query"], t["term"]
    assert len(run) == 1 and run.codec[0] == "pfor-delta256" and run.queries[0] == 50
    assert len(query) == 50 and set(query.query_class) == {"M"}
    assert set(query.run_id) == {run.run_id[0]} and set(term.run_id) == {run.run_id[0]}
    assert len(term) == sum(len(x) for x in query.terms)
    blocks = term.groupby("query_id").blocks_decoded.sum()
    assert (blocks.to_numpy() == query.blocks_decoded.to_numpy()).all()
    # --out holds the same query table as the trace
    name, plain = schema.read_table(traced_run / "r.parquet")
    assert name == "query"
    pd.testing.assert_frame_equal(plain, query)


def test_inspect_prints_the_headline(traced_run, capsys):
    assert main(["trace", "inspect", str(traced_run / "trace")]) == 0
    out = capsys.readouterr().out
    assert "QPS" in out and "query: 50 rows" in out


def test_not_a_trace(tmp_path):
    with pytest.raises(TierlabError, match="no trace tables"):
        read_trace(tmp_path)
    assert main(["trace", "inspect", str(tmp_path / "missing.parquet")]) == 2
