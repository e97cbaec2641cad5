"""`tierlab trace inspect` on what every writing command writes (tiny inputs):
each output is found, checked and summarised, every .parquet and .csv file a
command writes is a table of traces/schema.yaml, and a path without a table
is one line on stderr with exit status 2."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tierlab.cli import main
from tiny_inputs import SMALL_MODEL_SPEC, corpus_and_index
from tierlab.traces import schema
from tierlab.traces.read import find_tables

CACHE = {"cache_run", "cache_query", "cache_timeline"}
TRACE = {"run", "query", "term"}

MODEL = dict(SMALL_MODEL_SPEC, workload={"type": "and", "class": "H", "queries": 20})


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny corpus, its index, an H SINGLE workload and a cost table."""
    from tierlab.model import costs

    d = corpus_and_index(tmp_path_factory.mktemp("inputs"), docs=1500)
    assert main(["workload", "generate", "--corpus", str(d / "c.txt"), "--class", "H",
                 "--type", "single", "--queries", "20", "--rp", "0.5", "--quiet",
                 "--out", str(d / "w.queries")]) == 0
    costs.Costs(single=costs.Coefficients(1000.0, 300.0, 5.0),
                and_=costs.Coefficients(2000.0, 300.0, 40.0), codec="pfor-delta256",
                block_size=256).save(d / "costs.json")
    return d


def _yaml(path: Path, doc: dict) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def query_out_parquet(d, out):
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(out / "q.parquet"), "--quiet"]) == 0
    return [(out / "q.parquet", {"query"})]


def query_out_csv(d, out):
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(out / "q.csv"), "--quiet"]) == 0
    return [(out / "q.csv", {"query"})]


def query_trace(d, out):
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(out / "q.parquet"), "--trace", str(out / "q.trace"), "--quiet"]) == 0
    # the folder: --out's table and the trace's, the same rows
    return [(out, TRACE), (out / "q.trace", TRACE)]


def apcache_run(d, out):
    assert main(["apcache", "run", "--index", str(d / "idx"), "--workload", str(d / "w.queries"),
                 "--out", str(out / "apc"), "--config", "hybrid-prefetch", "--device",
                 "nvme-p4800x", "--cache-bytes", "64KiB", "--quiet"]) == 0
    return [(out / "apc", CACHE)]


def model_run(d, out):
    assert main(["model", "run", _yaml(out / "m.yaml", MODEL), "--out", str(out / "m")]) == 0
    return [(out / "m", CACHE)]


def model_sweep(d, out):
    grid = dict(MODEL, config=["base", "hybrid-prefetch"], workers=1)
    assert main(["model", "sweep", _yaml(out / "g.yaml", grid), "--out", str(out / "sw"),
                 "--no-progress"]) == 0
    return [(out / "sw", CACHE), (out / "sw" / "cache_run.csv", {"cache_run"})]


def model_reference(d, out, monkeypatch):
    """The reference's writer (three sweeps into OUT/main, lookahead,
    multicore) with tiny grids instead of its 700 reference-scale cells."""
    from tierlab.analysis import model_reference
    from tierlab.experiments import reference

    tiny = dict(MODEL, workers=1)
    monkeypatch.setattr(reference, "grids", lambda queries, costs: {
        "main": dict(tiny, config=["base", "base-prefetch"]), "lookahead": [tiny],
        "multicore": dict(tiny, cores=[1, 2])})
    monkeypatch.setattr(reference, "check_all", lambda *tables: {})
    monkeypatch.setattr(model_reference, "plot_all", lambda *args: [])
    assert main(["model", "reference", "--out", str(out / "ref"), "--no-progress"]) == 0
    return [(out / "ref", CACHE), (out / "ref" / "multicore", CACHE)]


def validate(d, out):
    grid = {"index": str(d / "idx"), "costs": str(d / "costs.json"),
            "workload": {"type": "single", "class": "H", "queries": 10, "rp": 0.5, "seed": 1},
            "config": ["base", "hybrid-prefetch"], "cache_fraction": 0.3,
            "device": "nvme-p4800x", "dram_budget_bytes": "256KiB", "repeats": 1,
            "min_runs": 1}
    assert main(["validate", _yaml(out / "v.yaml", grid), "--out", str(out / "v"),
                 "--no-progress"]) == 0
    return [(out / "v", TRACE | CACHE | {"validation"}),
            (out / "v" / "validation.csv", {"validation"}),
            (out / "v" / "measured.parquet", {"cache_run"}),
            (out / "v" / "model.parquet", {"cache_run"})]


WRITERS = [query_out_parquet, query_out_csv, query_trace, apcache_run, model_run, model_sweep,
           model_reference, validate]


def _kinds(out: str) -> set:
    """The table kinds inspect printed a summary of."""
    return set(re.findall(r"^(\w+): [\d,]+ rows", out, re.M))


@pytest.mark.parametrize("writer", WRITERS, ids=[w.__name__ for w in WRITERS])
def test_inspect_reads_what_each_command_writes(writer, inputs, tmp_path, capsys, monkeypatch):
    args = (monkeypatch,) if writer is model_reference else ()
    for path, tables in writer(inputs, tmp_path, *args):
        capsys.readouterr()
        assert main(["trace", "inspect", str(path)]) == 0
        out, err = capsys.readouterr()
        assert _kinds(out) == tables, out
        assert err == ""
        assert ("files: " in out) == path.is_dir()
    # every .parquet and .csv file the command wrote is a table of the schema
    skipped = []
    found = find_tables(tmp_path, skipped)
    assert skipped == []
    written = {p for p in tmp_path.rglob("*") if p.suffix in (".parquet", ".csv")
               and not any(part.startswith(".") for part in p.relative_to(tmp_path).parts)}
    assert {p for _, p in found} == written
    for name, p in found:
        got, df = schema.read_table(p)
        assert got == name and not df.duplicated(schema.key(name)).any(), p


def test_sweep_csv_rows_line_up_with_its_header(inputs, tmp_path):
    """cache_run.csv is the cache_run table while a sweep runs too: a row
    appended for a finished cell (a dict in the model's own key order) lines
    up with the header; a CSV in another column order (an older tierlab) is
    rebuilt from the cells instead, and a rerun ends with the merged table."""
    from tierlab.experiments import sweep

    path = model_sweep(inputs, tmp_path)[0][0]
    csv = path / "cache_run.csv"
    _, merged = schema.read_table(path / "cache_run.parquet")
    row = dict(reversed(list(merged.iloc[0].to_dict().items())), run_id="appended")
    sweep._append_csv(path, row)
    _, df = schema.read_table(csv)
    assert len(df) == 3
    pd.testing.assert_frame_equal(df.iloc[2:].reset_index(drop=True),
                                  merged.iloc[:1].assign(run_id="appended"))
    merged[list(reversed(schema.columns("cache_run")))].to_csv(csv, index=False)
    sweep._append_csv(path, row)
    pd.testing.assert_frame_equal(schema.read_table(csv)[1], merged)
    grid = dict(MODEL, config=["base", "hybrid-prefetch", "base-prefetch"], workers=1)
    assert main(["model", "sweep", _yaml(tmp_path / "g3.yaml", grid), "--out", str(path),
                 "--no-progress"]) == 0
    _, merged = schema.read_table(path / "cache_run.parquet")
    assert len(merged) == 3
    pd.testing.assert_frame_equal(schema.read_table(csv)[1], merged)


def test_inspect_a_folder_of_everything(inputs, tmp_path, capsys, monkeypatch):
    for w in (query_trace, apcache_run, model_sweep):
        w(inputs, tmp_path / w.__name__)
    capsys.readouterr()
    assert main(["trace", "inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert _kinds(out) == TRACE | CACHE
    assert "cells/*/cache_run.parquet (2)" not in out  # two cells: named, not a pattern
    assert "a row in several files counted once" in out


@pytest.mark.parametrize("name, what", [
    ("", "no result tables in this folder"),
    ("notes.json", "not a result table"),
    ("hits.tsv", "not a result table"),
    ("other.parquet", "not a tierlab result table"),
    ("other.csv", "not a tierlab result table"),
    ("broken.parquet", "not a readable Parquet file"),
    ("missing", "no such file or folder"),
])
def test_no_table_is_one_line_and_status_2(tmp_path, capsys, name, what):
    """A folder of files that are no tables (JSON, TSV, foreign Parquet and
    CSV, a subfolder), and each such file alone."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.txt").write_text("x")
    (tmp_path / "notes.json").write_text("{}")
    (tmp_path / "hits.tsv").write_text("query_id\trank\tdid\tscore\n0\t1\t7\t1.5\n")
    pd.DataFrame({"x": [1, 2]}).to_parquet(tmp_path / "other.parquet")
    pd.DataFrame({"x": [1, 2]}).to_csv(tmp_path / "other.csv", index=False)
    if name == "broken.parquet":  # a broken table fails a folder's check too
        (tmp_path / name).write_bytes(b"PAR1 not really")
    assert main(["trace", "inspect", str(tmp_path / name)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tierlab: error: ") and what in lines[0], err
    assert "Traceback" not in err and out == ""


def test_a_folder_with_a_failing_table_summarises_the_rest(tmp_path, capsys):
    ok = {"run_id": ["r"], "source": ["model"], "core": [0], "t_ns": [5], "queries_done": [1],
          "lookahead_queries": [0], "rolling_sum_segments": [0], "cache_used_bytes": [4096],
          "storage_bytes_read": [8192]}
    schema.write_table("cache_timeline", ok, tmp_path / "cache_timeline.parquet")
    bad = pd.DataFrame(ok).assign(t_ns="soon")
    bad.to_csv(tmp_path / "cache_timeline.csv", index=False)
    assert main(["trace", "inspect", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "cache_timeline: 1 rows" in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "cache_timeline.csv: line 2: column t_ns" in lines[0]


def test_many_runs_are_summarised_by_group(inputs, tmp_path, capsys):
    one = schema.read_table(model_run(inputs, tmp_path)[0][0] / "cache_run.parquet")[1]
    many = pd.concat([one.assign(run_id=f"r{i}", cache_bytes=4096 * (i + 1),
                                 config="base" if i % 2 else "hybrid") for i in range(20)],
                     ignore_index=True)
    schema.write_table("cache_run", many, tmp_path / "many.csv")
    capsys.readouterr()
    assert main(["trace", "inspect", str(tmp_path / "many.csv")]) == 0
    out = capsys.readouterr().out.splitlines()
    groups = [x for x in out if "10 runs  cache 4.0 KiB-76.0 KiB" in x
              or "10 runs  cache 8.0 KiB-80.0 KiB" in x]
    assert len(groups) == 2 and len(out) == 5, out  # header, blank, table line, 2 groups
