"""The slow tier's serving cost (model/tier.py): the access rule from the
memory spec's numbers, and the multiplicative `tier_factor` it replaces."""
from __future__ import annotations

import pytest
from model_helpers import Costs, fast_device, index_of, trace_of

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.model import config as C
from tierlab.model.sim import Params, Simulation
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


# --- the access rule inside a run: one query, one term, partly decoded ---------------------

TERM_BYTES, TERM_BLOCKS, DECODED, SEG = 40_000, 40, 10, 4096


def _cpu_ns(slow_tier, block_ns, tier_factor=None, query_ns=5_000):
    """CPU time the query thread spent on a query that decodes DECODED of the
    TERM_BLOCKS blocks of one term served from the segment cache on slow_tier
    (its latency minus its wait for the prefetch; nothing else is charged)."""
    ix = index_of([TERM_BYTES], blocks=[TERM_BLOCKS])
    tr = trace_of([[0]], blocks=[DECODED])
    p = Params(config="hybrid-prefetch", cache_bytes=1 << 20, segment_bytes=SEG, passes=1,
               tier_factor=tier_factor)
    sim = Simulation(ix, tr, p, Costs(query_ns=query_ns, block_ns=block_ns), fast_device(),
                     specs.load(slow_tier, kind="memory")).run()
    sh = sim.shards[0]
    assert sh.rec_page_miss[0] == 0  # served from the segment cache, not storage
    return int(sh.rec_latency[0] - sh.rec_wait[0]), sim


def test_known_term_on_optane_by_hand():
    # the term's chain: 40,000 bytes + 8 x 40 bytes of offsets in 4 KiB segments
    segments = -(-(TERM_BYTES + 8 * TERM_BLOCKS) // SEG)
    assert segments == 10
    share = DECODED / TERM_BLOCKS                       # the query decodes 10 of 40 blocks
    seg_ns = segments * share * (169.4 - 81.4)          # 2.5 stream starts x 88 ns = 220 ns
    stream_pm = TERM_BYTES * share / 2.92               # 10,000 B at 2.92 GB/s: 3,424.7 ns
    stream_dram = TERM_BYTES * share / 105.6            # at DDR4-2666's (fallback) 105.6 GB/s

    # decoding (10 x 500 ns) outlasts the stream: only the stream starts stall
    cpu, sim = _cpu_ns("optane-dcpmm-g1", 500)
    assert sim.term_segs[0] == segments
    assert cpu == round(5_000 + 10 * 500 + seg_ns) == 10_220

    # decoding (10 x 100 ns) faster than the tier streams: it waits for the stream
    decode = 10 * 100
    cpu, _ = _cpu_ns("optane-dcpmm-g1", 100)
    extra = seg_ns + max(decode, stream_pm) - max(decode, stream_dram)
    assert cpu == round(5_000 + decode + extra) == 8_645


def test_dram_as_the_slow_tier_costs_nothing_extra():
    for block_ns in (500, 100, 0):
        cpu, _ = _cpu_ns("ddr4-2666", block_ns)
        assert cpu == 5_000 + 10 * block_ns


def test_tier_factor_restores_the_multiplicative_rule():
    # every block the query decodes comes from the tier: decode x 2.08, no access cost
    cpu, sim = _cpu_ns("optane-dcpmm-g1", 100, tier_factor=2.08)
    assert cpu == round(5_000 + 10 * 100 * 2.08) == 7_080
    assert sim.tier.factor == 2.08 and "tier_factor" in sim.tier.factor_source


def test_cxl_has_no_single_thread_figure_and_falls_back_to_its_link_bandwidth():
    cxl, dram = specs.load("cxl-type3", kind="memory"), specs.load("ddr4-2666", kind="memory")
    t = Tier.from_spec(cxl)
    assert t.segment_ns == pytest.approx(cxl["read_latency_seq_ns"] - dram["read_latency_seq_ns"])
    assert t.byte_ns == pytest.approx(1e9 / 32e9)
    assert t.dram_byte_ns == pytest.approx(1e9 / 105.6e9)
    assert "read_bandwidth_bytes_per_s" in t.factor_source


MEMORY = """name: bad
kind: memory
read_latency_seq_ns: {value: 169.4, source: s}
read_latency_random_ns: {value: 305.0, source: s}
read_bandwidth_bytes_per_s: {value: 6.52e+9, source: s}
access_granularity_bytes: {value: 256, source: s}
"""


@pytest.mark.parametrize("extra, key", [
    ("read_bandwidth_1thread_bytes_per_s: {value: 0, source: s}\n"
     "write_bandwidth_bytes_per_s: {value: 2.22e+9, source: s}\n",
     "read_bandwidth_1thread_bytes_per_s"),
    ("write_bandwidth_bytes_per_s: {value: 0, source: s}\n", "write_bandwidth_bytes_per_s"),
    ("", "write_bandwidth_bytes_per_s"),
])
def test_a_bad_spec_value_is_an_error_naming_its_key(tmp_path, extra, key):
    path = tmp_path / "bad.yaml"
    path.write_text(MEMORY + extra)
    with pytest.raises(TierlabError, match=key):
        Tier.from_spec(specs.load(str(path), kind="memory"))
