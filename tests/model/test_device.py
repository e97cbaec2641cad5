"""The device timing rule (sim-configs/README.md) and queueing: one device
with deterministic service and Poisson arrivals against M/D/1."""
from __future__ import annotations

import numpy as np
import simpy

from tierlab.model.device import Device


def make(env, **kw):
    v = dict(read_bandwidth_bytes_per_s=1e9, read_latency_ns=10_000, queue_depth=1)
    v.update(kw)
    return Device(env, **v)


def test_sequential_requests_skip_positioning_and_seek_adds_to_it():
    env = simpy.Environment()
    d = make(env, seek_ns=5_000)
    done = []

    def reader():
        for addr, n in ((0, 4096), (4096, 4096), (100_000, 1000)):
            yield from d.read(addr, n)
            done.append(env.now)

    env.process(reader())
    env.run()
    # 4096 B at 1 GB/s = 4096 ns; positioning 10 us + 5 us seek when not sequential
    assert done == [15_000 + 4096, 15_000 + 2 * 4096, 2 * 15_000 + 2 * 4096 + 1000]
    assert d.reads == 3 and d.bytes == 9192 and d.busy_ns == done[-1]


def test_queue_depth_serves_requests_in_parallel_in_arrival_order():
    env = simpy.Environment()
    d = make(env, queue_depth=2)
    done = {}

    def reader(i):
        yield from d.read(i * 1_000_000, 1000)
        done[i] = env.now

    for i in range(4):
        env.process(reader(i))
    env.run()
    # two slots position at once (10 us); the transfers (1 us) share the bandwidth
    assert done == {0: 11_000, 1: 12_000, 2: 22_000, 3: 23_000}


def test_concurrency_never_adds_bandwidth():
    """Sequential streams on many slots move bytes no faster than the spec's
    read bandwidth (the slots share it)."""
    env = simpy.Environment()
    d = make(env, queue_depth=8, read_latency_ns=0)

    def stream(i):
        for k in range(10):
            yield from d.read(i * 10**9 + k * 100_000, 100_000)

    for i in range(8):
        env.process(stream(i))
    env.run()
    assert env.now == 8 * 10 * 100_000  # 8 MB at 1 GB/s


def test_md1_mean_wait():
    """Poisson arrivals (rate lam) at one slot with deterministic service S:
    mean wait in queue = rho * S / (2 (1 - rho)) (Pollaczek-Khinchine)."""
    service = 10_000  # every request positions (addresses never follow each other)
    rho = 0.5
    n = 200_000
    rng = np.random.default_rng(7)
    gaps = rng.exponential(service / rho, n)
    env = simpy.Environment()
    d = make(env, read_bandwidth_bytes_per_s=1e18, read_latency_ns=service)
    waits = np.zeros(n)

    def request(i, t_arrive):
        yield from d.read(2 * i * 4096, 1)
        waits[i] = env.now - t_arrive - service

    def arrivals():
        t = 0.0
        for i in range(n):
            t += gaps[i]
            yield env.timeout(t - env.now)
            env.process(request(i, env.now))

    env.process(arrivals())
    env.run()
    expected = rho * service / (2 * (1 - rho))
    measured = waits[n // 10:].mean()  # without the warm-up tenth
    assert abs(measured / expected - 1) < 0.02, (measured, expected)
    assert abs(d.busy_ns / env.now - rho) < 0.02


# --- the drive's segmented read cache (model/device.py DriveCache) ---------------------------

def cached(env, **kw):
    from tierlab.model.device import DriveCache

    c = DriveCache(kw.pop("cache_bytes", 4 * 1_000_000), kw.pop("segments", 4),
                   kw.pop("iface", 2e9), 1e9)
    return make(env, drive_cache=c, **kw)


def _run(env, d, reqs):
    """Issue (addr, nbytes, stream_end) one after the other; returns done times."""
    done = []

    def reader():
        for addr, n, end in reqs:
            yield from d.read_many([(addr, n, 0, 0, 0.0, end)], None)
            done.append(env.now)

    env.process(reader())
    env.run()
    return done


def test_drive_cache_reads_ahead_to_the_stream_end_and_two_streams_position_twice():
    env = simpy.Environment()
    d = cached(env)  # 1 MB segments, media 1 GB/s, interface 2 GB/s, positioning 10 us
    # two interleaved streams (a term's DID and freq ranges), 4 reads each of 1000 B
    a, b = 0, 50_000_000
    reqs = []
    for i in range(4):
        reqs += [(a + 1000 * i, 1000, a + 4000), (b + 1000 * i, 1000, b + 4000)]
    done = _run(env, d, reqs)
    c = d.cache
    # the first read of each stream positions and reads ahead to its end; the rest hit
    assert c.media_bytes == 8000 and c.hits == 6
    # the freq stream waits for the DID read-ahead (the head): 10 us + 4000 ns, then
    # positions again: 10 us + its own 1000 ns
    assert done[0] == 10_000 + 1000
    assert done[1] == 10_000 + 4000 + 10_000 + 1000
    # a hit is sent at the interface rate once its bytes are in the cache
    assert done[2] == done[1] + 500
    # without the cache every switch between the streams positions: 8 x (10 us + 1 us)
    env2 = simpy.Environment()
    plain = make(env2)
    assert _run(env2, plain, reqs)[-1] == 8 * 11_000 > done[-1]


def test_drive_cache_read_ahead_stops_at_the_stream_end_not_a_whole_segment():
    env = simpy.Environment()
    d = cached(env)
    # a term of 3000 B and then a far term: the head must not read a 1 MB segment first
    done = _run(env, d, [(0, 1000, 3000), (1000, 2000, 3000), (9_000_000, 1000, 9_001_000)])
    assert d.cache.media_bytes == 3000 + 1000
    # the hit is sent at the interface rate (2000 B: 1000 ns), then the far term positions
    assert done[-1] == 10_000 + 3000 + 1000 + 10_000 + 1000
    # a read-ahead longer than a segment stops at the segment (1 MB here)
    env2 = simpy.Environment()
    d2 = cached(env2)
    _run(env2, d2, [(0, 1000, 5_000_000)])
    assert d2.cache.media_bytes == 1_000_000


def test_drive_cache_evicts_the_least_recently_used_segment():
    env = simpy.Environment()
    d = cached(env, segments=2, cache_bytes=2_000_000)
    s = [i * 10_000_000 for i in range(3)]
    _run(env, d, [(s[0], 100, s[0] + 100), (s[1], 100, s[1] + 100), (s[0], 100, s[0] + 100),
                  (s[2], 100, s[2] + 100), (s[0], 100, s[0] + 100), (s[1], 100, s[1] + 100)])
    # s0 hit twice (most recent when s2 came in), s1 evicted by s2 and read again
    assert d.cache.hits == 2 and d.cache.media_bytes == 400


def test_drive_cache_spec_checks():
    import pytest

    from tierlab.core import specs
    from tierlab.core.errors import TierlabError
    from tierlab.model.device import DriveCache

    spec = specs.load("hdd-7200-readcache", kind="storage")
    c = DriveCache.from_spec(spec, spec["read_bandwidth_bytes_per_s"])
    assert c.segments == 16 and c.segment_bytes == 2**28 // 16
    assert DriveCache.from_spec(specs.load("hdd-7200", kind="storage"), 1e9) is None

    class Bad(dict):
        name = "bad"

        def get(self, k, default=None):
            return {"drive_cache_bytes": 1e6, "queue_depth": 1}.get(k, default)

        def __getitem__(self, k):
            return self.get(k)

    with pytest.raises(TierlabError, match="drive_cache_segments"):
        DriveCache.from_spec(Bad(), 1e9)


def test_runtime_refuses_a_drive_cache_spec():
    import pytest

    from tierlab.core.errors import TierlabError
    from tierlab.runtime.apcache import _device

    with pytest.raises(TierlabError, match="no drive read cache"):
        _device("hdd-7200-readcache")
