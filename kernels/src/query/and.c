/* and.c — AND of 2..16 terms by skip-list block intersection (docs/engine.md):
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

/* Score a match at the cursors' current positions (freq blocks decoded on
 * first use) and offer it to the top-k heap. */
static int tl_score_match(tierlab_query_ctx *q, tl_cursor *c, uint32_t m, uint32_t did) {
    double s = 0.0;
    for (uint32_t i = 0; i < m; i++) {
        if (c[i].fdec_b != c[i].b) {
            int rc = tl_cursor_decode_freqs(q, &c[i]);
            if (rc) return rc;
        }
        s += tl_weight(&c[i], c[i].f[c[i].pos]);
    }
    q->st->postings_scored++;
    if (s > tl_threshold(q)) tl_offer(q, did, s);
    return 0;
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
            int rc = tl_score_match(q, c, m, cand);
            if (rc) return rc;
            if (++c[0].pos == c[0].n) return 0;
            cand = c[0].d[c[0].pos];
            agree = 1;
            j = 1;
            continue;
        }
        j = j + 1 == m ? 0 : j + 1;
    }
}

/* Two terms (every AND query of the reference workloads): a merge over
 * windows of 4 DIDs. Each step compares a window of each list all against
 * all (4 lane-wise compares against the other window's rotations) and
 * advances the window(s) whose last DID is smaller or equal: a match can only
 * lie in windows whose ranges overlap, and every such pair meets once, in DID
 * order. The leapfrog's scalar steps depend on the previous step's load, ~3 ns
 * a DID here (most of an H AND query's time); a step here covers 4. A short
 * last window is padded with values above every DID compared (matches are
 * checked against the real lengths). */
#if defined(__SSE2__)
#include <emmintrin.h>

static inline __m128i tl_window(const uint32_t *d, uint32_t p, uint32_t n) {
    if (p + 4 <= n) return _mm_loadu_si128((const __m128i *)(d + p));
    uint32_t w[4] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};
    for (uint32_t k = 0; p + k < n; k++) w[k] = d[p + k];
    return _mm_loadu_si128((const __m128i *)w);
}

static int tl_intersect2(tierlab_query_ctx *q, tl_cursor *c) {
    const uint32_t *da = c[0].d, *db = c[1].d;
    uint32_t i = c[0].pos, j = c[1].pos;
    const uint32_t na = c[0].n, nb = c[1].n;
    while (i < na && j < nb) {
        __m128i va = tl_window(da, i, na), vb = tl_window(db, j, nb);
        __m128i eq = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi32(va, vb),
                         _mm_cmpeq_epi32(va, _mm_shuffle_epi32(vb, _MM_SHUFFLE(0, 3, 2, 1)))),
            _mm_or_si128(_mm_cmpeq_epi32(va, _mm_shuffle_epi32(vb, _MM_SHUFFLE(1, 0, 3, 2))),
                         _mm_cmpeq_epi32(va, _mm_shuffle_epi32(vb, _MM_SHUFFLE(2, 1, 0, 3)))));
        unsigned hit = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(eq));
        for (; hit; hit &= hit - 1) {
            uint32_t a = i + (uint32_t)__builtin_ctz(hit), b = j;
            if (a >= na) break;            /* a padding lane */
            while (b < nb && b < j + 4 && db[b] != da[a]) b++;
            if (b == nb || b == j + 4) continue; /* matched b's padding only */
            c[0].pos = a;
            c[1].pos = b;
            int rc = tl_score_match(q, c, 2, da[a]);
            if (rc) return rc;
        }
        uint32_t amax = i + 4 <= na ? da[i + 3] : UINT32_MAX;
        uint32_t bmax = j + 4 <= nb ? db[j + 3] : UINT32_MAX;
        if (amax <= bmax) i += 4;
        if (bmax <= amax) j += 4;
    }
    c[0].pos = i < na ? i : na;
    c[1].pos = j < nb ? j : nb;
    return 0;
}
#else
/* Without SSE2: the general leapfrog. */
static int tl_intersect2(tierlab_query_ctx *q, tl_cursor *c) { return tl_intersect(q, c, 2); }
#endif

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
            int rc = m == 2 ? tl_intersect2(q, c) : tl_intersect(q, c, m);
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
