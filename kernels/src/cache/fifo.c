/* fifo.c — first in, first out: insertion order, hits change nothing. The
 * victim is the oldest insert. O(1) per access. */
#include "cache.h"

static void fifo_hit(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)c, (void)key, (void)next_use;
}

static void fifo_insert(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    c->node[key].where = TLC_HELD;
    tlc_list_push_front(c, tlc_list(c, 0), key);
}

static int64_t fifo_victim(tierlab_cache *c) {
    uint32_t h = tlc_list(c, 0);
    return tlc_list_empty(c, h) ? -1 : (int64_t)tlc_list_back(c, h);
}

static void fifo_unlink(tierlab_cache *c, uint32_t key, int evicted) {
    (void)evicted;
    tlc_list_unlink(c, key);
    c->node[key].where = TLC_ABSENT;
}

const tlc_policy tlc_fifo = {
    .name = "fifo",
    .hit = fifo_hit,
    .insert = fifo_insert,
    .victim = fifo_victim,
    .unlink = fifo_unlink,
};
