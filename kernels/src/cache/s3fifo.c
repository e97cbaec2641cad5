/* s3fifo.c — S3-FIFO: J. Yang, Y. Zhang, Z. Qiu, Y. Yue, R. Vinayak, "FIFO
 * queues are all you need for cache eviction", SOSP 2023.
 *
 * Three FIFOs: a small one (S, 10 % of the capacity) that new keys enter, a
 * main one (M, the rest) and a ghost (G) that remembers keys evicted from S,
 * not their data, up to M's capacity in units. A hit only raises the key's
 * frequency counter (capped at 3); nothing moves on a hit. A miss whose key
 * is in G goes straight to M; any other miss goes to S.
 * Eviction (the paper's rule: from S while S holds at least its 10 %, else
 * from M):
 *  - S's oldest key, if it was hit while in S, moves to M (counter 0) and
 *    the next one is looked at; otherwise it is the victim and its key goes
 *    to G. So a one-hit wonder (inserted, never hit again) leaves through S
 *    without ever touching M (quick demotion);
 *  - M's oldest key with a non-zero counter is reinserted at M's front with
 *    the counter decremented (CLOCK with a 2-bit counter); the first with 0
 *    is the victim.
 * Differences from the paper's pseudo-code, stated: S and M share one
 * capacity here (`used`), so a move from S to M never triggers an eviction
 * from M by itself — M's excess is evicted by the next evictions, which then
 * find S below its share; sizes are weighted (units), S's share is
 * max(1, capacity / 10) units. libCacheSim's S3FIFO.c (the `bench cache`
 * peer) differs in details (a move threshold of 2 hits, insertion into M
 * before the first eviction), so miss ratios there are close, not equal.
 * Each key moves from S to M once and each reinsertion in M spends a counter
 * point earned by a hit, so a victim costs O(1) amortised. */
#include <stdlib.h>

#include "cache.h"

enum { S3_SMALL = 0, S3_MAIN = 1, S3_GHOST = 2 }; /* list numbers */

typedef struct s3_state {
    uint64_t small_cap, ghost_cap;        /* units                             */
    uint64_t s_used, m_used, g_used;      /* units in S, M, G                  */
    int64_t cand;                         /* the victim named last, or -1      */
} s3_state;

static int s3_init(tierlab_cache *c) {
    s3_state *s = calloc(1, sizeof *s);
    if (s == NULL) return TIERLAB_ENOMEM;
    s->small_cap = c->capacity / 10 ? c->capacity / 10 : 1;
    s->ghost_cap = c->capacity > s->small_cap ? c->capacity - s->small_cap : 1;
    s->cand = -1;
    c->ps = s;
    return 0;
}

static void s3_destroy(tierlab_cache *c) { free(c->ps); }

static void s3_hit(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    if (c->node[key].bits < 3) c->node[key].bits++;
}

/* Forget a ghost key (it is requested again, or removed). */
static void s3_unghost(tierlab_cache *c, uint32_t key) {
    s3_state *s = c->ps;
    tlc_list_unlink(c, key);
    s->g_used -= c->node[key].size;
    c->node[key].where = TLC_ABSENT;
}

static void s3_miss(tierlab_cache *c, uint32_t key) {
    if (c->node[key].where == TLC_GHOST) {
        s3_unghost(c, key);
        c->node[key].where = TLC_GHOST_HIT;
    }
}

static void s3_insert(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    s3_state *s = c->ps;
    tlc_node *n = &c->node[key];
    if (n->where == TLC_GHOST_HIT) {
        n->where = TLC_MAIN;
        tlc_list_push_front(c, tlc_list(c, S3_MAIN), key);
        s->m_used += n->size;
    } else {
        n->where = TLC_HELD;
        tlc_list_push_front(c, tlc_list(c, S3_SMALL), key);
        s->s_used += n->size;
    }
    s->cand = -1;
}

static int64_t s3_victim(tierlab_cache *c) {
    s3_state *s = c->ps;
    if (s->cand >= 0) { /* unchanged since named: the same victim */
        tlc_node *n = &c->node[s->cand];
        if (tlc_held(n) && n->bits == 0) return s->cand;
    }
    uint32_t hs = tlc_list(c, S3_SMALL), hm = tlc_list(c, S3_MAIN);
    int from_small = !tlc_list_empty(c, hs) && (s->s_used >= s->small_cap || tlc_list_empty(c, hm));
    if (from_small) {
        while (!tlc_list_empty(c, hs)) {
            uint32_t k = tlc_list_back(c, hs);
            tlc_node *n = &c->node[k];
            if (n->bits == 0) return s->cand = k;
            tlc_list_unlink(c, k); /* hit while in S: on to M */
            tlc_list_push_front(c, hm, k);
            n->where = TLC_MAIN;
            n->bits = 0;
            s->s_used -= n->size;
            s->m_used += n->size;
        }
    }
    if (tlc_list_empty(c, hm)) return -1;
    for (;;) {
        uint32_t k = tlc_list_back(c, hm);
        tlc_node *n = &c->node[k];
        if (n->bits == 0) return s->cand = k;
        n->bits--;
        tlc_list_unlink(c, k);
        tlc_list_push_front(c, hm, k);
    }
}

static void s3_unlink(tierlab_cache *c, uint32_t key, int evicted) {
    s3_state *s = c->ps;
    tlc_node *n = &c->node[key];
    s->cand = -1;
    if (n->where == TLC_GHOST) { /* remove() of a ghost key */
        s3_unghost(c, key);
        return;
    }
    tlc_list_unlink(c, key);
    if (n->where == TLC_MAIN) {
        s->m_used -= n->size;
        n->where = TLC_ABSENT;
        return;
    }
    s->s_used -= n->size;
    n->where = TLC_ABSENT;
    if (!evicted) return;
    /* Evicted from S: remember the key in G, forgetting G's oldest keys
     * beyond its capacity. */
    n->where = TLC_GHOST;
    tlc_list_push_front(c, tlc_list(c, S3_GHOST), key);
    s->g_used += n->size;
    uint32_t hg = tlc_list(c, S3_GHOST);
    while (s->g_used > s->ghost_cap) s3_unghost(c, tlc_list_back(c, hg));
}

const tlc_policy tlc_s3fifo = {
    .name = "s3-fifo",
    .init = s3_init,
    .destroy = s3_destroy,
    .hit = s3_hit,
    .miss = s3_miss,
    .insert = s3_insert,
    .victim = s3_victim,
    .unlink = s3_unlink,
};
