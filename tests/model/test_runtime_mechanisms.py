"""Mechanisms the model shares with the native runtime (kernels/src/apcache/):
the cost table's result and candidate terms, the query thread's read order,
the readahead cap of a small page cache."""
from __future__ import annotations

import math

import numpy as np
import pytest
from model_helpers import Costs, fast_device, index_of, trace_of

from tierlab.model import costs as costs_mod
from tierlab.model.pagecache import PAGE
from tierlab.model.sim import Params, Simulation, shortest_postings


def table(result_ns=0.0, candidate_ns=0.0) -> costs_mod.Costs:
    single = costs_mod.Coefficients(1000.0, 0.0, 0.0, result_ns=result_ns)
    and_ = costs_mod.Coefficients(2000.0, 0.0, 0.0, result_ns=result_ns,
                                  candidate_ns=candidate_ns)
    return costs_mod.Costs(single=single, and_=and_, codec="pfor-delta256", block_size=256)


def latencies(costs, k=1024):
    ix = index_of([PAGE, PAGE, PAGE], postings=[5000, 300, 800])
    tr = trace_of([[0], [0, 1], [2, 0]], postings=[5000, 40, 2000])
    p = Params(config="base", cache_bytes=1 << 20, passes=1, k=k)
    sim = Simulation(ix, tr, p, costs, fast_device(read_latency_ns=0.0), None).run()
    return sim.query_rows()["latency_ns"], sim


def test_result_and_candidate_terms_are_charged():
    base, sim = latencies(table())
    assert shortest_postings(sim.base_trace, sim.index).tolist() == [5000, 300, 800]
    extra = latencies(table(result_ns=10.0, candidate_ns=3.0))[0] - base
    # results min(k, postings scored); candidates: the shortest list (AND only)
    assert extra.tolist() == [10 * 1024, 10 * 40 + 3 * 300, 10 * 1024 + 3 * 800]
    small_k = latencies(table(result_ns=10.0), k=10)[0] - base
    assert small_k.tolist() == [100, 100, 100]


def test_a_table_without_the_terms_charges_nothing_more():
    plain = costs_mod.Costs(single=costs_mod.Coefficients(1000.0, 0.0, 0.0),
                            and_=costs_mod.Coefficients(2000.0, 0.0, 0.0),
                            codec="pfor-delta256", block_size=256)
    assert latencies(plain)[0].tolist() == latencies(table())[0].tolist()


def reads_of(config, ra_pages, cache_pages, did_pages=8, freq_pages=8):
    # one term: DID and freq halves of equal size
    ix = index_of([(did_pages + freq_pages) * PAGE])
    assert ix.did_bytes[0] == did_pages * PAGE
    log = []
    p = Params(config=config, cache_bytes=cache_pages * PAGE, readahead_bytes=ra_pages * PAGE,
               lookahead=1 if config == "base-prefetch" else None, passes=1)
    sim = Simulation(ix, trace_of([[0]]), p, Costs(), fast_device(), None, log=log).run()
    span = sim.pagemap.did_span
    return [("did" if e[5]["addr"] < span else "freq", e[5]["bytes"] // PAGE, e[2])
            for e in log if e[3] == "read"]


def test_query_thread_reads_in_cursor_order():
    # DID and freq interleaved, as the runtime's cursor decodes block by block
    assert reads_of("base", 2, 64) == [("did", 2, "query"), ("freq", 2, "query")] * 4


def test_worker_reads_the_did_range_then_the_freq_range():
    assert reads_of("base-prefetch", 2, 64) == [("did", 2, "worker")] * 4 + \
        [("freq", 2, "worker")] * 4


def test_readahead_is_capped_at_a_quarter_of_the_cache():
    # the runtime's page cache reads at most frames / 4 pages at once
    assert {n for _, n, _ in reads_of("base", 32, 8)} == {2}
    assert [n for _, n, _ in reads_of("base", 32, 64)] == [8, 8]


def test_shortest_postings_of_an_empty_query_is_zero():
    ix = index_of([PAGE], postings=[7])
    tr = trace_of([[0], []])
    assert shortest_postings(tr, ix).tolist() == [7, 0]
    assert np.asarray(shortest_postings(trace_of([]), ix)).size == 0


# --- the cost table's extra terms (model/costs.py) -------------------------------

def synthetic_and(rng, n=1500, result_ns=0.0, candidate_ns=0.0):
    import pandas as pd

    cls = rng.choice(["H", "M", "L"], size=n, p=[0.2, 0.3, 0.5])
    short = np.where(cls == "H", rng.integers(300, 5000, n), rng.integers(1, 300, n))
    blocks = np.ceil(short / 256).astype(int) * 2
    scored = (short * rng.uniform(0.001, 0.05, n)).astype(int)
    results = np.minimum(scored, 1024)
    y = 1200 + 300 * blocks + 20 * scored + result_ns * results + candidate_ns * short
    y = y * rng.lognormal(0, 0.03, n)
    return pd.DataFrame({"query_type": "and", "query_class": cls, "blocks_decoded": blocks,
                         "freq_blocks_decoded": blocks, "postings_scored": scored,
                         "results": results, "shortest_postings": short, "latency_ns": y})


def with_single(t):
    import pandas as pd

    s = t.copy()
    s["query_type"] = "single"
    return pd.concat([t, s], ignore_index=True)


def test_fit_finds_the_candidate_cost_of_and_queries():
    rng = np.random.default_rng(5)
    coef, fit, _ = costs_mod.fit_table(with_single(synthetic_and(rng, candidate_ns=25.0)))
    assert abs(coef["and"].candidate_ns - 25.0) < 2.5
    assert fit["and"]["by_class"]["H"]["median_abs_rel_error"] < 0.05


def test_fit_leaves_the_extra_terms_out_when_they_explain_nothing():
    rng = np.random.default_rng(6)
    coef, _, _ = costs_mod.fit_table(with_single(synthetic_and(rng)))
    assert coef["and"].candidate_ns is None and coef["and"].result_ns is None
    assert abs(coef["and"].block_ns - 300) < 30


def test_extra_terms_round_trip_and_are_checked(tmp_path):
    import json

    import pytest

    from tierlab.core.errors import TierlabError

    t = table(result_ns=4.0, candidate_ns=2.5)
    back = costs_mod.Costs.load(t.save(tmp_path / "c.json"))
    assert back.and_.candidate_ns == 2.5 and back.single.result_ns == 4.0
    assert back.single.candidate_ns is None
    d = json.loads((tmp_path / "c.json").read_text())
    d["and"]["candidate_ns"] = -1
    (tmp_path / "bad.json").write_text(json.dumps(d))
    with pytest.raises(TierlabError, match="and.candidate_ns"):
        costs_mod.Costs.load(tmp_path / "bad.json")


# --- thread hand-off (the cost table's `threads`) -----------------------------------

class HandoffCosts(Costs):
    def __init__(self, wake=0.0, signal=0.0, **kw):
        super().__init__(**kw)
        self.h = (wake, signal)

    def handoff(self):
        return self.h


def prefetch_run(wake, signal, config="base-prefetch", spin=0):
    ix = index_of([PAGE, PAGE, PAGE])
    tr = trace_of([[0], [1], [2]])
    p = Params(config=config, cache_bytes=1 << 20, passes=1,
               lookahead=16 if config == "base-prefetch" else None, handoff_spin_ns=spin)
    from tierlab.core import specs

    tier = specs.load("ddr4-2666") if p.hybrid else None
    sim = Simulation(ix, tr, p, HandoffCosts(wake, signal, query_ns=1000),
                     fast_device(read_latency_ns=50_000.0), tier).run()
    return sim.query_rows(), sim


def test_a_waiting_query_thread_resumes_wake_ns_after_its_signal():
    q0, _ = prefetch_run(0, 0)
    q1, sim = prefetch_run(7000, 0)
    assert sim.wake_ns == 7000
    # the first query waits for its prefetch: 7 us longer
    assert q0["wait_ns"][0] > 0
    assert q1["wait_ns"][0] - q0["wait_ns"][0] == 7000


def test_a_thread_still_spinning_when_signalled_resumes_at_once():
    # the first query waits ~51 us for its prefetch (a 50 us read)
    blocked, _ = prefetch_run(7000, 0)
    spun, _ = prefetch_run(7000, 0, spin=1_000_000)
    assert spun["wait_ns"][0] == blocked["wait_ns"][0] - 7000  # no wake-up
    short, _ = prefetch_run(7000, 0, spin=10_000)  # blocked after 10 us: woken as before
    assert short["wait_ns"][0] == blocked["wait_ns"][0]
    # notifying a spinning worker costs the notifier nothing; a blocked one signal_ns
    q_block, _ = prefetch_run(0, 3000, "hybrid")
    q_spin, _ = prefetch_run(0, 3000, "hybrid", spin=1_000_000)
    assert (q_block["start_ns"] - q_spin["start_ns"]).tolist() == [0, 3000, 6000]


class DrawnWakeCosts(HandoffCosts):
    def __init__(self, samples, **kw):
        super().__init__(wake=float(np.median(samples)), **kw)
        self.samples = np.asarray(samples, dtype=np.float64)

    def wake_samples(self):
        return self.samples


def wake_sim(costs, seed=0, drawn=True):
    ix = index_of([PAGE] * 40)
    tr = trace_of([[i] for i in range(40)])
    p = Params(config="base-prefetch", cache_bytes=1 << 20, passes=1, lookahead=1)
    return Simulation(ix, tr, p, costs, fast_device(read_latency_ns=50_000.0), None, seed=seed,
                      drawn_wake_ups=drawn)


def test_wake_ups_are_drawn_from_the_measured_ones_seeded():
    samples = [1000, 2000, 3000, 900_000]
    sims = [wake_sim(DrawnWakeCosts(samples, query_ns=1000), seed) for seed in (0, 0, 1)]
    draws = [[s.wake() for _ in range(200)] for s in sims]
    assert set(draws[0]) == set(samples)  # only measured values, each of them in 200 draws
    assert draws[0] == draws[1] and draws[0] != draws[2]  # the seed decides, and only it
    # a table without samples, or draws not asked for: the median for every wake-up
    assert {wake_sim(HandoffCosts(2500, 0, query_ns=1000)).wake() for _ in range(5)} == {2500}
    median = wake_sim(DrawnWakeCosts(samples, query_ns=1000), drawn=False)
    assert {median.wake() for _ in range(50)} == {2500}
    # in a run, every wake-up of the waiting query thread is a draw: the tail shows in its waits
    tail = wake_sim(DrawnWakeCosts(samples, query_ns=1000)).run().query_rows()["wait_ns"]
    flat = wake_sim(DrawnWakeCosts([2000] * 4, query_ns=1000)).run().query_rows()["wait_ns"]
    assert max(tail) > 900_000 > max(flat)


def test_signalling_a_waiting_worker_costs_the_query_thread():
    q0, s0 = prefetch_run(0, 0, "hybrid")
    q1, s1 = prefetch_run(0, 3000, "hybrid")
    # the copy worker waits for every query's end: each end costs 3 us more,
    # between queries (latency unchanged)
    assert (q1["latency_ns"] == q0["latency_ns"]).all()
    assert (q1["start_ns"] - q0["start_ns"]).tolist() == [0, 3000, 6000]


# --- copy into the segment cache (the cost table's threads.copy_bytes_per_s) ---------

def test_copy_rate_probe_measures_a_positive_rate():
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    rate = ffi.new("double *")
    assert lib.tierlab_apcache_copy_rate(4 << 20, 3, rate) == 0
    # a rate (finite, positive); its size is a measurement (tests/bench/)
    assert math.isfinite(rate[0]) and rate[0] > 0
    assert lib.tierlab_apcache_copy_rate(1000, 3, rate) != 0  # below 1 MiB: refused


class CopyCosts(Costs):
    def __init__(self, rate, **kw):
        super().__init__(**kw)
        self.rate = rate

    def copy_rate(self):
        return self.rate


def test_copies_go_at_the_slower_of_tier_and_copying_thread():
    from tierlab.core import specs

    ix = index_of([8 * PAGE, 8 * PAGE])
    tr = trace_of([[0], [1]])
    p = Params(config="hybrid-prefetch", cache_bytes=1 << 20, segment_bytes=4096, passes=1)
    tier = specs.load("ddr4-2666")
    chain = 8 * PAGE + 8  # postings + offsets of one block
    fast = Simulation(ix, tr, p, CopyCosts(None), fast_device(), tier)
    slow = Simulation(ix, tr, p, CopyCosts(1e9), fast_device(), tier)
    assert fast.copy_ns[0] == round(chain * 1e9 / 76.8e9)
    assert slow.copy_ns[0] == round(chain * 1e9 / 1e9)  # 1 GB/s < 76.8 GB/s


# --- cores sharing the memory side (the cost table's cores.cpu_factor) ---------------

class CoreCosts(Costs):
    def __init__(self, factors, **kw):
        super().__init__(**kw)
        self.t = costs_mod.Costs(single=costs_mod.Coefficients(0, 0, 0),
                                 and_=costs_mod.Coefficients(0, 0, 0), codec="pfor-delta256",
                                 block_size=256, extra={"cores": {"cpu_factor": factors}})

    def cpu_factor(self, cores):
        return self.t.cpu_factor(cores)


def core_run(costs, cores):
    ix = index_of([PAGE], blocks=[3])
    tr = trace_of([[0]] * 4, blocks=[3] * 4)  # read once, then served from the page cache
    p = Params(config="base", cache_bytes=1 << 20, passes=1, cores=cores)
    return Simulation(ix, tr, p, costs, fast_device(read_latency_ns=0.0), None).run()


def test_each_query_costs_cpu_factor_more_cpu_on_several_cores():
    plain = core_run(Costs(query_ns=1000, block_ns=2000), 2)
    two = core_run(CoreCosts({"1": 1.0, "2": 1.5}, query_ns=1000, block_ns=2000), 2)
    four = core_run(CoreCosts({"1": 1.0, "2": 1.5}, query_ns=1000, block_ns=2000), 4)
    assert two.extra()["cores_cpu_factor"] == 1.5
    assert four.extra()["cores_cpu_factor_source"].startswith("extrapolated")
    def cached(sim):  # each core's queries after its first: CPU only
        q = sim.query_rows()
        return set(q["latency_ns"][q["query_id"] > 0].tolist())

    assert cached(plain) == {7000}  # 1000 + 3 blocks x 2000
    assert cached(two) == {10500}
    assert cached(four) == {17500}  # x (1 + 3 x 0.5): +0.5 per core beyond the first
    # a table without the section: the cores do not slow each other, and the run says so
    assert plain.extra()["cores_cpu_factor"] == 1.0
    assert core_run(CoreCosts({"1": 1.0, "2": 1.5}, query_ns=1000), 1).extra()[
        "cores_cpu_factor"] == 1.0


# --- a block read through the runtime's emulated page cache (threads.page_hit_ns) -----

def test_page_hit_probe_measures_a_small_positive_cost():
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    ns = ffi.new("double *")
    assert lib.tierlab_apcache_page_hit_ns(256, 3, ns) == 0
    # ns per access (a lock, a lookup and a copy): a pass's wall time over its
    # accesses, so finite and positive; its size is a measurement (tests/bench/)
    assert math.isfinite(ns[0]) and ns[0] > 0
    assert lib.tierlab_apcache_page_hit_ns(8192, 3, ns) != 0  # beyond a page: refused
    assert lib.tierlab_apcache_page_hit_ns(256, 0, ns) != 0


def test_page_miss_probe_measures_the_bookkeeping_of_a_read():
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    ns = ffi.new("double *")
    assert lib.tierlab_apcache_page_miss_ns(32, 3, ns) == 0
    # per read: frames reserved and released, not the copy. The probe is a difference
    # of two timings clamped at 0, so on a busy machine it may be 0: its size is a
    # measurement (bench), its contract here is a finite, bounded, non-negative value
    assert 0 <= ns[0] < 1_000_000
    # no run, a run beyond 1 MiB, no pass, more than 1000 passes: refused
    for run, passes in ((0, 3), (257, 3), (32, 0), (32, 1001)):
        assert lib.tierlab_apcache_page_miss_ns(run, passes, ns) != 0


def test_every_read_through_the_page_cache_pays_page_miss_ns_before_its_device_time():
    def run(miss_ns):
        ix = index_of([3 * PAGE, 5 * PAGE, 2 * PAGE])
        tr = trace_of([[0], [1], [2], [0]])
        p = Params(config="base", cache_bytes=1 << 20, passes=1, page_miss_ns=miss_ns,
                   readahead_bytes=PAGE)  # a read per page
        return Simulation(ix, tr, p, Costs(query_ns=1000), fast_device(read_latency_ns=5000.0),
                          None).run()

    plain, slow = run(0.0), run(700.0)
    reads = slow.metrics()["storage_reads"]
    assert reads == plain.metrics()["storage_reads"] >= 5
    # one thread: each read waits for its bookkeeping first, and nothing overlaps it
    assert slow.elapsed_ns - plain.elapsed_ns == 700 * reads
    lat = slow.query_rows()["latency_ns"] - plain.query_rows()["latency_ns"]
    assert lat[-1] == 0  # the repeat is a hit: no read, nothing charged


def test_a_fifo_page_cache_does_not_keep_a_repeated_term():
    def misses(policy):
        ix = index_of([2 * PAGE] * 3)  # a DID page and a freq page each, none shared
        tr = trace_of([[0], [1], [0], [2], [0]])
        p = Params(config="base", cache_bytes=4 * PAGE, passes=1, readahead_bytes=PAGE,
                   page_cache_policy=policy)
        sim = Simulation(ix, tr, p, Costs(query_ns=1000), fast_device(read_latency_ns=0.0),
                         None).run()
        return sim.query_rows()["page_cache_misses"].tolist()

    # the cache holds two terms
    assert misses("lru") == [2, 2, 0, 2, 0]   # the repeat moved term 0 up: term 1 goes
    assert misses("fifo") == [2, 2, 0, 2, 2]  # term 0 came first, so it goes first


def test_each_block_from_the_page_cache_costs_two_page_hits():
    def cached_latency(config, page_hit_ns):
        ix = index_of([PAGE], blocks=[3])
        tr = trace_of([[0]] * 3, blocks=[3] * 3)  # read once, then from a cache
        p = Params(config=config, cache_bytes=1 << 20, passes=1, page_hit_ns=page_hit_ns,
                   segment_bytes=4096, dram_budget_bytes=1 << 20)
        from tierlab.core import specs

        tier = specs.load("ddr4-2666") if p.hybrid else None
        sim = Simulation(ix, tr, p, Costs(query_ns=1000), fast_device(read_latency_ns=0.0),
                         tier).run()
        return sim.query_rows()["latency_ns"][1:].tolist()

    assert cached_latency("base", 0.0) == [1000, 1000]
    assert cached_latency("base", 50.0) == [1300, 1300]  # 3 blocks x (DID + freq) x 50 ns
    # hybrid: the segment cache serves the term after its first use, not the page cache
    assert cached_latency("hybrid", 50.0)[-1] == cached_latency("hybrid", 0.0)[-1]


# --- a second steady state (Params.head_start, check_bistable) ------------------------

def thrash_case(head_start: bool):
    """base-prefetch, LA 4, a 6-page page cache, queries of one 2-page term
    each (no readahead beyond it: a quarter of the cache is one page), 30 us
    of CPU against two 50 us reads on a device serving one at a time: the
    worker is the slower thread, so it stays about one query ahead and every
    prefetched page is used (3 queries fit). Started four queries ahead, its
    reads evict the query thread's pages before their use; the query thread
    rereads them, which keeps it behind: the same run has a second, slower
    steady state."""
    ix = index_of([2 * PAGE] * 60)
    tr = trace_of([[i] for i in range(60)])
    p = Params(config="base-prefetch", cache_bytes=6 * PAGE, passes=1, lookahead=4,
               head_start=head_start)
    return Simulation(ix, tr, p, Costs(query_ns=30_000),
                      fast_device(read_latency_ns=50_000.0), None).run()


def test_a_head_start_puts_the_worker_as_far_ahead_as_its_lookahead():
    sim = thrash_case(head_start=True)
    assert sim.shards[0].rec_lookahead[0] == 4  # the query thread began with 4 prefetched
    normal = thrash_case(head_start=False)
    assert normal.shards[0].rec_lookahead[0] == 0


def test_a_fixed_lookahead_on_a_small_cache_has_two_steady_states():
    from tierlab.model.config import head_start_check

    usual, ahead = thrash_case(False), thrash_case(True)
    mu, ma = usual.metrics(), ahead.metrics()
    assert mu["page_cache_miss_rate"] == 0.5  # each page read once (a miss, then a hit)
    assert ma["page_cache_miss_rate"] > 0.9   # read twice: the query thread's touch misses
    assert ahead.tail_qps() < 0.8 * usual.tail_qps()  # and it stays so to the end
    check = head_start_check(mu, usual.tail_qps(), ma, ahead.tail_qps(), ahead.elapsed_ns)
    assert check["bistable"]
    # the other state's QPS counts the worker's head start (the runtime's clock would)
    assert check["head_start"]["qps"] == pytest.approx(60 / (ahead.elapsed_ns / 1e9))
    # second halves within 10 % of each other: one steady state, whatever the start did
    assert not head_start_check(mu, 100.0, ma, 95.0, ahead.elapsed_ns)["bistable"]


def test_a_head_start_that_only_shifts_the_start_is_not_a_second_state():
    # a cache holding every query's pages: started ahead, the run converges to the same rate
    ix = index_of([2 * PAGE] * 60)
    tr = trace_of([[i] for i in range(60)])
    runs = [Simulation(ix, tr, Params(config="base-prefetch", cache_bytes=256 * PAGE, passes=1,
                                      lookahead=4, head_start=h), Costs(query_ns=30_000),
                       fast_device(read_latency_ns=50_000.0), None).run() for h in (False, True)]
    assert runs[1].tail_qps() == pytest.approx(runs[0].tail_qps(), rel=0.02)


def test_a_base_prefetch_worker_pays_page_touch_ns_for_every_page_it_reads():
    def waits(touch):
        ix = index_of([3 * PAGE, 5 * PAGE])  # DID + freq: 2 and 3 pages (odd split: 1.5 pages each)
        tr = trace_of([[0], [1]])
        p = Params(config="base-prefetch", cache_bytes=1 << 20, passes=1, lookahead=4,
                   page_touch_ns=touch)
        sim = Simulation(ix, tr, p, Costs(query_ns=1000), fast_device(read_latency_ns=0.0),
                         None).run()
        return sim.query_rows()["wait_ns"], sim.pagemap

    base, pm = waits(0.0)
    slow, _ = waits(250.0)
    pages = int(pm.npages[0][0] + pm.npages[1][0])
    assert pages >= 3
    assert slow[0] - base[0] == 250 * pages  # query 0 waits for its term's touches too


def test_page_touch_ns_comes_from_the_table():
    t = costs_mod.Costs(single=costs_mod.Coefficients(1.0, 0.0, 0.0),
                        and_=costs_mod.Coefficients(1.0, 0.0, 0.0), codec="pfor-delta256",
                        block_size=256, extra={"threads": {"page_touch_ns": 300.0}})
    assert t.page_touch_ns() == 300.0 and t.page_hit_ns() == 0.0
    with pytest.raises(Exception, match="page_touch_ns"):
        costs_mod.Costs(single=t.single, and_=t.and_, codec="pfor-delta256", block_size=256,
                        extra={"threads": {"page_touch_ns": -1}}).page_touch_ns()


def test_a_hybrid_worker_behind_the_page_cache_skips_terms_and_never_reads_storage():
    from tierlab.core import specs

    def run(copy_rate):
        ix = index_of([2 * PAGE] * 6)  # a DID page and a freq page each
        tr = trace_of([[t] for t in range(6)])
        p = Params(config="hybrid", cache_bytes=1 << 20, segment_bytes=4096, passes=1,
                   dram_budget_bytes=6 * PAGE, readahead_bytes=PAGE)  # three terms' pages
        return Simulation(ix, tr, p, CopyCosts(copy_rate, query_ns=1000),
                          fast_device(read_latency_ns=1000.0), specs.load("ddr4-2666")).run()

    # copying term 0 takes ~8 ms, each query ~11 us: terms 1 and 2 have left the
    # page cache when the worker comes to them, terms 3-5 are still there
    slow = run(1e6)
    assert slow.extra()["worker_skipped_terms"] == 2
    q = slow.query_rows()
    # every read is the query thread's: 2 per term, nothing reread by the worker
    assert slow.metrics()["storage_reads"] == int(q["page_cache_misses"].sum()) == 12
    fast = run(None)  # a worker right behind the query thread copies every term
    assert fast.extra()["worker_skipped_terms"] == 0
    assert fast.metrics()["storage_reads"] == 12
