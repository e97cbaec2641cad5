/* lru.c — least recently used (docs/apcache.md "The segment cache": the
 * reference's policy). One list; a hit or an insert moves the key to the
 * front, the victim is the back. O(1) per access. */
#include "cache.h"

static void lru_to_front(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    tlc_list_unlink(c, key);
    tlc_list_push_front(c, tlc_list(c, 0), key);
}

static void lru_insert(tierlab_cache *c, uint32_t key, uint64_t next_use) {
    (void)next_use;
    c->node[key].where = TLC_HELD;
    tlc_list_push_front(c, tlc_list(c, 0), key);
}

static int64_t lru_victim(tierlab_cache *c) {
    uint32_t h = tlc_list(c, 0);
    return tlc_list_empty(c, h) ? -1 : (int64_t)tlc_list_back(c, h);
}

static void lru_unlink(tierlab_cache *c, uint32_t key, int evicted) {
    (void)evicted;
    tlc_list_unlink(c, key);
    c->node[key].where = TLC_ABSENT;
}

const tlc_policy tlc_lru = {
    .name = "lru",
    .hit = lru_to_front,
    .insert = lru_insert,
    .victim = lru_victim,
    .unlink = lru_unlink,
};
