"""Run configurations and grids: every mistake is a TierlabError naming the
key; a valid configuration runs and writes the three tables."""
from __future__ import annotations

import json

import pytest

from tierlab.core.errors import TierlabError
from tierlab.model import config as C
from tierlab.experiments import sweep
from tierlab.traces.schema import read_table

SMALL = {"documents": 5000, "postings": 400_000, "vocabulary": 20_000, "index_bytes": 600_000}
COSTS = {"single": {"query_ns": 1000, "block_ns": 300, "posting_ns": 5},
         "and": {"query_ns": 1000, "block_ns": 300, "posting_ns": 40}}


def base(**over):
    d = {"config": "hybrid-prefetch", "device": "nvme-p4800x", "cache_fraction": 0.2,
         "index": SMALL, "costs": COSTS, "segment_bytes": 1024, "dram_budget_bytes": 65536,
         "readahead_bytes": 8192, "workload": {"type": "single", "class": "H", "queries": 50}}
    d.update(over)
    return d


@pytest.mark.parametrize("over, key", [
    ({"bogus": 1}, "bogus"),
    ({"config": "turbo"}, "config"),
    ({"policy": "mru"}, "policy"),
    ({"device": "floppy"}, "device"),
    ({"slow_tier": "hdd-7200"}, "slow_tier"),  # a storage spec is not a memory tier
    ({"cache_bytes": -5, "cache_fraction": None}, "cache_bytes"),
    ({"cache_bytes": "lots", "cache_fraction": None}, "cache_bytes"),
    ({"cache_fraction": -0.1}, "cache_fraction"),
    ({"cache_bytes": 4096}, "cache_bytes and cache_fraction"),
    ({"segment_bytes": 100}, "segment_bytes"),
    ({"dram_budget_bytes": -1}, "dram_budget_bytes"),
    ({"wake_ups": "sometimes"}, "wake_ups"),
    ({"readahead_bytes": 2**21}, "readahead_bytes"),
    ({"cores": 0}, "cores"),
    ({"lookahead": 0}, "lookahead"),
    ({"config": "base", "lookahead": 16}, "lookahead"),
    ({"config": "base-prefetch", "lookahead": "adaptive"}, "lookahead"),
    ({"workload": {"type": "or"}}, "workload.type"),
    ({"workload": {"class": "X"}}, "workload.class"),
    ({"workload": {"rp": 1.5}}, "workload.rp"),
    ({"workload": {"queries": 10, "colour": "red"}}, "colour"),
    ({"index": {"documents": 10, "postings": 5}}, "vocabulary"),
    ({"index": dict(SMALL, zipf=-1)}, "zipf"),
    ({"index": dict(SMALL, colour=1)}, "colour"),
    ({"costs": {"single": {"query_ns": -1}, "and": {}}}, "costs.single.query_ns"),
    ({"tier_factor": 0}, "tier_factor"),
])
def test_bad_keys_are_named(over, key):
    with pytest.raises(TierlabError, match=key.split(".")[-1]):
        cfg = C.validate(base(**over))
        cfg.params(10**9)


def test_cache_smaller_than_a_segment_per_core():
    cfg = C.validate(base(cache_bytes=3 * 1024, cache_fraction=None, cores=4))
    with pytest.raises(TierlabError, match="cache_bytes.*less than one 1024-byte segment"):
        C.run(cfg)


def test_a_run_writes_the_three_tables(tmp_path):
    log = []
    res = C.run(C.validate(base(passes=2)), log=log)
    paths = C.write(res, tmp_path)
    names = {read_table(p)[0] for p in paths.values()}
    assert names == {"cache_run", "cache_query", "cache_timeline"}
    _, run = read_table(paths["cache_run"])
    r = run.iloc[0]
    assert r["source"] == "model" and r["config"] == "hybrid-prefetch"
    assert r["queries"] == 50 and r["qps"] > 0 and r["lookahead"] == "adaptive"
    assert r["segment_cache_hits"] + r["segment_cache_misses"] == 50
    _, q = read_table(paths["cache_query"])
    assert len(q) == 50 and (q["latency_ns"] > 0).all()
    assert log  # the event log was filled


def test_grid_expansion_and_errors():
    cells = sweep.expand({"config": ["base", "hybrid"], "cache_fraction": [0.1, 0.2, 0.3],
                          "workload": {"type": ["single", "and"], "queries": 5}})
    assert len(cells) == 12
    assert {(c["config"], c["cache_fraction"], c["workload"]["type"]) for c in cells} == {
        (a, b, t) for a in ("base", "hybrid") for b in (0.1, 0.2, 0.3) for t in ("single", "and")}
    assert len({sweep.cell_id(c) for c in cells}) == 12
    with pytest.raises(TierlabError, match="unknown key 'colour'"):
        sweep.expand({"colour": [1, 2]})
    with pytest.raises(TierlabError, match="empty list"):
        sweep.expand({"config": []})
    with pytest.raises(TierlabError, match="cell 2 of 2: device"):
        sweep.prepare(base(device=["nvme-p4800x", "floppy"]))
    with pytest.raises(TierlabError, match="workers"):
        sweep.prepare(base(), workers=0)


def test_sweep_resumes_and_skips_finished_cells(tmp_path):
    doc = base(config=["base", "hybrid-prefetch"], cache_fraction=[0.1, 0.3])
    cells, _, _ = sweep.prepare(doc)
    # an "interrupted" sweep: only the first two cells ran
    df = sweep.run(cells[:2], tmp_path, workers=1, progress=False)
    assert len(df) == 2
    first = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cells").iterdir()}
    df = sweep.run(cells, tmp_path, workers=2, progress=False)
    assert len(df) == 4 and set(df["config"]) == {"base", "hybrid-prefetch"}
    again = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "cells").iterdir()}
    assert all(again[k] == v for k, v in first.items())  # not rerun
    assert (tmp_path / "cache_run.csv").exists() and (tmp_path / "cache_run.parquet").exists()
    _, merged = read_table(tmp_path / "cache_run.parquet")
    assert len(merged) == 4


def test_handoff_spin_defaults_to_the_runtimes():
    from tierlab.core.native import ffi_lib

    spin = ffi_lib()[1].TIERLAB_APCACHE_HANDOFF_SPIN_NS
    assert C.runtime_spin_ns() == spin > 0
    cfg = C.validate(base())
    assert cfg.values["handoff_spin_ns"] == spin == cfg.params(10**6).handoff_spin_ns
    assert C.validate(base(handoff_spin_ns=0)).values["handoff_spin_ns"] == 0
    for bad in (-1, 1.5, "fast", True):
        with pytest.raises(TierlabError, match="handoff_spin_ns"):
            C.validate(base(handoff_spin_ns=bad))


def test_the_page_cache_is_lru_or_fifo():
    assert C.validate(base()).values["page_cache_policy"] == "lru"
    res = C.run(C.validate(base(config="base", page_cache_policy="fifo")))
    assert json.loads(res.run["params"])["page_cache_policy"] == "fifo"
    for bad in ("belady", "LRU", 1):  # belady needs next uses the page cache does not pass
        with pytest.raises(TierlabError, match="page_cache_policy"):
            C.validate(base(page_cache_policy=bad))


def test_page_hit_cost_comes_from_the_table_or_the_config():
    cfg = C.validate(base())
    assert cfg.values["page_hit_ns"] == 0  # the OS page cache through a mapping: no extra cost
    assert C.validate(base(page_hit_ns="table")).values["page_hit_ns"] == "table"
    res = C.run(C.validate(base(page_hit_ns="table", config="base")))
    assert json.loads(res.run["params"])["page_hit_ns"] == 0.0  # this test table has none
    for key in C.PAGE_COST_KEYS:  # a number is used as given
        res = C.run(C.validate(base(config="base-prefetch", **{key: 120})))
        assert json.loads(res.run["params"])[key] == 120.0
    with pytest.raises(TierlabError, match="page_hit_ns"):
        C.validate(base(page_hit_ns=-5))


def test_check_bistable_runs_prefetch_configurations_twice():
    params = {c: json.loads(C.run(C.validate(base(config=c, check_bistable=True))).run["params"])
              for c in ("base", "base-prefetch")}
    assert "bistable" not in params["base"]  # nothing prefetches: nothing to check
    p = params["base-prefetch"]
    assert isinstance(p["bistable"], bool) and p["tail_qps"] > 0
    assert set(p["head_start"]) >= {"qps", "tail_qps", "page_cache_miss_rate"}
    assert "bistable" not in json.loads(C.run(C.validate(base(config="base-prefetch")))
                                        .run["params"])  # off by default
    with pytest.raises(TierlabError, match="check_bistable"):
        C.validate(base(check_bistable="yes"))
