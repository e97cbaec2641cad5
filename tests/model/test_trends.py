"""The model's trends on a small synthetic index (seconds, not the reference
scale): QPS does not fall as the cache grows, and prefetching is at least as
fast as base on NVMe."""
from __future__ import annotations

import pytest

from tierlab.model import config as C

INDEX = {"documents": 20_000, "postings": 3_000_000, "vocabulary": 100_000,
         "index_bytes": 4_000_000}
COSTS = {"single": {"query_ns": 1000, "block_ns": 500, "posting_ns": 5},
         "and": {"query_ns": 1000, "block_ns": 500, "posting_ns": 50}}
FRACTIONS = (0.05, 0.1, 0.2, 0.4)


def qps(config, device, frac, qtype="single"):
    cfg = C.validate({"config": config, "device": device, "cache_fraction": frac,
                      "index": INDEX, "costs": COSTS, "segment_bytes": 1024,
                      "readahead_bytes": 8192, "dram_budget_bytes": 65536, "passes": 2,
                      "workload": {"type": qtype, "class": "H", "queries": 200, "rp": 0.25}})
    return C.run(cfg).run["qps"]


@pytest.mark.parametrize("config", ["base", "hybrid-prefetch"])
@pytest.mark.parametrize("device", ["hdd-7200", "nvme-p4800x"])
def test_qps_does_not_fall_as_the_cache_grows(config, device):
    q = [qps(config, device, f) for f in FRACTIONS]
    assert all(b >= 0.98 * a for a, b in zip(q, q[1:])), q
    assert q[-1] > 1.2 * q[0], q  # and the cache matters here


@pytest.mark.parametrize("qtype", ["single", "and"])
def test_prefetch_is_at_least_base_on_nvme(qtype):
    for f in FRACTIONS:
        b, p = qps("base", "nvme-p4800x", f, qtype), qps("base-prefetch", "nvme-p4800x", f, qtype)
        assert p >= 0.98 * b, (f, b, p)
