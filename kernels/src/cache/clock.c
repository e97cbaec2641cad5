/* clock.c — CLOCK (second chance): FIFO order plus one reference bit per
 * key. A hit sets the bit; an insert clears it. To find a victim the hand
 * looks at the oldest key: if its bit is set it is cleared and the key goes
 * to the front (a second chance), else it is the victim. Each bit set by a
 * hit is cleared at most once, so a victim costs O(1) amortised. */
#include "cache.h"

static void clock_hit(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    c->node[key].bits = 1;
}

static void clock_insert(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    c->node[key].where = TLC_HELD;
    tlc_list_push_front(c, tlc_list(c, 0), key);
}

static int64_t clock_victim(tierlab_cache *c) {
    uint32_t h = tlc_list(c, 0);
    if (tlc_list_empty(c, h)) return -1;
    for (;;) {
        uint32_t k = tlc_list_back(c, h);
        if (!c->node[k].bits) return k;
        c->node[k].bits = 0;
        tlc_list_unlink(c, k);
        tlc_list_push_front(c, h, k);
    }
}

static void clock_unlink(tierlab_cache *c, uint32_t key, int evicted) {
    (void)evicted;
    tlc_list_unlink(c, key);
    c->node[key].where = TLC_ABSENT;
}

const tlc_policy tlc_clock = {
    .name = "clock",
    .hit = clock_hit,
    .insert = clock_insert,
    .victim = clock_victim,
    .unlink = clock_unlink,
};
