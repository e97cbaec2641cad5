"""The result schema: golden column list, checked writes and reads (Parquet
and CSV), and reading tables of an older schema version."""
import csv
import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from tierlab.core.errors import TierlabError
from tierlab.traces import schema

# Golden: changing a column must be a deliberate act (bump schema_version).
# v3 added the table validation; the tables of v2 are unchanged.
GOLDEN_V3 = {
    "query": ["run_id", "source", "query_id", "query_type", "query_class", "terms", "latency_ns",
              "postings_scored", "blocks_total", "blocks_decoded", "freq_blocks_decoded",
              "dict_bytes_read", "skip_bytes_read", "did_bytes_read", "freq_bytes_read",
              "results", "unknown_terms"],
    "term": ["run_id", "source", "query_id", "term_pos", "term", "postings", "blocks_total",
             "blocks_decoded"],
    "validation": [
        "config", "policy", "device", "query_type", "query_class", "rp", "cores", "cache_bytes",
        "segment_bytes", "lookahead", "dram_budget_bytes", "cell", "row_id",
        "qps_measured", "latency_p99_ns_measured", "page_cache_miss_rate_measured",
        "segment_cache_miss_rate_measured", "storage_bytes_read_measured",
        "worker_stall_ns_measured", "query_wait_ns_measured", "latency_mean_ns_measured",
        "qps_model", "latency_p99_ns_model", "page_cache_miss_rate_model",
        "segment_cache_miss_rate_model", "storage_bytes_read_model", "worker_stall_ns_model",
        "query_wait_ns_model", "latency_mean_ns_model", "bistable", "qps_head_start",
        "latency_p99_ns_head_start", "page_cache_miss_rate_head_start",
        "segment_cache_miss_rate_head_start", "qps_rel_error", "latency_p99_ns_rel_error",
        "latency_mean_ns_rel_error", "storage_bytes_read_rel_error", "page_cache_miss_rate_pp",
        "segment_cache_miss_rate_pp", "diagnosis"],
    # v4 (memory traces, traces/memtrace.md)
    "memtrace_summary": ["trace_id", "codec", "placement", "k", "every", "max_bytes", "sampling",
                         "query_id", "query_type", "region", "accesses", "loads", "stores",
                         "bytes", "distinct_lines", "stack_accesses", "line_bytes"],
    # v5 (issue 22) added sim_run
    "sim_run": ["run_id", "source", "started_at", "tierlab_version", "spec", "tier", "stream",
                "mode", "region", "reads", "writes", "read_latency_mean_ns",
                "read_latency_p50_ns", "read_latency_p99_ns", "total_ns",
                "read_bandwidth_bytes_per_s", "wall_s", "params"],
}
KEYS = {"run": ["run_id"], "query": ["run_id", "query_id"],
        "term": ["run_id", "query_id", "term_pos"], "cache_run": ["run_id"],
        "cache_query": ["run_id", "core", "query_id"],
        "cache_timeline": ["run_id", "core", "t_ns"], "validation": ["row_id"],
        "memtrace_summary": ["trace_id", "query_id", "region"],
        "sim_run": ["run_id", "mode", "region"]}


def test_golden_columns():
    assert schema.version() == 5
    for table, cols in GOLDEN_V3.items():
        assert schema.arrow_schema(table).names == cols
    assert {t: schema.key(t) for t in schema.tables()} == KEYS


def test_validation_pairs_the_compared_cache_run_columns():
    """The validation table is analysis/validation.py's pair() of two cache_run
    tables: its parameters and metrics are cache_run's, of the same types."""
    run = schema.arrow_schema("cache_run")
    val = schema.arrow_schema("validation")
    for k in schema.RUN_PARAMS:
        assert k in val.names
    for k in schema.RUN_METRICS:
        for side in ("measured", "model"):
            assert val.field(f"{k}_{side}").type == run.field(k).type
    assert "source" not in val.names  # a pair of two sources


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


def _with_version(tmp_path, name, data, v, monkeypatch):
    """A table written by a tierlab whose schema is version v."""
    with monkeypatch.context() as m:
        m.setitem(schema.spec(), "schema_version", v)
        return schema.write_table(name, data, tmp_path / f"v{v}.parquet")


def test_newer_version_names_both(tmp_path, monkeypatch):
    v = schema.version()
    p = _with_version(tmp_path, "term", _term_rows(), v + 1, monkeypatch)
    with pytest.raises(TierlabError, match=f"schema version {v + 1}, this tierlab knows "
                       f"version {v}"):
        schema.read_table(p)


def test_older_version_of_an_unchanged_table_is_read(tmp_path, monkeypatch):
    p = _with_version(tmp_path, "term", _term_rows(), 2, monkeypatch)
    assert pq.read_schema(p).metadata[b"tierlab.schema_version"] == b"2"
    name, df = schema.read_table(p)
    assert name == "term" and df["postings"].tolist() == [700, 12]


def test_older_version_of_a_changed_table_names_both(tmp_path, monkeypatch):
    p = _with_version(tmp_path, "term", _term_rows(), 2, monkeypatch)
    cols = schema.spec()["tables"]["term"]["columns"]
    monkeypatch.setitem(schema.spec()["tables"]["term"], "columns",
                        cols + [{"name": "bytes", "type": "int64", "desc": "new in v3"}])
    with pytest.raises(TierlabError, match="table 'term' of schema version 2 differs from "
                       f"version {schema.version()}.*missing bytes"):
        schema.read_table(p)


def test_not_parquet(tmp_path):
    p = tmp_path / "x.parquet"
    p.write_text("hello")
    with pytest.raises(TierlabError, match="not a readable Parquet"):
        schema.read_table(p)


def test_csv_round_trip(tmp_path):
    q = {"run_id": ["r1"] * 2, "source": ["measured"] * 2, "query_id": [0, 1],
         "query_type": ["single", "and"], "query_class": ["H", ""],
         "terms": [["apple"], ["apple", "pear"]],
         **{c: [3, 4] for c in schema.columns("query")[6:]}}
    p = schema.write_table("query", q, tmp_path / "q.csv")
    assert p.read_text().splitlines()[2].startswith("r1,measured,1,and,,apple pear,")
    name, df = schema.read_table(p)
    assert name == "query" and [list(x) for x in df["terms"]] == [["apple"], ["apple", "pear"]]
    _, want = schema.read_table(schema.write_table("query", q, tmp_path / "q.parquet"))
    pd.testing.assert_frame_equal(df, want)


def test_csv_floats_nan_and_columns_in_any_order(tmp_path):
    cols = schema.columns("cache_timeline")
    rows = pd.DataFrame({c: [1, 2] for c in cols}).assign(source="model")
    p = tmp_path / "t.csv"
    rows[list(reversed(cols))].to_csv(p, index=False)
    assert schema.read_table(p)[0] == "cache_timeline"
    row = {f.name: "x" if str(f.type) == "string" else 1
           for f in schema.arrow_schema("cache_run")}
    row.update(source="model", qps=1 / 3, segment_cache_miss_rate=math.nan, rp=math.inf,
               params='{"a": 1, "b": "two"}')
    p = schema.write_table("cache_run", {k: [v] for k, v in row.items()}, tmp_path / "c.csv")
    _, df = schema.read_table(p)
    assert df["qps"][0] == 1 / 3 and math.isnan(df["segment_cache_miss_rate"][0])
    assert df["rp"][0] == math.inf and df["params"][0] == '{"a": 1, "b": "two"}'
    with open(p, newline="") as f:
        assert schema.csv_row("cache_run", row) == list(csv.reader(f))[1]


def test_csv_that_is_no_table_says_what_differs(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("run_id,source,query_id,colour\nr,measured,0,red\n")
    with pytest.raises(TierlabError, match=f"header is no table of schema v{schema.version()} "
                       "\\(nearest "):
        schema.read_table(p)
    p.write_text("")
    with pytest.raises(TierlabError, match="empty"):
        schema.read_table(p)
    _term_rows().assign(postings=["many", "12"]).to_csv(p, index=False)
    with pytest.raises(TierlabError, match="line 2: column postings \\(int64\\) holds 'many'"):
        schema.read_table(p)


def test_csv_refuses_a_word_with_a_space(tmp_path):
    q = {c: [0] for c in schema.columns("query")}
    q.update(run_id=["r"], source=["measured"], query_type=["and"], query_class=[""],
             terms=[["new york"]])
    with pytest.raises(TierlabError, match="words without spaces"):
        schema.write_table("query", q, tmp_path / "q.csv")
    assert not list(tmp_path.iterdir())
