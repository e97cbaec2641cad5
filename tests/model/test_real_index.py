"""The model on an index built by `tierlab index build`: metadata from its
extents, a query file, and the replay of a `tierlab query run --trace`."""
from __future__ import annotations

import random

import numpy as np
import pytest

from tierlab.cli import main
from tierlab.engine.index import build
from tierlab.model import config as C
from tierlab.model import indexmeta, replay
from tierlab.traces.runs import read_trace

COSTS = {"single": {"query_ns": 1000, "block_ns": 300, "posting_ns": 5},
         "and": {"query_ns": 1000, "block_ns": 300, "posting_ns": 40}}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("idx")
    rng = random.Random(1)
    lines = [" ".join(f"w{int(300 ** rng.random())}" for _ in range(rng.randint(5, 60)))
             for _ in range(3000)]
    (d / "c.txt").write_text("\n".join(lines) + "\n")
    build(d / "c.txt", d / "idx", codec="pfor-delta256")
    (d / "w.queries").write_text("w1\nw2 AND w3\nw1\nnosuchterm\nw5 w7\nw2\n")
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(d / "r.parquet"), "--trace", str(d / "trace"), "--quiet"]) == 0
    return d


def test_metadata_from_extents(small):
    m = indexmeta.from_index(small / "idx")
    assert m.index_bytes == (small / "idx" / "dids.bin").stat().st_size + \
        (small / "idx" / "freqs.bin").stat().st_size
    assert m.documents == 3000 and len(m) == m.vocabulary
    i = m.term_id("w1")
    assert m.postings[i] > 0 and m.blocks[i] == -(-m.postings[i] // 256)
    assert (m.did_offset + m.did_bytes <= m.did_file_bytes).all()


def test_replay_uses_the_measured_work(small):
    m = indexmeta.from_index(small / "idx")
    t = replay.from_query_trace(m, small / "trace")
    measured = read_trace(small / "trace")
    q = measured["query"].sort_values("query_id")
    assert t.queries == len(q) == 6
    assert list(t.postings_scored) == list(q["postings_scored"])
    known = measured["term"][measured["term"]["term"] != "nosuchterm"]
    assert t.occurrences == len(known) and t.unknown_terms == 1
    assert list(t.blocks_decoded) == list(known.sort_values(["query_id", "term_pos"])[
        "blocks_decoded"])
    assert list(t.qtype) == [0, 1, 0, 0, 1, 0]


@pytest.mark.parametrize("workload", ["file", "trace"])
def test_model_runs_on_the_index(small, workload):
    w = {"file": str(small / "w.queries")} if workload == "file" else \
        {"trace": str(small / "trace")}
    cfg = C.validate({"config": "hybrid", "index": str(small / "idx"), "workload": w,
                      "cache_bytes": 64 * 1024, "segment_bytes": 1024, "costs": COSTS,
                      "device": "sas-ssd", "readahead_bytes": 4096})
    r = C.run(cfg).run
    assert r["queries"] == 6 and r["index_path"] == str(small / "idx")
    assert r["segment_cache_hits"] + r["segment_cache_misses"] == 7  # known occurrences
    assert r["segment_cache_hits"] >= 2  # w1 and w2 repeat
    assert np.isfinite(r["qps"])


@pytest.fixture(scope="module")
def dram_trace(small):
    d = small / "trace-dram"
    assert main(["query", "run", str(small / "idx"), str(small / "w.queries"), "--out",
                 str(small / "rd.parquet"), "--place", "dram", "--trace", str(d),
                 "--quiet"]) == 0
    return d


def test_cpu_measured_charges_each_query_its_measured_time(small, dram_trace):
    """With every page cached (second pass, huge cache) a base query costs only
    its CPU time: the measured latency of that query, not the table's formula."""
    cfg = C.validate({"config": "base", "index": str(small / "idx"),
                      "workload": {"trace": str(dram_trace), "cpu": "measured"},
                      "cache_bytes": 64 * 2**20, "costs": COSTS, "device": "nvme-p4800x",
                      "passes": 2})
    res = C.run(cfg)
    want = read_trace(dram_trace)["query"].sort_values("query_id")["latency_ns"].to_numpy()
    got = np.asarray(res.query["latency_ns"])
    assert list(res.query["query_id"]) == list(range(len(want)))
    assert got == pytest.approx(want, abs=1)
    table = C.run(C.validate({**cfg.values, "workload": {"trace": str(dram_trace)}}))
    assert not np.allclose(np.asarray(table.query["latency_ns"]), want)


@pytest.mark.parametrize("workload, msg", [
    ({"trace": "T", "cpu": "guess"}, "workload.cpu"),
    ({"file": "F", "cpu": "measured"}, "'file' alone"),
    ({"trace": "T", "rp": 0.5}, "takes only 'cpu'")])
def test_cpu_source_is_checked(workload, msg):
    with pytest.raises(Exception, match=msg):
        C.validate({"config": "base", "workload": workload, "cache_bytes": 2**20})


def test_cpu_measured_needs_an_all_dram_run(small):
    from tierlab.core.errors import TierlabError

    m = indexmeta.from_index(small / "idx")
    with pytest.raises(TierlabError, match="every structure in DRAM"):
        replay.from_query_trace(m, small / "trace", "measured")  # a storage-placement run
