"""docs/apcache.md's two worked examples of adaptive lookahead (8 segments), run
step by step through the model's hybrid-prefetch worker and query thread."""
from __future__ import annotations

from model_helpers import Costs, fast_device, segment_sized, trace_of

from tierlab.core import specs
from tierlab.model.sim import Params, Simulation

SEG = 1024


def run(segments, queries, query_ns=1_000_000):
    log = []
    p = Params(config="hybrid-prefetch", cache_bytes=8 * SEG, segment_bytes=SEG,
               dram_budget_bytes=1 << 20, readahead_bytes=4096)
    sim = Simulation(segment_sized(segments, SEG), trace_of(queries), p,
                     Costs(query_ns=query_ns), fast_device(),
                     specs.load("optane-dcpmm-g1"), log=log).run()
    return sim, log


def events(log, actor, what):
    return [e for e in log if e[2] == actor and e[3] == what]


def query_done_at(log, q):
    return next(e[0] for e in events(log, "query", "done") if e[5]["query"] == q)


def test_example_1_worker_waits_for_the_victim_then_evicts_it():
    # t0 (4 segments), t1 (1), t2 (4); one term per query
    sim, log = run([4, 1, 4], [[0], [1], [2]])
    pre = events(log, "worker", "prefetched")
    assert [(e[4], e[5]["rolling_sum"]) for e in pre[:2]] == [(0, 4), (1, 5)]
    # cache full (5 used, 3 free): the 4th segment of t2 needs the LRU term t0
    waits = events(log, "worker", "wait")
    assert waits, "the worker never waited"
    first = waits[0]
    assert first[4] == 0 and first[5]["segments"] == 4 and first[5]["rolling_sum"] == 5
    assert first[5]["reason"] == "rule"  # the rule, not only the pin, says wait
    assert 5 + 4 > 8
    # it waits exactly until the query thread finishes t0 and pops 4 (sum 1)
    done0 = query_done_at(log, 0)
    evicts = events(log, "worker", "evict")
    assert [e[4] for e in evicts] == [0]
    assert evicts[0][0] == done0 > first[0]
    popped = [e for e in events(log, "query", "query_done") if e[0] == done0]
    assert popped[0][5]["popped"] == 4 and popped[0][5]["rolling_sum"] == 1
    # then it completes t2: sum 5, FIFO [1, 4]
    assert (pre[2][4], pre[2][5]["rolling_sum"], pre[2][5]["pending"]) == (2, 5, 2)
    assert pre[2][0] > done0
    assert sim.acct[0].worker_stall_ns == done0 - first[0]
    assert sim.acct[0].bypassed == 0 and sim.acct[0].evicted_before_use == 0
    assert sim.shards[0].q_done == 3


def test_example_2_a_repeat_makes_the_in_use_term_the_victim():
    # t0 (3), t1 (5), t0 again (a repeat), t2 (5)
    sim, log = run([3, 5, 5], [[0], [1], [0], [2]])
    pre = events(log, "worker", "prefetched")
    assert [(e[4], e[5]["rolling_sum"]) for e in pre[:3]] == [(0, 3), (1, 8), (0, 11)]
    done0, done1 = query_done_at(log, 0), query_done_at(log, 1)
    # after the query thread finishes t0 (pops 3), sum is 8 and the LRU victim
    # is t1, which the query thread is on now: 8 + 5 > 8, so the worker waits
    # (the wrong rule, rolling_sum > total, would say 8 > 8 = false: evict)
    waits = [e for e in events(log, "worker", "wait") if e[0] == done0]
    assert waits and waits[-1][4] == 1
    assert waits[-1][5]["rolling_sum"] == 8 and not 8 > 8
    assert waits[-1][5]["rolling_sum"] + waits[-1][5]["segments"] > 8
    assert waits[-1][5]["reason"] == "rule"
    # after the query thread finishes t1 (sum 3): 3 + 5 = 8, not > 8: evict t1
    evicts = events(log, "worker", "evict")
    assert [e[4] for e in evicts] == [1]
    assert evicts[0][0] == done1 > done0
    # t1 was never evicted while the query thread used it; every query finished
    assert sim.acct[0].evicted_before_use == 0 and sim.acct[0].bypassed == 0
    assert sim.acct[0].seg_hits == 1 and sim.acct[0].seg_misses == 3
    assert sim.shards[0].q_done == 4
