/* cache.h — inside the cache bookkeeping (kernels/src/cache/): the state of a
 * tierlab_cache, the policy interface every eviction policy implements (one
 * file per policy, one table in cache.c) and the intrusive lists they share.
 *
 * Per key the cache keeps one 16-byte node: list links, the key's size and
 * where it is. Keys are dense (0..nkeys-1), so nodes are an array indexed by
 * key, with no hashing; links are 32-bit indices. The lists are circular with
 * a sentinel node each, stored after the keys (node[nkeys + i] heads list i),
 * so linking and unlinking never branch on an empty list.
 *
 * The split of work: cache.c checks arguments, keeps `used`, the statistics
 * and the eviction hook, and runs the miss path (evict victims until `size`
 * units are free, then insert). A policy only orders keys: it learns of hits,
 * inserts and removals and names the next victim. */
#ifndef TL_CACHE_INTERNAL_H
#define TL_CACHE_INTERNAL_H

#include <stdint.h>

#include "tierlab.h"

/* node.where */
enum {
    TLC_ABSENT = 0,
    TLC_HELD = 1,      /* cached (S3-FIFO: in the small FIFO)                  */
    TLC_MAIN = 2,      /* S3-FIFO: cached in the main FIFO                     */
    TLC_GHOST = 3,     /* S3-FIFO: not cached, its key in the ghost FIFO       */
    TLC_GHOST_HIT = 4, /* S3-FIFO: left the ghost on this miss; goes to main   */
};

typedef struct tlc_node {
    uint32_t prev, next; /* list links (node indices)                          */
    uint32_t size;       /* units, while held (S3-FIFO: also while a ghost)   */
    uint8_t where;       /* TLC_*                                              */
    uint8_t bits;        /* policy's per-key bits: CLOCK reference, S3 freq    */
    uint16_t pad;
} tlc_node;

typedef void (*tlc_evict_hook)(void *ctx, uint64_t key, uint64_t size);

typedef struct tlc_policy tlc_policy;

struct tierlab_cache {
    const tlc_policy *pol;
    uint64_t nkeys, capacity, used;
    tlc_node *node; /* nkeys keys + TLC_LISTS sentinels */
    void *ps;       /* the policy's own state           */
    tierlab_cache_stats st;
    /* Called after a key left the cache by evict or remove (segcache.c
     * returns the term's chain to the free list here). */
    tlc_evict_hook hook;
    void *hook_ctx;
};

#define TLC_LISTS 3 /* sentinels: enough for S3-FIFO's small, main, ghost */

/* A policy orders the keys it holds. Every call gets a key in range; cache.c
 * has already set node[key].size (insert) and does the accounting. */
struct tlc_policy {
    const char *name;
    /* Optional: set up c->ps; 0 or TIERLAB_ENOMEM (destroy still runs). */
    int (*init)(tierlab_cache *c);
    void (*destroy)(tierlab_cache *c); /* optional */
    /* Bytes per key of the policy's own state (init's arrays), for
     * tierlab_cache_bytes; 0 when it keeps none per key. */
    uint32_t key_bytes;
    /* A held key was used again. */
    void (*hit)(tierlab_cache *c, uint32_t key, uint64_t next_use);
    /* Optional: a key not held was requested; called before the miss path
     * evicts anything and again by insert (must be idempotent). */
    void (*miss)(tierlab_cache *c, uint32_t key);
    /* Take a key that is not held; must set node[key].where. */
    void (*insert)(tierlab_cache *c, uint32_t key, uint64_t next_use);
    /* The next victim, or -1 when nothing is held. May reorder (CLOCK's hand,
     * S3-FIFO's moves) but never changes which keys are held; calling it
     * again without other calls in between names the same key. */
    int64_t (*victim)(tierlab_cache *c);
    /* Drop a held key (evicted: by the policy's choice, or removed by the
     * caller); must set node[key].where (ABSENT, or GHOST). */
    void (*unlink)(tierlab_cache *c, uint32_t key, int evicted);
};

/* The internal eviction hook (one per cache; NULL clears it). */
void tlc_set_hook(tierlab_cache *c, tlc_evict_hook fn, void *ctx);

/* For the tests (kernels/tests/cache.c): 0 when every segment of s is in
 * exactly one chain of a cached term or in the free list and every chain
 * head's tail and length are right; a negative step number otherwise. */
int tlc_segcache_check(const tierlab_segcache *s);

static inline int tlc_held(const tlc_node *n) {
    return n->where == TLC_HELD || n->where == TLC_MAIN;
}

/* ---- intrusive circular lists: front = newest, back = oldest ---------------- */

static inline uint32_t tlc_list(const tierlab_cache *c, int i) {
    return (uint32_t)(c->nkeys + (uint64_t)i);
}

static inline void tlc_list_init(tierlab_cache *c, uint32_t h) {
    c->node[h].prev = c->node[h].next = h;
}

static inline int tlc_list_empty(const tierlab_cache *c, uint32_t h) {
    return c->node[h].next == h;
}

static inline uint32_t tlc_list_back(const tierlab_cache *c, uint32_t h) {
    return c->node[h].prev;
}

static inline void tlc_list_unlink(tierlab_cache *c, uint32_t k) {
    tlc_node *n = c->node;
    n[n[k].prev].next = n[k].next;
    n[n[k].next].prev = n[k].prev;
}

static inline void tlc_list_push_front(tierlab_cache *c, uint32_t h, uint32_t k) {
    tlc_node *n = c->node;
    uint32_t first = n[h].next;
    n[k].prev = h;
    n[k].next = first;
    n[first].prev = k;
    n[h].next = k;
}

#endif /* TL_CACHE_INTERNAL_H */
