"""tierlab.engine.memsim: the cache filter and tier-timing model from Python
(issue 20 sections 2-3), on streams whose answers follow from the specs."""
import numpy as np
import pytest

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.engine import memsim


def _seq(n, region="did", base=1 << 32, step=8):
    r = np.zeros(n, dtype=memsim.RECORD)
    r["addr"] = base + step * np.arange(n, dtype=np.uint64)
    r["size"], r["region"] = 8, memsim.region_id(region)
    return r


def _random_lines(n, region="did", seed=0):
    r = np.zeros(n, dtype=memsim.RECORD)
    r["addr"] = (1 << 33) + 64 * np.random.default_rng(seed).integers(0, 1 << 24, n,
                                                                       dtype=np.uint64)
    r["size"], r["region"] = 8, memsim.region_id(region)
    return r


def test_regions_are_the_header_numbers():
    names = memsim.regions()
    assert names[0] == "other" and {"dictionary", "skip", "did", "freq", "segment_cache",
                                    "decode_buffer", "topk_heap"} <= set(names)
    with pytest.raises(TierlabError, match="unknown memory region 'heap'"):
        memsim.region_id("heap")


def test_filter_geometry_comes_from_the_machine_spec():
    m = specs.load("xeon-gold-6252n", kind="machine")
    c = memsim.filter_config(m)
    assert c["levels"] == 3 and c["level_bytes"][2] == m["llc_bytes"]
    assert c["level_ways"] == [8, 16, 11] and c["prefetch_stream"] == 1
    assert memsim.filter_config(m, levels=2, prefetch=False)["prefetch_next_line"] == 0


def test_filter_keeps_order_and_counts_per_region():
    f = memsim.Filter("this-vm", prefetch=False)
    rec = np.concatenate([_seq(800, "did"), _seq(800, "freq", base=1 << 34)])
    req = f.run(rec)
    assert len(req) == 200 and (req["kind"] == memsim.READ).all()
    assert (np.diff(req["addr"][:100].astype(np.int64)) == 64).all()
    assert set(req["region"][:100]) == {memsim.region_id("did")}
    c = f.counts()
    assert c["did"]["accesses"] == 800 and c["did"]["reads"] == 100 == c["freq"]["reads"]
    assert c["did"]["l1_misses"] == 100


def test_filter_output_in_parts_equals_one_call(monkeypatch):
    rec = _random_lines(5000)
    whole = memsim.Filter("xeon-gold-6252n").run(rec)
    monkeypatch.setattr(memsim, "CHUNK", 1)  # the smallest output buffer the filter takes
    parts = memsim.Filter("xeon-gold-6252n").run(rec)
    assert np.array_equal(whole, parts)


def test_filter_refuses_a_bad_geometry():
    cfg = memsim.filter_config("this-vm")
    cfg["level_bytes"][0] = 1000  # not whole sets
    with pytest.raises(TierlabError, match="cache filter"):
        memsim.Filter(config=cfg)


def test_prefetcher_turns_a_stream_into_prefetches():
    f = memsim.Filter("xeon-gold-6252n")
    req = f.run(_seq(8192))
    kinds = np.bincount(req["kind"], minlength=3)
    assert kinds[memsim.PREFETCH] > 10 * kinds[memsim.READ]


def test_slow_tier_stalls_more_and_sharing_adds_bandwidth_stalls():
    req = memsim.Filter("xeon-gold-6252n", prefetch=False).run(_random_lines(4000))

    def stall(tier, cores=1, cpa=0.5):
        t = memsim.Timing({"did": tier}, "xeon-gold-6252n", cores=cores, cpu_ns_per_access=cpa)
        t.run(req)
        return t.result()["regions"]["did"]

    dram, cxl, pm = stall("ddr4-2666"), stall("cxl-type3"), stall("optane-dcpmm-g1")
    assert dram["stall_ns"] < cxl["stall_ns"] < pm["stall_ns"]
    # random 64 B reads of 256 B granules: four times the bytes on the media
    assert pm["media_bytes"] == pytest.approx(4 * 64 * pm["reads"], rel=0.05)
    shared = stall("optane-dcpmm-g1-x6", cores=24)
    alone = stall("optane-dcpmm-g1-x6", cores=1)
    assert shared["bandwidth_ns"] > alone["bandwidth_ns"]


def test_timing_per_query_sums_to_the_total():
    rec = _random_lines(3000)
    rec["query"] = np.arange(3000) // 1000
    req = memsim.Filter("xeon-gold-6252n").run(rec)
    t = memsim.Timing({"did": "optane-dcpmm-g1"}, cpu_ns_per_access=1.0)
    pq = t.run(req, queries=3)
    total = sum(r["stall_ns"] for r in t.result()["regions"].values())
    assert pq.shape == (3, len(memsim.regions())) and (pq.sum(axis=1) > 0).all()
    assert pq.sum() == pytest.approx(total)


def test_timing_refuses_unknown_regions_and_negative_cpu():
    with pytest.raises(TierlabError, match="unknown memory region"):
        memsim.Timing({"postings": "ddr4-2666"})
    with pytest.raises(TierlabError, match="cpu_ns_per_access"):
        memsim.Timing({}, cpu_ns_per_access=-1)
    with pytest.raises(TierlabError, match="a memory spec is needed|unknown device"):
        memsim.Timing({"did": "hdd-7200"})


def test_any_record_is_taken(monkeypatch):
    """Sizes 0..65535 (an access over 1,024 lines) and out-of-range regions
    (counted as other): the output is the same in one call or in parts."""
    rng = np.random.default_rng(7)
    r = np.zeros(600, dtype=memsim.RECORD)
    r["addr"] = rng.integers(0, 1 << 40, 600, dtype=np.uint64)
    r["size"] = rng.choice([0, 1, 8, 63, 64, 65, 4096, 65535], 600)
    r["kind"] = rng.integers(0, 2, 600)
    r["region"] = rng.choice([0, 3, 7, 8, 255], 600)
    whole = memsim.Filter("xeon-gold-6252n").run(r)
    monkeypatch.setattr(memsim, "CHUNK", 1)
    f = memsim.Filter("xeon-gold-6252n")
    assert np.array_equal(whole, f.run(r))
    assert f.counts()["other"]["accesses"] == int(np.isin(r["region"], [0, 8, 255]).sum())
    assert set(np.unique(whole["region"])) <= {0, 3, 7}
