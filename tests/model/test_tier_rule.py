"""The model's memory-tier charges (issue 20 section 3): tier_rule trace
charges segment-cache blocks the cost table's memory costs, place_* keys
charge their structure on the slow_tier spec, and a table without the costs
is an error that names the command to measure them."""
import json

import pytest

from tierlab.core.errors import TierlabError
from tierlab.model import config as cfgmod
from tiny_inputs import SMALL_MODEL_SPEC

SPEC = "optane-dcpmm-g1"


def _memory(block_ns: float, dict_ns: float) -> dict:
    row = {s: {"extra_ns_per_block": block_ns, "extra_ns_per_query": dict_ns}
           for s in ("dict", "skip", "did", "freq", "all")}
    return {"rule": "trace", "machine": "xeon-gold-6252n", "cores": 1, "baseline": "ddr4-2666",
            "tiers": {SPEC: {"single": row, "and": row}}}


def _run(tmp_path, memory=None, **keys):
    costs = dict(SMALL_MODEL_SPEC["costs"])
    if memory is not None:
        costs["memory"] = memory
    doc = {**SMALL_MODEL_SPEC, "costs": costs, "slow_tier": SPEC, "out": str(tmp_path / "o"),
           **keys}
    res = cfgmod.run(cfgmod.load(None, doc))
    return res.run


def test_trace_rule_charges_the_table_per_block(tmp_path):
    hyb = {"config": "hybrid", "cache_fraction": 1.0}
    roof = _run(tmp_path, _memory(0.0, 0.0), tier_rule="roofline", **hyb)
    free = _run(tmp_path, _memory(0.0, 0.0), tier_rule="trace", **hyb)
    dear = _run(tmp_path, _memory(2000.0, 0.0), tier_rule="trace", **hyb)
    assert json.loads(free["params"])["tier_serving"] == "trace"
    assert json.loads(roof["params"])["tier_serving"] == "access"
    assert dear["qps"] < free["qps"]
    assert free["qps"] >= roof["qps"] * 0.999  # 0 ns a block: no tier cost at all


def test_placements_charge_their_structure(tmp_path):
    base = _run(tmp_path, _memory(500.0, 3000.0))
    d = _run(tmp_path, _memory(500.0, 3000.0), place_dict="pm:/mnt/pmem")
    did = _run(tmp_path, _memory(500.0, 3000.0), place_did="numa:1")
    dram = _run(tmp_path, _memory(500.0, 3000.0), place_dict="dram")
    assert d["qps"] < base["qps"] and did["qps"] < base["qps"]
    assert dram["qps"] == base["qps"]
    assert json.loads(d["params"])["placed"] == {"dict": f"pm:/mnt/pmem as {SPEC}"}


def test_missing_memory_costs_name_the_command(tmp_path):
    with pytest.raises(TierlabError, match=r"query costs INDEX --tier optane-dcpmm-g1"):
        _run(tmp_path, None, place_skip="numa:0")
    with pytest.raises(TierlabError, match="no memory cost of 'did'"):
        _run(tmp_path, None, config="hybrid", cache_fraction=1.0, tier_rule="trace")
