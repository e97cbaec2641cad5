"""The slow tier's serving cost (model/tier.py): the access rule from the
memory spec's numbers, and the multiplicative `tier_factor` it replaces."""
from __future__ import annotations

import pytest

from tierlab import specs
from tierlab.model import config as C
from tierlab.model.tier import Tier

INDEX = {"documents": 20_000, "postings": 3_000_000, "vocabulary": 100_000,
         "index_bytes": 4_000_000}
COSTS = {"single": {"query_ns": 1000, "block_ns": 500, "posting_ns": 5},
         "and": {"query_ns": 1000, "block_ns": 500, "posting_ns": 50}}


def test_optane_access_cost_from_its_spec():
    t = Tier.from_spec(specs.load("optane-dcpmm-g1", kind="memory"))
    assert t.factor is None
    assert t.segment_ns == pytest.approx(169.4 - 81.4)
    assert t.byte_ns == pytest.approx(1e9 / 2.92e9)
    # 3 segments, 10,000 bytes: the stream (3,424.7 ns at 2.92 GB/s) hides behind
    # 5,000 ns of decoding, so only the stream starts stall: 3 x 88 ns
    assert t.stall_ns(3, 10_000, 5_000) == pytest.approx(264.0)
    # decoding faster than the tier streams: it waits for the rest of the stream
    assert t.stall_ns(3, 10_000, 1_000) == pytest.approx(264.0 + 10_000 / 2.92 - 1_000)


def test_dram_serves_at_no_extra_cost():
    t = Tier.from_spec(specs.load("ddr4-2666", kind="memory"))
    assert t.stall_ns(100, 10**6, 0) == 0


def test_tier_factor_replaces_the_access_rule():
    t = Tier.from_spec(specs.load("optane-dcpmm-g1", kind="memory"), 2.08)
    assert t.factor == 2.08 and t.stall_ns(3, 10_000, 0) == 0


def _qps(slow_tier, tier_factor=None):
    doc = {"config": "hybrid-prefetch", "device": "nvme-p4800x", "cache_fraction": 0.4,
           "index": INDEX, "costs": COSTS, "segment_bytes": 1024, "readahead_bytes": 8192,
           "dram_budget_bytes": 65536, "passes": 2, "slow_tier": slow_tier,
           "workload": {"type": "single", "class": "H", "queries": 200, "rp": 0.25}}
    if tier_factor is not None:
        doc["tier_factor"] = tier_factor
    return C.run(C.validate(doc)).run


def test_optane_is_slower_than_dram_but_less_than_the_factor_bound():
    dram, pm, bound = _qps("ddr4-2666"), _qps("optane-dcpmm-g1"), _qps("optane-dcpmm-g1", 2.08)
    assert bound["qps"] < pm["qps"] < dram["qps"]
    assert "access" in str(pm["params"]) and "factor" in str(bound["params"])
