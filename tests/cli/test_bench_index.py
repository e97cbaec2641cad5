"""`tierlab bench index` end to end on a tiny corpus, and its handling of bad
input."""
import json

import pytest

from tierlab.core import native
from tierlab.experiments.bench import index as bench
from tierlab.cli import main

COMBOS = [(t, c) for t in ("single", "and") for c in ("H", "M", "L")]


@pytest.fixture(scope="module")
def run(run_bench, tmp_path_factory):
    png = tmp_path_factory.mktemp("plot") / "index.png"
    return (*run_bench("index", "--plot", str(png), "--size", "2MB", "--queries-h", "10",
                       "--queries-m", "20", "--queries-l", "20"), png)


def test_json_covers_every_codec(run):
    rc, doc, out, png = run
    assert rc == 0
    assert doc["benchmark"] == "index"
    assert [r["codec"] for r in doc["codecs"]] == [c.name for c in native.codecs()]
    for key in ("cpu_model", "simd_features", "kernel", "tierlab_version", "date"):
        assert key in doc["machine"]
    assert doc["config"]["block_size"] == 256 and doc["config"]["passes"] == 2
    assert doc["corpus"]["bytes"] > 1_000_000


def test_sizes_and_ratios(run):
    _, doc, _, _ = run
    for r in doc["codecs"]:
        assert r["error"] is None
        assert r["build_mb_per_s"] > 0
        assert r["index_bytes"] == sum(r["files"].values())
        assert set(r["files"]) == {"dict.bin", "skip.bin", "dids.bin", "freqs.bin"}
        assert r["did_ratio"] == pytest.approx(r["did_block_bytes"] / (4 * r["postings"]))
        if r["codec"] == "base":
            assert r["did_ratio"] == 1.0 and r["freq_ratio"] == 1.0
        else:
            assert 0 < r["did_ratio"] < 1.0


def test_queries_and_identity(run):
    _, doc, _, _ = run
    assert doc["results_identical"] is True and doc["errors"] == []
    for r in doc["codecs"]:
        assert r["results_identical"] is True
        got = {(q["type"], q["class"]): q for q in r["queries"]}
        assert set(got) == set(COMBOS)
        for q in got.values():
            assert q["qps"] > 0
            assert 0 < q["latency_p50_ns"] <= q["latency_p99_ns"]


def test_png_written_and_scratch_removed(run):
    _, _, out, png = run
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    leftovers = [p.name for p in out.parent.iterdir() if p.name != "index.json"]
    assert leftovers == []


def test_table_flags_a_mismatch(run):
    _, doc, _, _ = run
    bad = json.loads(json.dumps(doc))
    bad["codecs"][-1]["results_identical"] = False
    bad["results_identical"] = False
    bad["errors"] = [{"codec": bad["codecs"][-1]["codec"], "stage": "results", "type": "and",
                      "class": "H", "query": 3, "error": "top-10 differs from base"}]
    table = bench.format_table(bad)
    assert "MISMATCH" in table and "ERRORS" in table and ": NO" in table


@pytest.mark.parametrize("size", ["0", "0MB", "-5MB", "lots"])
def test_bad_size_exits_2(bench_fails, size):
    assert "--size" in bench_fails("index", "--size", size)


def test_unwritable_out_exits_2(tmp_path, capsys):
    rc = main(["bench", "index", "--out", str(tmp_path), "--size", "2MB", "--no-progress"])
    assert rc == 2
    assert "is a directory" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = main(["bench", "index", "--out", str(blocker / "x.json"), "--size", "2MB",
               "--no-progress"])
    assert rc == 2
    assert "cannot write" in capsys.readouterr().err
