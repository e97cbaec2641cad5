"""model/cache.py: the C cache policies through the Python wrapper, against
independent pure-Python references and against libCacheSim on the same
exported trace."""
from __future__ import annotations

import struct
from collections import OrderedDict, deque

import numpy as np
import pytest

from tierlab.core.errors import TierlabError
from tierlab.model.cache import (NEVER, POLICIES, Cache, Lookahead, next_uses,
                                 write_oracle_general)


# ---- traces ---------------------------------------------------------------------------

def zipf_trace(n, nkeys, alpha, seed):
    """Keys 0..nkeys-1 with Zipf(alpha) popularity, popular keys scattered."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, nkeys + 1) ** alpha
    ranks = rng.choice(nkeys, size=n, p=p / p.sum())
    return rng.permutation(nkeys)[ranks].astype(np.uint64)


def uniform_trace(n, nkeys, seed):
    return np.random.default_rng(seed).integers(0, nkeys, n).astype(np.uint64)


def key_sizes(nkeys, hi, seed):
    return np.random.default_rng(seed).integers(1, hi + 1, nkeys).astype(np.uint64)


TRACES = {
    "uniform": lambda: uniform_trace(20_000, 500, 1),
    "zipf0.9": lambda: zipf_trace(20_000, 2_000, 0.9, 2),
    "zipf1.2": lambda: zipf_trace(20_000, 2_000, 1.2, 3),
}


# ---- independent references ----------------------------------------------------------

def ref_lru(keys, sizes, capacity):
    """LRU with weighted sizes on an OrderedDict (last = most recent)."""
    held: OrderedDict[int, int] = OrderedDict()
    used, hits, evictions = 0, [], 0
    for k, s in zip(keys.tolist(), sizes.tolist()):
        if k in held:
            held.move_to_end(k)
            hits.append(True)
            continue
        hits.append(False)
        if s > capacity:
            continue
        while capacity - used < s:
            _, vs = held.popitem(last=False)
            used -= vs
            evictions += 1
        held[k] = s
        used += s
    return np.array(hits), evictions, used, len(held)


def ref_fifo(keys, capacity):
    q, held, hits = deque(), set(), []
    for k in keys.tolist():
        hits.append(k in held)
        if k in held:
            continue
        if len(held) == capacity:
            held.discard(q.popleft())
        q.append(k)
        held.add(k)
    return np.array(hits)


def ref_clock(keys, capacity):
    """CLOCK on a deque: the hand is at the left end, new keys at the right."""
    q, ref, hits = deque(), {}, []
    for k in keys.tolist():
        if k in ref:
            ref[k] = 1
            hits.append(True)
            continue
        hits.append(False)
        if len(ref) == capacity:
            while ref[q[0]]:
                ref[q[0]] = 0
                q.rotate(-1)
            del ref[q.popleft()]
        q.append(k)
        ref[k] = 0
    return np.array(hits)


# ---- against the references ---------------------------------------------------------

@pytest.mark.parametrize("trace", sorted(TRACES))
@pytest.mark.parametrize("weighted", [False, True], ids=["unit", "weighted"])
@pytest.mark.parametrize("frac", [0.02, 0.2])
def test_lru_matches_ordereddict_reference(trace, weighted, frac):
    keys = TRACES[trace]()
    nkeys = int(keys.max()) + 1
    size_of = key_sizes(nkeys, 16 if weighted else 1, 9)
    sizes = size_of[keys]
    capacity = max(20, int(frac * size_of.sum()))
    want, evictions, used, nheld = ref_lru(keys, sizes, capacity)
    c = Cache("lru", nkeys, capacity)
    got = c.access_many(keys, sizes if weighted else None)
    assert got.dtype == np.bool_
    first = np.flatnonzero(got != want)
    assert first.size == 0, f"first difference at request {first[0]}"
    st = c.stats
    assert st["hits"] == want.sum() and st["misses"] == (~want).sum()
    assert st["hit_units"] == sizes[want].sum() and st["miss_units"] == sizes[~want].sum()
    assert (st["evictions"], st["used"], st["keys"]) == (evictions, used, nheld)
    assert st["used"] <= capacity and st["peak_used"] <= capacity
    assert c.free_units == capacity - used


def test_access_one_by_one_equals_access_many():
    keys = TRACES["zipf0.9"]()[:3000]
    size_of = key_sizes(2000, 8, 4)
    a, b = Cache("s3-fifo", 2000, 300), Cache("s3-fifo", 2000, 300)
    one = [a.access(int(k), int(size_of[k])) for k in keys]
    assert np.array_equal(np.array(one), b.access_many(keys, size_of[keys]))
    assert a.stats == b.stats


@pytest.mark.parametrize("trace", sorted(TRACES))
def test_fifo_and_clock_match_references(trace):
    keys = TRACES[trace]()
    nkeys = int(keys.max()) + 1
    for cap in (10, 150):
        assert np.array_equal(Cache("fifo", nkeys, cap).access_many(keys), ref_fifo(keys, cap))
        assert np.array_equal(Cache("clock", nkeys, cap).access_many(keys), ref_clock(keys, cap))


def test_fifo_ignores_hits_lru_does_not():
    for policy, survivor in (("fifo", 1), ("lru", 0)):
        c = Cache(policy, 8, 2)
        c.access_many(np.array([0, 1, 0, 2], dtype=np.uint64))
        assert c.contains(survivor) and c.contains(2), policy


def test_s3fifo_keeps_a_hot_set_through_scans():
    """Hot keys requested again and again, interleaved with long scans of
    one-hit wonders: S3-FIFO filters the scans through its small FIFO, LRU
    and FIFO let them flush the hot set."""
    rng = np.random.default_rng(5)
    hot = np.arange(50, dtype=np.uint64)
    parts, nxt = [], 1000
    for _ in range(40):
        parts.append(rng.choice(hot, 200))
        parts.append(np.arange(nxt, nxt + 300, dtype=np.uint64))
        nxt += 300
    keys = np.concatenate(parts)
    is_hot = keys < 50
    miss = {p: int((~Cache(p, nxt, 100).access_many(keys))[is_hot].sum())
            for p in ("lru", "fifo", "s3-fifo")}  # misses on hot keys only
    assert miss["s3-fifo"] < 0.2 * min(miss["lru"], miss["fifo"]), miss
    c = Cache("s3-fifo", nxt, 100)
    c.access_many(keys)
    assert all(c.contains(int(k)) for k in hot), "the hot set survived the last scan"


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("trace", sorted(TRACES))
def test_every_policy_invariants(policy, trace):
    keys = TRACES[trace]()
    nkeys = int(keys.max()) + 1
    size_of = key_sizes(nkeys, 6, 11)
    c = Cache(policy, nkeys, 400)
    nu = next_uses(keys) if policy == "belady" else None
    for lo in range(0, keys.size, 5000):  # several calls keep one state
        part = slice(lo, lo + 5000)
        c.access_many(keys[part], size_of[keys[part]], None if nu is None else nu[part])
        st = c.stats
        assert st["used"] <= 400 and st["peak_used"] <= 400
        assert c.contains(int(keys[part][-1])), "the last key was just inserted or hit"
    st = c.stats
    assert st["hits"] + st["misses"] == keys.size
    held = [k for k in range(nkeys) if c.contains(k)]
    assert len(held) == st["keys"] and size_of[held].sum() == st["used"]
    # a range is held when each of its keys is; asking changes nothing
    for k0 in range(0, nkeys - 3, 7):
        assert c.contains_range(k0, 3) == all(c.contains(k) for k in range(k0, k0 + 3))
    assert c.contains_range(0, 0) and not c.contains_range(nkeys - 1, 2)
    assert c.stats == st
    # step-wise: victim names what evict takes, until empty
    evicted = 0
    while (v := c.victim()) is not None:
        assert c.victim() == v, "victim is stable"
        assert c.evict() == v[0] and not c.contains(v[0]) and v[1] == size_of[v[0]]
        evicted += 1
    assert evicted == st["keys"] and c.stats["used"] == 0 and c.evict() is None
    assert c.stats["evictions"] == st["evictions"] + evicted


@pytest.mark.parametrize("trace", sorted(TRACES))
def test_belady_misses_no_more_than_any_policy(trace):
    keys = TRACES[trace]()
    nkeys = int(keys.max()) + 1
    nu = next_uses(keys)
    for cap in (10, 100, 400):
        miss = {p: int((~Cache(p, nkeys, cap).access_many(
            keys, None, nu if p == "belady" else None)).sum()) for p in POLICIES}
        assert all(miss["belady"] <= m for m in miss.values()), (cap, miss)
        assert miss["belady"] < miss["lru"], (cap, miss)


def test_belady_textbook():
    """3 frames on the classic reference string: OPT 9 faults, LRU 12, FIFO 15
    (Silberschatz et al., Operating System Concepts, "Virtual memory")."""
    s = np.array([7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1], dtype=np.uint64)
    faults = {p: int((~Cache(p, 8, 3).access_many(s, None, next_uses(s))).sum())
              for p in ("belady", "lru", "fifo")}
    assert faults == {"belady": 9, "lru": 12, "fifo": 15}


def test_next_uses_against_a_loop():
    keys = uniform_trace(3000, 300, 8)
    want = np.full(keys.size, NEVER, dtype=np.uint64)
    last = {}
    for i in range(keys.size - 1, -1, -1):
        k = int(keys[i])
        if k in last:
            want[i] = last[k]
        last[k] = i
    assert np.array_equal(next_uses(keys), want)
    assert next_uses(np.array([], dtype=np.uint64)).size == 0
    assert next_uses(np.array([3])).tolist() == [NEVER]


# ---- step-wise calls and the lookahead --------------------------------------------------

def test_stepwise_calls():
    c = Cache("lru", 10, 5)
    c.insert(1, 3)
    c.insert(2, 2)
    assert c.free_units == 0 and c.victim() == (1, 3)
    assert c.touch(1) and not c.touch(3) and c.victim() == (2, 2)
    with pytest.raises(TierlabError, match="no room for key 3"):
        c.insert(3, 1)
    with pytest.raises(TierlabError, match="already in the cache"):
        c.insert(1, 1)
    assert c.evict() == 2 and c.remove(1) and not c.remove(1)
    st = c.stats
    assert st["hits"] == st["misses"] == 0, "step-wise calls count no hits or misses"
    assert st["evictions"] == 1 and st["keys"] == 0 and st["peak_used"] == 5


def test_lookahead_worked_example_1():
    la, c = Lookahead(8, 16), Cache("lru", 3, 8)
    c.insert(0, 4)
    la.worker_done(4)
    c.insert(1, 1)
    la.worker_done(1)
    assert (la.rolling_sum, la.pending) == (5, 2)
    assert c.victim() == (0, 4) and not la.may_evict(4)  # 5 + 4 > 8: wait
    assert la.query_done() == 4 and la.rolling_sum == 1 and la.may_evict(4)
    assert c.evict() == 0
    c.insert(2, 4)
    la.worker_done(4)
    assert (la.rolling_sum, la.pending) == (5, 2)
    assert [la.query_done(), la.query_done(), la.query_done()] == [1, 4, -1]


def test_lookahead_full_fifo_is_an_error():
    la = Lookahead(8, 1)
    la.worker_done(2)
    with pytest.raises(TierlabError, match="FIFO is full"):
        la.worker_done(1)
    with pytest.raises(TierlabError, match="max_pending"):
        Lookahead(8, 0)


# ---- errors ---------------------------------------------------------------------------

def test_errors_name_the_bad_value():
    with pytest.raises(TierlabError, match="unknown cache policy 'arc'.*lru"):
        Cache("arc", 10, 5)
    with pytest.raises(TierlabError, match="capacity must be at least 1"):
        Cache("lru", 10, 0)
    with pytest.raises(TierlabError, match="capacity must be in"):
        Cache("lru", 10, -1)
    c = Cache("lru", 10, 5)
    with pytest.raises(TierlabError, match="key 10 out of range.*0..9"):
        c.access(10)
    with pytest.raises(TierlabError, match="size must be at least 1"):
        c.access(1, 0)
    with pytest.raises(TierlabError, match="request 2: key 12 out of range"):
        c.access_many(np.array([1, 2, 12, 3], dtype=np.uint64))
    assert c.stats["misses"] == 2 and not c.contains(3), "the requests before it ran, none after"
    with pytest.raises(TierlabError, match="request 1: size 0"):
        c.access_many(np.array([1, 2], dtype=np.uint64), np.array([1, 0], dtype=np.uint64))
    with pytest.raises(TierlabError, match="sizes has shape"):
        c.access_many(np.array([1, 2], dtype=np.uint64), np.array([1], dtype=np.uint64))
    assert c.access(4, 6) is False and not c.contains(4), "larger than the cache: not admitted"


# ---- libCacheSim's oracleGeneral format and libCacheSim itself --------------------------------

def test_oracle_general_round_trip(tmp_path):
    keys = np.array([5, 7, 5, 2**40, 7], dtype=np.uint64)
    sizes = np.array([10, 20, 10, 1, 20])
    times = np.array([0, 1, 1, 3, 2**32 - 1])
    path = write_oracle_general(tmp_path / "sub" / "t.oracleGeneral", keys, sizes, times)
    raw = path.read_bytes()
    assert len(raw) == 24 * keys.size
    rows = list(struct.iter_unpack("<IQIq", raw))
    assert rows == [(0, 5, 10, 2), (1, 7, 20, 4), (1, 5, 10, -1), (3, 2**40, 1, -1),
                    (2**32 - 1, 7, 20, -1)]
    with pytest.raises(TierlabError, match="sizes must be in 1"):
        write_oracle_general(tmp_path / "bad", keys, np.zeros(5, dtype=int))


def _libcachesim_miss_ratios(path, policy, capacity):
    lcs = pytest.importorskip("libcachesim")
    make = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock, "belady": lcs.Belady,
            "s3-fifo": lambda cap: lcs.S3FIFO(cap, move_to_main_threshold=1)}[policy]
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    return make(capacity).process_trace(reader)  # (request, byte) miss ratios


@pytest.mark.parametrize("policy", ["lru", "fifo", "clock", "belady"])
def test_miss_ratio_equals_libcachesim(tmp_path, policy):
    pytest.importorskip("libcachesim")
    keys = TRACES["zipf0.9"]()
    size_of = key_sizes(2000, 40, 12)
    sizes = size_of[keys]
    path = write_oracle_general(tmp_path / "t.oracleGeneral", keys, sizes)
    for capacity in (500, 5000):
        hit = Cache(policy, 2000, capacity).access_many(
            keys, sizes, next_uses(keys) if policy == "belady" else None)
        ours = (1 - hit.mean(), sizes[~hit].sum() / sizes.sum())
        theirs = _libcachesim_miss_ratios(path, policy, capacity)
        assert ours == pytest.approx(theirs, abs=1e-9), (capacity, ours, theirs)


def test_s3fifo_close_to_libcachesim(tmp_path):
    """libCacheSim's S3FIFO.c differs in details (see kernels/src/cache/s3fifo.c);
    with the same move-to-main threshold the miss ratios stay close."""
    pytest.importorskip("libcachesim")
    keys = TRACES["zipf0.9"]()
    path = write_oracle_general(tmp_path / "t.oracleGeneral", keys)
    for capacity in (50, 500):
        ours = 1 - Cache("s3-fifo", 2000, capacity).access_many(keys).mean()
        theirs = _libcachesim_miss_ratios(path, "s3-fifo", capacity)[0]
        assert abs(ours - theirs) < 0.01, (capacity, ours, theirs)
