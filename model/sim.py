"""One model run: the index, the query trace, the parameters, the device and
the tier in; the metrics of the cache_run / cache_query / cache_timeline
tables out (traces/schema.yaml, source `model`).

Closed loop (docs/apcache.md "The setting"): the query queue is always full, so
a query's latency runs from when its query thread takes it to its results,
waits for prefetch included, and QPS = queries / simulated time. Every core
runs the whole workload on its own shard (a duplicated index: its own page
keys and device addresses), as the runtime does; QPS counts all cores.
With passes > 1 the workload runs back to back that many times and only the
last pass is reported (counters, latencies and wall time), like `tierlab
query run` reports its warm pass.

The CPU time of a query is the cost table's
query_ns + block_ns * blocks + posting_ns * postings (model/costs.py,
per query type), or, replaying a `tierlab query run` trace with
`cpu: measured`, the latency measured for that query in an all-DRAM run
(no fit error; the formula still splits off the decoding part). Its
decoding part (the measured decode time of a DID and a freq block, the
table's `decode` section, per block decoded; the whole per-block part when
the table has no decode timing) is what reads the postings' memory: it is
multiplied by the tier factor for the share of the
query's blocks served from the slow tier (model/tier.py). Scoring works on
decoded values and the per-query part on the dictionary, so neither is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import simpy

from tierlab.core import registry, runspec
from tierlab.core.errors import TierlabError

from tierlab.model import actors
from tierlab.model.costs import CostModel
from tierlab.model.device import Device, Slots
from tierlab.model.indexmeta import IndexMeta
from tierlab.model.pagecache import PAGE, PageCache, PageMap
from tierlab.model.tier import Tier
from tierlab.model.replay import Replay, next_uses

# Params' defaults are the run spec's (tierlab.core.runspec)
DEFAULT_LOOKAHEAD = runspec.DEFAULT_LOOKAHEAD
DEFAULT_SEGMENT = runspec.default("segment_bytes")
DEFAULT_DRAM_BUDGET = runspec.default("dram_budget_bytes")
DEFAULT_READAHEAD = runspec.default("readahead_bytes")
DEFAULT_SAMPLE_NS = runspec.default("sample_ns")
DEFAULT_K = runspec.default("k")


def __getattr__(name: str):
    """CONFIGS: the configuration names of the C registry
    (kernels/src/apcache/configs.c) in table order, the names actors.py
    switches on, as the runtime's threads do. Read when first used:
    importing this module needs no built library."""
    if name == "CONFIGS":
        return registry.configs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def memory_cost(costs, spec, qtype: str, structures, per: str) -> float:
    """ns per block decoded (per="block") or per query (per="query") that
    placing `structures` on memory spec `spec` adds over the machine's DRAM:
    the cost table's memory section (`tierlab query costs INDEX --tier SPEC`),
    summed over the structures."""
    total = 0.0
    for s in structures:
        v = costs.memory_extra_ns(spec.name, qtype, s, per)
        if v is None:
            raise TierlabError(f"the cost table has no memory cost of '{s}' on '{spec.name}' "
                               f"for {qtype} queries: measure it with `tierlab query costs "
                               f"INDEX --tier {spec.name} --out TABLE` and give costs: TABLE")
        total += v
    return total


@dataclass(frozen=True)
class Params:
    """The knobs of one run (model/README.md documents each)."""

    config: str = "hybrid-prefetch"
    policy: str = "lru"
    cores: int = 1
    cache_bytes: int = 64 * 2**20
    segment_bytes: int = DEFAULT_SEGMENT
    lookahead: object = None          # int, "adaptive", or None (the config's default)
    dram_budget_bytes: int = DEFAULT_DRAM_BUDGET
    readahead_bytes: int = DEFAULT_READAHEAD
    page_cache_policy: str = "lru"     # the OS page cache's replacement (config.py)
    tier_factor: float | None = None
    tier_rule: str = "roofline"       # or "trace": the cost table's memory section (model/tier.py)
    placement: tuple = ()             # ((structure, place), ...): dict/skip/did/freq off DRAM
    passes: int = 1
    sample_ns: int = DEFAULT_SAMPLE_NS
    k: int = DEFAULT_K                # hits kept per query (the runtime's --k)
    handoff_spin_ns: int = 0          # a waiting thread spins this long before it blocks
    page_hit_ns: float = 0.0          # CPU per block access through the emulated page cache
    page_touch_ns: float = 0.0        # a base-prefetch worker's CPU per page it reads
    page_miss_ns: float = 0.0         # CPU per page-cache read outside the device's time
    head_start: bool = False          # the query thread starts once its prefetching worker
    #                                   first waits (is as far ahead as it may be) or is done

    @property
    def hybrid(self) -> bool:
        return self.config.startswith("hybrid")

    def lookahead_value(self):
        """'none', 'adaptive' or an int (queries), as cache_run.lookahead says."""
        if self.config in ("base", "hybrid"):
            return "none"
        if self.lookahead is None:
            return "adaptive" if self.config == "hybrid-prefetch" else DEFAULT_LOOKAHEAD
        return self.lookahead


@dataclass
class Counters:
    """What one pass counted (all cores)."""

    page_hits: int = 0
    page_misses: int = 0
    seg_hits: int = 0
    seg_misses: int = 0
    reads: int = 0
    bytes_read: int = 0
    busy_ns: int = 0
    worker_stall_ns: int = 0
    query_wait_ns: int = 0
    evicted_before_use: int = 0
    worker_skipped_terms: int = 0  # hybrid: gone from the page cache before the copy
    bypassed: int = 0
    page_requests: int = 0   # pages looked up in the page cache (access_many keys)
    block_requests: int = 0  # index blocks of every term access (any actor, any cache)


class Shard:
    """One core: its segment cache, lookahead state and progress."""

    def __init__(self, env, sim, core: int):
        self.core = core
        self.sim = sim
        self.signal = actors.Signal(env, sim.params.handoff_spin_ns)
        self.taken = self.q_done = self.occ_done = self.w_q = self.w_occ = 0
        self.qt_waiting = 0
        self.qt_finished = False
        # head start: fires when the prefetching worker first waits or is done
        self.head_start = (env.event() if sim.params.head_start and sim.cfg in
                           (actors.BASE_PREFETCH, actors.HYBRID_PREFETCH) else None)
        nq, nocc = sim.trace.queries, sim.trace.occurrences
        self.missed = np.zeros(nocc, np.uint8)
        self.bypass = np.zeros(nocc, np.uint8)
        self.pins = np.zeros(max(1, sim.nterms), np.int32)
        self.rec_start = np.zeros(nq, np.int64)
        self.rec_latency = np.zeros(nq, np.int64)
        self.rec_wait = np.zeros(nq, np.int64)
        self.rec_terms = np.zeros(nq, np.int64)
        self.rec_seg_miss = np.zeros(nq, np.int64)
        self.rec_page_miss = np.zeros(nq, np.int64)
        self.rec_lookahead = np.zeros(nq, np.int64)
        self.samples: list = []
        self._next_sample = 0
        self.cache = self.la = None
        self.segments = 0
        la = sim.params.lookahead_value()
        self.fixed_la = la if isinstance(la, int) else None
        if sim.params.hybrid:
            self.segments = sim.segments_per_core
            self.cache = sim.cache_cls(sim.params.policy, max(1, sim.nterms), self.segments)
            if la == "adaptive":
                self.la = sim.lookahead_cls(self.segments, max(1, nocc))

    def ahead(self, q: int) -> int:
        cfg = self.sim.cfg
        if cfg in (actors.BASE_PREFETCH, actors.HYBRID_PREFETCH):
            return self.w_q - q
        if cfg == actors.HYBRID:
            return int(np.searchsorted(self.sim.qfirst[1:], self.w_occ, side="right")) - q
        return 0

    def sample(self, q: int) -> None:
        """A timeline sample at a query start, at most one per sample_ns."""
        sim = self.sim
        now = sim.env.now
        if now < self._next_sample:
            return
        self._next_sample = now + sim.params.sample_ns
        if self.cache is not None:
            used = self.cache.stats["used"] * sim.params.segment_bytes
        else:
            used = sim.pc.used_bytes
        self.samples.append((self.core, now, self.q_done, self.ahead(q),
                             self.la.rolling_sum if self.la is not None else 0, used,
                             sim.device.bytes))


def shortest_postings(trace, index) -> np.ndarray:
    """Per query, the postings of its shortest list (the candidates an AND
    query looks up in the other lists); 0 for a query without terms."""
    out = np.zeros(trace.queries, np.int64)
    if trace.occurrences:
        q = np.repeat(np.arange(trace.queries), np.diff(trace.qfirst))
        out[:] = np.iinfo(np.int64).max
        np.minimum.at(out, q, np.asarray(index.postings, np.int64)[trace.term])
        out[np.diff(trace.qfirst) == 0] = 0
    return out


# --- the resource guard (tierlab.h "Resource guards") -----------------------------
# A run whose planned memory exceeds what the machine has for this process is
# refused with the numbers before the big allocations, by the rule the native
# runtime applies (tierlab_memory_guard). Computed: the C caches' bookkeeping
# (tierlab_cache_bytes: the page cache over every page key of every shard, a
# segment cache per core over the referenced terms) and the numpy arrays sized
# by occurrences and pages. Python objects per query (the trace's arrays, the
# per-query CPU lists of floats, and per core the records and the rows of the
# cache_query table) are measured: peak RSS of `tierlab model run` growing by
# about 340 bytes per query on one core and 110 more per extra core from
# 10^5 to 10^6 queries, rounded up here.
QUERY_BYTES = 400        # per query of every pass
CORE_QUERY_BYTES = 160   # per core and query of every pass
OCC_BYTES = 48           # per term occurrence of every pass: ids, blocks, next uses, flags
GENERATE_QUERY_BYTES = 600  # per generated query: its terms as Python lists while generated


def plan_memory(p: Params, queries: int, occurrences: int, *, nterms: int = 0,
                page_keys: int = 0, term_pages: int = 0,
                generated: int = 0) -> tuple[int, str]:
    """(bytes, what they are) of a run of `queries` queries and `occurrences`
    term occurrences per pass (the resource guard above)."""
    from tierlab.core.native import bytes_text, cache_bytes

    q, o = queries * p.passes, occurrences * p.passes
    core = {"records": q * CORE_QUERY_BYTES + 2 * o + 4 * nterms}
    if p.hybrid:
        core["segment-cache bookkeeping"] = cache_bytes(p.policy, max(1, nterms))
        if p.lookahead_value() == "adaptive":
            core["lookahead"] = 8 * max(1, o)
    once = {"trace": q * QUERY_BYTES + o * OCC_BYTES,
            "generating the workload": generated * GENERATE_QUERY_BYTES,
            "page-cache keys (every page of every shard)":
                cache_bytes(p.page_cache_policy, page_keys) if page_keys else 0,
            "page buffers of the largest term": 25 * term_pages}
    per_core = sum(core.values())
    total = per_core * p.cores + sum(once.values())

    def text(items):
        return ", ".join(f"{k} {bytes_text(v)}" for k, v in
                         sorted(items.items(), key=lambda kv: -kv[1]) if v)
    detail = (f"{p.cores} x {bytes_text(per_core)} per core: {text(core)}; once "
              f"{bytes_text(sum(once.values()))}: {text(once)}")
    return total, detail


def check_memory(p: Params, queries: int, occurrences: int, **kw) -> int:
    """Refuse (TierlabError with the numbers) a run whose plan_memory exceeds
    what this machine has for it; returns the planned bytes."""
    from tierlab.core.native import memory_guard

    total, detail = plan_memory(p, queries, occurrences, **kw)
    memory_guard(total, f"the model run ({queries:,} queries x {p.passes} pass(es) on "
                 f"{p.cores} core(s))", detail,
                 "lower workload.queries, passes or cores, or use a smaller index")
    return total


def _cache_classes():
    from tierlab.model.cache import Cache, Lookahead

    return Cache, Lookahead


class Simulation:
    """Build with the inputs, call run(); results in `result()`."""

    def __init__(self, index: IndexMeta, trace: Replay, params: Params, costs, device_spec,
                 tier_spec=None, *, log: list | None = None, cache_classes=None,
                 seed: int = 0, drawn_wake_ups: bool = False, place_spec=None):
        if not isinstance(costs, CostModel):
            raise TierlabError(f"costs: a cost table (model/costs.py CostModel), not "
                               f"{type(costs).__name__}")
        p = params
        configs = registry.configs()
        if p.config not in configs:
            raise TierlabError(f"config: unknown configuration '{p.config}'; known: "
                               f"{', '.join(configs)}")
        if p.config not in actors.MODELLED:
            raise TierlabError(f"config: the model has no actors for '{p.config}' yet "
                               f"(model/actors.py models {', '.join(actors.MODELLED)})")
        if p.passes < 1:
            raise TierlabError(f"passes must be at least 1, got {p.passes}")
        self.params = p
        self.index = index
        self.cfg = p.config
        self.cache_cls, self.lookahead_cls = cache_classes or _cache_classes()
        self.log = log
        self.planned_bytes = self._check_memory(index, trace, p)
        self.base_trace = trace
        self.trace = trace.repeated(p.passes)
        self.nq_pass = max(1, trace.queries)
        self.nocc_pass = max(1, trace.occurrences)
        self.env = simpy.Environment()
        self.device_spec = device_spec
        self.device = Device.from_spec(self.env, device_spec)
        if p.hybrid:
            if tier_spec is None:
                raise TierlabError("slow_tier: a hybrid configuration needs a memory spec")
            self.tier = Tier.from_spec(tier_spec, p.tier_factor)
        else:
            self.tier = None
        # the multiplicative serving rule only when tier_factor is given (model/tier.py)
        self.tier_factor = self.tier.factor if self.tier and self.tier.factor else 1.0
        # a DRAM-backed segment cache counts as DRAM use (any spec of tier dram)
        self.tier_in_dram = bool(p.hybrid and getattr(tier_spec, "tier", None) == "dram")
        self.tier_slots = Slots(self.env, 1)  # copies into the tier, one at a time

        # dense term ids over the terms the trace references
        ref, dense = np.unique(self.trace.term, return_inverse=True)
        self.ref = ref
        self.nterms = len(ref)
        self.term = dense.astype(np.int64)
        self.qfirst = self.trace.qfirst
        self.blocks = self.trace.blocks_decoded
        self.next_use = next_uses(self.term)
        seg = index.segments(p.segment_bytes)[ref] if len(ref) else np.zeros(0, np.int64)
        self.segs = seg
        self.term_blocks = index.blocks[ref].tolist() if len(ref) else []
        chain = (index.term_bytes + 8 * index.blocks)[ref] if len(ref) else np.zeros(0, np.int64)
        # a copy goes at the tier's write bandwidth, or slower: the rate at which the
        # runtime's worker copies page by page (the cost table's, when it has it)
        rate = costs.copy_rate()
        self.copy_ns = [self.tier.copy_ns(int(b), rate) for b in chain] if self.tier else []
        # what serving a whole term from the slow tier reads (model/tier.py stall_ns)
        self.term_segs = seg.tolist() if len(ref) else []
        self.term_bytes = index.term_bytes[ref].tolist() if len(ref) else []
        if p.hybrid:
            self.segments_per_core = p.cache_bytes // p.cores // p.segment_bytes
            if self.segments_per_core < 1:
                raise TierlabError(f"cache_bytes {p.cache_bytes}: less than one "
                                   f"{p.segment_bytes}-byte segment per core")
            pc_bytes = p.dram_budget_bytes
        else:
            self.segments_per_core = 0
            pc_bytes = p.cache_bytes
        if pc_bytes < PAGE:
            raise TierlabError(f"{'dram_budget_bytes' if p.hybrid else 'cache_bytes'} "
                               f"{pc_bytes}: the page cache must hold one {PAGE}-byte page")
        ra_pages = self._readahead_pages(p, pc_bytes)
        self.pagemap = PageMap([index.did_offset[ref], index.freq_offset[ref]],
                               [index.did_bytes[ref], index.freq_bytes[ref]],
                               [index.did_file_bytes, index.freq_file_bytes], ra_pages, p.cores)
        self.pc = PageCache(self.env, self.pagemap, pc_bytes, self.device, self.cache_cls, log,
                            p.page_miss_ns, p.page_cache_policy)

        # CPU per query: fixed part and the block/posting part
        qt = ["and" if x else "single" for x in self.trace.qtype[: self.nq_pass]]
        qb = trace.blocks_per_query()
        fixed = np.array([costs.query_cpu_ns(t, 0, 0) for t in qt], np.float64)
        per_block = np.array([costs.query_cpu_ns(t, int(b), 0) for t, b in zip(qt, qb)],
                             np.float64) - fixed
        total = np.array([costs.query_cpu_ns(t, int(b), int(s)) for t, b, s in
                          zip(qt, qb, trace.postings_scored)], np.float64)
        # the table's result and candidate terms (0 for a table without them)
        total += np.asarray(costs.extra_cpu_ns(
            np.asarray(qt), np.minimum(trace.postings_scored, p.k),
            shortest_postings(trace, index)), np.float64)
        if trace.cpu_ns is not None:  # a replay with each query's measured CPU time
            total = np.asarray(trace.cpu_ns[: len(qt)], np.float64)
        self.decode_ns = costs.decode_block_ns()
        decode = per_block if self.decode_ns is None else \
            np.minimum(per_block, self.decode_ns * qb)
        decode = np.minimum(decode, total)
        # cores querying their own index copies at once share the last-level cache
        # and memory bandwidth: each query's CPU work takes longer (the table's
        # `cores` section, measured; tierlab.model.costs.core_costs)
        self.cpu_factor, self.cpu_factor_source = costs.cpu_factor(p.cores)
        total, decode = total * self.cpu_factor, decode * self.cpu_factor
        reps = p.passes
        self.cpu_fixed = np.tile(total - decode, reps).tolist()  # all but the decoding
        self.cpu_var = np.tile(decode, reps).tolist()            # decoding: the tier's part
        self.q_blocks = np.tile(qb, reps).tolist()
        self.costs = costs
        # tier_rule trace: a block served from the slow tier costs the cost table's
        # memory cost of DID + freq on the slow_tier spec (model/tier.py "trace")
        self.trace_block_ns = None
        if p.hybrid and p.tier_rule == "trace" and self.tier is not None and \
                self.tier.factor is None:
            self.trace_block_ns = {t: memory_cost(costs, tier_spec, t, ("did", "freq"), "block")
                                   for t in set(qt)}
        # structures placed off DRAM (place_dict ... = pm:PATH / numa:N): each query
        # is charged their memory cost on place_spec (the slow_tier spec)
        extra = np.zeros(len(qt))
        self.placed = {}
        for struct, where in p.placement:
            if place_spec is None:
                raise TierlabError(f"place_{struct}={where}: the model needs a slow_tier "
                                   "memory spec to time it")
            per = "query" if struct == "dict" else "block"
            for t in set(qt):
                c = memory_cost(costs, place_spec, t, (struct,), per)
                for i in (i for i, x in enumerate(qt) if x == t):
                    extra[i] += c if per == "query" else c * qb[i]
            self.placed[struct] = f"{where} as {place_spec.name}"
        self.place_extra = np.tile(extra, reps).tolist()
        # thread hand-off (the cost table's `threads`, tierlab_apcache_handoff_ns)
        wake, sig = costs.handoff()
        self.wake_ns, self.signal_ns = int(wake + 0.5), int(sig + 0.5)
        # drawn_wake_ups: each wake-up drawn from the measured ones (when the
        # table has them): their rare long tail (a vCPU not running) is what
        # tips a prefetching run on a small cache into thrashing; seeded, so a
        # run is reproducible. Off by default: how often the tail comes varies
        # between measurements on one machine (model/README.md).
        samples = costs.wake_samples() if drawn_wake_ups else None
        self._wakes = None
        if samples is not None and len(samples):
            self._wakes = np.rint(samples).astype(np.int64)
            self._wake_rng = np.random.default_rng(seed)
            self._wake_draws = iter(())

        self.acct = [Counters() for _ in range(p.passes)]
        self.shards = [Shard(self.env, self, c) for c in range(p.cores)]
        self.elapsed_ns = None

    @staticmethod
    def _page_cache_bytes(p: Params) -> int:
        return p.dram_budget_bytes if p.hybrid else p.cache_bytes

    @staticmethod
    def _readahead_pages(p: Params, pc_bytes: int) -> int:
        # the runtime's page cache never reads more than a quarter of its frames
        # at once (kernels/src/apcache/pagecache.c max_run): tiny caches read less
        return max(1, min(p.readahead_bytes // PAGE, pc_bytes // PAGE // 4))

    def _check_memory(self, index: IndexMeta, trace: Replay, p: Params) -> int:
        """The resource guard (check_memory) with this run's page keys: before
        the trace is repeated and anything per query or per page is built."""
        ref = np.unique(trace.term)
        ra = self._readahead_pages(p, self._page_cache_bytes(p))
        pm = PageMap([index.did_offset[ref], index.freq_offset[ref]],
                     [index.did_bytes[ref], index.freq_bytes[ref]],
                     [index.did_file_bytes, index.freq_file_bytes], ra, p.cores)
        pages = max([int(n.max(initial=0)) for n in pm.npages] + [ra])
        return check_memory(p, trace.queries, trace.occurrences, nterms=len(ref),
                            page_keys=pm.nkeys, term_pages=pages + ra)

    def wake(self) -> int:
        """The time (ns) a thread takes to run again after it is signalled:
        drawn from the measured wake-ups (bootstrap, in blocks of 4096 draws),
        else the table's median wake_ns."""
        if self._wakes is None:
            return self.wake_ns
        v = next(self._wake_draws, None)
        if v is None:
            self._wake_draws = iter(self._wake_rng.choice(self._wakes, 4096).tolist())
            v = next(self._wake_draws)
        return v

    def run(self) -> "Simulation":
        env = self.env
        worker = {actors.BASE_PREFETCH: actors.base_prefetch_worker,
                  actors.HYBRID: actors.copy_worker,
                  actors.HYBRID_PREFETCH: actors.prefetch_worker}.get(self.cfg)
        for sh in self.shards:
            env.process(actors.query_thread(env, self, sh))
            if worker is not None:
                env.process(worker(env, self, sh))
        env.run()
        self.elapsed_ns = env.now
        for sh in self.shards:
            if sh.q_done != self.trace.queries:
                raise TierlabError(f"model: core {sh.core} finished {sh.q_done} of "
                                   f"{self.trace.queries} queries (a deadlock in the model)")
        return self

    # --- results --------------------------------------------------------------------

    def last_pass(self) -> slice:
        n = self.nq_pass
        return slice((self.params.passes - 1) * n, self.params.passes * n)

    def metrics(self) -> dict:
        """The measured columns of cache_run (model names = runtime names)."""
        p = self.params
        sl = self.last_pass()
        starts = np.concatenate([sh.rec_start[sl] for sh in self.shards])
        ends = np.concatenate([sh.rec_start[sl] + sh.rec_latency[sl] for sh in self.shards])
        lat = np.concatenate([sh.rec_latency[sl] for sh in self.shards]).astype(np.float64)
        wall = int(ends.max() - starts.min()) if len(lat) else 0
        c = self.acct[-1]
        pages = c.page_hits + c.page_misses
        terms = c.seg_hits + c.seg_misses
        la = self.params.lookahead_value()
        look = np.concatenate([sh.rec_lookahead[sl] for sh in self.shards])
        seg_peak = sum(sh.cache.stats["peak_used"] for sh in self.shards) * p.segment_bytes \
            if p.hybrid else 0
        dram = self.pc.peak_bytes
        if self.tier_in_dram:
            dram += seg_peak
        q = len(lat)
        out = {
            "queries": q,
            "wall_ns": wall,
            "qps": q / (wall / 1e9) if wall else math.nan,
            "latency_mean_ns": float(lat.mean()) if q else math.nan,
            "latency_p50_ns": float(np.percentile(lat, 50)) if q else math.nan,
            "latency_p99_ns": float(np.percentile(lat, 99)) if q else math.nan,
            "latency_p999_ns": float(np.percentile(lat, 99.9)) if q else math.nan,
            "page_cache_hits": c.page_hits,
            "page_cache_misses": c.page_misses,
            "page_cache_miss_rate": c.page_misses / pages if pages else math.nan,
            "segment_cache_hits": c.seg_hits,
            "segment_cache_misses": c.seg_misses,
            "segment_cache_miss_rate": c.seg_misses / terms if p.hybrid and terms else math.nan,
            "storage_reads": c.reads,
            "storage_bytes_read": c.bytes_read,
            "worker_stall_ns": c.worker_stall_ns,
            "query_wait_ns": c.query_wait_ns,
            "lookahead_mean": float(look.mean()) if la != "none" and q else math.nan,
            "peak_dram_bytes": int(dram),
            "peak_slow_tier_bytes": int(seg_peak),
            "device_utilisation": c.busy_ns / (self.device.slots.capacity * wall) if wall else 0.0,
        }
        return out

    def tail_qps(self) -> float:
        """QPS over the second half of the reported pass's queries (all
        cores): the steady state, without the start's transient."""
        rows = self.query_rows()
        tail = rows["query_id"] >= self.nq_pass // 2
        if not tail.any():
            return math.nan
        start = rows["start_ns"][tail].min()
        end = (rows["start_ns"][tail] + rows["latency_ns"][tail]).max()
        return int(tail.sum()) / ((end - start) / 1e9) if end > start else math.nan

    def extra(self) -> dict:
        """Counters outside the schema's columns (go to params JSON)."""
        c = self.acct[-1]
        return {"evicted_before_use": c.evicted_before_use, "bypassed": c.bypassed,
                "worker_skipped_terms": c.worker_skipped_terms,
                "page_requests_all_passes": sum(a.page_requests for a in self.acct),
                "block_requests_all_passes": sum(a.block_requests for a in self.acct),
                "simulated_ns": int(self.elapsed_ns or 0),
                "term_occurrences": self.trace.occurrences,
                "device_reads_all_passes": self.device.reads,
                "page_cache_keys": self.pagemap.nkeys,
                "cores_cpu_factor": self.cpu_factor,
                "cores_cpu_factor_source": self.cpu_factor_source}

    def query_rows(self) -> dict:
        """cache_query columns (without run_id/source) of the reported pass."""
        sl = self.last_pass()
        n = self.nq_pass
        cols = {k: [] for k in ("core", "query_id", "start_ns", "latency_ns", "wait_ns", "terms",
                                "segment_cache_misses", "page_cache_misses")}
        for sh in self.shards:
            cols["core"].append(np.full(n, sh.core, np.int64))
            cols["query_id"].append(np.arange(n, dtype=np.int64))
            cols["start_ns"].append(sh.rec_start[sl])
            cols["latency_ns"].append(sh.rec_latency[sl])
            cols["wait_ns"].append(sh.rec_wait[sl])
            cols["terms"].append(sh.rec_terms[sl])
            cols["segment_cache_misses"].append(sh.rec_seg_miss[sl])
            cols["page_cache_misses"].append(sh.rec_page_miss[sl])
        return {k: np.concatenate(v) for k, v in cols.items()}

    def timeline_rows(self) -> dict:
        names = ("core", "t_ns", "queries_done", "lookahead_queries", "rolling_sum_segments",
                 "cache_used_bytes", "storage_bytes_read")
        rows = [s for sh in self.shards for s in sh.samples]
        return {k: np.asarray([r[i] for r in rows], np.int64) for i, k in enumerate(names)}
