/* config_hybrid_prefetch.c — the prefetch worker of hybrid-prefetch: it
 * prefetches the terms of upcoming queries straight into the segment cache
 * (pread into the chain, or through the emulated page cache = the DRAM
 * budget) with adaptive lookahead, or a fixed LA when asked. A query whose
 * terms do not fit in the cache together would deadlock the rule (the
 * worker waits for the query thread, which waits for the worker): the
 * worker then serves the rest of that query from storage (`bypassed`). */
#define _GNU_SOURCE

#include "runtime.h"

void *tl_prefetch_worker(void *arg) {
    tl_shard *s = tl_shard_thread_start(arg);
    tl_run *r = s->run;
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
