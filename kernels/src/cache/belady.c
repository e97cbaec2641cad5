/* belady.c — Belady's rule (MIN, 1966), offline: the victim is the held key
 * whose next use is farthest in the future (TIERLAB_NEVER first). Each
 * access tells the key's next use (`next_use`, a position in the request
 * stream); the held keys sit in a binary max-heap keyed by it, updated on
 * every hit and insert, so an access costs O(log n).
 * With unit sizes this is the optimal demand-paging policy, the bound the
 * others are measured against. With variable sizes it is the classic rule
 * applied as is: a bound on what a recency or frequency rule can learn from
 * the future, not the exact optimum (that problem is NP-hard). */
#include <stdlib.h>

#include "cache.h"

typedef struct bel_state {
    uint32_t *heap; /* held keys; heap[0] has the farthest next use */
    uint32_t *pos;  /* pos[key]: index of key in heap               */
    uint64_t *next; /* next[key]: its next use                      */
    uint64_t n;
} bel_state;

static int bel_init(tierlab_cache *c) {
    bel_state *b = calloc(1, sizeof *b);
    if (b == NULL) return TIERLAB_ENOMEM;
    c->ps = b;
    size_t n = c->nkeys ? (size_t)c->nkeys : 1;
    b->heap = malloc(n * sizeof *b->heap);
    b->pos = malloc(n * sizeof *b->pos);
    b->next = malloc(n * sizeof *b->next);
    return b->heap && b->pos && b->next ? 0 : TIERLAB_ENOMEM;
}

static void bel_destroy(tierlab_cache *c) {
    bel_state *b = c->ps;
    if (b == NULL) return;
    free(b->heap);
    free(b->pos);
    free(b->next);
    free(b);
}

static void bel_place(bel_state *b, uint64_t i, uint32_t key) {
    b->heap[i] = key;
    b->pos[key] = (uint32_t)i;
}

/* Restore the heap around index i after heap[i]'s next use changed. */
static void bel_fix(bel_state *b, uint64_t i) {
    uint32_t key = b->heap[i];
    uint64_t v = b->next[key];
    while (i > 0 && b->next[b->heap[(i - 1) / 2]] < v) { /* up */
        bel_place(b, i, b->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) { /* down */
        uint64_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t mv = v;
        if (l < b->n && b->next[b->heap[l]] > mv) m = l, mv = b->next[b->heap[l]];
        if (r < b->n && b->next[b->heap[r]] > mv) m = r;
        if (m == i) break;
        bel_place(b, i, b->heap[m]);
        i = m;
    }
    bel_place(b, i, key);
}

static void bel_hit(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    bel_state *b = c->ps;
    b->next[key] = next_use;
    bel_fix(b, b->pos[key]);
}

static void bel_insert(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    bel_state *b = c->ps;
    c->node[key].where = TLC_HELD;
    b->next[key] = next_use;
    bel_place(b, b->n++, key);
    bel_fix(b, b->n - 1);
}

static int64_t bel_victim(tierlab_cache *c) {
    bel_state *b = c->ps;
    return b->n ? (int64_t)b->heap[0] : -1;
}

static void bel_unlink(tierlab_cache *c, uint32_t key, int evicted) {
    (void)evicted;
    bel_state *b = c->ps;
    uint64_t i = b->pos[key];
    uint32_t last = b->heap[--b->n];
    c->node[key].where = TLC_ABSENT;
    if (i == b->n) return; /* it was the last slot */
    bel_place(b, i, last);
    bel_fix(b, i);
}

const tlc_policy tlc_belady = {
    .name = "belady",
    .init = bel_init,
    .destroy = bel_destroy,
    .key_bytes = sizeof(uint32_t) + sizeof(uint32_t) + sizeof(uint64_t), /* heap, pos, next */
    .hit = bel_hit,
    .insert = bel_insert,
    .victim = bel_victim,
    .unlink = bel_unlink,
};
