/* segcache.c — the segment cache of docs/apcache.md ("The segment cache") as
 * memory layout: fixed-size segments in caller-provided memory, one chain of
 * segments per cached term, and the free list, all in one next[] array
 * (-1 ends a chain). A chain's head also knows its tail and length, so a
 * whole chain goes back to the free list in O(1). Each term has a 4-byte
 * slot: bit 31 "cached", bits 0..30 its first segment.
 *
 * Which term to evict is the policy's decision (a tierlab_cache over terms,
 * sizes in segments). The segment cache hooks into that cache's evictions
 * and removals (tlc_set_hook): whenever a term leaves it, by
 * tierlab_cache_evict, the miss path of tierlab_cache_access or
 * tierlab_cache_remove, its chain is returned to the free list there. */
#include <stdlib.h>

#include "cache.h"

#define SC_CACHED 0x80000000u
#define SC_FIRST 0x7FFFFFFFu
#define SC_MAX_SEGMENTS 0x7FFFFFFFu /* 31 bits of first segment */

struct tierlab_segcache {
    tierlab_cache *pol;
    uint64_t nterms, nsegments, segment_bytes;
    uint8_t *memory;  /* NULL: bookkeeping only (the model)                   */
    int32_t *next;    /* next[i]: the segment after i, -1 at a chain's end     */
    int32_t *tail;    /* tail[h]: last segment of the chain headed by h        */
    uint32_t *len;    /* len[h]: segments in the chain headed by h             */
    uint32_t *slot;   /* slot[term]                                            */
    int32_t free_head; /* the free list: a chain too (-1 when empty)           */
    uint64_t nfree;
};

uint64_t tierlab_segcache_segments(uint64_t term_bytes, uint64_t term_blocks,
                                   uint64_t segment_bytes) {
    if (segment_bytes == 0) return 0;
    uint64_t bytes = term_bytes + 8 * term_blocks;
    return bytes / segment_bytes + (bytes % segment_bytes != 0);
}

/* The policy let `term` go: its chain returns to the free list. */
static void sc_release(void *ctx, uint64_t term, uint64_t size) {
    (void)size;
    tierlab_segcache *s = ctx;
    uint32_t slot = s->slot[term];
    if (!(slot & SC_CACHED)) return; /* held by the policy without a chain */
    int32_t h = (int32_t)(slot & SC_FIRST);
    s->next[s->tail[h]] = s->free_head;
    s->free_head = h;
    s->nfree += s->len[h];
    s->slot[term] = 0;
}

uint64_t tierlab_segcache_bytes(int policy, uint64_t nterms, uint64_t nsegments) {
    tierlab_segcache *s = NULL;
    return sizeof *s + tierlab_cache_bytes(policy, nterms) +
           nsegments * (sizeof *s->next + sizeof *s->tail + sizeof *s->len) +
           (nterms ? nterms : 1) * sizeof *s->slot;
}

int tierlab_segcache_new(int policy, uint64_t nterms, uint64_t nsegments,
                         uint64_t segment_bytes, void *memory, tierlab_segcache **out) {
    if (out == NULL) return TIERLAB_EINVAL;
    *out = NULL;
    if (nsegments == 0 || nsegments > SC_MAX_SEGMENTS || segment_bytes == 0)
        return TIERLAB_EINVAL;
    tierlab_segcache *s = calloc(1, sizeof *s);
    if (s == NULL) return TIERLAB_ENOMEM;
    int rc = tierlab_cache_new(policy, nterms, nsegments, &s->pol);
    if (rc) {
        free(s);
        return rc;
    }
    s->nterms = nterms;
    s->nsegments = nsegments;
    s->segment_bytes = segment_bytes;
    s->memory = memory;
    s->next = malloc(nsegments * sizeof *s->next);
    s->tail = malloc(nsegments * sizeof *s->tail);
    s->len = malloc(nsegments * sizeof *s->len);
    s->slot = calloc(nterms ? nterms : 1, sizeof *s->slot);
    if (!s->next || !s->tail || !s->len || !s->slot) {
        tierlab_segcache_free(s);
        return TIERLAB_ENOMEM;
    }
    for (uint64_t i = 0; i < nsegments; i++) s->next[i] = i + 1 < nsegments ? (int32_t)(i + 1) : -1;
    s->free_head = 0;
    s->nfree = nsegments;
    tlc_set_hook(s->pol, sc_release, s);
    *out = s;
    return 0;
}

void tierlab_segcache_free(tierlab_segcache *s) {
    if (s == NULL) return;
    tierlab_cache_free(s->pol);
    free(s->next);
    free(s->tail);
    free(s->len);
    free(s->slot);
    free(s);
}

tierlab_cache *tierlab_segcache_policy(tierlab_segcache *s) { return s ? s->pol : NULL; }

int64_t tierlab_segcache_alloc(tierlab_segcache *s, uint64_t term, uint64_t n) {
    if (s == NULL || term >= s->nterms || n == 0 || n > s->nfree || (s->slot[term] & SC_CACHED))
        return -1;
    int32_t h = s->free_head, t = h;
    for (uint64_t i = 1; i < n; i++) t = s->next[t];
    s->free_head = s->next[t];
    s->next[t] = -1;
    s->tail[h] = t;
    s->len[h] = (uint32_t)n;
    s->nfree -= n;
    s->slot[term] = SC_CACHED | (uint32_t)h;
    return h;
}

int64_t tierlab_segcache_segment(const tierlab_segcache *s, uint64_t term, uint64_t i) {
    if (s == NULL || term >= s->nterms || !(s->slot[term] & SC_CACHED)) return -1;
    int32_t g = (int32_t)(s->slot[term] & SC_FIRST);
    if (i >= s->len[g]) return -1;
    while (i--) g = s->next[g];
    return g;
}

int64_t tierlab_segcache_next(const tierlab_segcache *s, int64_t segment) {
    if (s == NULL || segment < 0 || (uint64_t)segment >= s->nsegments) return -1;
    return s->next[segment];
}

void *tierlab_segcache_segment_ptr(tierlab_segcache *s, int64_t segment) {
    if (s == NULL || s->memory == NULL || segment < 0 || (uint64_t)segment >= s->nsegments)
        return NULL;
    return s->memory + (uint64_t)segment * s->segment_bytes;
}

uint32_t tierlab_segcache_slot(const tierlab_segcache *s, uint64_t term) {
    return s && term < s->nterms ? s->slot[term] : 0;
}

uint64_t tierlab_segcache_free_segments(const tierlab_segcache *s) { return s ? s->nfree : 0; }

/* For the tests: every segment is in exactly one chain of a cached term or
 * in the free list, each chain has the length and tail its head records, and
 * the free count is right. 0 when consistent, else a negative step number. */
int tlc_segcache_check(const tierlab_segcache *s) {
    uint8_t *seen = calloc(s->nsegments, 1);
    if (seen == NULL) return -100;
    int rc = 0;
    for (uint64_t term = 0; term < s->nterms && !rc; term++) {
        if (!(s->slot[term] & SC_CACHED)) continue;
        int32_t h = (int32_t)(s->slot[term] & SC_FIRST), g = h, last = -1;
        uint64_t n = 0;
        if ((uint64_t)h >= s->nsegments) rc = -1;
        while (!rc && g != -1) {
            if ((uint64_t)g >= s->nsegments || seen[g]) rc = -2;
            else seen[g] = 1, n++, last = g, g = s->next[g];
        }
        if (!rc && (n != s->len[h] || last != s->tail[h])) rc = -3;
    }
    uint64_t nfree = 0;
    for (int32_t g = s->free_head; !rc && g != -1; g = s->next[g]) {
        if ((uint64_t)g >= s->nsegments || seen[g]) rc = -4;
        else seen[g] = 1, nfree++;
    }
    if (!rc && nfree != s->nfree) rc = -5;
    for (uint64_t i = 0; i < s->nsegments && !rc; i++)
        if (!seen[i]) rc = -6; /* lost: in no chain and not free */
    free(seen);
    return rc;
}
