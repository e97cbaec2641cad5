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

The drive's read cache (a spec with `drive_cache_bytes`, e.g.
`hdd-7200-readcache`): a segmented read cache with read-ahead, the disk
cache of DiskSim (Bucy, Schindler, Schlosser, Ganger, "The DiskSim
Simulation Environment Version 4.0 Reference Manual", CMU-PDL-08-101, 2008:
the disk module's "Number of buffer segments", "Segment size", "Maximum
read-ahead" and "Read-ahead over requested" parameters). The cache is
`drive_cache_segments` segments of drive_cache_bytes / segments each; a
segment holds one contiguous range of one stream, replaced LRU.

- A request wholly inside a segment's range is a hit: no positioning; it
  is done when the drive has read its last byte into the segment (a
  read-ahead may still be filling it) and then sent it over the
  interface (`interface_bandwidth_bytes_per_s`).
- Otherwise the media serves it: it waits until the head is free (the
  head may be finishing a read-ahead), positions unless the request
  starts where the head is, reads the request and goes on reading ahead
  into the same segment, up to a segment's size past the request's start
  and never past the end of the stream the host is reading (`stream_end`
  of the request: the end of the term's range in its file, page-cache
  readahead included). The request is done when its own bytes are read;
  the read-ahead keeps the head busy after it.
Why the read-ahead stops at the stream's end: a real drive's read-ahead
is interrupted by the next request that needs the head elsewhere
(DiskSim's read-ahead after a request proceeds while the disk is idle);
in the closed loop the host's next request for another term follows the
term's last read at once, so the read-ahead the head would do past the
term's end is cut off there. An uninterruptible read-ahead of a whole
segment instead makes every term end cost up to a segment / bandwidth of
over-read (16 MB at 181 MB/s: 88 ms). What the model does not have: the
drive reading ahead while idle past the stream's end (free time, never
used by the next term: terms lie in random order), NCQ reordering, zoned
bandwidth. The drive cache is shared by all cores.
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
                 name: str = "device", drive_cache: "DriveCache | None" = None):
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
        self.cache = drive_cache

    @classmethod
    def from_spec(cls, env, spec) -> "Device":
        bw = spec["read_bandwidth_bytes_per_s"]
        return cls(env, read_bandwidth_bytes_per_s=bw,
                   read_latency_ns=spec["read_latency_ns"], queue_depth=int(spec["queue_depth"]),
                   seek_ns=spec.get("seek_ns", 0.0) or 0.0, name=spec.name,
                   drive_cache=DriveCache.from_spec(spec, bw))

    def _plan(self, addr: int, nbytes: int, stream_end: int = 0) -> tuple[int, int]:
        """(busy ns, ns until done) of a request starting now in a slot:
        positioning in the slot, then the transfer in its turn (or the drive
        cache's rule, DriveCache.plan)."""
        if self.cache is not None:
            return self.cache.plan(self, addr, nbytes, stream_end)
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
            cost, wait = self._plan(addr, nbytes, where[3] if len(where) > 3 else 0)
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


class DriveCache:
    """The drive's segmented read cache with read-ahead (module docstring).
    Segments are [start, end) ranges of device addresses with the time the
    media began filling them at `t0` from `base` (byte a of the range is in
    the cache at t0 + (a - base) / bandwidth), kept in LRU order."""

    KEYS = ("drive_cache_bytes", "drive_cache_segments", "interface_bandwidth_bytes_per_s")

    def __init__(self, cache_bytes: float, segments: int, interface_bytes_per_s: float,
                 media_bytes_per_s: float):
        self.segments = max(1, int(segments))
        self.segment_bytes = int(cache_bytes) // self.segments
        self.ns_per_byte = 1e9 / float(media_bytes_per_s)
        self.iface_ns_per_byte = 1e9 / float(interface_bytes_per_s)
        self.lru: list = []   # [start, end, base, t0], most recent last
        self.head = -1        # device address under the head after its last read
        self.head_free = 0    # when the head has finished its last read(-ahead)
        self.hits = 0
        self.media_bytes = 0  # read from the media, read-ahead included

    @classmethod
    def from_spec(cls, spec, media_bytes_per_s: float) -> "DriveCache | None":
        if spec.get("drive_cache_bytes") is None:
            return None
        from tierlab.core.errors import TierlabError

        vals = {k: spec.get(k) for k in cls.KEYS}
        for k, v in vals.items():
            if v is None or not v > 0:
                raise TierlabError(f"storage spec '{spec.name}': a drive cache needs '{k}' > 0 "
                                   f"(model/device.py DriveCache), got {v!r}")
        if int(spec["queue_depth"]) != 1:
            raise TierlabError(f"storage spec '{spec.name}': the drive cache model serves one "
                               f"request at a time (queue_depth 1), not {spec['queue_depth']:g}")
        return cls(vals["drive_cache_bytes"], int(vals["drive_cache_segments"]),
                   vals["interface_bandwidth_bytes_per_s"], media_bytes_per_s)

    def plan(self, dev: "Device", addr: int, nbytes: int, stream_end: int) -> tuple[int, int]:
        """(busy ns, ns until done) of a request arriving now (Device._plan)."""
        now = dev.env.now
        end = addr + nbytes
        lru = self.lru
        for i in range(len(lru) - 1, -1, -1):
            seg = lru[i]
            if seg[0] <= addr and end <= seg[1]:
                lru.append(lru.pop(i))
                self.hits += 1
                ready = seg[3] + int((end - seg[2]) * self.ns_per_byte + 0.5)
                done = max(now, ready) + int(nbytes * self.iface_ns_per_byte + 0.5)
                return done - now, done - now
        start = max(now, self.head_free)
        if addr != self.head:
            start += dev.position_ns
        upto = max(end, min(stream_end, addr + self.segment_bytes))
        done = start + int(nbytes * self.ns_per_byte + 0.5)
        self.head_free = start + int((upto - addr) * self.ns_per_byte + 0.5)
        self.head = upto
        self.media_bytes += upto - addr
        for i in range(len(lru) - 1, -1, -1):  # the stream's own segment is reused
            if lru[i][0] <= addr <= lru[i][1]:
                del lru[i]
                break
        lru.append([addr, upto, addr, start])
        if len(lru) > self.segments:
            del lru[0]
        return done - now, done - now
