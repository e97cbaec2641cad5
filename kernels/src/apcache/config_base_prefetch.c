/* config_base_prefetch.c — the worker of base-prefetch: it reads every term
 * of queries q_taken .. q_taken + LA - 1 through a 4096-byte buffer (pread,
 * or the emulated page cache), so that the query thread finds the pages in
 * the page cache; the query thread waits until the worker has finished its
 * query. (base has no worker: its query thread is query_thread.c alone.) */
#define _GNU_SOURCE

#include "runtime.h"

void *tl_base_prefetch_worker(void *arg) {
    tl_shard *s = tl_shard_thread_start(arg);
    tl_run *r = s->run;
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
