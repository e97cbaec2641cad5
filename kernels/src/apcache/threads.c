/* threads.c — what the threads of a shard share: stopping and failing, the
 * start gate, and waiting for and waking the other thread of the shard; the
 * steps both kinds of worker take (the fixed-lookahead wait, publishing
 * progress, filling a chain). The threads themselves are query_thread.c and
 * one config_*.c per configuration with a worker (runtime.c's comment says
 * what each does). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime.h"

/* Wake every waiting thread (stop, failure, end). */
void tl_wake_all(tl_run *r) {
    for (uint32_t i = 0; i < r->nshards; i++) {
        pthread_mutex_lock(&r->sh[i].mu);
        pthread_cond_broadcast(&r->sh[i].cv);
        pthread_mutex_unlock(&r->sh[i].mu);
    }
    if (r->pc_inited) {
        pthread_mutex_lock(&r->pc.mu);
        pthread_cond_broadcast(&r->pc.loaded);
        pthread_mutex_unlock(&r->pc.mu);
    }
}

void tl_fail(tl_shard *s, int rc, const char *what) {
    if (!s->rc) {
        s->rc = rc;
        snprintf(s->err, sizeof s->err, "shard %u: %s", s->id, what);
    }
    atomic_store(&s->run->failed, 1);
    tl_wake_all(s->run);
}

/* Wait at the start gate, running: spin, yielding the CPU to any other
 * runnable thread (the opener may share it), so that leaving costs no
 * wake-up. Also returns on failure. */
void tl_gate_wait(tl_run *r) {
    atomic_fetch_add(&r->gate_arrived, 1);
    while (!atomic_load_explicit(&r->gate_open, memory_order_acquire) && !tl_stopping(r))
        sched_yield();
}

int tl_thread_create(pthread_t *t, void *(*fn)(void *), void *arg) {
    pthread_attr_t a;
    int rc = pthread_attr_init(&a);
    if (rc) return rc;
    rc = pthread_attr_setstacksize(&a, TL_THREAD_STACK_BYTES);
    if (!rc) rc = pthread_create(t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc;
}

tl_shard *tl_shard_thread_start(void *arg) {
    tl_thread_setup();
    tl_shard *s = arg;
    tl_gate_wait(s->run);
    return s;
}

/* Open the gate once `threads` threads wait at it (or on failure). */
void tl_gate_open(tl_run *r, uint32_t threads) {
    while (atomic_load(&r->gate_arrived) < threads && !tl_stopping(r)) sched_yield();
    r->t0 = tl_now_ns();
    atomic_store_explicit(&r->gate_open, 1, memory_order_release);
}

/* ---- waking the other thread of the shard -------------------------------------- */
/* A futex wake costs the waker a system call (measured: the cost table's
 * threads.signal_ns), so a thread is woken only when it blocked. Who blocks
 * says so under the shard's mutex (qt_waiting, worker_asleep) before it
 * re-checks its condition; a notifier publishes its progress first and reads
 * that flag after, both sequentially consistent: either the waiter sees the
 * progress or the notifier sees the flag and broadcasts under the mutex, so
 * no wake-up is lost. A thread with a CPU of its own first spins on the
 * progress counter it waits for (tl_spin_until, up to the run's
 * handoff_spin_ns) with neither flag set, so a wait shorter than that costs
 * no futex call on either side and no wake-up. (Spinning pays where the two
 * threads' CPUs do not share a core and a blocked thread wakes late after its
 * signal; where they share one, the spinner can slow the thread it waits
 * for. Where it does not pay, run with fewer threads than CPUs unpinned.) */

static inline void tl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin until *counter + add > v, the query thread finishes or the run stops
 * (1), or the run's handoff_spin_ns has passed (0: the caller blocks). */
int tl_spin_until(tl_shard *s, _Atomic uint64_t *counter, uint64_t add, uint64_t v) {
    uint64_t budget = s->run->handoff_spin_ns;
    if (!budget) return 0;
    uint64_t end = tl_now_ns() + budget;
    for (unsigned i = 1;; i++) {
        if (atomic_load(counter) + add > v || atomic_load(&s->qt_finished)) return 1;
        if (!(i & 63)) {
            if (tl_stopping(s->run)) return 1;
            if (tl_now_ns() >= end) return 0;
        }
        tl_cpu_relax();
    }
}

/* Wake the worker if it blocked (call after publishing what it waits for). */
void tl_wake_worker(tl_shard *s) {
    if (!atomic_load(&s->worker_asleep)) return;
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* The worker blocks once on the shard's condition variable (mutex held).
 * For a victim held by the query thread: the query thread releases it under
 * the mutex, so the flag may be set here. A wait on a progress counter the
 * query thread stores without the mutex (q_taken, occ_done) sets the flag
 * before its condition's last check instead (tl_worker_await). */
void tl_worker_block(tl_shard *s) {
    atomic_store(&s->worker_asleep, 1);
    pthread_cond_wait(&s->cv, &s->mu);
    atomic_store(&s->worker_asleep, 0);
}

/* Block (mutex held) until *counter + add > q, the query thread finishes or
 * the run stops: the lookahead wait (q_taken + LA > q) and the hybrid
 * worker's idle wait (occ_done > j). */
void tl_worker_await(tl_shard *s, _Atomic uint64_t *counter, uint64_t add, uint64_t q) {
    if (s->run->handoff_spin_ns) {
        pthread_mutex_unlock(&s->mu);
        int done = tl_spin_until(s, counter, add, q);
        pthread_mutex_lock(&s->mu);
        if (done) return;
    }
    atomic_store(&s->worker_asleep, 1);
    while (q >= atomic_load(counter) + add && !atomic_load(&s->qt_finished) &&
           !tl_stopping(s->run))
        pthread_cond_wait(&s->cv, &s->mu);
    atomic_store(&s->worker_asleep, 0);
}

/* How many queries the worker is ahead of query q: the queries all of whose
 * term occurrences it has finished, minus q (negative for hybrid's trailing
 * worker). Never negative in the prefetch configurations: the query thread
 * finished q - 1 only after the worker had finished its terms. */
int64_t tl_worker_ahead(tl_shard *s, uint64_t q) {
    tl_run *r = s->run;
    if (r->p.config == TL_APCACHE_BASE) return 0;
    uint64_t j = atomic_load_explicit(&s->w_occ, memory_order_acquire);
    const tl_workload *w = &r->wl;
    uint64_t lo = 0, hi = w->nq;
    while (lo < hi) { /* the first query whose occurrences end after j */
        uint64_t mid = lo + (hi - lo) / 2;
        if (w->qfirst[mid + 1] <= j) lo = mid + 1;
        else hi = mid;
    }
    return (int64_t)lo - (int64_t)q;
}

/* Fixed lookahead: wait (counted as a stall) until query q is at most LA
 * queries ahead of the query thread. 0, or 1 when the run ends. */
int tl_wait_lookahead(tl_shard *s, uint64_t q) {
    tl_run *r = s->run;
    uint32_t la = r->p.lookahead;
    if (la == TIERLAB_LOOKAHEAD_ADAPTIVE) return 0;
    if (q < atomic_load(&s->q_taken) + la) return 0;
    uint64_t t = tl_now_ns();
    pthread_mutex_lock(&s->mu);
    tl_worker_await(s, &s->q_taken, la, q);
    int end = atomic_load(&s->qt_finished) || tl_stopping(r);
    pthread_mutex_unlock(&s->mu);
    s->worker_stall_ns += tl_now_ns() - t;
    return end;
}

/* Publish worker progress; wake the query thread only when it blocked and
 * what it waits for is there (tl_wait_prefetched): an AND query would
 * otherwise be woken per term, each wake a futex call and a hand-off. The
 * query thread is the only thread that waits on progress. */
void tl_worker_published(tl_shard *s, _Atomic uint64_t *counter, uint64_t v) {
    const tl_workload *w = &s->run->wl;
    atomic_store(counter, v);
    if (!atomic_load(&s->qt_asleep)) return; /* not blocked: spinning, or not waiting */
    uint64_t q1 = atomic_load(&s->qt_waiting); /* query + 1 it blocks for */
    if (!q1) return;
    int hp = s->run->p.config == TL_APCACHE_HYBRID_PREFETCH;
    if (atomic_load(hp ? &s->w_occ : &s->w_q) < (hp ? w->qfirst[q1] : q1)) return;
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Fill a freshly allocated chain from storage and commit it. */
int tl_fill(tl_shard *s, uint64_t j, int direct, int count) {
    tl_run *r = s->run;
    const tl_workload *w = &r->wl;
    uint64_t term = w->term[j], nseg = w->nseg[j];
    tl_extent x;
    int rc = tl_term_extent(s->ix, term, &x);
    uint8_t **map = malloc((nseg ? nseg : 1) * sizeof *map);
    if (!map) rc = TIERLAB_ENOMEM;
    if (!rc) {
        pthread_mutex_lock(&s->mu); /* the chain's next[] is shared state */
        rc = tl_chain_map(&s->cs, term, nseg, map);
        pthread_mutex_unlock(&s->mu);
    }
    if (!rc) rc = tl_read_term_chain(&s->rd, &x, map, s->cs.segment_bytes, direct, &s->wps);
    free(map);
    if (rc) return rc;
    pthread_mutex_lock(&s->mu);
    tl_worker_commit(&s->cs, term, nseg, w->next_use[j], count);
    pthread_mutex_unlock(&s->mu);
    return 0;
}
