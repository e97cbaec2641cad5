"""The actors of APCache (docs/apcache.md "The four configurations", "Adaptive
lookahead") as SimPy processes: one short generator each, taking `env`, the
run (`sim`: device, page cache, trace, costs, counters) and the core's
`shard` (its segment cache, lookahead state, progress counters, signal).

Per core: a query thread, and (except in `base`) one worker:
- base-prefetch: `base_prefetch_worker` reads the terms of the next queries
  into the page cache, at most LA queries ahead of the query thread;
- hybrid: `copy_worker` trails the query thread and copies every term it
  missed in the segment cache from the page cache into the segment cache;
  a term whose pages the page cache no longer holds is skipped (only the
  query thread reads storage in hybrid, as the runtime's worker);
- hybrid-prefetch: `prefetch_worker` fills the segment cache with the terms
  of upcoming queries (through the DRAM-budget page cache) under adaptive
  (rolling_sum rule) or fixed lookahead.
In both prefetch configurations the query thread waits until the worker has
finished its whole query. The decisions follow the native runtime's steps
(kernels/src/apcache/steps.c): terms the query thread is using are pinned
and never evicted (a pinned victim makes the worker wait); with adaptive
lookahead the worker evicts victim v only when rolling_sum + segments(v) <=
total segments; if the query thread is waiting for the very query the
worker is stuck on, the worker gives the occurrence up (a bypass: the query
thread reads it from storage), which breaks the one possible deadlock.

Time is ns. Counters go to the pass of the query or occurrence concerned
(`sim.acct[pass]`), so a warm pass can be reported alone.
"""
from __future__ import annotations

import numpy as np

# The configurations by their registry names (kernels/src/apcache/configs.c);
# Simulation checks that the C registry has each name it is given.
BASE, BASE_PREFETCH, HYBRID, HYBRID_PREFETCH = "base", "base-prefetch", "hybrid", "hybrid-prefetch"
MODELLED = (BASE, BASE_PREFETCH, HYBRID, HYBRID_PREFETCH)


class Signal:
    """A condition variable: `wait()` is an event that fires at the next
    `notify()`; waiters re-check their condition after it fires.

    As in the runtime (kernels/src/apcache/threads.c tl_spin_until), a waiter
    that may spin (`spins=True`: the query thread waiting for its prefetch,
    a worker waiting for the lookahead or for work) spends the first spin_ns
    of its wait spinning and only then blocks; a victim wait blocks at once.
    Notifying a spinning waiter is free and it runs on at once; notifying a
    blocked one costs the notifier a futex wake (signal_ns) and the waiter a
    wake-up (`resume`)."""

    __slots__ = ("env", "spin_ns", "_ev", "_since", "_spins")

    def __init__(self, env, spin_ns: int = 0):
        self.env = env
        self.spin_ns = spin_ns
        self._ev = None
        self._since = 0
        self._spins = False

    def wait(self, since=None, spins: bool = False):
        """The event of the next notify; `since`: when this waiter's wait
        began (its spin counts from there), default now."""
        since = self.env.now if since is None else since
        if self._ev is None:
            self._ev = self.env.event()
            self._since, self._spins = since, spins
        else:  # two waiters: the earlier start, and blocked if either blocks
            self._since, self._spins = min(self._since, since), self._spins and spins
        return self._ev

    def blocked(self, since, spins: bool) -> bool:
        """Whether a waiter that began at `since` has blocked by now."""
        return not spins or self.env.now - since > self.spin_ns

    def notify(self) -> bool:
        """Wake the waiters; True when one had blocked (the runtime's
        broadcast then costs a futex wake)."""
        ev = self._ev
        if ev is not None:
            self._ev = None
            ev.succeed()
            return self.blocked(self._since, self._spins)
        return False


def _worker_waits(sh) -> None:
    """The prefetching worker waits (or is done): with a head start
    (Params.head_start) the query thread starts now."""
    if sh.head_start is not None and not sh.head_start.triggered:
        sh.head_start.succeed()


def _resume(env, sim, sh, since, spins: bool = False):
    """Process step: a thread woken from a wait that began at `since` runs
    again a wake-up after the signal if it had blocked (the runtime's futex
    wake-up: Simulation.wake, the cost table's measured wake-ups), at once if
    it was still spinning."""
    if not sh.signal.blocked(since, spins):
        return
    w = sim.wake()
    if w:
        yield env.timeout(w)


def query_thread(env, sim, sh):
    tr = sim.trace
    qfirst, term, blocks = sim.qfirst, sim.term, sim.blocks
    cfg = sim.cfg
    prefetching = cfg in (BASE_PREFETCH, HYBRID_PREFETCH)
    sc = sh.cache
    pins = sh.pins
    log = sim.log
    fslow = sim.tier_factor - 1.0
    page_hit_ns = sim.params.page_hit_ns
    if sh.head_start is not None:
        yield sh.head_start
    for q in range(tr.queries):
        t0 = env.now
        sh.taken = q + 1
        # a fixed-lookahead worker waits for this: waking it costs a futex call
        if prefetching and sh.fixed_la is not None and sh.signal.notify() and sim.signal_ns:
            yield env.timeout(sim.signal_ns)
        acct = sim.acct[q // sim.nq_pass]
        sh.sample(q)
        sh.rec_lookahead[q] = sh.ahead(q)
        j0, j1 = int(qfirst[q]), int(qfirst[q + 1])
        if prefetching:
            hp = cfg == HYBRID_PREFETCH
            need = j1 if hp else q + 1
            if (sh.w_occ if hp else sh.w_q) < need:
                sh.qt_waiting = q + 1
                sh.signal.notify()  # a worker stalled on a victim re-checks
                t_wait = env.now
                while (sh.w_occ if hp else sh.w_q) < need:
                    yield sh.signal.wait(t_wait, spins=True)
                yield from _resume(env, sim, sh, t_wait, spins=True)
                sh.qt_waiting = 0
                acct.query_wait_ns += env.now - t0
                sh.rec_wait[q] = env.now - t0
        slow_blocks = seg_miss = page_miss = 0
        slow_segs = slow_bytes = 0.0  # read from the slow tier (model/tier.py)
        pinned = []
        for j in range(j0, j1):
            t = int(term[j])
            acct.block_requests += sim.term_blocks[t]
            cached = False
            if cfg == HYBRID:
                cached = sc.touch(t, int(sim.next_use[j]))
                if cached:
                    acct.seg_hits += 1
                else:
                    acct.seg_misses += 1
                    seg_miss += 1
                    sh.missed[j] = 1
            elif cfg == HYBRID_PREFETCH:
                seg_miss += int(sh.missed[j])
                cached = not sh.bypass[j] and sc.contains(t)
                if not cached and not sh.bypass[j]:
                    acct.evicted_before_use += 1
            if cached:
                pins[t] += 1
                pinned.append(t)
                slow_blocks += int(blocks[j])
                if sim.term_blocks[t]:
                    share = int(blocks[j]) / sim.term_blocks[t]
                    slow_segs += sim.term_segs[t] * share
                    slow_bytes += sim.term_bytes[t] * share
            else:
                page_miss += yield from sim.pc.read_term(sh.core, t, acct, "query", True)
            if log is not None:
                log.append((env.now, sh.core, "query", "term", t,
                            {"query": q, "occurrence": j, "cached": cached}))
        slow_share = slow_blocks / sim.q_blocks[q] if sim.q_blocks[q] else 0.0
        cpu = sim.cpu_fixed[q] + sim.cpu_var[q] * (1.0 + fslow * slow_share)
        if page_hit_ns:  # each block not in the segment cache: a DID and a freq access
            cpu += 2.0 * page_hit_ns * max(sim.q_blocks[q] - slow_blocks, 0)
        if slow_blocks and sim.tier is not None:
            if sim.trace_block_ns is not None:  # tier_rule trace: the cost table's memory costs
                cpu += slow_blocks * sim.trace_block_ns["and" if tr.qtype[q] else "single"]
            else:
                cpu += sim.tier.stall_ns(slow_segs, slow_bytes, sim.cpu_var[q] * slow_share)
        cpu += sim.place_extra[q]
        yield env.timeout(int(cpu + 0.5))
        for t in pinned:
            pins[t] -= 1
        if cfg == HYBRID_PREFETCH and sh.la is not None:
            for _ in range(j1 - j0):
                popped = sh.la.query_done()
                if log is not None:
                    log.append((env.now, sh.core, "query", "query_done", -1,
                                {"popped": popped, "rolling_sum": sh.la.rolling_sum}))
        sh.rec_start[q] = t0
        sh.rec_latency[q] = env.now - t0
        sh.rec_terms[q] = j1 - j0
        sh.rec_seg_miss[q] = seg_miss
        sh.rec_page_miss[q] = page_miss
        sh.q_done = q + 1
        sh.occ_done = j1
        if log is not None:
            log.append((env.now, sh.core, "query", "done", -1, {"query": q}))
        # released pins and finished occurrences: a hybrid worker may go on
        if cfg in (HYBRID, HYBRID_PREFETCH) and sh.signal.notify() and sim.signal_ns:
            yield env.timeout(sim.signal_ns)  # the broadcast woke the worker
    sh.qt_finished = True
    sh.signal.notify()


def _lookahead_wait(env, sim, sh, q, acct):
    """Fixed lookahead: wait until query q is at most LA queries ahead."""
    if sh.fixed_la is None or q < sh.taken + sh.fixed_la:
        return
    _worker_waits(sh)
    t = env.now
    while q >= sh.taken + sh.fixed_la and not sh.qt_finished:
        yield sh.signal.wait(t, spins=True)
    yield from _resume(env, sim, sh, t, spins=True)
    acct.worker_stall_ns += env.now - t


def _publish(env, sim, sh):
    """Process step after the worker published progress (w_q, w_occ): as the
    runtime's tl_worker_published, the query thread is woken only when it is
    blocked and what it waits for is there, and the futex wake costs the
    worker signal_ns."""
    q1 = sh.qt_waiting
    if not q1:
        return
    have, need = ((sh.w_occ, int(sim.qfirst[q1])) if sim.cfg == HYBRID_PREFETCH
                  else (sh.w_q, q1))
    if have >= need and sh.signal.notify() and sim.signal_ns:
        yield env.timeout(sim.signal_ns)


def base_prefetch_worker(env, sim, sh):
    qfirst, term = sim.qfirst, sim.term
    # each page it reads goes into its 4096-byte buffer: CPU per term, in ns
    touch = sim.params.page_touch_ns
    pages = sim.pagemap.npages[0] + sim.pagemap.npages[1]
    touch_ns = np.floor(touch * pages + 0.5).astype(np.int64).tolist() if touch else None
    for q in range(sim.trace.queries):
        acct = sim.acct[q // sim.nq_pass]
        yield from _lookahead_wait(env, sim, sh, q, acct)
        for j in range(int(qfirst[q]), int(qfirst[q + 1])):
            t = int(term[j])
            acct.block_requests += sim.term_blocks[t]
            yield from sim.pc.read_term(sh.core, t, acct, "worker")
            if touch_ns:
                yield env.timeout(touch_ns[t])
        sh.w_q = q + 1
        yield from _publish(env, sim, sh)
    _worker_waits(sh)


def _make_room(env, sim, sh, nseg, q, acct, rule):
    """Evict victims until nseg segments are free. Returns False when the
    worker must give up (the query thread waits for this very query)."""
    sc, la, log = sh.cache, sh.la, sim.log
    while sc.free_units < nseg:
        victim, vsize = sc.victim()
        by_rule = rule and not la.may_evict(vsize)
        if not by_rule and not sh.pins[victim]:
            sc.evict()
            if log is not None:
                log.append((env.now, sh.core, "worker", "evict", victim, {"segments": vsize}))
            continue
        if sh.qt_waiting == q + 1:
            return False
        _worker_waits(sh)
        if log is not None:
            log.append((env.now, sh.core, "worker", "wait", victim,
                        {"segments": vsize, "rolling_sum": la.rolling_sum if la else None,
                         "pinned": int(sh.pins[victim]),
                         "reason": "rule" if by_rule else "pinned"}))
        t = env.now
        yield sh.signal.wait(t)  # a victim wait blocks at once, as the runtime's
        yield from _resume(env, sim, sh, t)
        acct.worker_stall_ns += env.now - t
    return True


def _fill(env, sim, sh, t, nseg, j, acct):
    """Read term t (through the page cache) and copy it into the tier."""
    yield from sim.pc.read_term(sh.core, t, acct, "worker")
    ev = sim.tier_slots.take()  # the tier's write bandwidth is shared by all workers
    if ev is not None:
        yield ev
    yield env.timeout(sim.copy_ns[t])
    sim.tier_slots.give()
    sh.cache.insert(t, nseg, int(sim.next_use[j]))
    if sim.log is not None:
        sim.log.append((env.now, sh.core, "worker", "cached", t, {"segments": nseg,
                                                                  "occurrence": j}))


def prefetch_worker(env, sim, sh):
    qfirst, term, segs = sim.qfirst, sim.term, sim.segs
    sc, la, log = sh.cache, sh.la, sim.log
    total = sh.segments
    for q in range(sim.trace.queries):
        acct = sim.acct[q // sim.nq_pass]
        yield from _lookahead_wait(env, sim, sh, q, acct)
        for j in range(int(qfirst[q]), int(qfirst[q + 1])):
            t = int(term[j])
            nseg = int(segs[t])
            acct.block_requests += sim.term_blocks[t]
            if nseg <= total and sc.contains(t):
                sc.touch(t, int(sim.next_use[j]))
                acct.seg_hits += 1
                if la is not None:
                    la.worker_done(nseg)
                if log is not None:
                    log.append((env.now, sh.core, "worker", "hit", t, {"occurrence": j}))
            else:
                acct.seg_misses += 1
                sh.missed[j] = 1
                ok = nseg <= total and (yield from _make_room(env, sim, sh, nseg, q, acct,
                                                              la is not None))
                if ok:
                    yield from _fill(env, sim, sh, t, nseg, j, acct)
                    if la is not None:
                        la.worker_done(nseg)
                else:
                    sh.bypass[j] = 1
                    acct.bypassed += 1
                    if la is not None:
                        la.worker_done(0)
                    if log is not None:
                        log.append((env.now, sh.core, "worker", "bypass", t, {"occurrence": j}))
            if log is not None:
                log.append((env.now, sh.core, "worker", "prefetched", t, {
                    "occurrence": j, "rolling_sum": la.rolling_sum if la is not None else None,
                    "pending": la.pending if la is not None else None}))
            sh.w_occ = j + 1
            yield from _publish(env, sim, sh)
        sh.w_q = q + 1
    _worker_waits(sh)


def copy_worker(env, sim, sh):
    term, segs = sim.term, sim.segs
    sc = sh.cache
    total = sh.segments
    nocc = len(term)
    j = 0
    while j < nocc:
        if j >= sh.occ_done:
            t = env.now
            while j >= sh.occ_done:
                if sh.qt_finished:
                    return
                yield sh.signal.wait(t, spins=True)
            yield from _resume(env, sim, sh, t, spins=True)
        avail = sh.occ_done
        while j < avail:
            if sh.missed[j]:
                t = int(term[j])
                nseg = int(segs[t])
                acct = sim.acct[j // sim.nocc_pass]
                acct.block_requests += sim.term_blocks[t]
                if not sim.pc.holds(sh.core, t):  # checked first, as the runtime does
                    acct.worker_skipped_terms += 1
                elif nseg <= total and not sc.contains(t):
                    yield from _make_room(env, sim, sh, nseg, -2, acct, False)
                    yield from _fill(env, sim, sh, t, nseg, j, acct)
            j += 1
            sh.w_occ = j
