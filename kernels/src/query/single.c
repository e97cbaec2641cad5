/* single.c — SINGLE: walk every block of the term, decode DIDs and freqs into
 * the context's buffers, score each posting and offer it to the top-k heap. */
#include "query.h"

int tl_query_single(tierlab_query_ctx *q, tl_cursor *c) {
    for (c->b = 0; c->b < c->nb; c->b++) {
        int rc = tl_cursor_decode(q, c);
        if (!rc) rc = tl_cursor_decode_freqs(q, c);
        if (rc) return rc;
        const uint32_t *d = c->d, *f = c->f;
        uint32_t n = c->n;
        double th = tl_threshold(q);
        /* DIDs ascend, so a score equal to the root's never enters: a strict
         * comparison against the root filters most postings once the heap is full.
         * The threshold only rises, so it is re-read only after an insertion. */
        if (c->table) {
            for (uint32_t i = 0; i < n; i++) {
                uint32_t fi = f[i];
                double s = fi < TL_WTAB ? c->w[fi] : tl_bm25(c->idf, fi);
                if (s <= th) continue;
                tl_offer(q, d[i], s);
                th = tl_threshold(q);
            }
        } else {
            for (uint32_t i = 0; i < n; i++) {
                double s = tl_bm25(c->idf, f[i]);
                if (s <= th) continue;
                tl_offer(q, d[i], s);
                th = tl_threshold(q);
            }
        }
    }
    c->visited = (uint64_t)c->nb + 1;
    q->st->postings_scored += c->postings;
    return 0;
}
