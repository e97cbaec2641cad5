/* cache.c — the public tierlab_cache_* entry points (tierlab.h, "Caches") and
 * the one table of eviction policies. Adding a policy touches three files:
 * one file in this folder exporting a `const tlc_policy` (its .name is what
 * users type, kebab-case), its extern declaration and one line in
 * tlc_policies below, one line in kernels/CMakeLists.txt. Nothing else keeps
 * a list of policy names: the C CLI, the Python side and the tests read this
 * table through tierlab_policy_count/name/find.
 *
 * What lives here and not in the policies: argument checks, `used`, the
 * statistics, the miss path (evict the policy's victims until `size` units
 * are free, then insert) and the eviction hook that segcache.c uses. */
#include <stdlib.h>
#include <string.h>

#include "cache.h"

/* The policies, one line each (defined in <name>.c of this folder). */
extern const tlc_policy tlc_lru;
extern const tlc_policy tlc_fifo;
extern const tlc_policy tlc_clock;
extern const tlc_policy tlc_s3fifo;
extern const tlc_policy tlc_belady;

static const tlc_policy *const tlc_policies[] = {
    &tlc_lru,
    &tlc_fifo,
    &tlc_clock,
    &tlc_s3fifo,
    &tlc_belady,
};
#define TLC_NPOLICIES (sizeof tlc_policies / sizeof tlc_policies[0])

/* Largest nkeys: node indices (keys, then the list sentinels) are 32-bit. */
#define TLC_MAX_KEYS 0xFFFFFFF0u

size_t tierlab_policy_count(void) { return TLC_NPOLICIES; }

const char *tierlab_policy_name(size_t i) {
    return i < TLC_NPOLICIES ? tlc_policies[i]->name : NULL;
}

int tierlab_policy_find(const char *name) {
    if (name == NULL) return -1;
    for (size_t i = 0; i < TLC_NPOLICIES; i++)
        if (strcmp(tlc_policies[i]->name, name) == 0) return (int)i;
    return -1;
}

int tierlab_cache_new(int policy, uint64_t nkeys, uint64_t capacity, tierlab_cache **out) {
    if (out == NULL) return TIERLAB_EINVAL;
    *out = NULL;
    if (policy < 0 || !tierlab_policy_name((size_t)policy) || capacity == 0 ||
        nkeys > TLC_MAX_KEYS)
        return TIERLAB_EINVAL;
    tierlab_cache *c = calloc(1, sizeof *c);
    if (c == NULL) return TIERLAB_ENOMEM;
    c->pol = tlc_policies[policy];
    c->nkeys = nkeys;
    c->capacity = capacity;
    c->st.capacity = capacity;
    c->node = calloc(nkeys + TLC_LISTS, sizeof *c->node);
    if (c->node == NULL || (c->pol->init && c->pol->init(c) != 0)) {
        tierlab_cache_free(c);
        return TIERLAB_ENOMEM;
    }
    for (int i = 0; i < TLC_LISTS; i++) tlc_list_init(c, tlc_list(c, i));
    *out = c;
    return 0;
}

uint64_t tierlab_cache_bytes(int policy, uint64_t nkeys) {
    uint64_t per_key = sizeof(tlc_node);
    if (policy >= 0 && tierlab_policy_name((size_t)policy)) per_key += tlc_policies[policy]->key_bytes;
    return sizeof(tierlab_cache) + (nkeys + TLC_LISTS) * per_key;
}

void tierlab_cache_free(tierlab_cache *c) {
    if (c == NULL) return;
    if (c->pol && c->pol->destroy) c->pol->destroy(c);
    free(c->node);
    free(c);
}

void tlc_set_hook(tierlab_cache *c, tlc_evict_hook fn, void *ctx) {
    c->hook = fn;
    c->hook_ctx = ctx;
}

/* Take a held key out: the policy unlinks it, the accounting follows. */
static void tlc_drop(tierlab_cache *c, uint32_t key, int evicted) {
    uint64_t size = c->node[key].size;
    c->pol->unlink(c, key, evicted);
    c->used -= size;
    c->st.keys--;
    if (evicted) {
        c->st.evictions++;
        c->st.evicted_units += size;
    }
    if (c->hook) c->hook(c->hook_ctx, key, size);
}

/* Put a key that is not held into free space (the caller checked room). */
static void tlc_put(tierlab_cache *c, uint32_t key, uint64_t size, uint64_t next_use) {
    if (c->pol->miss) c->pol->miss(c, key);
    c->node[key].size = (uint32_t)size;
    c->node[key].bits = 0;
    c->pol->insert(c, key, next_use);
    c->used += size;
    c->st.keys++;
    if (c->used > c->st.peak_used) c->st.peak_used = c->used;
}

static int tlc_bad(const tierlab_cache *c, uint64_t key, uint64_t size) {
    return key >= c->nkeys || size == 0 || size > UINT32_MAX;
}

static inline int tlc_access1(tierlab_cache *c, uint64_t key, uint64_t size, uint64_t next_use) {
    tlc_node *n = &c->node[key];
    if (tlc_held(n)) {
        c->st.hits++;
        c->st.hit_units += size;
        c->pol->hit(c, (uint32_t)key, next_use);
        return 1;
    }
    c->st.misses++;
    c->st.miss_units += size;
    if (size > c->capacity) return 0; /* not admitted */
    if (c->pol->miss) c->pol->miss(c, (uint32_t)key);
    while (c->capacity - c->used < size) tlc_drop(c, (uint32_t)c->pol->victim(c), 1);
    tlc_put(c, (uint32_t)key, size, next_use);
    return 0;
}

int tierlab_cache_access(tierlab_cache *c, uint64_t key, uint64_t size, uint64_t next_use) {
    if (c == NULL || tlc_bad(c, key, size)) return TIERLAB_EINVAL;
    return tlc_access1(c, key, size, next_use);
}

int64_t tierlab_cache_access_many(tierlab_cache *c, const uint64_t *keys, const uint64_t *sizes,
                                  const uint64_t *next_use, size_t n, uint8_t *hit) {
    if (c == NULL || (n > 0 && (keys == NULL || hit == NULL))) return TIERLAB_EINVAL;
    int64_t hits = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t size = sizes ? sizes[i] : 1;
        if (tlc_bad(c, keys[i], size)) return TIERLAB_EINVAL;
        int h = tlc_access1(c, keys[i], size, next_use ? next_use[i] : TIERLAB_NEVER);
        hit[i] = (uint8_t)h;
        hits += h;
    }
    return hits;
}

int tierlab_cache_contains(const tierlab_cache *c, uint64_t key) {
    return c && key < c->nkeys && tlc_held(&c->node[key]);
}

int tierlab_cache_contains_range(const tierlab_cache *c, uint64_t key0, uint64_t n) {
    if (!c || key0 > c->nkeys || n > c->nkeys - key0) return 0;
    for (uint64_t k = key0; k < key0 + n; k++)
        if (!tlc_held(&c->node[k])) return 0;
    return 1;
}

int tierlab_cache_touch(tierlab_cache *c, uint64_t key, uint64_t next_use) {
    if (c == NULL || key >= c->nkeys) return TIERLAB_EINVAL;
    if (!tlc_held(&c->node[key])) return 0;
    c->pol->hit(c, (uint32_t)key, next_use);
    return 1;
}

int tierlab_cache_insert(tierlab_cache *c, uint64_t key, uint64_t size, uint64_t next_use) {
    if (c == NULL || tlc_bad(c, key, size) || tlc_held(&c->node[key])) return TIERLAB_EINVAL;
    if (c->capacity - c->used < size) return TIERLAB_ENOMEM;
    tlc_put(c, (uint32_t)key, size, next_use);
    return 0;
}

int tierlab_cache_victim(tierlab_cache *c, uint64_t *key, uint64_t *size) {
    if (c == NULL) return -1;
    int64_t v = c->used ? c->pol->victim(c) : -1;
    if (v < 0) return -1;
    if (key) *key = (uint64_t)v;
    if (size) *size = c->node[v].size;
    return 0;
}

int64_t tierlab_cache_evict(tierlab_cache *c) {
    if (c == NULL || c->used == 0) return -1;
    int64_t v = c->pol->victim(c);
    if (v >= 0) tlc_drop(c, (uint32_t)v, 1);
    return v;
}

int tierlab_cache_remove(tierlab_cache *c, uint64_t key) {
    if (c == NULL || key >= c->nkeys) return TIERLAB_EINVAL;
    tlc_node *n = &c->node[key];
    if (tlc_held(n)) {
        tlc_drop(c, (uint32_t)key, 0);
        return 1;
    }
    if (n->where != TLC_ABSENT) c->pol->unlink(c, (uint32_t)key, 0); /* a ghost */
    return 0;
}

uint64_t tierlab_cache_free_units(const tierlab_cache *c) {
    return c ? c->capacity - c->used : 0;
}

void tierlab_cache_get_stats(const tierlab_cache *c, tierlab_cache_stats *st) {
    if (c && st) {
        *st = c->st;
        st->used = c->used;
    }
}
