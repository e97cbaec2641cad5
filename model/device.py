"""The storage device of the model: service slots (queue depth) and the device
timing rule shared with the native runtime's emulated device
(sim-configs/README.md, kernels/src/apcache/device.c):

    cost = positioning + bytes / read_bandwidth_bytes_per_s
    positioning = 0 when the request starts at the device address where the
                  device's previous request ended (sequential), else
                  read_latency_ns (+ seek_ns when the spec has it)

`queue_depth` requests are served at once, in arrival order: each positions
in its own slot, but the transfers share the one read bandwidth (one at a
time, in arrival order; a transfer starts at max(slot start + positioning,
the previous transfer's end)), so concurrency hides latency, never adds
bandwidth. Both terms are
rounded to whole nanoseconds as the runtime rounds them. Every shard and
file has its own range of one device address space, so "sequential" is one
comparison and duplicated shards sit apart on the device.

Units: ns, bytes.
"""
from __future__ import annotations

from collections import deque

import simpy


class Slots:
    """Service slots taken in FIFO order, like simpy.Resource(capacity).

    A free slot is taken without an event (only a request that must queue
    gets one): a simpy.Resource request and release are events, several
    times the Python cost of a Slots.take, and the model issues one per
    device read. Lifecycle: `free` slots; `take()` returns None (got one) or an
    event that fires when a slot is handed over; `give()` hands the slot to
    the oldest waiter or frees it."""

    __slots__ = ("env", "capacity", "free", "waiting")

    def __init__(self, env: simpy.Environment, capacity: int):
        self.env = env
        self.capacity = capacity
        self.free = capacity
        self.waiting: deque = deque()

    def take(self):
        if self.free and not self.waiting:
            self.free -= 1
            return None
        ev = self.env.event()
        self.waiting.append(ev)
        return ev

    def give(self) -> None:
        if self.waiting:
            self.waiting.popleft().succeed()
        else:
            self.free += 1


class Device:
    """One storage device from a storage spec (tierlab.core.specs, kind storage)."""

    def __init__(self, env: simpy.Environment, *, read_bandwidth_bytes_per_s: float,
                 read_latency_ns: float, queue_depth: int, seek_ns: float = 0.0,
                 name: str = "device"):
        self.env = env
        self.name = name
        self.ns_per_byte = 1e9 / float(read_bandwidth_bytes_per_s)
        self.position_ns = int(float(read_latency_ns) + float(seek_ns) + 0.5)
        self.slots = Slots(env, int(queue_depth))
        self.last_end = -1
        self.xfer_free = 0  # when the shared transfer is free
        self.reads = 0
        self.bytes = 0
        self.busy_ns = 0

    @classmethod
    def from_spec(cls, env, spec) -> "Device":
        return cls(env, read_bandwidth_bytes_per_s=spec["read_bandwidth_bytes_per_s"],
                   read_latency_ns=spec["read_latency_ns"], queue_depth=int(spec["queue_depth"]),
                   seek_ns=spec.get("seek_ns", 0.0) or 0.0, name=spec.name)

    def _plan(self, addr: int, nbytes: int) -> tuple[int, int]:
        """(busy ns, ns until done) of a request starting now in a slot:
        positioning in the slot, then the transfer in its turn."""
        xfer = int(nbytes * self.ns_per_byte + 0.5)
        pos = 0 if addr == self.last_end else self.position_ns
        now = self.env.now
        done = max(now + pos, self.xfer_free) + xfer
        self.xfer_free = done
        self.last_end = addr + nbytes
        return pos + xfer, done - now

    def read(self, addr: int, nbytes: int, acct=None):
        """Process step: one read of nbytes at device address addr; waits for a
        slot, then for its service time. `acct` (optional) gets reads,
        bytes_read and busy_ns added."""
        yield from self.read_many(((addr, nbytes),), acct)

    def read_many(self, requests, acct, log=None, core=-1, who="", term=-1, before_ns=0):
        """Process step: the reads (addr, nbytes, ...) one after the other, as
        one thread issues them (each waits for a slot and its service time;
        other requests may come between them), each after before_ns of the
        reader's own CPU (its page-cache bookkeeping). Logs each read when
        `log` is a list."""
        env, slots = self.env, self.slots
        for addr, nbytes, *where in requests:
            if before_ns:
                yield env.timeout(before_ns)
            ev = slots.take()
            if ev is not None:
                yield ev
            cost, wait = self._plan(addr, nbytes)
            self.reads += 1
            self.bytes += nbytes
            self.busy_ns += cost
            if acct is not None:
                acct.reads += 1
                acct.bytes_read += nbytes
                acct.busy_ns += cost
            if log is not None:
                log.append((env.now, core, who, "read", term,
                            {"addr": addr, "bytes": nbytes, "service_ns": cost}))
            yield env.timeout(wait)
            slots.give()
