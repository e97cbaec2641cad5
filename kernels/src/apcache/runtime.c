/* runtime.c — the native APCache runtime (APCACHE.md "The four
 * configurations"): shards, the query thread and the worker of each, the
 * sampler, and tierlab_apcache_run.
 *
 * Per shard (one per core): its own copy of the index (a real-device run
 * with cores > 1 copies the index directory next to the original, removed
 * at the end; an emulated run gives each shard its own range of device
 * addresses and page-cache keys over the one set of files), one query
 * thread, and one worker (all configurations but base), a segment cache of
 * cache_bytes / cores (hybrid configurations), and the whole workload: every
 * core runs every query on its shard, back to back (closed loop; queries
 * are all queued at the start, so a query's latency is from the moment its
 * query thread takes it to its sorted results, waits included).
 *
 *   base            query thread reads blocks through the index mmap (real)
 *                   or the emulated page cache (emulated);
 *   base-prefetch   + a worker reading every term of queries q_taken ..
 *                   q_taken + LA - 1 through a 4096-byte buffer (pread, or
 *                   the emulated page cache); the query thread waits until
 *                   the worker has finished its query;
 *   hybrid          the query thread serves a term from the segment cache
 *                   when it is there (pinned while in use) and from storage
 *                   otherwise; the worker trails it, copying every term it
 *                   missed into the segment cache (from the page cache;
 *                   a term the page cache no longer holds whole is
 *                   skipped: only the query thread reads storage);
 *   hybrid-prefetch the worker prefetches the terms of upcoming queries
 *                   straight into the segment cache (pread into the chain,
 *                   or through the emulated page cache = the DRAM budget)
 *                   with adaptive lookahead (or a fixed LA when asked); the
 *                   query thread waits until all terms of its query are
 *                   prefetched and serves them from the cache.
 * Terms larger than a shard's segment cache are never cached (served from
 * storage, counted as segment misses). A hybrid-prefetch query whose terms
 * do not fit in the cache together would deadlock the rule (the worker
 * waits for the query thread, which waits for the worker): the worker then
 * serves the rest of that query from storage (counted in `bypassed`).
 *
 * Stopping: the progress callback (polled by the sampler at least every
 * 50 ms) returning non-zero stops every thread at its next step; what was
 * measured so far is written with partial = 1 and the call returns
 * TIERLAB_ECANCELED after the same cleanup as a complete run. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

static const char *const tl_config_names[TIERLAB_APCACHE_CONFIGS] = {
    "base", "base-prefetch", "hybrid", "hybrid-prefetch"};

const char *tierlab_apcache_config_name(int config) {
    return config >= 0 && config < TIERLAB_APCACHE_CONFIGS ? tl_config_names[config] : NULL;
}

void tierlab_apcache_params_default(tierlab_apcache_params *p) {
    memset(p, 0, sizeof *p);
    p->config = TIERLAB_APCACHE_HYBRID_PREFETCH;
    p->policy = TIERLAB_POLICY_LRU;
    p->cores = 1;
    p->k = TIERLAB_K_DEFAULT;
    p->lookahead = TIERLAB_LOOKAHEAD_ADAPTIVE;
    p->sample_ms = 10;
    p->cache_bytes = 64ull << 20;
    p->segment_bytes = 32768;
    p->dram_budget_bytes = 50000000;
    p->readahead_bytes = 131072;
    p->emulated = 0;
    p->dev_queue_depth = 1;
    p->memory_limit = 1;
    snprintf(p->slow_tier, sizeof p->slow_tier, "dram");
}

static int tl_is_prefetch(int c) {
    return c == TIERLAB_APCACHE_BASE_PREFETCH || c == TIERLAB_APCACHE_HYBRID_PREFETCH;
}
#define tl_is_hybrid tl_is_hybrid_cfg
static int tl_stopping(tl_run *r) {
    return atomic_load_explicit(&r->stop, memory_order_relaxed) ||
           atomic_load_explicit(&r->failed, memory_order_relaxed);
}

/* Wake every waiting thread (stop, failure, end). */
static void tl_wake_all(tl_run *r) {
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

static void tl_fail(tl_shard *s, int rc, const char *what) {
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
static void tl_gate_wait(tl_run *r) {
    atomic_fetch_add(&r->gate_arrived, 1);
    while (!atomic_load_explicit(&r->gate_open, memory_order_acquire) && !tl_stopping(r))
        sched_yield();
}

/* Open the gate once `threads` threads wait at it (or on failure). */
static void tl_gate_open(tl_run *r, uint32_t threads) {
    while (atomic_load(&r->gate_arrived) < threads && !tl_stopping(r)) sched_yield();
    r->t0 = tl_now_ns();
    atomic_store_explicit(&r->gate_open, 1, memory_order_release);
}

/* ---- the workload ------------------------------------------------------------- */

static int tl_workload_parse(tl_run *r, const struct tierlab_index *ix, char *err, size_t errlen) {
    tl_workload *w = &r->wl;
    FILE *f = fopen(r->workload_path, "rb");
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", r->workload_path, strerror(errno));
    size_t cap = 1 << 16, qcap = 1024, tcap = 4096, n = 0, nq = 0, nt = 0;
    char *text = malloc(cap);
    uint64_t *qtext = malloc(qcap * sizeof *qtext), *toff = malloc(tcap * sizeof *toff);
    char line[65536];
    int rc = 0;
    uint64_t lineno = 0;
    if (!text || !qtext || !toff) rc = TIERLAB_ENOMEM;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s:%llu: line too long", r->workload_path,
                        (unsigned long long)lineno);
            break;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p || *p == '#') continue;
        if (nq + 2 > qcap) {
            qcap *= 2;
            uint64_t *g = realloc(qtext, qcap * sizeof *qtext);
            if (!g) { rc = TIERLAB_ENOMEM; break; }
            qtext = g;
        }
        qtext[nq] = nt;
        uint32_t terms = 0;
        char *save = NULL;
        for (char *t = strtok_r(p, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (!strcmp(t, "AND")) continue;
            size_t tl = strlen(t);
            if (++terms > TIERLAB_QUERY_MAX_TERMS) {
                rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s:%llu: more than %d terms",
                            r->workload_path, (unsigned long long)lineno, TIERLAB_QUERY_MAX_TERMS);
                break;
            }
            while (n + tl > cap) {
                cap *= 2;
                char *g = realloc(text, cap);
                if (!g) { rc = TIERLAB_ENOMEM; break; }
                text = g;
            }
            if (nt + 2 > tcap) {
                tcap *= 2;
                uint64_t *g = realloc(toff, tcap * sizeof *toff);
                if (!g) { rc = TIERLAB_ENOMEM; break; }
                toff = g;
            }
            if (rc) break;
            toff[nt++] = n;
            memcpy(text + n, t, tl);
            n += tl;
        }
        if (!rc && terms == 0) continue;
        nq++;
    }
    fclose(f);
    if (!rc && nq == 0) rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s: no queries", r->workload_path);
    if (!rc && nq > UINT32_MAX - 1) rc = tl_err(err, errlen, TIERLAB_EINVAL, "too many queries");
    if (rc) {
        free(text);
        free(qtext);
        free(toff);
        if (rc == TIERLAB_ENOMEM) tl_err(err, errlen, rc, "out of memory reading the workload");
        return rc;
    }
    qtext[nq] = nt;
    toff[nt] = n;
    w->nq = (uint32_t)nq;
    w->text = text;
    w->qtext = qtext;
    w->toff = toff;
    w->qfirst = malloc((nq + 1) * sizeof *w->qfirst);
    w->type = malloc(nq);
    w->nterms = malloc(nq);
    w->known = malloc(nq);
    w->term = malloc((nt ? nt : 1) * sizeof *w->term);
    w->next_use = malloc((nt ? nt : 1) * sizeof *w->next_use);
    w->nseg = malloc((nt ? nt : 1) * sizeof *w->nseg);
    uint64_t *last = malloc((ix->terms ? ix->terms : 1) * sizeof *last);
    if (!w->qfirst || !w->type || !w->nterms || !w->known || !w->term || !w->next_use ||
        !w->nseg || !last) {
        free(last);
        return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for the workload");
    }
    uint64_t occ = 0;
    for (size_t q = 0; q < nq; q++) {
        uint64_t a = qtext[q], z = qtext[q + 1];
        w->nterms[q] = (uint8_t)(z - a);
        w->type[q] = z - a == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND;
        uint64_t ids[TIERLAB_QUERY_MAX_TERMS];
        int known = 1;
        for (uint64_t t = a; t < z; t++) {
            uint64_t bytes = 0;
            int corrupt = 0;
            const tl_dict_entry *e =
                tl_dict_find(ix, text + toff[t], (size_t)(toff[t + 1] - toff[t]), &bytes, &corrupt);
            if (corrupt) {
                free(last);
                return tl_err(err, errlen, TIERLAB_EFORMAT, "corrupt dictionary");
            }
            if (!e) known = 0;
            else ids[t - a] = (uint64_t)(e - ix->dict);
        }
        w->known[q] = (uint8_t)known;
        w->qfirst[q] = occ;
        if (known)
            for (uint64_t t = a; t < z; t++) w->term[occ++] = ids[t - a];
    }
    w->qfirst[nq] = occ;
    w->nocc = occ;
    for (uint64_t i = 0; i < ix->terms; i++) last[i] = TIERLAB_NEVER;
    for (uint64_t j = occ; j-- > 0;) {
        w->next_use[j] = last[w->term[j]];
        last[w->term[j]] = j;
    }
    free(last);
    return 0;
}

static void tl_workload_free(tl_workload *w) {
    free(w->qfirst);
    free(w->type);
    free(w->nterms);
    free(w->known);
    free(w->term);
    free(w->next_use);
    free(w->nseg);
    free(w->text);
    free(w->qtext);
    free(w->toff);
    memset(w, 0, sizeof *w);
}

/* ---- waking the other thread of the shard -------------------------------------- */
/* A futex wake costs the waker ~7-10 us here (the cost table's
 * threads.signal_ns), so a thread is woken only when it blocked. Who blocks
 * says so under the shard's mutex (qt_waiting, worker_asleep) before it
 * re-checks its condition; a notifier publishes its progress first and reads
 * that flag after, both sequentially consistent: either the waiter sees the
 * progress or the notifier sees the flag and broadcasts under the mutex, so
 * no wake-up is lost. A thread with a CPU of its own first spins on the
 * progress counter it waits for (tl_spin_until, up to the run's
 * handoff_spin_ns) with neither flag set, so a wait shorter than that costs
 * no futex call on either side and no wake-up. (Spinning was tried on an
 * earlier 2-vCPU VM and rejected there: the spinner slowed the worker it
 * waited for. On a later one, whose vCPUs a pure ALU loop showed not to share
 * a core and whose blocked threads woke 30-70 us (median) after their signal,
 * it paid: hybrid-prefetch SINGLE on emulated NVMe, 10 % cache, 7,851 ->
 * ~8,700 QPS. Where it does not, run with fewer threads than CPUs unpinned.) */

static inline void tl_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin until *counter + add > v, the query thread finishes or the run stops
 * (1), or the run's handoff_spin_ns has passed (0: the caller blocks). */
static int tl_spin_until(tl_shard *s, _Atomic uint64_t *counter, uint64_t add, uint64_t v) {
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
static void tl_wake_worker(tl_shard *s) {
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
static void tl_worker_block(tl_shard *s) {
    atomic_store(&s->worker_asleep, 1);
    pthread_cond_wait(&s->cv, &s->mu);
    atomic_store(&s->worker_asleep, 0);
}

/* Block (mutex held) until *counter + add > q, the query thread finishes or
 * the run stops: the lookahead wait (q_taken + LA > q) and the hybrid
 * worker's idle wait (occ_done > j). */
static void tl_worker_await(tl_shard *s, _Atomic uint64_t *counter, uint64_t add, uint64_t q) {
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

/* ---- the query thread ------------------------------------------------------------ */

/* Wait (counted) until the worker has prefetched query q. */
static uint64_t tl_wait_prefetched(tl_shard *s, uint64_t q) {
    tl_run *r = s->run;
    const tl_workload *w = &r->wl;
    int hp = r->p.config == TIERLAB_APCACHE_HYBRID_PREFETCH;
    uint64_t need = hp ? w->qfirst[q + 1] : q + 1;
    _Atomic uint64_t *have = hp ? &s->w_occ : &s->w_q;
    if (atomic_load(have) >= need) return 0;
    uint64_t t = tl_now_ns();
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->qt_waiting, q + 1);
    /* a worker stalled on a victim re-checks: for this very query it bypasses */
    if (atomic_load(&s->worker_asleep)) pthread_cond_broadcast(&s->cv);
    int spun = 0;
    if (r->handoff_spin_ns) {
        pthread_mutex_unlock(&s->mu);
        spun = tl_spin_until(s, have, 1, need);
        pthread_mutex_lock(&s->mu);
    }
    if (!spun) {
        atomic_store(&s->qt_asleep, 1);
        while (atomic_load(have) < need && !tl_stopping(r)) pthread_cond_wait(&s->cv, &s->mu);
        atomic_store(&s->qt_asleep, 0);
    }
    atomic_store(&s->qt_waiting, 0);
    pthread_mutex_unlock(&s->mu);
    return tl_now_ns() - t;
}

/* How many queries the worker is ahead of query q: the queries all of whose
 * term occurrences it has finished, minus q (negative for hybrid's trailing
 * worker). Never negative in the prefetch configurations: the query thread
 * finished q - 1 only after the worker had finished its terms. */
static int64_t tl_worker_ahead(tl_shard *s, uint64_t q) {
    tl_run *r = s->run;
    if (r->p.config == TIERLAB_APCACHE_BASE) return 0;
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

static void *tl_query_thread(void *arg) {
    tl_thread_setup();
    tl_shard *s = arg;
    tl_run *r = s->run;
    tl_gate_wait(r);
    const tl_workload *w = &r->wl;
    int cfg = r->p.config;
    tierlab_query_stats st;
    for (uint64_t q = 0; q < w->nq && !tl_stopping(r); q++) {
        tl_qrec *rec = &s->rec[q];
        uint64_t t0 = tl_now_ns();
        rec->start_ns = t0 - r->t0;
        atomic_store(&s->q_taken, q + 1);
        /* the worker may move on (fixed lookahead only) */
        if (tl_is_prefetch(cfg) && r->p.lookahead != TIERLAB_LOOKAHEAD_ADAPTIVE) tl_wake_worker(s);
        rec->lookahead = tl_worker_ahead(s, q);
        uint64_t j0 = w->qfirst[q], j1 = w->qfirst[q + 1];
        if (tl_is_prefetch(cfg) && w->known[q]) rec->wait_ns = tl_wait_prefetched(s, q);
        if (tl_stopping(r)) break;
        /* dictionary lookups, as any query does (the dictionary's tier counts) */
        const tl_dict_entry *ents[TIERLAB_QUERY_MAX_TERMS];
        tl_block_src *srcs[TIERLAB_QUERY_MAX_TERMS];
        uint32_t nt = w->nterms[q];
        for (uint32_t i = 0; i < nt; i++) {
            uint64_t t = w->qtext[q] + i, bytes = 0;
            int corrupt = 0;
            ents[i] = tl_dict_find(s->ix, w->text + w->toff[t],
                                   (size_t)(w->toff[t + 1] - w->toff[t]), &bytes, &corrupt);
            srcs[i] = &s->src[i].base;
        }
        tl_pstats before = s->qps;
        uint32_t seg_miss = 0;
        int pinned[TIERLAB_QUERY_MAX_TERMS] = {0};
        if (w->known[q]) {
            if (tl_is_hybrid(cfg)) pthread_mutex_lock(&s->mu);
            for (uint32_t i = 0; i < nt; i++) {
                uint64_t j = j0 + i, term = w->term[j];
                tl_src *src = &s->src[i];
                int cached = 0;
                if (cfg == TIERLAB_APCACHE_HYBRID) {
                    cached = tl_query_acquire(&s->cs, term, 1, w->next_use[j]);
                    if (cached) s->seg_hits++;
                    else s->seg_misses++, seg_miss++, s->missed[j] = 1;
                } else if (cfg == TIERLAB_APCACHE_HYBRID_PREFETCH) {
                    /* hits and misses were the worker's (a repeat found cached is a hit) */
                    seg_miss += s->missed[j];
                    cached = !s->bypass[j] && tl_query_acquire(&s->cs, term, 0, w->next_use[j]);
                    if (!cached && !s->bypass[j]) s->evicted_before_use++;
                }
                if (cached) {
                    tl_extent x;
                    int rc = tl_term_extent(s->ix, term, &x);
                    if (!rc) rc = tl_src_chain(src, &s->cs, term, w->nseg[j], &x);
                    if (rc) {
                        pthread_mutex_unlock(&s->mu);
                        tl_fail(s, rc, "a cached term's chain is broken");
                        return NULL;
                    }
                    pinned[i] = 1;
                } else {
                    tl_src_storage(src, &s->rd, &s->qps);
                }
            }
            if (tl_is_hybrid(cfg)) pthread_mutex_unlock(&s->mu);
        }
        int rc = tl_query_entries(s->qctx, w->type[q], ents, nt, srcs, &st);
        int src_fail = 0;
        for (uint32_t i = 0; i < nt && w->known[q]; i++) src_fail |= s->src[i].fail;
        if (tl_is_hybrid(cfg) && w->known[q]) {
            pthread_mutex_lock(&s->mu);
            for (uint32_t i = 0; i < nt; i++) {
                if (pinned[i]) tl_query_release(&s->cs, w->term[j0 + i]);
                if (cfg == TIERLAB_APCACHE_HYBRID_PREFETCH) tl_query_term_done(&s->cs);
            }
            /* hybrid: the wake after the query (below) serves the worker once */
            if (cfg == TIERLAB_APCACHE_HYBRID_PREFETCH && atomic_load(&s->worker_asleep))
                pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        uint64_t t1 = tl_now_ns();
        if (rc || src_fail) {
            tl_fail(s, rc ? rc : TIERLAB_EIO,
                    rc ? tierlab_query_error(s->qctx) : "a block could not be read");
            return NULL;
        }
        rec->latency_ns = t1 - t0;
        rec->terms = w->known[q] ? nt : 0;
        rec->seg_misses = seg_miss;
        rec->page_misses = (uint32_t)(s->qps.misses - before.misses);
        rec->results = st.results;
        rec->done = 1;
        if (s->hits) memcpy(s->hits + q * r->p.k, s->qctx->out, (size_t)st.results * sizeof *s->hits);
        atomic_store(&s->occ_done, j1);
        atomic_store_explicit(&s->q_done, q + 1, memory_order_release);
        if (cfg == TIERLAB_APCACHE_HYBRID) tl_wake_worker(s); /* the copy worker has work */
    }
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->qt_finished, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- the workers --------------------------------------------------------------------- */

/* Fixed lookahead: wait (counted as a stall) until query q is at most LA
 * queries ahead of the query thread. 0, or 1 when the run ends. */
static int tl_wait_lookahead(tl_shard *s, uint64_t q) {
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
static void tl_worker_published(tl_shard *s, _Atomic uint64_t *counter, uint64_t v) {
    const tl_workload *w = &s->run->wl;
    atomic_store(counter, v);
    if (!atomic_load(&s->qt_asleep)) return; /* not blocked: spinning, or not waiting */
    uint64_t q1 = atomic_load(&s->qt_waiting); /* query + 1 it blocks for */
    if (!q1) return;
    int hp = s->run->p.config == TIERLAB_APCACHE_HYBRID_PREFETCH;
    if (atomic_load(hp ? &s->w_occ : &s->w_q) < (hp ? w->qfirst[q1] : q1)) return;
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *tl_base_prefetch_worker(void *arg) {
    tl_thread_setup();
    tl_shard *s = arg;
    tl_run *r = s->run;
    tl_gate_wait(r);
    const tl_workload *w = &r->wl;
    for (uint64_t q = 0; q < w->nq && !tl_stopping(r); q++) {
        if (tl_wait_lookahead(s, q)) break;
        for (uint64_t j = w->qfirst[q]; j < w->qfirst[q + 1]; j++) {
            tl_extent x;
            int rc = tl_term_extent(s->ix, w->term[j], &x);
            if (!rc) rc = tl_read_term_touch(&s->rd, &x, s->buf4k, &s->wps);
            if (rc) {
                tl_fail(s, rc, "a prefetch read failed");
                return NULL;
            }
            atomic_store_explicit(&s->w_occ, j + 1, memory_order_release);
        }
        tl_worker_published(s, &s->w_q, q + 1);
    }
    return NULL;
}

/* Fill a freshly allocated chain from storage and commit it. */
static int tl_fill(tl_shard *s, uint64_t j, int direct, int count) {
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

static void *tl_hybrid_worker(void *arg) {
    tl_thread_setup();
    tl_shard *s = arg;
    tl_run *r = s->run;
    tl_gate_wait(r);
    const tl_workload *w = &r->wl;
    uint64_t j = 0;
    while (j < w->nocc && !tl_stopping(r)) {
        uint64_t avail = atomic_load(&s->occ_done);
        if (j >= avail) { /* idle: nothing used yet that is not handled */
            pthread_mutex_lock(&s->mu);
            tl_worker_await(s, &s->occ_done, 0, j);
            int end = j >= atomic_load(&s->occ_done);
            pthread_mutex_unlock(&s->mu);
            if (end) break;
            continue;
        }
        for (; j < avail && !tl_stopping(r); j++) {
            if (atomic_load(&s->qt_finished)) return NULL; /* nothing would use the copies */
            if (!s->missed[j]) { /* a hit: the query thread counted it */
                atomic_store_explicit(&s->w_occ, j + 1, memory_order_release);
                continue;
            }
            /* Copies come from the page cache only: in hybrid the query thread
             * alone reads storage (APCACHE.md). A term whose pages left the page
             * cache before the worker came is skipped, to be copied when it is
             * used again; rereading it would put the worker on the device next
             * to the query thread, further behind with every term (on a 1 MB page
             * cache and emulated NVMe, half the runs of a row settled there:
             * page-cache miss rate 0.60-0.68 against 0.36). Pages evicted while
             * it waits for a victim below are still read (the window is short). */
            tl_extent held_x;
            if (!tl_term_extent(s->ix, w->term[j], &held_x) && !tl_term_held(&s->rd, &held_x)) {
                s->worker_skipped++;
                atomic_store_explicit(&s->w_occ, j + 1, memory_order_release);
                continue;
            }
            pthread_mutex_lock(&s->mu);
            int step;
            for (;;) {
                step = tl_copy_step(&s->cs, w->term[j], w->nseg[j], w->next_use[j]);
                if (step != TL_STEP_WAIT || tl_stopping(r)) break;
                uint64_t t = tl_now_ns(); /* the victim is in use: wait for its release */
                tl_worker_block(s);
                s->worker_stall_ns += tl_now_ns() - t;
            }
            pthread_mutex_unlock(&s->mu);
            if (step < 0) {
                tl_fail(s, TIERLAB_EINVAL, "segment cache allocation failed");
                return NULL;
            }
            if (step == TL_STEP_FILL) {
                int rc = tl_fill(s, j, 0, 0);
                if (rc) {
                    tl_fail(s, rc, "copying a term into the cache failed");
                    return NULL;
                }
            }
            atomic_store_explicit(&s->w_occ, j + 1, memory_order_release);
        }
    }
    return NULL;
}

static void *tl_prefetch_worker(void *arg) {
    tl_thread_setup();
    tl_shard *s = arg;
    tl_run *r = s->run;
    tl_gate_wait(r);
    const tl_workload *w = &r->wl;
    for (uint64_t q = 0; q < w->nq && !tl_stopping(r); q++) {
        if (tl_wait_lookahead(s, q)) break;
        for (uint64_t j = w->qfirst[q]; j < w->qfirst[q + 1] && !tl_stopping(r); j++) {
            pthread_mutex_lock(&s->mu);
            int step;
            for (;;) {
                step = tl_prefetch_step(&s->cs, w->term[j], w->nseg[j], w->next_use[j]);
                if (step != TL_STEP_WAIT || tl_stopping(r)) break;
                if (atomic_load(&s->qt_waiting) == q + 1) { /* the query thread waits for this very query */
                    step = TL_STEP_BYPASS;
                    break;
                }
                uint64_t t = tl_now_ns();
                tl_worker_block(s);
                s->worker_stall_ns += tl_now_ns() - t;
            }
            if (step == TL_STEP_HIT) s->seg_hits++;
            else if (step != TL_STEP_WAIT) s->seg_misses++, s->missed[j] = 1;
            if (step == TL_STEP_BYPASS) {
                tl_prefetch_bypass(&s->cs);
                s->bypass[j] = 1;
            }
            pthread_mutex_unlock(&s->mu);
            if (step < 0) {
                tl_fail(s, TIERLAB_EINVAL, "segment cache allocation failed");
                return NULL;
            }
            if (step == TL_STEP_WAIT) break; /* stopping */
            if (step == TL_STEP_FILL) {
                int rc = tl_fill(s, j, 1, 1);
                if (rc) {
                    tl_fail(s, rc, "prefetching a term failed");
                    return NULL;
                }
            }
            tl_worker_published(s, &s->w_occ, j + 1);
        }
        if (!tl_stopping(r)) tl_worker_published(s, &s->w_q, q + 1);
    }
    return NULL;
}

/* ---- memory and device accounting ------------------------------------------------ */

/* kB fields of /proc/self/status. */
static uint64_t tl_status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(field);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

uint64_t tl_proc_io_read_bytes(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "read_bytes:", 11)) v = strtoull(line + 11, NULL, 10);
    fclose(f);
    return v;
}

/* Reads completed and io_ticks (ms) of the block device holding `path`. */
static int tl_blk_stat(const char *dev, uint64_t *reads, uint64_t *ticks) {
    if (!*dev) return -1;
    char p[128];
    snprintf(p, sizeof p, "/sys/dev/block/%s/stat", dev);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    unsigned long long v[11] = {0};
    int n = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10]);
    fclose(f);
    if (n < 10) return -1;
    *reads = v[0];
    *ticks = v[9];
    return 0;
}

static uint64_t tl_region_resident(const void *addr, size_t len) {
    if (!addr || !len) return 0;
    size_t pages = (len + TL_PAGE - 1) / TL_PAGE;
    unsigned char vec[1024];
    uint64_t res = 0;
    for (size_t p = 0; p < pages; p += sizeof vec) {
        size_t n = pages - p < sizeof vec ? pages - p : sizeof vec;
        size_t bytes = n * TL_PAGE;
        if ((p + n) * TL_PAGE > len) bytes = len - p * TL_PAGE;
        if (mincore((void *)((const uint8_t *)addr + p * TL_PAGE), bytes, vec) != 0) continue;
        for (size_t i = 0; i < n; i++) res += vec[i] & 1;
    }
    return res * TL_PAGE;
}

static int tl_on_tmpfs(const char *dir) {
    struct statfs fs;
    return statfs(dir, &fs) == 0 && (unsigned long)fs.f_type == 0x01021994ul;
}

/* Bytes of the dict/skip copies that live on the slow tier and are counted
 * in RssAnon/RssShmem (dram, numa:N, pm on tmpfs): not DRAM of the budget. */
static uint64_t tl_slow_static_bytes(tl_run *r) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int f = TIERLAB_FILE_DICT; f <= TIERLAB_FILE_SKIP; f++) {
            const tl_region *g = &r->sh[i].ix->r[f];
            if (strcmp(g->rep.request, r->p.slow_tier) != 0) continue;
            if (!strcmp(g->rep.tier, "dram") || !strcmp(g->rep.tier, "numa") ||
                (!strcmp(g->rep.tier, "pm") && tl_on_tmpfs(g->rep.request + 3)))
                b += tl_region_resident(g->map, g->map_len);
        }
    return b;
}

/* Index bytes in the host page cache (real device: the budget's page cache). */
static uint64_t tl_index_cached_bytes(tl_run *r) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int f = 0; f < TIERLAB_FILES; f++) {
            const tl_region *g = &r->sh[i].ix->r[f];
            if (!strcmp(g->rep.tier, "storage")) b += tl_region_resident(g->data, g->len);
        }
    return b;
}

static void tl_take_sample(tl_run *r, uint64_t slow_static) {
    uint64_t t = tl_now_ns() - r->t0;
    uint64_t slow_used = 0, slow_resident = 0;
    uint64_t storage = r->p.emulated ? atomic_load(&r->dev.bytes)
                                     : tl_proc_io_read_bytes() - r->io_read0;
    if (r->nsamples + r->nshards > r->cap_samples) {
        size_t cap = r->cap_samples ? 2 * r->cap_samples : 1024;
        tl_sample *g = realloc(r->samples, cap * sizeof *g);
        if (!g) return;
        r->samples = g;
        r->cap_samples = cap;
    }
    for (uint32_t i = 0; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        tl_sample *x = &r->samples[r->nsamples++];
        x->core = i;
        x->t_ns = t;
        x->queries_done = atomic_load_explicit(&s->q_done, memory_order_relaxed);
        uint64_t taken = atomic_load_explicit(&s->q_taken, memory_order_relaxed);
        x->lookahead = tl_worker_ahead(s, taken ? taken - 1 : 0);
        x->rolling_sum = 0;
        x->storage_bytes_read = storage;
        if (s->has_cache) {
            pthread_mutex_lock(&s->mu);
            uint64_t used = tl_cache_used_segments(&s->cs);
            if (s->cs.la) x->rolling_sum = tierlab_lookahead_rolling_sum(s->cs.la);
            pthread_mutex_unlock(&s->mu);
            x->cache_used_bytes = used * s->cs.segment_bytes;
            slow_used += x->cache_used_bytes;
            if (s->slow.anon) slow_resident += tl_region_resident(s->slow.mem, s->slow.len);
        } else if (r->pc_inited) {
            x->cache_used_bytes = tl_pcache_used_bytes(&r->pc);
        } else {
            x->cache_used_bytes = 0;
            for (int f = 0; f < 2; f++)
                x->cache_used_bytes += tl_region_resident(s->rd.f[f].map, s->rd.f[f].len);
        }
    }
    uint64_t anon = tl_status_bytes("RssAnon") + tl_status_bytes("RssShmem");
    uint64_t not_dram = slow_resident + slow_static;
    uint64_t dram = anon > not_dram ? anon - not_dram : 0;
    if (!r->p.emulated) dram += tl_index_cached_bytes(r);
    if (dram > r->peak_dram) r->peak_dram = dram;
    if (slow_used > r->peak_slow) r->peak_slow = slow_used;
}

static void *tl_sampler(void *arg) {
    tl_thread_setup();
    tl_run *r = arg;
    uint64_t slow_static = r->slow_static;
    tl_gate_wait(r);
    uint64_t period = (uint64_t)r->p.sample_ms * 1000000u;
    uint64_t tick = period < 50000000u ? period : 50000000u;
    uint64_t next_sample = r->t0, next_progress = r->t0, now = r->t0;
    uint64_t total = (uint64_t)r->wl.nq * r->nshards;
    while (!atomic_load(&r->sampler_quit)) {
        if (now >= next_sample) {
            tl_take_sample(r, slow_static);
            next_sample += period;
            if (next_sample < now) next_sample = now + period;
        }
        if (now >= next_progress && r->progress) {
            uint64_t done = 0;
            for (uint32_t i = 0; i < r->nshards; i++)
                done += atomic_load_explicit(&r->sh[i].q_done, memory_order_relaxed);
            if (r->progress(r->progress_ctx, done, total) && !atomic_load(&r->stop)) {
                atomic_store(&r->stop, 1);
                tl_wake_all(r);
            }
            next_progress = now + 100000000u;
        }
        uint64_t wake = next_sample < now + tick ? next_sample : now + tick;
        tl_sleep_until(wake);
        now = tl_now_ns();
    }
    tl_take_sample(r, slow_static); /* the end state */
    return NULL;
}

/* ---- setup and teardown ------------------------------------------------------------ */

static int tl_copy_file(const char *src, const char *dst, char *err, size_t errlen) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = 0;
    char *buf = malloc(1 << 20);
    if (in < 0 || out < 0 || !buf) {
        rc = tl_err(err, errlen, TIERLAB_EIO, "cannot copy %s to %s: %s", src, dst, strerror(errno));
    } else {
        for (;;) {
            ssize_t n = read(in, buf, 1 << 20);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 || (n > 0 && write(out, buf, (size_t)n) != n)) {
                rc = tl_err(err, errlen, TIERLAB_EIO, "cannot copy %s: %s", src, strerror(errno));
                break;
            }
            if (n == 0) break;
        }
        if (!rc && fsync(out) != 0) rc = tl_err(err, errlen, TIERLAB_EIO, "fsync %s", dst);
    }
    free(buf);
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return rc;
}

static const char *const tl_index_names[] = {"dict.bin", "skip.bin", "dids.bin", "freqs.bin",
                                             "manifest.json"};

static void tl_remove_copy(const char *dir) {
    char p[PATH_MAX + 32];
    for (int f = 0; f < 5; f++) {
        snprintf(p, sizeof p, "%s/%s", dir, tl_index_names[f]);
        unlink(p);
    }
    rmdir(dir);
}

/* Shard i > 0 of a real-device run gets its own copy of the index directory,
 * next to the original: <parent>/.tierlab-shard-<pid>-<i> (removed at the end). */
static int tl_shard_copy(tl_run *r, tl_shard *s, char *err, size_t errlen) {
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", r->index_dir);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (slash == parent) parent[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(parent, sizeof parent, ".");
    snprintf(s->dir, sizeof s->dir, "%s/.tierlab-shard-%ld-%u", parent, (long)getpid(), s->id);
    if (mkdir(s->dir, 0755) != 0)
        return tl_err(err, errlen, TIERLAB_EIO, "cannot create the shard copy %s: %s", s->dir,
                      strerror(errno));
    s->is_copy = 1;
    for (int f = 0; f < 5; f++) {
        char a[PATH_MAX + 32], b[PATH_MAX + 32];
        snprintf(a, sizeof a, "%s/%s", r->index_dir, tl_index_names[f]);
        snprintf(b, sizeof b, "%s/%s", s->dir, tl_index_names[f]);
        int rc = tl_copy_file(a, b, err, errlen);
        if (rc) return rc;
    }
    return 0;
}

static int tl_shard_open(tl_run *r, tl_shard *s, uint64_t *dev_addr, uint64_t *key, char *err,
                         size_t errlen) {
    s->run = r;
    if (tl_mutex_init_adaptive(&s->mu) || pthread_cond_init(&s->cv, NULL))
        return tl_err(err, errlen, TIERLAB_ENOMEM, "cannot create a mutex");
    if (!s->is_copy) snprintf(s->dir, sizeof s->dir, "%s", r->index_dir);
    char place[800];
    const char *pd = r->p.place_dict[0] ? r->p.place_dict : r->p.slow_tier;
    const char *ps = r->p.place_skip[0] ? r->p.place_skip : r->p.slow_tier;
    snprintf(place, sizeof place, "dict=%s,skip=%s,did=storage,freq=storage", pd, ps);
    int rc = tierlab_index_open(s->dir, place, &s->ix, err, errlen);
    if (rc) return rc;
    s->rd.dev = &r->dev;
    s->rd.pc = r->p.emulated ? &r->pc : NULL;
    for (int k = 0; k < 2; k++) {
        int file = k ? TIERLAB_FILE_FREQS : TIERLAB_FILE_DIDS;
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", s->dir, tierlab_index_file_name(file));
        tl_file_ref *f = &s->rd.f[k];
        f->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", path, strerror(errno));
        f->len = s->ix->r[file].len;
        f->map = s->ix->r[file].data;
        f->dev_addr = *dev_addr;
        f->key0 = *key;
        uint64_t pages = (f->len + TL_PAGE - 1) / TL_PAGE;
        *dev_addr += (pages + 256) * TL_PAGE; /* a gap: files never look contiguous */
        *key += pages;
    }
    return 0;
}

static void tl_shard_close(tl_shard *s) {
    for (int i = 0; i < TIERLAB_QUERY_MAX_TERMS; i++) tl_src_free(&s->src[i]);
    tierlab_query_ctx_free(s->qctx);
    if (s->has_cache) tl_cache_state_free(&s->cs);
    tl_slow_free(&s->slow);
    for (int k = 0; k < 2; k++)
        if (s->rd.f[k].fd > 0) close(s->rd.f[k].fd);
    tierlab_index_close(s->ix);
    if (s->is_copy) tl_remove_copy(s->dir);
    free(s->rec);
    free(s->hits);
    free(s->missed);
    free(s->bypass);
    if (s->run) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
}

static int tl_check_params(const tierlab_apcache_params *p, char *err, size_t errlen) {
    if (!tierlab_apcache_config_name(p->config))
        return tl_err(err, errlen, TIERLAB_EINVAL, "config %d: not one of 0..%d", p->config,
                      TIERLAB_APCACHE_CONFIGS - 1);
    if (!tierlab_policy_name(p->policy))
        return tl_err(err, errlen, TIERLAB_EINVAL, "policy %d: unknown", p->policy);
    if (p->cores < 1 || p->cores > 1024)
        return tl_err(err, errlen, TIERLAB_EINVAL, "cores %u: must be 1..1024", p->cores);
    if (p->k < 1) return tl_err(err, errlen, TIERLAB_EINVAL, "k must be at least 1");
    if (p->sample_ms < 1) return tl_err(err, errlen, TIERLAB_EINVAL, "sample_ms must be >= 1");
    if (p->lookahead == TIERLAB_LOOKAHEAD_ADAPTIVE && p->config == TIERLAB_APCACHE_BASE_PREFETCH)
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "lookahead: base-prefetch needs a fixed lookahead (>= 1 queries); "
                      "adaptive is for hybrid-prefetch");
    if (tl_is_hybrid(p->config)) {
        if (p->segment_bytes < 64 || p->segment_bytes % 8 || p->segment_bytes > (1ull << 30))
            return tl_err(err, errlen, TIERLAB_EINVAL,
                          "segment size %llu: must be a multiple of 8 from 64 bytes to 1 GiB",
                          (unsigned long long)p->segment_bytes);
        if (p->cache_bytes / p->cores < p->segment_bytes)
            return tl_err(err, errlen, TIERLAB_EINVAL,
                          "cache size %llu: less than one %llu-byte segment per core",
                          (unsigned long long)p->cache_bytes, (unsigned long long)p->segment_bytes);
    } else if (p->cache_bytes < TL_PAGE) {
        return tl_err(err, errlen, TIERLAB_EINVAL, "cache size %llu: the page-cache cap must be "
                      "at least one 4096-byte page", (unsigned long long)p->cache_bytes);
    }
    if ((p->readahead_bytes || p->emulated) &&
        (p->readahead_bytes < TL_PAGE || p->readahead_bytes > TL_MAX_RA_PAGES * TL_PAGE))
        return tl_err(err, errlen, TIERLAB_EINVAL, "readahead %llu: must be 4 KiB .. 1 MiB%s",
                      (unsigned long long)p->readahead_bytes,
                      p->emulated ? "" : " (or 0: the kernel's, real device)");
    if (p->emulated && (!(p->dev_read_bytes_per_s > 0) || p->dev_read_latency_ns < 0 ||
                        p->dev_seek_ns < 0 || p->dev_queue_depth < 1))
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "emulated device: read bandwidth > 0, latency and seek >= 0, queue depth "
                      ">= 1 needed");
    return 0;
}

/* Each query thread and worker gets an allowed CPU of its own when there are
 * enough (query thread of shard i, then its worker). Without pinning, the
 * scheduler wakes a blocked thread on the CPU of its waker when that looks
 * cheaper; the waker, an emulated read later, spins (TL_SPIN_FULL_NS), so
 * the woken thread waited for the next tick while the other CPU idled:
 * query waits of ~2 ms every few hundred queries, each letting a
 * base-prefetch worker run LA queries ahead (measured here on NVMe rows).
 * Emulated devices only: a real read ends in the disk's interrupt, and a
 * reader pinned away from the CPU that takes it waits for a cross-CPU
 * wake-up on every read (base SINGLE, 365 reads of 128 KiB: 68-82 ms pinned
 * off that CPU, 50-53 ms on it; unpinned the scheduler moves the reader). */
static void tl_plan_cpus(tl_run *r) {
    if (!r->p.emulated) {
        snprintf(r->pin_how, sizeof r->pin_how,
                 "no: real device (a reader pinned away from the CPU that takes the disk's "
                 "interrupts waits for a cross-CPU wake-up on every read)");
        return;
    }
    cpu_set_t set;
    int allowed[CPU_SETSIZE], n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) allowed[n++] = c;
    int workers = r->p.config != TIERLAB_APCACHE_BASE;
    uint64_t threads = (uint64_t)r->nshards * (workers ? 2 : 1);
    if (n == 0 || threads > (uint64_t)n) {
        snprintf(r->pin_how, sizeof r->pin_how,
                 "no: %llu query threads and workers on %d allowed CPU(s)",
                 (unsigned long long)threads, n);
        return;
    }
    int k = 0;
    for (uint32_t i = 0; i < r->nshards; i++) {
        r->sh[i].qt_cpu = allowed[k++];
        r->sh[i].wk_cpu = workers ? allowed[k++] : -1;
    }
    r->pin = 1;
    char wk[48] = "";
    if (workers) snprintf(wk, sizeof wk, ", its worker on CPU %d", r->sh[0].wk_cpu);
    snprintf(r->pin_how, sizeof r->pin_how,
             "yes: each query thread and worker on an allowed CPU of its own (shard 0: query "
             "thread on CPU %d%s; %d CPU(s) allowed)", r->sh[0].qt_cpu, wk, n);
}

static int tl_setup(tl_run *r, char *err, size_t errlen) {
    const tierlab_apcache_params *p = &r->p;
    int cfg = p->config;
    r->nshards = p->cores;
    r->sh = calloc(r->nshards, sizeof *r->sh);
    if (!r->sh) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    int rc = tl_device_init(&r->dev, p->emulated, p->dev_read_bytes_per_s, p->dev_read_latency_ns,
                            p->dev_seek_ns, p->dev_queue_depth);
    if (rc) return tl_err(err, errlen, rc, "bad device parameters");
    r->dev_inited = 1;
    tl_plan_cpus(r);
    if (r->pin) r->dev.spin_ns = TL_SPIN_FULL_NS;
    r->handoff_spin_ns = r->pin ? TL_HANDOFF_SPIN_NS : 0;
    uint64_t dev_addr = 0, key = 0;
    for (uint32_t i = 0; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        s->id = i;
        if (i > 0 && !p->emulated) {
            rc = tl_shard_copy(r, s, err, errlen);
            if (rc) return rc;
        }
        rc = tl_shard_open(r, s, &dev_addr, &key, err, errlen);
        if (rc) return rc;
    }
    rc = tl_workload_parse(r, r->sh[0].ix, err, errlen);
    if (rc) return rc;
    tl_workload *w = &r->wl;
    /* sizes: segments of every occurrence, the largest block, the largest term */
    size_t bounce = r->sh[0].ix->dc->max_encoded_bytes(TIERLAB_MAX_BLOCK);
    size_t fb = r->sh[0].ix->fc->max_encoded_bytes(TIERLAB_MAX_BLOCK);
    r->bounce_bytes = bounce > fb ? bounce : fb;
    r->nsegments = tl_is_hybrid(cfg) ? p->cache_bytes / p->cores / p->segment_bytes : 0;
    for (uint64_t j = 0; j < w->nocc; j++) {
        tl_extent x;
        rc = tl_term_extent(r->sh[0].ix, w->term[j], &x);
        if (rc) return tl_err(err, errlen, rc, "corrupt skip record of term %llu",
                              (unsigned long long)w->term[j]);
        uint64_t n = tl_is_hybrid(cfg)
                         ? tierlab_segcache_segments(x.did_len + x.freq_len, x.nb, p->segment_bytes)
                         : 0;
        w->nseg[j] = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
        if (n > r->max_term_segments) r->max_term_segments = n;
    }
    r->page_cap_bytes = tl_is_hybrid(cfg) ? p->dram_budget_bytes : p->cache_bytes;
    if (p->emulated) {
        uint64_t cap = r->page_cap_bytes ? r->page_cap_bytes : key * TL_PAGE;
        rc = tl_pcache_init(&r->pc, &r->dev, key ? key : 1, cap, p->readahead_bytes);
        if (rc) return tl_err(err, errlen, rc, "cannot allocate the emulated page cache");
        r->pc_inited = 1;
    }
    for (uint32_t i = 0; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        if (tl_is_hybrid(cfg)) {
            rc = tl_slow_alloc(p->slow_tier, r->nsegments * p->segment_bytes, &s->slow, err, errlen);
            if (rc) return rc;
            rc = tl_cache_state_init(&s->cs, p->policy, s->ix->terms, r->nsegments, p->segment_bytes,
                                     s->slow.mem,
                                     cfg == TIERLAB_APCACHE_HYBRID_PREFETCH &&
                                         p->lookahead == TIERLAB_LOOKAHEAD_ADAPTIVE,
                                     w->nocc + 1);
            if (rc) return tl_err(err, errlen, rc, "cannot create the segment cache");
            s->has_cache = 1;
        }
        s->qctx = tierlab_query_ctx_new(s->ix, p->k);
        s->rec = calloc(w->nq, sizeof *s->rec);
        s->missed = calloc(w->nocc + 1, 1);
        s->bypass = calloc(w->nocc + 1, 1);
        if (p->write_hits && i == 0) s->hits = malloc((size_t)w->nq * p->k * sizeof *s->hits);
        if (!s->qctx || !s->rec || !s->missed || !s->bypass || (p->write_hits && i == 0 && !s->hits))
            return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for shard %u", i);
        for (int t = 0; t < TIERLAB_QUERY_MAX_TERMS; t++)
            if (tl_src_init(&s->src[t], r->bounce_bytes, r->max_term_segments))
                return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for shard %u", i);
    }
    return 0;
}

/* Drop the index files from the page cache (WORKLOAD.md's protocol). An
 * emulated device then reads its medium — the DID and freq files — once, so
 * that the host's page cache holds it and only the injected delay is
 * storage time. */
static void tl_drop_caches(tl_run *r) {
    int ok = 1;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int f = 0; f < TIERLAB_FILES; f++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/%s", r->sh[i].dir, tierlab_index_file_name(f));
            ok &= tierlab_file_dontneed(path) == 0;
        }
    snprintf(r->drop_how, sizeof r->drop_how, "%s", ok ? "fadvise" : "fadvise (failed on a file)");
    if (!r->p.emulated) return;
    char *buf = malloc(1 << 20);
    if (!buf) return;
    for (int k = 0; k < 2; k++) { /* shards share the files in emulated mode */
        const tl_file_ref *f = &r->sh[0].rd.f[k];
        for (uint64_t o = 0; o < f->len; o += 1 << 20)
            if (pread(f->fd, buf, 1 << 20, (off_t)o) < 0) break;
    }
    free(buf);
}

static void tl_memory_limit(tl_run *r, int entered, const char *why) {
    const tierlab_apcache_params *p = &r->p;
    uint64_t cap = r->page_cap_bytes;
    if (p->emulated) {
        snprintf(r->limit_how, sizeof r->limit_how,
                 "emulated: the runtime's own page cache holds at most %llu bytes (LRU over 4 KiB "
                 "pages); no cgroup needed",
                 (unsigned long long)r->pc.nframes * TL_PAGE);
        return;
    }
    if (!p->memory_limit) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: not requested");
        return;
    }
    if (!cap) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: no DRAM budget for this configuration");
        return;
    }
    if (!entered) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: %s", why);
        return;
    }
    /* No slack above the cap: what the run allocates from here on (thread
     * stacks, timeline samples; allocations of the setup were faulted in
     * below) is taken from the page cache — a slack would be page cache the
     * model is not told about (2 MiB of it gave a 4 MiB cap 6 MiB). Below a
     * floor the kernel cannot reclaim fast enough and OOM-kills the process:
     * seen at 64 KiB with the runtime's readahead (256 KiB and up ran), and
     * at 512 KiB under the kernel's mmap read-around (8 MiB windows). */
    const uint64_t floor = p->readahead_bytes ? 256ull << 10 : 4ull << 20;
    char raised[128] = "";
    if (cap < floor) {
        snprintf(raised, sizeof raised, " (raised from %llu: smaller caps get the process "
                 "OOM-killed)", (unsigned long long)cap);
        cap = floor;
        r->page_cap_bytes = cap; /* reported as the run's dram_budget_bytes */
    }
    uint64_t usage = tl_cgroup_usage(&r->cg);
    r->limit_bytes = usage + cap;
    char err[512];
    if (tl_cgroup_limit(&r->cg, r->limit_bytes, err, sizeof err)) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: %s", err);
        r->limit_bytes = 0;
        return;
    }
    tl_cgroup_reset_peak(&r->cg); /* the peak of the run, not of the setup */
    snprintf(r->limit_how, sizeof r->limit_how,
             "cgroup v%d %s = %llu bytes: the runtime's memory at start %llu (slow tier "
             "included when it is DRAM-backed; allocations faulted in first: %llu bytes) + "
             "page-cache cap %llu%s (%s)",
             r->cg.version, r->cg.version == 2 ? "memory.max" : "memory.limit_in_bytes",
             (unsigned long long)r->limit_bytes, (unsigned long long)usage,
             (unsigned long long)r->populated, (unsigned long long)cap, raised, r->cg.path);
}

/* Real device: who reads ahead (terms.c "Readahead on the real device").
 * After the memory limit, whose page cap bounds the run as in the emulated
 * cache: a run never takes more than a quarter of the cap. */
static void tl_real_readahead(tl_run *r) {
    const tierlab_apcache_params *p = &r->p;
    if (p->emulated) return;
    if (!p->readahead_bytes) {
        snprintf(r->ra_how, sizeof r->ra_how, "the kernel's (read_ahead_kb of the disk, mmap "
                 "read-around on page faults)");
        return;
    }
    uint32_t ra = tl_readahead_run_pages(p->readahead_bytes, r->page_cap_bytes / TL_PAGE);
    int ok = 1;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int k = 0; k < 2; k++) {
            tl_file_ref *f = &r->sh[i].rd.f[k];
            f->ra_pages = ra;
            if (f->len) ok &= madvise((void *)f->map, f->len, MADV_RANDOM) == 0;
            ok &= posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM) == 0;
        }
    snprintf(r->ra_how, sizeof r->ra_how, "the runtime's: %llu KiB runs of missing pages by "
             "readahead(2), kernel read-around off (MADV_RANDOM, POSIX_FADV_RANDOM)%s",
             (unsigned long long)ra * TL_PAGE / 1024, ok ? "" : " - failed on a file");
}

static void tl_run_free(tl_run *r) {
    for (uint32_t i = 0; r->sh && i < r->nshards; i++) tl_shard_close(&r->sh[i]);
    free(r->sh);
    if (r->pc_inited) tl_pcache_destroy(&r->pc);
    if (r->dev_inited) tl_device_destroy(&r->dev);
    tl_workload_free(&r->wl);
    free(r->samples);
}

/* ---- the run ----------------------------------------------------------------------- */

int tierlab_apcache_run(const char *index_dir, const char *workload_path,
                        const tierlab_apcache_params *params, const char *out_dir,
                        tierlab_progress_fn progress, void *ctx, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!index_dir || !workload_path || !params || !out_dir)
        return tl_err(err, errlen, TIERLAB_EINVAL, "index, workload, params and out_dir needed");
    int rc = tl_check_params(params, err, errlen);
    if (rc) return rc;
    tl_run *r = calloc(1, sizeof *r);
    if (!r) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    r->p = *params;
    snprintf(r->index_dir, sizeof r->index_dir, "%s", index_dir);
    snprintf(r->workload_path, sizeof r->workload_path, "%s", workload_path);
    snprintf(r->out_dir, sizeof r->out_dir, "%s", out_dir);
    r->progress = progress;
    r->progress_ctx = ctx;
    int cfg = r->p.config;

    /* Into the cgroup first, so that everything the run allocates is charged. */
    char why[1100] = "";
    int entered = 0;
    if (!r->p.emulated && r->p.memory_limit)
        entered = tl_cgroup_enter(&r->cg, why, sizeof why) == 0;
    rc = tl_setup(r, err, errlen);
    if (!rc) {
        struct stat st;
        if (!r->p.emulated && fstat(r->sh[0].rd.f[0].fd, &st) == 0)
            snprintf(r->blk_dev, sizeof r->blk_dev, "%u:%u", major(st.st_dev), minor(st.st_dev));
        /* Every anonymous mapping written once before any thread starts: a
         * calloc'd array first read maps the shared zero page, and the first
         * write to it then is a copy-on-write fault whose TLB flush
         * interrupts the other CPU — the query thread's — with an IPI (found
         * in a hybrid run: the worker's inserts into the segment cache's
         * arrays, all-hit queries ~15 us slower than their CPU trace). It
         * also charges those arrays before the cgroup limit is set. */
        r->populated = tl_populate_anon();
        tl_drop_caches(r);
        tl_memory_limit(r, entered, why);
        tl_real_readahead(r);
        r->io_read0 = tl_proc_io_read_bytes();
        if (tl_blk_stat(r->blk_dev, &r->blk_reads0, &r->blk_ticks0)) r->blk_dev[0] = 0;
        r->slow_static = tl_slow_static_bytes(r);
        if (pthread_create(&r->sampler, NULL, tl_sampler, r) == 0) r->sampler_started = 1;
        void *(*worker)(void *) = cfg == TIERLAB_APCACHE_BASE_PREFETCH ? tl_base_prefetch_worker
                                  : cfg == TIERLAB_APCACHE_HYBRID      ? tl_hybrid_worker
                                  : cfg == TIERLAB_APCACHE_HYBRID_PREFETCH ? tl_prefetch_worker
                                                                          : NULL;
        for (uint32_t i = 0; i < r->nshards; i++) {
            tl_shard *s = &r->sh[i];
            if (worker && pthread_create(&s->wk, NULL, worker, s) == 0) s->wk_started = 1;
            if (pthread_create(&s->qt, NULL, tl_query_thread, s) == 0) s->qt_started = 1;
            if (r->pin && s->wk_started) tl_pin_thread(s->wk, s->wk_cpu);
            if (r->pin && s->qt_started) tl_pin_thread(s->qt, s->qt_cpu);
            if ((worker && !s->wk_started) || !s->qt_started) {
                rc = tl_err(err, errlen, TIERLAB_ENOMEM, "cannot start the threads of shard %u", i);
                atomic_store(&r->failed, 1);
                tl_wake_all(r);
                break;
            }
        }
        uint32_t threads = r->sampler_started;
        for (uint32_t i = 0; i < r->nshards; i++)
            threads += (uint32_t)r->sh[i].wk_started + (uint32_t)r->sh[i].qt_started;
        tl_gate_open(r, threads);
        for (uint32_t i = 0; i < r->nshards; i++)
            if (r->sh[i].qt_started) pthread_join(r->sh[i].qt, NULL);
        r->t_end = tl_now_ns();
        for (uint32_t i = 0; i < r->nshards; i++) { /* a worker may wait for a query thread */
            tl_shard *s = &r->sh[i];
            pthread_mutex_lock(&s->mu);
            atomic_store(&s->qt_finished, 1);
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        atomic_store(&r->sampler_quit, 1);
        for (uint32_t i = 0; i < r->nshards; i++)
            if (r->sh[i].wk_started) pthread_join(r->sh[i].wk, NULL);
        if (r->sampler_started) pthread_join(r->sampler, NULL);
        r->io_read1 = tl_proc_io_read_bytes();
        if (tl_blk_stat(r->blk_dev, &r->blk_reads1, &r->blk_ticks1)) r->blk_dev[0] = 0;
        for (uint32_t i = 0; i < r->nshards && !rc; i++)
            if (r->sh[i].rc) rc = tl_err(err, errlen, r->sh[i].rc, "%s", r->sh[i].err);
        if (!rc || rc == TIERLAB_ECANCELED) {
            int wrc = tl_report_write(r, err, errlen);
            if (wrc) rc = wrc;
        }
        if (!rc && atomic_load(&r->stop)) rc = TIERLAB_ECANCELED;
    }
    if (entered) tl_cgroup_leave(&r->cg);
    tl_run_free(r);
    free(r);
    return rc;
}
