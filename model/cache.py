"""Caches for the model: a thin wrapper of the C cache bookkeeping
(kernels/src/cache/, tierlab.h "Caches"), so the SimPy model and the native
APCache runtime count hits, misses and evictions with the same code.

- Cache(policy, nkeys, capacity): one of POLICIES over dense keys
  0..nkeys-1, each with a size in the cache's unit (segments, pages, ...);
  `access_many` runs a whole request array in one C call.
- Lookahead(total_segments, max_pending): rolling_sum and the FIFO of
  docs/apcache.md "Adaptive lookahead".
- next_uses(keys): each request's next occurrence, the oracle BELADY reads.
- write_oracle_general(path, keys, sizes): a request trace in libCacheSim's
  oracleGeneral binary format, to run the same trace through libCacheSim.

Units are the caller's; nothing here knows bytes from segments.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tierlab.core import registry
from tierlab.core.errors import TierlabError
from tierlab.core.native import ffi_lib

NEVER = 2**64 - 1  # next use of a key that is not requested again (TIERLAB_NEVER)
_MAX_SIZE = 2**32 - 1
_STATS = ("hits", "misses", "hit_units", "miss_units", "evictions", "evicted_units",
          "used", "peak_used", "capacity", "keys")


def __getattr__(name: str):
    """POLICIES: the policy names of the C registry (kernels/src/cache/cache.c),
    in table order; read when first used, so that importing this module needs
    no built library (using it does: the "run `make build`" TierlabError)."""
    if name == "POLICIES":
        return registry.policies()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _u64(name: str, value, limit: int = NEVER) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise TierlabError(f"{name} must be an integer, got {value!r}") from None
    if v < 0 or v > limit:
        raise TierlabError(f"{name} must be in 0..{limit}, got {v}")
    return v


class Cache:
    """A cache of `capacity` units over keys 0..nkeys-1 under `policy`.

    access() is the whole request: a hit updates the policy, a miss evicts
    until the key fits and inserts it (a key larger than the capacity is a
    miss and is not inserted). contains/touch/insert/victim/evict/remove are
    the step-wise calls a worker that must look at the victim first uses;
    they never count hits or misses (see tierlab.h). Not thread-safe.
    """

    def __init__(self, policy: str, nkeys: int, capacity: int):
        ffi, lib = ffi_lib()
        index = lib.tierlab_policy_find(policy.encode()) if isinstance(policy, str) else -1
        if index < 0:
            known = ", ".join(registry.policies())
            raise TierlabError(f"unknown cache policy {policy!r}; known: {known}")
        self.nkeys = _u64("nkeys", nkeys, 0xFFFFFFF0)
        self.capacity = _u64("capacity", capacity)
        if self.capacity == 0:
            raise TierlabError("cache capacity must be at least 1 unit, got 0")
        self.policy = policy
        self._ffi, self._lib = ffi, lib
        out = ffi.new("tierlab_cache **")
        rc = lib.tierlab_cache_new(index, self.nkeys, self.capacity, out)
        if rc == lib.TIERLAB_ENOMEM:
            raise TierlabError(f"out of memory for a cache over {self.nkeys} keys")
        if rc != 0:
            raise TierlabError(f"cannot create a {policy} cache of {capacity} units over "
                               f"{nkeys} keys (error {rc})")
        self._c = ffi.gc(out[0], lib.tierlab_cache_free)

    def __repr__(self) -> str:
        return f"Cache({self.policy!r}, nkeys={self.nkeys}, capacity={self.capacity})"

    # -- checks -------------------------------------------------------------------
    def _key(self, key) -> int:
        k = _u64("key", key)
        if k >= self.nkeys:
            raise TierlabError(f"key {k} out of range: this cache has keys 0..{self.nkeys - 1}")
        return k

    @staticmethod
    def _size(size) -> int:
        s = _u64("size", size, _MAX_SIZE)
        if s == 0:
            raise TierlabError("size must be at least 1 unit, got 0")
        return s

    @staticmethod
    def _next(next_use) -> int:
        return NEVER if next_use is None else _u64("next_use", next_use)

    # -- one request -------------------------------------------------------------
    def access(self, key: int, size: int = 1, next_use: int | None = None) -> bool:
        """True on a hit. next_use (BELADY only): position of the key's next
        request, None if never."""
        return self._lib.tierlab_cache_access(self._c, self._key(key), self._size(size),
                                              self._next(next_use)) == 1

    def access_many(self, keys: np.ndarray, sizes: np.ndarray | None = None,
                    next_use: np.ndarray | None = None) -> np.ndarray:
        """Run the requests keys[i] (sizes[i] units, default 1; next use
        next_use[i], default never) in order, in one C call without copies
        when the arrays are contiguous uint64. Returns a bool array of hits.
        A bad request raises after the requests before it have run."""
        ffi = self._ffi
        keys = np.ascontiguousarray(keys, dtype=np.uint64)
        n = keys.size
        if keys.ndim != 1:
            raise TierlabError(f"keys must be a 1-d array, got shape {keys.shape}")
        args = []
        for name, arr in (("sizes", sizes), ("next_use", next_use)):
            if arr is None:
                args.append(ffi.NULL)
                continue
            arr = np.ascontiguousarray(arr, dtype=np.uint64)
            if arr.shape != keys.shape:
                raise TierlabError(f"{name} has shape {arr.shape}, keys has {keys.shape}")
            args.append(ffi.from_buffer("uint64_t[]", arr))
        hit = np.zeros(n, dtype=np.bool_)
        if n == 0:
            return hit
        got = self._lib.tierlab_cache_access_many(
            self._c, ffi.from_buffer("uint64_t[]", keys), args[0], args[1], n,
            ffi.from_buffer("uint8_t[]", hit.view(np.uint8)))
        if got < 0:
            self._explain_bad(keys, sizes)
        return hit

    def _explain_bad(self, keys: np.ndarray, sizes) -> None:
        bad_key = np.flatnonzero(keys >= self.nkeys)
        first = int(bad_key[0]) if bad_key.size else keys.size
        if sizes is not None:
            s = np.ascontiguousarray(sizes, dtype=np.uint64)
            bad_size = np.flatnonzero((s == 0) | (s > _MAX_SIZE))
            if bad_size.size and int(bad_size[0]) < first:
                i = int(bad_size[0])
                raise TierlabError(f"request {i}: size {int(s[i])} is not in 1..{_MAX_SIZE} "
                                   f"(the requests before it have run)")
        if first < keys.size:
            raise TierlabError(f"request {first}: key {int(keys[first])} out of range: this "
                               f"cache has keys 0..{self.nkeys - 1} (the requests before it "
                               f"have run)")
        raise TierlabError("tierlab_cache_access_many refused the requests")

    # -- step-wise -----------------------------------------------------------------
    def contains(self, key: int) -> bool:
        return self._lib.tierlab_cache_contains(self._c, self._key(key)) == 1

    def contains_range(self, key0: int, n: int) -> bool:
        """Whether keys key0 .. key0 + n - 1 are all held (one C call)."""
        return self._lib.tierlab_cache_contains_range(self._c, _u64("key", key0),
                                                      _u64("n", n)) == 1

    def touch(self, key: int, next_use: int | None = None) -> bool:
        """A hit without the miss path: True if the key was held."""
        return self._lib.tierlab_cache_touch(self._c, self._key(key), self._next(next_use)) == 1

    def insert(self, key: int, size: int = 1, next_use: int | None = None) -> None:
        """Put a key that is not held into free space (evict first)."""
        k, s = self._key(key), self._size(size)
        rc = self._lib.tierlab_cache_insert(self._c, k, s, self._next(next_use))
        if rc == self._lib.TIERLAB_ENOMEM:
            raise TierlabError(f"no room for key {k} of {s} units: {self.free_units} free "
                               f"(evict first)")
        if rc != 0:
            raise TierlabError(f"key {k} is already in the cache")

    def victim(self) -> tuple[int, int] | None:
        """(key, size) the policy would evict next, or None when empty. May
        advance CLOCK's hand or S3-FIFO's queues, never changes what is held."""
        k, s = self._ffi.new("uint64_t *"), self._ffi.new("uint64_t *")
        if self._lib.tierlab_cache_victim(self._c, k, s) != 0:
            return None
        return int(k[0]), int(s[0])

    def evict(self) -> int | None:
        """Evict the victim; its key, or None when empty."""
        r = self._lib.tierlab_cache_evict(self._c)
        return None if r < 0 else int(r)

    def remove(self, key: int) -> bool:
        """Drop a key (not an eviction); True if it was held."""
        return self._lib.tierlab_cache_remove(self._c, self._key(key)) == 1

    @property
    def free_units(self) -> int:
        return int(self._lib.tierlab_cache_free_units(self._c))

    @property
    def stats(self) -> dict[str, int]:
        """tierlab_cache_stats: hits, misses, hit_units, miss_units (access and
        access_many only), evictions, evicted_units, used, peak_used,
        capacity, keys."""
        st = self._ffi.new("tierlab_cache_stats *")
        self._lib.tierlab_cache_get_stats(self._c, st)
        return {f: int(getattr(st, f)) for f in _STATS}


class Lookahead:
    """Adaptive lookahead's bookkeeping (docs/apcache.md): the worker calls
    worker_done(segments) for every term occurrence it finished (repeats
    too), the query thread query_done() for every term it finished; the
    worker may evict a victim of v segments only when may_evict(v)."""

    def __init__(self, total_segments: int, max_pending: int):
        total = _u64("total_segments", total_segments)
        pending = _u64("max_pending", max_pending)
        if pending == 0:
            raise TierlabError("max_pending must be at least 1, got 0")
        ffi, lib = ffi_lib()
        self._ffi, self._lib = ffi, lib
        self.total_segments, self.max_pending = total, pending
        out = ffi.new("tierlab_lookahead **")
        rc = lib.tierlab_lookahead_new(total, pending, out)
        if rc != 0:
            raise TierlabError(f"cannot create the lookahead state for {pending} pending "
                               f"terms (error {rc})")
        self._la = ffi.gc(out[0], lib.tierlab_lookahead_free)

    def worker_done(self, segments: int) -> None:
        rc = self._lib.tierlab_lookahead_worker_done(self._la, _u64("segments", segments))
        if rc != 0:
            raise TierlabError(f"the lookahead FIFO is full ({self.max_pending} pending terms): "
                               f"raise max_pending")

    def query_done(self) -> int:
        """Pop the front count; -1 if nothing is pending."""
        return int(self._lib.tierlab_lookahead_query_done(self._la))

    def may_evict(self, victim_segments: int) -> bool:
        return self._lib.tierlab_lookahead_may_evict(
            self._la, _u64("victim_segments", victim_segments)) == 1

    @property
    def rolling_sum(self) -> int:
        return int(self._lib.tierlab_lookahead_rolling_sum(self._la))

    @property
    def pending(self) -> int:
        return int(self._lib.tierlab_lookahead_pending(self._la))


def next_uses(keys: np.ndarray) -> np.ndarray:
    """For each position i, the position of the next request of keys[i]
    (NEVER = 2**64 - 1 if there is none), as uint64: BELADY's next_use."""
    keys = np.asarray(keys)
    if keys.ndim != 1:
        raise TierlabError(f"keys must be a 1-d array, got shape {keys.shape}")
    out = np.full(keys.size, NEVER, dtype=np.uint64)
    if keys.size < 2:
        return out
    order = np.argsort(keys, kind="stable")  # equal keys stay in request order
    sk = keys[order]
    same = sk[1:] == sk[:-1]
    out[order[:-1][same]] = order[1:][same]
    return out


# libCacheSim's oracleGeneral record (traceReader/customizedReader/oracle/
# oracleGeneralBin.h): packed little-endian, 24 bytes.
ORACLE_GENERAL = np.dtype([("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"),
                           ("next_access_vtime", "<i8")])
assert ORACLE_GENERAL.itemsize == 24


def write_oracle_general(path, keys: np.ndarray, sizes: np.ndarray | None = None,
                         times: np.ndarray | None = None) -> Path:
    """Write requests as libCacheSim's oracleGeneral binary trace: per request
    uint32 clock_time (times, default 0), uint64 obj_id (keys), uint32
    obj_size (sizes, default 1; libCacheSim skips size-0 requests, so 0 is
    refused) and int64 next_access_vtime (the index of the key's next
    request, -1 for never, as next_uses computes). Returns the path."""
    keys = np.asarray(keys)
    n = keys.size
    if keys.ndim != 1:
        raise TierlabError(f"keys must be a 1-d array, got shape {keys.shape}")
    if keys.dtype.kind not in "iu":
        raise TierlabError(f"keys must be integers, got dtype {keys.dtype}")
    if n and keys.dtype.kind == "i" and keys.min() < 0:
        raise TierlabError("keys must be non-negative")
    rec = np.zeros(n, dtype=ORACLE_GENERAL)
    rec["obj_id"] = keys
    if sizes is None:
        rec["obj_size"] = 1
    else:
        sizes = np.asarray(sizes)
        if sizes.shape != keys.shape:
            raise TierlabError(f"sizes has shape {sizes.shape}, keys has {keys.shape}")
        if n and (sizes.min() < 1 or sizes.max() > _MAX_SIZE):
            raise TierlabError(f"sizes must be in 1..{_MAX_SIZE} (oracleGeneral's uint32; "
                               f"libCacheSim skips size-0 requests)")
        rec["obj_size"] = sizes
    if times is not None:
        times = np.asarray(times)
        if times.shape != keys.shape:
            raise TierlabError(f"times has shape {times.shape}, keys has {keys.shape}")
        if n and (times.min() < 0 or times.max() > 2**32 - 1):
            raise TierlabError("times must be in 0..2**32-1 (oracleGeneral's uint32 seconds)")
        rec["clock_time"] = times
    nu = next_uses(keys)
    rec["next_access_vtime"] = np.where(nu == NEVER, -1, nu.astype(np.int64))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rec.tofile(path)
    return path
