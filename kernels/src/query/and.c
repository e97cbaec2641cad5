/* and.c — AND of 2..16 terms by skip-list block intersection (ENGINE.md):
 * each term has a current block whose DID range is [first DID, next block's
 * first DID), or [first DID, last DID + 1) for a term's last block. When the ranges of all current blocks overlap (max of lower
 * bounds < min of upper bounds), the blocks are decoded (once: a block stays
 * decoded, with its position, while it remains current) and intersected from
 * the remembered positions; then the blocks with the lowest upper bound
 * advance (all of them on a tie). When they do not overlap, every block that
 * ends at or before the highest lower bound advances undecoded. For two terms
 * this is exactly the pairwise walk of the design. Freq blocks are decoded
 * only for blocks that hold a match. */
#include "query.h"

/* Upper bound of the current block: the next block's first DID; the last
 * block has no next block, so its range ends after the term's last DID (kept
 * in the sentinel entry). Without that, a one-block rare term would overlap
 * every later block of the other terms. */
static inline uint64_t tl_upper(const tl_cursor *c) {
    const tl_skip_entry *next = &c->e[c->b + 1];
    return c->b + 1 < c->nb ? next->first_did : (uint64_t)next->prev_did + 1;
}

/* Leapfrog over the decoded blocks from the remembered positions; stops when
 * any block runs out. Scores run in query-term order. */
static int tl_intersect(tierlab_query_ctx *q, tl_cursor *c, uint32_t m) {
    for (uint32_t i = 0; i < m; i++)
        if (c[i].pos >= c[i].n) return 0;
    uint32_t cand = c[0].d[c[0].pos], agree = 1, j = 1;
    for (;;) {
        tl_cursor *x = &c[j];
        const uint32_t *d = x->d;
        uint32_t p = x->pos, n = x->n;
        while (p < n && d[p] < cand) p++;
        x->pos = p;
        if (p == n) return 0;
        if (d[p] != cand) {
            cand = d[p];
            agree = 1;
        } else if (++agree == m) {
            double s = 0.0;
            for (uint32_t i = 0; i < m; i++) {
                if (c[i].fdec_b != c[i].b) {
                    int rc = tl_cursor_decode_freqs(q, &c[i]);
                    if (rc) return rc;
                }
                s += tl_weight(&c[i], c[i].f[c[i].pos]);
            }
            q->st->postings_scored++;
            if (s > tl_threshold(q)) tl_offer(q, cand, s);
            if (++c[0].pos == c[0].n) return 0;
            cand = c[0].d[c[0].pos];
            agree = 1;
            j = 1;
            continue;
        }
        j = j + 1 == m ? 0 : j + 1;
    }
}

int tl_query_and(tierlab_query_ctx *q, tl_cursor *c, uint32_t m) {
    for (uint32_t i = 0; i < m; i++) c[i].visited = 2; /* entries 0 and 1 (or the sentinel) */
    for (;;) {
        uint64_t lo = 0, up = UINT64_MAX;
        for (uint32_t i = 0; i < m; i++) {
            uint64_t f = c[i].e[c[i].b].first_did, u = tl_upper(&c[i]);
            if (f > lo) lo = f;
            if (u < up) up = u;
        }
        uint64_t cut; /* advance every block whose upper bound is <= cut */
        if (lo < up) {
            for (uint32_t i = 0; i < m; i++) {
                int rc = tl_cursor_decode(q, &c[i]);
                if (rc) return rc;
            }
            int rc = tl_intersect(q, c, m);
            if (rc) return rc;
            cut = up;
        } else {
            cut = lo;
        }
        int done = 0;
        for (uint32_t i = 0; i < m; i++) {
            if (tl_upper(&c[i]) > cut) continue;
            if (++c[i].b == c[i].nb) done = 1;
            else c[i].visited++;
        }
        if (done) return 0;
    }
}
