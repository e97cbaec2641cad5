/* query_thread.c — the query thread of a shard, the same code in every
 * configuration (runtime.c's comment says what each configuration asks of
 * it): it takes the queries in order, waits for the worker where the
 * configuration prefetches, serves each term from the segment cache or from
 * storage and records one tl_qrec per query. */
#define _GNU_SOURCE
#include <string.h>

#include "runtime.h"

/* Wait (counted) until the worker has prefetched query q. */
static uint64_t tl_wait_prefetched(tl_shard *s, uint64_t q) {
    tl_run *r = s->run;
    const tl_workload *w = &r->wl;
    int hp = r->p.config == TL_APCACHE_HYBRID_PREFETCH;
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

void *tl_query_thread(void *arg) {
    tl_shard *s = tl_shard_thread_start(arg);
    tl_run *r = s->run;
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
            uint64_t t = w->file.query_first[q] + i, bytes = 0;
            size_t len;
            const char *term = tl_workload_term(w, t, &len);
            int rc = tl_dict_find(s->ix, term, len, s->qctx->checks, &ents[i], &bytes,
                                  s->qctx->err, sizeof s->qctx->err);
            if (rc < 0) {
                tl_fail(s, rc, s->qctx->err);
                return NULL;
            }
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
                if (cfg == TL_APCACHE_HYBRID) {
                    cached = tl_query_acquire(&s->cs, term, 1, w->next_use[j]);
                    if (cached) s->seg_hits++;
                    else s->seg_misses++, seg_miss++, s->missed[j] = 1;
                } else if (cfg == TL_APCACHE_HYBRID_PREFETCH) {
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
                if (cfg == TL_APCACHE_HYBRID_PREFETCH) tl_query_term_done(&s->cs);
            }
            /* hybrid: the wake after the query (below) serves the worker once */
            if (cfg == TL_APCACHE_HYBRID_PREFETCH && atomic_load(&s->worker_asleep))
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
        if (s->hits) memcpy(s->hits + q * r->k, s->qctx->out, (size_t)st.results * sizeof *s->hits);
        atomic_store(&s->occ_done, j1);
        atomic_store_explicit(&s->q_done, q + 1, memory_order_release);
        if (cfg == TL_APCACHE_HYBRID) tl_wake_worker(s); /* the copy worker has work */
    }
    pthread_mutex_lock(&s->mu);
    atomic_store(&s->qt_finished, 1);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}
