/* config_hybrid.c — the copy worker of hybrid: it trails the query thread,
 * copying every term the query thread missed into the segment cache, from
 * the page cache only (a term the page cache no longer holds whole is
 * skipped: only the query thread reads storage). */
#define _GNU_SOURCE

#include "runtime.h"

void *tl_hybrid_worker(void *arg) {
    tl_shard *s = tl_shard_thread_start(arg);
    tl_run *r = s->run;
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
             * alone reads storage (docs/apcache.md). A term whose pages left the page
             * cache before the worker came is skipped, to be copied when it is
             * used again; rereading it would put the worker on the device next
             * to the query thread, further behind with every term (a run on a
             * small page cache and a fast device can settle in that state,
             * with a far higher page-cache miss rate). Pages evicted while
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
