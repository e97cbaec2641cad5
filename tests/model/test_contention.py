"""Core contention derived from a machine spec (model/contention.py): the
bandwidth roofline, its inputs, and the run key that selects it."""
from __future__ import annotations

import json

import pytest

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.model import contention


def test_roofline_is_one_below_the_machine_bandwidth_and_grows_beyond_it():
    m = specs.load("apcache-2x-xeon-gold-6252n")
    bw, how = contention.machine_bandwidth(m)
    assert bw == pytest.approx(2 * 105.6e9) and "2 socket(s)" in how
    # one core reading 1 GB/s: 16 cores are far below 211 GB/s
    f, src = contention.cpu_factor(m, 16, 1e9, 0.0, 1e9)
    assert f == 1.0 and "apcache-2x-xeon-gold-6252n" in src
    # 50 GB/s per core: 16 cores want 800 GB/s, 3.79x the machine's
    f, _ = contention.cpu_factor(m, 16, 50e9, 0.0, 1e9)
    assert f == pytest.approx(16 * 50e9 / bw)
    assert contention.cpu_factor(m, 1, 50e9, 0.0, 1e9) == (1.0, "one core")


def test_slow_tier_bandwidth_counts_the_dimms_of_the_machine():
    m = specs.load("apcache-2x-xeon-gold-6252n")
    pm = specs.load("optane-dcpmm-g1", kind="memory")
    bw, _ = contention.tier_bandwidth(m, pm)
    assert bw == pytest.approx(2 * 6 * 6.52e9)
    # 4 GB/s per core from the tier: 24 cores want 96 GB/s of 78 GB/s
    f, src = contention.cpu_factor(m, 24, 0.0, 4e9, 1e9, pm)
    assert f == pytest.approx(24 * 4e9 / bw) and "slow tier" in src


def test_machine_key_is_checked_and_the_host_factor_reported(tmp_path):
    from tierlab.model import config as cfgmod

    with pytest.raises(TierlabError, match="machine"):
        cfgmod.validate({"machine": "no-such-machine"})
    with pytest.raises(TierlabError, match="not a machine"):
        cfgmod.validate({"machine": "hdd-7200"})
    base = {"index": {"documents": 20000, "postings": 400000, "vocabulary": 5000,
                      "index_bytes": 600000}, "cache_fraction": 0.5, "config": "base",
            "device": "nvme-p4800x", "workload": {"type": "single", "class": "H",
                                                  "queries": 40, "rp": 0.0},
            "costs": {"single": {"query_ns": 1000, "block_ns": 100, "posting_ns": 1},
                      "and": {"query_ns": 1000, "block_ns": 100, "posting_ns": 1}},
            "cores": 2, "out": str(tmp_path)}
    res = cfgmod.run(cfgmod.validate(dict(base, machine="apcache-2x-xeon-gold-6252n")))
    p = json.loads(res.run["params"])
    assert p["cores_cpu_factor"] == 1.0
    assert "derived from machine spec" in p["cores_cpu_factor_source"]
    assert "not used" in p["cores_cpu_factor_host_source"]
    plain = json.loads(cfgmod.run(cfgmod.validate(base)).run["params"])
    assert "cores_cpu_factor_host" not in plain
