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
