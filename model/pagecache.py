"""The OS page cache of the index files (docs/apcache.md: `base` reads through
mmap, capped by the memory limit): LRU over 4 KiB pages with the C cache of
model/cache.py, shared by all cores, plus the readahead the kernel does.

A term access is one `access_many` over the term's pages of a file (DID
file, then freq file). The accessed pages that were missing form runs; each
run becomes device reads of at most `readahead_bytes` (the Linux default
read_ahead_kb is 128 KiB), one per window, issued one after the other. The
last read of a run that reaches the term's last page is filled up to a
whole window with the pages after the term that are not cached (stopping at
the first cached page or the end of the file), and those pages enter the
cache too. This is the rule of the runtime's emulated page cache
(kernels/src/apcache/pagecache.c). Counting as there: an access that issues
a read is a miss, every other page access (readahead pages included) a hit,
so page misses = reads issued through the page cache.

Simplification: a page counts as cached from the moment its read is issued
(the runtime makes a second reader wait for a page in flight; here it does
not wait). In the four configurations a page in flight is rarely wanted by
another thread: the prefetching query thread waits for its worker anyway.

Page keys are dense: only pages a referenced term (or its readahead) can
touch get a key, each shard its own range (the index is duplicated per
core).
"""
from __future__ import annotations

import numpy as np

PAGE = 4096


class PageMap:
    """Page keys and device addresses of the referenced terms, per file
    (0: DIDs, 1: freqs). Arrays are indexed by the dense term id."""

    def __init__(self, offsets: list, sizes: list, file_bytes: list, ra_pages: int, cores: int):
        self.ra = int(ra_pages)
        self.file_bytes = [int(b) for b in file_bytes]
        self.page0, self.npages, self.key0, self.ext = [], [], [], []
        base = 0
        for f in range(2):
            off = np.asarray(offsets[f], np.int64)
            size = np.asarray(sizes[f], np.int64)
            last_file_page = max(0, (self.file_bytes[f] - 1) // PAGE)
            p0 = off // PAGE
            n = np.where(size > 0, (off + np.maximum(size, 1) - 1) // PAGE - p0 + 1, 0)
            p1 = p0 + np.maximum(n, 1) - 1
            end = np.minimum(p1 + self.ra - 1, last_file_page)
            key0 = np.zeros(len(off), np.int64)
            if len(off):
                order = np.argsort(p0, kind="stable")
                s, e = p0[order], end[order]
                reach = np.maximum.accumulate(e)
                new = np.concatenate([[True], s[1:] > reach[:-1] + 1])
                iid = np.cumsum(new) - 1
                istart = s[new]
                iend = np.maximum.reduceat(e, np.flatnonzero(new))
                ibase = np.concatenate([[0], np.cumsum(iend - istart + 1)[:-1]])
                key0[order] = base + ibase[iid] + (s - istart[iid])
                base += int((iend - istart + 1).sum())
            self.page0.append(p0)
            self.npages.append(n)
            self.key0.append(key0)
            self.ext.append(np.maximum(0, end - p1))  # pages after the term with keys
        self.keys_per_shard = max(1, base)
        self.cores = cores
        # device addresses: shard s, file f at s * stride + f * did_span
        self.did_span = -(-self.file_bytes[0] // PAGE) * PAGE
        self.stride = self.did_span + -(-self.file_bytes[1] // PAGE) * PAGE

    @property
    def nkeys(self) -> int:
        return self.keys_per_shard * self.cores


class PageCache:
    """LRU page cache of `capacity_bytes` (at least one page) in front of a
    Device."""

    def __init__(self, env, pagemap: PageMap, capacity_bytes: int, device, cache_cls,
                 log=None, miss_ns: float = 0.0, policy: str = "lru"):
        self.env = env
        self.map = pagemap
        self.capacity_pages = max(1, int(capacity_bytes) // PAGE)
        self.cache = cache_cls(policy, pagemap.nkeys, min(self.capacity_pages, pagemap.nkeys))
        self.device = device
        self.log = log
        maxn = max([int(n.max(initial=0)) for n in pagemap.npages] + [pagemap.ra, 1])
        self._arange = np.arange(maxn + pagemap.ra, dtype=np.uint64)
        self.record = None  # a list: every access_many key array is appended (benchmarks)
        # the reader's CPU per read outside the device's time (Params.page_miss_ns)
        self.miss_ns = int(miss_ns + 0.5)

    @property
    def used_bytes(self) -> int:
        return self.cache.stats["used"] * PAGE

    @property
    def peak_bytes(self) -> int:
        return self.cache.stats["peak_used"] * PAGE

    def holds(self, shard: int, term: int) -> bool:
        """Whether every page of `term` in shard `shard` is resident, without
        accessing them (their recency is unchanged)."""
        m = self.map
        return all(self.cache.contains_range(int(m.key0[f][term]) + shard * m.keys_per_shard,
                                             int(m.npages[f][term])) for f in (0, 1))

    def read_term(self, shard: int, term: int, acct, who: str = "", interleave: bool = False):
        """Process step: access every page of `term` in shard `shard` (both
        files), reading the missing ones from the device. Returns the page
        misses (reads issued). interleave: issue the reads in the order a
        query's cursor needs them (DID block i, then freq block i: by
        relative position in the term, DID first), as the runtime's query
        thread does; otherwise the DID file's reads, then the freq file's
        (a worker reading whole ranges). The order decides which reads
        continue the previous one (no positioning on an HDD)."""
        m = self.map
        ra = m.ra
        requests = []
        for f in (0, 1):
            n = int(m.npages[f][term])
            if n == 0:
                continue
            k0 = int(m.key0[f][term]) + shard * m.keys_per_shard
            keys = self._arange[:n] + np.uint64(k0)
            hit = self.cache.access_many(keys)
            acct.page_requests += n
            if self.record is not None:
                self.record.append(keys)
            nhit = int(np.count_nonzero(hit))
            if nhit == n:
                acct.page_hits += n
                continue
            if nhit == 0:
                runs = ((0, n - 1),)
            else:
                miss = np.flatnonzero(~hit)
                cut = np.flatnonzero(np.diff(miss) != 1)
                runs = zip(np.concatenate([miss[:1], miss[cut + 1]]).tolist(),
                           np.concatenate([miss[cut], miss[-1:]]).tolist())
            chunks = []
            for a, b in runs:
                chunks.extend([c, min(ra, b + 1 - c)] for c in range(a, b + 1, ra))
            last = chunks[-1]
            if last[0] + last[1] == n and last[1] < ra:  # readahead past the term
                room = min(ra - last[1], int(m.ext[f][term]))
                ext = 0
                contains = self.cache.contains
                while ext < room and not contains(k0 + n + ext):
                    ext += 1
                if ext:
                    keys = self._arange[n:n + ext] + np.uint64(k0)
                    self.cache.access_many(keys)
                    acct.page_requests += ext
                    if self.record is not None:
                        self.record.append(keys)
                    last[1] += ext
            acct.page_misses += len(chunks)
            acct.page_hits += n - len(chunks)
            first = int(m.page0[f][term]) * PAGE
            fbytes = m.file_bytes[f]
            base = shard * m.stride + (m.did_span if f else 0)
            # where the host's stream of this term in this file ends (readahead
            # included): a drive cache's read-ahead stops there (model/device.py)
            last = chunks[-1]
            stream_end = base + min(first + (last[0] + last[1]) * PAGE, fbytes)
            for c, k in chunks:
                at = first + c * PAGE
                # cursor order key: where in the term's own pages the read starts
                requests.append((base + at, min(k * PAGE, fbytes - at), f, at, c / n,
                                 stream_end))
        if interleave and len(requests) > 1:
            requests.sort(key=lambda r: (r[4], r[2]))
        if requests:
            yield from self.device.read_many(requests, acct, self.log, shard, who, term,
                                             self.miss_ns)
        return len(requests)
