/* lookahead.c — the bookkeeping of adaptive lookahead (docs/apcache.md "Adaptive
 * lookahead"): rolling_sum, the segments of term occurrences the worker has
 * finished and the query thread has not, and the FIFO of their per-term
 * counts (a ring of max_pending entries). The worker may evict a victim of
 * v segments only while rolling_sum + v <= total_segments: then the victim
 * cannot be a term the query thread still needs. */
#include <stdlib.h>

#include "tierlab.h"

struct tierlab_lookahead {
    uint64_t total, sum;
    uint64_t *ring; /* counts, oldest at head */
    uint64_t cap, head, n;
};

uint64_t tierlab_lookahead_bytes(uint64_t max_pending) {
    tierlab_lookahead *la = NULL;
    return sizeof *la + max_pending * sizeof *la->ring;
}

int tierlab_lookahead_new(uint64_t total_segments, uint64_t max_pending,
                          tierlab_lookahead **out) {
    if (out == NULL) return TIERLAB_EINVAL;
    *out = NULL;
    if (max_pending == 0 || max_pending > SIZE_MAX / sizeof(uint64_t)) return TIERLAB_EINVAL;
    tierlab_lookahead *la = calloc(1, sizeof *la);
    if (la == NULL) return TIERLAB_ENOMEM;
    la->ring = malloc(max_pending * sizeof *la->ring);
    if (la->ring == NULL) {
        free(la);
        return TIERLAB_ENOMEM;
    }
    la->total = total_segments;
    la->cap = max_pending;
    *out = la;
    return 0;
}

void tierlab_lookahead_free(tierlab_lookahead *la) {
    if (la == NULL) return;
    free(la->ring);
    free(la);
}

int tierlab_lookahead_worker_done(tierlab_lookahead *la, uint64_t segments) {
    if (la == NULL) return TIERLAB_EINVAL;
    if (la->n == la->cap) return TIERLAB_ENOMEM;
    la->ring[(la->head + la->n) % la->cap] = segments;
    la->n++;
    la->sum += segments;
    return 0;
}

int64_t tierlab_lookahead_query_done(tierlab_lookahead *la) {
    if (la == NULL || la->n == 0) return -1;
    uint64_t v = la->ring[la->head];
    la->head = (la->head + 1) % la->cap;
    la->n--;
    la->sum -= v;
    return (int64_t)v;
}

int tierlab_lookahead_may_evict(const tierlab_lookahead *la, uint64_t victim_segments) {
    /* sum <= total here unless the caller over-counts; written so it cannot wrap */
    return la && victim_segments <= la->total && la->sum <= la->total - victim_segments;
}

uint64_t tierlab_lookahead_rolling_sum(const tierlab_lookahead *la) { return la ? la->sum : 0; }

uint64_t tierlab_lookahead_pending(const tierlab_lookahead *la) { return la ? la->n : 0; }
