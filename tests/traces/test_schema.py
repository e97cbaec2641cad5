"""The result schema: golden column list, checked writes and reads."""
import pandas as pd
import pytest

from tierlab.core.errors import TierlabError
from tierlab.traces import schema

# Golden: changing a column must be a deliberate act (bump schema_version).
GOLDEN_V2 = {
    "query": ["run_id", "source", "query_id", "query_type", "query_class", "terms", "latency_ns",
              "postings_scored", "blocks_total", "blocks_decoded", "freq_blocks_decoded",
              "dict_bytes_read", "skip_bytes_read", "did_bytes_read", "freq_bytes_read",
              "results", "unknown_terms"],
    "term": ["run_id", "source", "query_id", "term_pos", "term", "postings", "blocks_total",
             "blocks_decoded"],
}


def test_golden_columns():
    assert schema.version() == 2
    for table, cols in GOLDEN_V2.items():
        assert schema.arrow_schema(table).names == cols


def _term_rows(source="measured"):
    return pd.DataFrame({"run_id": ["r1", "r1"], "source": [source] * 2, "query_id": [0, 0],
                         "term_pos": [0, 1], "term": ["apple", "pear"],
                         "postings": [700, 12], "blocks_total": [3, 1],
                         "blocks_decoded": [1, 1]})


def test_round_trip(tmp_path):
    p = schema.write_table("term", _term_rows(), tmp_path / "b.parquet")
    name, df = schema.read_table(p)
    assert name == "term"
    assert df["term"].tolist() == ["apple", "pear"]
    assert not list(tmp_path.glob(".*tmp*"))


def test_missing_column_is_named(tmp_path):
    with pytest.raises(TierlabError, match="missing \\['postings'\\]"):
        schema.write_table("term", _term_rows().drop(columns=["postings"]), tmp_path / "b.parquet")
    assert not (tmp_path / "b.parquet").exists()


def test_unknown_source_refused(tmp_path):
    with pytest.raises(TierlabError, match="unknown source"):
        schema.write_table("term", _term_rows("guess"), tmp_path / "b.parquet")


def test_foreign_version_names_both(tmp_path, monkeypatch):
    p = schema.write_table("term", _term_rows(), tmp_path / "b.parquet")
    monkeypatch.setitem(schema.spec(), "schema_version", 3)
    with pytest.raises(TierlabError, match="schema version 2, this tierlab knows version 3"):
        schema.read_table(p)


def test_not_parquet(tmp_path):
    p = tmp_path / "x.parquet"
    p.write_text("hello")
    with pytest.raises(TierlabError, match="not a readable Parquet"):
        schema.read_table(p)
