"""Conservation in the model: bytes read from the device are the reads
issued, every query finishes, every term occurrence is a segment hit or
miss, and the segment cache's hit/miss sequence is an LRU's."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from model_helpers import Costs, fast_device, index_of, segment_sized, trace_of

from tierlab.core import specs
from tierlab.model.pagecache import PAGE
from tierlab.model.sim import CONFIGS, Params, Simulation

TIER = specs.load("optane-dcpmm-g1")


def workload(nterms=40, nq=300, seed=1):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6 * PAGE, nterms)
    queries = [[int(t)] if rng.random() < 0.5 else [int(t), int((t + 7) % nterms)]
               for t in rng.zipf(1.3, nq) % nterms]
    return index_of(sizes, gap=3 * PAGE), trace_of(queries)


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("cores", [1, 2])
def test_reads_bytes_and_queries_add_up(config, cores):
    ix, tr = workload()
    log = []
    p = Params(config=config, cores=cores, cache_bytes=12 * PAGE, segment_bytes=4096,
               dram_budget_bytes=8 * PAGE, readahead_bytes=PAGE, lookahead=4
               if config == "base-prefetch" else None, passes=2)
    sim = Simulation(ix, tr, p, Costs(query_ns=20_000, block_ns=100), fast_device(),
                     TIER, log=log).run()
    reads = [e for e in log if e[3] == "read" and "service_ns" in e[5]]
    total = sum(c.bytes_read for c in sim.acct)
    # every byte read was issued by a logged request, and with one-page
    # readahead every page-cache miss is one page read
    assert total == sum(e[5]["bytes"] for e in reads) == sim.device.bytes
    assert sum(c.reads for c in sim.acct) == len(reads) == sim.device.reads
    assert sum(c.page_misses for c in sim.acct) == len(reads)
    assert all(e[5]["bytes"] <= PAGE for e in reads)
    # every query of every core finished, in the reported pass too
    assert all(sh.q_done == 2 * tr.queries for sh in sim.shards)
    m = sim.metrics()
    assert m["queries"] == cores * tr.queries
    last = sim.acct[-1]
    if p.hybrid:  # every occurrence is a segment hit or a miss, once
        assert last.seg_hits + last.seg_misses == cores * tr.occurrences
    else:
        assert last.seg_hits + last.seg_misses == 0
    assert m["storage_bytes_read"] == last.bytes_read
    # latencies and waits are consistent
    q = sim.query_rows()
    assert (q["wait_ns"] <= q["latency_ns"]).all() and (q["latency_ns"] > 0).all()


def test_page_accesses_are_the_pages_of_the_terms_touched():
    ix, tr = workload()
    p = Params(config="base", cache_bytes=1 << 30, readahead_bytes=PAGE, passes=1)
    sim = Simulation(ix, tr, p, Costs(query_ns=1000), fast_device(), None).run()
    c = sim.acct[0]
    pages = sum(int(sim.pagemap.npages[f][t]) for t in sim.term for f in (0, 1))
    assert c.page_hits + c.page_misses == pages
    # an unbounded cache reads each distinct page once
    distinct = sum(int(sim.pagemap.npages[f][t]) for t in set(sim.term.tolist()) for f in (0, 1))
    assert c.page_misses == distinct


def reference_lru(trace_terms, sizes, capacity):
    """Hit/miss per access of an LRU over keys of given sizes."""
    lru, used, out = OrderedDict(), 0, []
    for t in trace_terms:
        if t in lru:
            lru.move_to_end(t)
            out.append(1)
            continue
        out.append(0)
        while used + sizes[t] > capacity:
            _, s = lru.popitem(last=False)
            used -= s
        lru[t] = sizes[t]
        used += sizes[t]
    return np.array(out)


def test_prefetch_worker_segment_hits_match_a_reference_lru():
    rng = np.random.default_rng(3)
    segs = rng.integers(1, 5, 60)
    queries = [[int(t)] for t in rng.zipf(1.2, 2000) % 60]
    ix, tr = segment_sized(segs, 1024), trace_of(queries)
    p = Params(config="hybrid-prefetch", cache_bytes=24 * 1024, segment_bytes=1024,
               dram_budget_bytes=1 << 20, readahead_bytes=PAGE)
    sim = Simulation(ix, tr, p, Costs(query_ns=5_000), fast_device(), TIER).run()
    assert sim.acct[0].bypassed == 0
    want = reference_lru([int(x) for x in tr.term], segs, 24)
    got = 1 - sim.shards[0].missed
    assert (got == want).all()
    assert want.sum() > 100 and (1 - want).sum() > 100  # both hits and misses happen


def test_every_policy_runs_and_belady_misses_least():
    from tierlab.model.cache import POLICIES

    rng = np.random.default_rng(5)
    queries = [[int(t)] for t in rng.zipf(1.1, 1500) % 80]
    misses = {}
    for policy in POLICIES:
        p = Params(config="hybrid-prefetch", policy=policy, cache_bytes=16 * 1024,
                   segment_bytes=1024, dram_budget_bytes=1 << 20, readahead_bytes=PAGE)
        sim = Simulation(segment_sized([1] * 80, 1024), trace_of(queries), p,
                         Costs(query_ns=5_000), fast_device(), TIER).run()
        c = sim.acct[0]
        assert c.seg_hits + c.seg_misses == 1500 and c.bypassed == 0
        misses[policy] = c.seg_misses
    assert misses["belady"] == min(misses.values())
    assert misses["belady"] < misses["lru"]


def test_the_model_has_actors_for_every_configuration_of_the_registry():
    """A configuration added to kernels/src/apcache/configs.c needs its actors
    in model/actors.py: this fails until it has them."""
    from tierlab.core import registry
    from tierlab.model import actors

    assert set(registry.configs()) <= set(actors.MODELLED)
