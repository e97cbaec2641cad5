/* cache.c — C tests of the cache bookkeeping (kernels/src/cache/): the
 * policies behind tierlab_cache, the segment cache and adaptive lookahead.
 * Run plain and under ASan/UBSan (ctest in the sanitizer build,
 * tests/kernels/test_native_builds.py).
 *  1. docs/apcache.md's two worked examples, written out step by step (worker and
 *     query thread alternating) over tierlab_segcache + tierlab_lookahead +
 *     LRU: rolling_sum, the FIFO, may_evict, which term is evicted, and that
 *     a term in use is never evicted;
 *  2. small hand-checked sequences per policy, and the textbook reference
 *     string on which OPT, LRU and FIFO fault 9, 12 and 15 times;
 *  3. LRU against a naive O(n) reference LRU on random weighted traces;
 *  4. segment-cache chain integrity after random inserts, evictions and
 *     removals, for every policy;
 *  5. argument errors.
 * A plain main returning an exit status; prints what failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/cache.h"
#include "tierlab.h"

#include "check.h"

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static uint64_t below(uint64_t n) { return rnd() % n; }

/* A policy's index in the registry, by the name users type. */
static int P(const char *name) {
    int i = tierlab_policy_find(name);
    CHECK(i >= 0, "policy %s is in the registry", name);
    return i;
}

/* ---- 1. the worked examples ------------------------------------------------ */

#define SEG 64
#define NT 3

/* The harness: one segment cache with LRU, the lookahead state, and which
 * terms the query thread is on (in_use), so every eviction can be checked. */
typedef struct harness {
    uint8_t mem[8 * SEG];
    tierlab_segcache *sc;
    tierlab_cache *pol;
    tierlab_lookahead *la;
    int in_use[NT];
} harness;

static void h_open(harness *h) {
    memset(h, 0, sizeof *h);
    CHECK(tierlab_segcache_new(P("lru"), NT, 8, SEG, h->mem, &h->sc) == 0, "segcache");
    h->pol = tierlab_segcache_policy(h->sc);
    CHECK(tierlab_lookahead_new(8, 16, &h->la) == 0, "lookahead");
}

static void h_close(harness *h) {
    tierlab_segcache_free(h->sc);
    tierlab_lookahead_free(h->la);
}

/* Worker: make room for n segments under the rule. Returns 1 when there is
 * room, 0 when it must wait (the victim might be in use). Asserts that what
 * it evicts is never in use. */
static int h_make_room(harness *h, uint64_t n) {
    while (tierlab_segcache_free_segments(h->sc) < n) {
        uint64_t v, vs;
        if (tierlab_cache_victim(h->pol, &v, &vs) != 0) return 0;
        if (!tierlab_lookahead_may_evict(h->la, vs)) return 0;
        CHECK(!h->in_use[v], "the rule let through term %llu which is in use",
              (unsigned long long)v);
        CHECK(tierlab_cache_evict(h->pol) == (int64_t)v, "evict takes the named victim");
    }
    return 1;
}

/* Worker: fill a term's chain and finish it (alloc, insert, count). */
static void h_fill(harness *h, uint64_t term, uint64_t n) {
    CHECK(tierlab_segcache_alloc(h->sc, term, n) >= 0, "alloc t%llu", (unsigned long long)term);
    CHECK(tierlab_cache_insert(h->pol, term, n, TIERLAB_NEVER) == 0, "insert");
    CHECK(tierlab_lookahead_worker_done(h->la, n) == 0, "worker_done");
    CHECK(tlc_segcache_check(h->sc) == 0, "chains intact");
}

static int h_sum_is(harness *h, uint64_t sum, uint64_t pending) {
    return tierlab_lookahead_rolling_sum(h->la) == sum && tierlab_lookahead_pending(h->la) == pending;
}

static void test_example_1(void) {
    harness h;
    h_open(&h);
    enum { T0, T1, T2 };
    /* Worker caches t0 (4): sum 4, FIFO [4]. */
    CHECK(h_make_room(&h, 4), "room for t0");
    h_fill(&h, T0, 4);
    CHECK(h_sum_is(&h, 4, 1), "sum 4, FIFO [4]");
    /* Query thread starts t0. */
    h.in_use[T0] = 1;
    /* Worker caches t1 (1): sum 5, FIFO [4, 1]. */
    CHECK(h_make_room(&h, 1), "room for t1");
    h_fill(&h, T1, 1);
    CHECK(h_sum_is(&h, 5, 2), "sum 5, FIFO [4, 1]");
    /* Worker wants t2 (4): 3 segments free, the LRU term is t0: 5 + 4 > 8. */
    uint64_t v, vs;
    CHECK(tierlab_segcache_free_segments(h.sc) == 3, "3 segments free");
    CHECK(tierlab_cache_victim(h.pol, &v, &vs) == 0 && v == T0 && vs == 4, "victim t0 (4)");
    CHECK(!tierlab_lookahead_may_evict(h.la, 4), "5 + 4 = 9 > 8: may not evict");
    CHECK(!h_make_room(&h, 4), "so the worker waits");
    CHECK(tierlab_cache_contains(h.pol, T0) && tierlab_segcache_slot(h.sc, T0) >> 31,
          "t0 still cached while in use");
    /* Query thread finishes t0, pops 4: sum 1. */
    h.in_use[T0] = 0;
    CHECK(tierlab_lookahead_query_done(h.la) == 4, "pops 4");
    CHECK(h_sum_is(&h, 1, 1), "sum 1, FIFO [1]");
    /* Now 1 + 4 = 5 <= 8: the worker evicts t0 and completes t2. */
    CHECK(tierlab_lookahead_may_evict(h.la, 4), "1 + 4 = 5 <= 8");
    CHECK(h_make_room(&h, 4), "evicts t0");
    CHECK(!tierlab_cache_contains(h.pol, T0) && tierlab_segcache_slot(h.sc, T0) == 0,
          "t0 evicted, its slot cleared");
    CHECK(tierlab_segcache_free_segments(h.sc) == 7, "t0's 4 segments back on the free list");
    h_fill(&h, T2, 4);
    CHECK(h_sum_is(&h, 5, 2), "sum 5, FIFO [1, 4]");
    CHECK(tierlab_lookahead_query_done(h.la) == 1 && tierlab_lookahead_query_done(h.la) == 4,
          "FIFO order [1, 4]");
    CHECK(tierlab_lookahead_query_done(h.la) == -1 && h_sum_is(&h, 0, 0), "then empty, sum 0");
    tierlab_cache_stats st;
    tierlab_cache_get_stats(h.pol, &st);
    CHECK(st.evictions == 1 && st.evicted_units == 4 && st.used == 5 && st.keys == 2,
          "one eviction of 4; 5 used by 2 terms");
    h_close(&h);
}

static void test_example_2(void) {
    harness h;
    h_open(&h);
    enum { T0, T1, T2 };
    CHECK(h_make_room(&h, 3), "room");
    h_fill(&h, T0, 3); /* sum 3 [3] */
    CHECK(h_make_room(&h, 5), "room");
    h_fill(&h, T1, 5); /* sum 8 [3, 5]: the cache is full */
    CHECK(h_sum_is(&h, 8, 2) && tierlab_segcache_free_segments(h.sc) == 0, "sum 8, full");
    /* Query thread does t0, then starts t1. */
    h.in_use[T0] = 1;
    h.in_use[T0] = 0;
    CHECK(tierlab_lookahead_query_done(h.la) == 3, "t0 done, pops 3");
    h.in_use[T1] = 1;
    /* Worker: t0 again, a repeat that is cached: a hit that moves t0 to the
     * front, and its count is pushed all the same. */
    CHECK(tierlab_cache_contains(h.pol, T0) && tierlab_cache_touch(h.pol, T0, TIERLAB_NEVER) == 1,
          "t0 repeated: hit");
    CHECK(tierlab_lookahead_worker_done(h.la, 3) == 0, "count pushed");
    CHECK(h_sum_is(&h, 8, 2), "sum 8, FIFO [5, 3]");
    uint64_t v, vs;
    CHECK(tierlab_cache_victim(h.pol, &v, &vs) == 0 && v == T1 && vs == 5,
          "t1 became the LRU victim while in use");
    /* The wrong rule would evict t1: rolling_sum > total is 8 > 8, false. */
    CHECK(!(tierlab_lookahead_rolling_sum(h.la) > 8), "`rolling_sum > total` says go");
    CHECK(!tierlab_lookahead_may_evict(h.la, 5), "the rule: 8 + 5 > 8, wait");
    CHECK(!h_make_room(&h, 2), "worker waits for t2");
    CHECK(tierlab_cache_contains(h.pol, T1), "t1 kept");
    /* Query thread finishes t1: 8 - 5 = 3; 3 + 5 = 8, not > 8: evict t1. */
    h.in_use[T1] = 0;
    CHECK(tierlab_lookahead_query_done(h.la) == 5 && h_sum_is(&h, 3, 1), "t1 done: sum 3");
    CHECK(tierlab_lookahead_may_evict(h.la, 5), "3 + 5 = 8 <= 8");
    CHECK(h_make_room(&h, 2), "evicts t1");
    h_fill(&h, T2, 2);
    CHECK(!tierlab_cache_contains(h.pol, T1) && tierlab_cache_contains(h.pol, T0) &&
              tierlab_cache_contains(h.pol, T2),
          "t1 evicted; t0 and t2 cached");
    CHECK(h_sum_is(&h, 5, 2), "sum 3 + 2");
    CHECK(tierlab_segcache_free_segments(h.sc) == 3, "8 - 3 - 2 free");
    h_close(&h);
}

/* ---- 2. hand-checked policy sequences ----------------------------------------- */

static tierlab_cache *open_cache(int policy, uint64_t nkeys, uint64_t capacity) {
    tierlab_cache *c = NULL;
    CHECK(tierlab_cache_new(policy, nkeys, capacity, &c) == 0, "new %s",
          tierlab_policy_name((size_t)policy));
    return c;
}

/* Access unit-size keys; returns the hits as a bit string (bit i = access i). */
static uint64_t run(tierlab_cache *c, const uint64_t *keys, size_t n) {
    uint64_t hits = 0;
    for (size_t i = 0; i < n; i++)
        if (tierlab_cache_access(c, keys[i], 1, TIERLAB_NEVER) == 1) hits |= 1ull << i;
    return hits;
}

static int holds(const tierlab_cache *c, const uint64_t *keys, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += tierlab_cache_contains(c, keys[i]) == 1;
    return k == n;
}

static void test_lru_fifo_clock(void) {
    const uint64_t seq[] = {0, 1, 2, 0, 3};
    /* LRU: the hit on 0 saves it, 3 evicts 1. */
    tierlab_cache *c = open_cache(P("lru"), 8, 3);
    CHECK(run(c, seq, 5) == 1u << 3, "LRU: only the repeat of 0 hits");
    CHECK(holds(c, (uint64_t[]){0, 2, 3}, 3) && !tierlab_cache_contains(c, 1), "LRU evicted 1");
    tierlab_cache_free(c);
    /* FIFO ignores the hit: 3 evicts 0, the oldest insert. */
    c = open_cache(P("fifo"), 8, 3);
    CHECK(run(c, seq, 5) == 1u << 3, "FIFO: the repeat hits");
    CHECK(holds(c, (uint64_t[]){1, 2, 3}, 3) && !tierlab_cache_contains(c, 0), "FIFO evicted 0");
    tierlab_cache_free(c);
    /* CLOCK: 0's reference bit gives it a second chance; 3 evicts 1; then 4
     * evicts 2 (0's bit was cleared when the hand passed it, 0 then went to
     * the front); then 5 evicts 0 (no bit left), 3 survives by a hit. */
    c = open_cache(P("clock"), 8, 3);
    CHECK(run(c, seq, 5) == 1u << 3, "CLOCK: the repeat hits");
    CHECK(holds(c, (uint64_t[]){0, 2, 3}, 3), "CLOCK evicted 1, not 0");
    uint64_t v;
    CHECK(tierlab_cache_victim(c, &v, NULL) == 0 && v == 2, "next victim 2");
    CHECK(tierlab_cache_access(c, 4, 1, TIERLAB_NEVER) == 0 && !tierlab_cache_contains(c, 2),
          "4 evicts 2");
    CHECK(tierlab_cache_access(c, 3, 1, TIERLAB_NEVER) == 1, "3 hits: bit set");
    CHECK(tierlab_cache_access(c, 5, 1, TIERLAB_NEVER) == 0 && !tierlab_cache_contains(c, 0) &&
              holds(c, (uint64_t[]){3, 4, 5}, 3),
          "5 evicts 0; 3 had its second chance");
    tierlab_cache_free(c);
}

static void test_s3fifo(void) {
    /* capacity 10 units: small FIFO 1 unit, main 9, ghost 9 */
    tierlab_cache *c = open_cache(P("s3-fifo"), 64, 10);
    for (uint64_t k = 0; k < 10; k++) tierlab_cache_access(c, k, 1, TIERLAB_NEVER);
    CHECK(tierlab_cache_access(c, 5, 1, TIERLAB_NEVER) == 1, "5 hit once while in small");
    /* New keys 10..14 evict the one-hit wonders 0..4 from small to the ghost. */
    for (uint64_t k = 10; k < 15; k++) tierlab_cache_access(c, k, 1, TIERLAB_NEVER);
    for (uint64_t k = 0; k < 5; k++) {
        CHECK(!tierlab_cache_contains(c, k) && c->node[k].where == TLC_GHOST,
              "one-hit wonder %llu went via small to the ghost", (unsigned long long)k);
    }
    tierlab_cache_stats st;
    tierlab_cache_get_stats(c, &st);
    CHECK(st.evictions == 5 && st.keys == 10 && st.used == 10, "5 evictions, full");
    /* 15: small's oldest is 5, which was hit: it moves to main; 6 goes. */
    tierlab_cache_access(c, 15, 1, TIERLAB_NEVER);
    CHECK(c->node[5].where == TLC_MAIN && !tierlab_cache_contains(c, 6) &&
              c->node[6].where == TLC_GHOST,
          "5 promoted to main, 6 to the ghost");
    /* 0 is requested again: it is in the ghost, so it goes straight to main. */
    CHECK(tierlab_cache_access(c, 0, 1, TIERLAB_NEVER) == 0, "a ghost hit is a miss");
    CHECK(c->node[0].where == TLC_MAIN, "0 inserted into main");
    /* A scan of 50 new keys passes through small only: 5 and 0 survive. */
    for (uint64_t k = 16; k < 64; k++) tierlab_cache_access(c, k, 1, TIERLAB_NEVER);
    CHECK(tierlab_cache_contains(c, 5) && tierlab_cache_contains(c, 0),
          "main keys survive a scan of one-hit wonders");
    for (uint64_t k = 16; k < 62; k++) {
        if (tierlab_cache_contains(c, k)) {
            CHECK(c->node[k].where == TLC_HELD, "scan key %llu only ever in small",
                  (unsigned long long)k);
        }
    }
    /* remove forgets a ghost too; victim twice names the same key */
    uint64_t v1, v2;
    CHECK(tierlab_cache_victim(c, &v1, NULL) == 0 && tierlab_cache_victim(c, &v2, NULL) == 0 &&
              v1 == v2 && tierlab_cache_evict(c) == (int64_t)v1,
          "victim is stable and evict takes it");
    for (uint64_t k = 0; k < 64; k++) {
        if (c->node[k].where == TLC_GHOST) {
            CHECK(tierlab_cache_remove(c, k) == 0 && c->node[k].where == TLC_ABSENT,
                  "remove drops ghost %llu", (unsigned long long)k);
            break;
        }
    }
    tierlab_cache_free(c);
}

/* The textbook reference string (Silberschatz, Galvin, Gagne, Operating
 * System Concepts, ch. "Virtual memory"): with 3 frames OPT faults 9 times,
 * LRU 12, FIFO 15. */
static void test_textbook(void) {
    const uint64_t s[] = {7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1};
    const size_t n = sizeof s / sizeof s[0];
    uint64_t next[sizeof s / sizeof s[0]];
    for (size_t i = 0; i < n; i++) {
        next[i] = TIERLAB_NEVER;
        for (size_t j = i + 1; j < n; j++)
            if (s[j] == s[i]) {
                next[i] = j;
                break;
            }
    }
    const struct { const char *policy; int64_t faults; } want[] = {
        {"belady", 9}, {"lru", 12}, {"fifo", 15}};
    for (size_t w = 0; w < 3; w++) {
        tierlab_cache *c = open_cache(P(want[w].policy), 8, 3);
        uint8_t hit[sizeof s / sizeof s[0]];
        int64_t hits = tierlab_cache_access_many(c, s, NULL, next, n, hit);
        CHECK((int64_t)n - hits == want[w].faults, "%s: %lld faults, want %lld",
              want[w].policy, (long long)((int64_t)n - hits),
              (long long)want[w].faults);
        tierlab_cache_free(c);
    }
}

/* ---- 3. LRU against a naive reference ------------------------------------------ */

typedef struct ref_lru {
    uint64_t key[64], size[64]; /* [0] most recent */
    size_t n;
    uint64_t cap, used, evictions;
} ref_lru;

static long ref_find(const ref_lru *r, uint64_t key) {
    for (size_t i = 0; i < r->n; i++)
        if (r->key[i] == key) return (long)i;
    return -1;
}

static void ref_take(ref_lru *r, size_t i) {
    r->used -= r->size[i];
    memmove(r->key + i, r->key + i + 1, (r->n - i - 1) * sizeof r->key[0]);
    memmove(r->size + i, r->size + i + 1, (r->n - i - 1) * sizeof r->size[0]);
    r->n--;
}

static void ref_front(ref_lru *r, uint64_t key, uint64_t size) {
    memmove(r->key + 1, r->key, r->n * sizeof r->key[0]);
    memmove(r->size + 1, r->size, r->n * sizeof r->size[0]);
    r->key[0] = key, r->size[0] = size;
    r->n++;
    r->used += size;
}

static int ref_access(ref_lru *r, uint64_t key, uint64_t size) {
    long i = ref_find(r, key);
    if (i >= 0) {
        uint64_t sz = r->size[i];
        ref_take(r, (size_t)i);
        ref_front(r, key, sz);
        return 1;
    }
    if (size > r->cap) return 0;
    while (r->cap - r->used < size) ref_take(r, r->n - 1), r->evictions++;
    ref_front(r, key, size);
    return 0;
}

static void test_lru_vs_reference(void) {
    for (int round = 0; round < 40; round++) {
        rng_state = 1000 + (uint64_t)round;
        const uint64_t nkeys = 40, cap = 5 + below(30);
        uint64_t size_of[40];
        for (uint64_t k = 0; k < nkeys; k++) size_of[k] = 1 + below(round % 2 ? 6 : 1);
        tierlab_cache *c = open_cache(P("lru"), nkeys, cap);
        ref_lru r = {.cap = cap};
        int bad = 0;
        for (int step = 0; step < 3000 && !bad; step++) {
            uint64_t k = below(4) ? below(nkeys / 4) : below(nkeys); /* skewed */
            if (below(50) == 0) { /* an explicit remove now and then */
                long i = ref_find(&r, k);
                int got = tierlab_cache_remove(c, k);
                if (i >= 0) ref_take(&r, (size_t)i);
                bad |= got != (i >= 0);
                continue;
            }
            int want = ref_access(&r, k, size_of[k]);
            int got = tierlab_cache_access(c, k, size_of[k], TIERLAB_NEVER);
            bad |= got != want || tierlab_cache_free_units(c) != cap - r.used;
            uint64_t v;
            if (r.n) bad |= tierlab_cache_victim(c, &v, NULL) != 0 || v != r.key[r.n - 1];
        }
        tierlab_cache_stats st;
        tierlab_cache_get_stats(c, &st);
        CHECK(!bad && st.evictions == r.evictions && st.keys == r.n,
              "LRU vs reference, round %d (capacity %llu)", round, (unsigned long long)cap);
        tierlab_cache_free(c);
    }
}

/* ---- 4. segment-cache chain integrity ------------------------------------------- */

static void test_segcache_random(void) {
    for (int policy = 0; policy < (int)tierlab_policy_count(); policy++) {
        rng_state = 77 + (uint64_t)policy;
        const uint64_t nterms = 200, nseg = 64;
        uint64_t len[200];
        for (uint64_t t = 0; t < nterms; t++) len[t] = 1 + below(below(4) ? 4 : 12);
        tierlab_segcache *s = NULL;
        CHECK(tierlab_segcache_new(policy, nterms, nseg, 16, NULL, &s) == 0, "new");
        tierlab_cache *pol = tierlab_segcache_policy(s);
        int bad = 0, step;
        for (step = 0; step < 4000 && !bad; step++) {
            uint64_t t = below(nterms / (below(3) ? 8 : 1));
            uint64_t nu = below(8) ? (uint64_t)step + 1 + below(500) : TIERLAB_NEVER;
            if (below(30) == 0) {
                tierlab_cache_remove(pol, t);
            } else if (tierlab_cache_touch(pol, t, nu) == 0) {
                while (!bad && tierlab_segcache_free_segments(s) < len[t])
                    bad |= tierlab_cache_evict(pol) < 0;
                if (bad) break;
                bad |= tierlab_segcache_alloc(s, t, len[t]) < 0;
                bad |= tierlab_segcache_alloc(s, t, 1) != -1; /* one chain per term */
                bad |= tierlab_cache_insert(pol, t, len[t], nu) != 0;
            }
            bad |= tlc_segcache_check(s) != 0;
            bad |= tierlab_segcache_free_segments(s) != tierlab_cache_free_units(pol);
            for (uint64_t u = 0; u < nterms && !bad; u++) {
                int cached = tierlab_cache_contains(pol, u) == 1;
                uint32_t slot = tierlab_segcache_slot(s, u);
                bad |= cached != (int)(slot >> 31);
                if (cached) {
                    bad |= tierlab_segcache_segment(s, u, 0) != (int64_t)(slot & 0x7FFFFFFF) ||
                           tierlab_segcache_segment(s, u, len[u] - 1) < 0 ||
                           tierlab_segcache_segment(s, u, len[u]) != -1;
                    /* next() walks the same chain as segment(i), and ends it */
                    int64_t g = (int64_t)(slot & 0x7FFFFFFF);
                    for (uint64_t i = 0; i < len[u] && !bad; i++, g = tierlab_segcache_next(s, g))
                        bad |= g != tierlab_segcache_segment(s, u, i);
                    bad |= g != -1;
                }
            }
        }
        CHECK(!bad, "%s: segment chains broken at step %d", tierlab_policy_name((size_t)policy), step);
        /* The miss path of access frees chains too (term 0 enters the
         * policy without a chain of its own). */
        tierlab_cache_remove(pol, 0);
        CHECK(tierlab_cache_access(pol, 0, nseg, TIERLAB_NEVER) == 0, "miss");
        CHECK(tlc_segcache_check(s) == 0 && tierlab_cache_contains(pol, 0) == 1 &&
                  tierlab_segcache_slot(s, 0) == 0 && tierlab_segcache_free_segments(s) == nseg &&
                  tierlab_cache_free_units(pol) == 0,
              "%s: access evicting everything returns every chain",
              tierlab_policy_name((size_t)policy));
        tierlab_segcache_free(s);
    }
    /* next(): out of range is -1 */
    {
        tierlab_segcache *s = NULL;
        CHECK(tierlab_segcache_new(P("lru"), 4, 4, 16, NULL, &s) == 0, "new");
        CHECK(tierlab_segcache_alloc(s, 1, 3) == 0, "alloc 3");
        CHECK(tierlab_segcache_next(s, 0) == 1 && tierlab_segcache_next(s, 1) == 2 &&
                  tierlab_segcache_next(s, 2) == -1,
              "next walks a fresh chain 0, 1, 2 and ends it");
        CHECK(tierlab_segcache_next(s, -1) == -1 && tierlab_segcache_next(s, 4) == -1 &&
                  tierlab_segcache_next(NULL, 0) == -1,
              "next out of range");
        tierlab_segcache_free(s);
    }
    /* segments(): bytes plus 8 per block, rounded up */
    CHECK(tierlab_segcache_segments(0, 0, 32768) == 0, "empty term");
    CHECK(tierlab_segcache_segments(32768 - 8, 1, 32768) == 1, "exactly one segment");
    CHECK(tierlab_segcache_segments(32768 - 7, 1, 32768) == 2, "one byte over");
    CHECK(tierlab_segcache_segments(178 * 100, 100, 4096) == 5, "ceil(18600 / 4096) = 5");
    /* memory layout: segment i at memory + i * segment_bytes */
    static uint8_t mem[4 * 32];
    tierlab_segcache *s = NULL;
    CHECK(tierlab_segcache_new(P("lru"), 2, 4, 32, mem, &s) == 0, "new");
    CHECK(tierlab_segcache_segment_ptr(s, 3) == mem + 96 && !tierlab_segcache_segment_ptr(s, 4),
          "segment pointers");
    CHECK(tierlab_segcache_alloc(s, 1, 5) == -1 && tierlab_segcache_alloc(s, 2, 1) == -1 &&
              tierlab_segcache_alloc(s, 1, 0) == -1,
          "alloc refuses too many segments, a bad term, n 0");
    tierlab_segcache_free(s);
}

/* ---- 5. errors ---------------------------------------------------------------- */

static void test_errors(void) {
    tierlab_cache *c = NULL;
    CHECK(tierlab_cache_new((int)tierlab_policy_count(), 4, 4, &c) == TIERLAB_EINVAL && !c,
          "bad policy");
    CHECK(tierlab_cache_new(-1, 4, 4, &c) == TIERLAB_EINVAL, "negative policy");
    CHECK(tierlab_cache_new(P("lru"), 4, 0, &c) == TIERLAB_EINVAL, "capacity 0");
    CHECK(tierlab_policy_name(tierlab_policy_count()) == NULL && tierlab_policy_find("s3fifo") == -1 &&
              !strcmp(tierlab_policy_name((size_t)P("s3-fifo")), "s3-fifo"),
          "names");
    c = open_cache(P("lru"), 4, 4);
    CHECK(tierlab_cache_access(c, 4, 1, 0) == TIERLAB_EINVAL, "key >= nkeys");
    CHECK(tierlab_cache_access(c, 0, 0, 0) == TIERLAB_EINVAL, "size 0");
    CHECK(tierlab_cache_access(c, 0, 1ull << 32, 0) == TIERLAB_EINVAL, "size >= 2^32");
    CHECK(tierlab_cache_access(c, 0, 5, 0) == 0 && !tierlab_cache_contains(c, 0),
          "larger than the cache: a miss, not admitted");
    CHECK(tierlab_cache_insert(c, 1, 3, 0) == 0 && tierlab_cache_insert(c, 1, 1, 0) == TIERLAB_EINVAL,
          "insert of a present key");
    CHECK(tierlab_cache_insert(c, 2, 2, 0) == TIERLAB_ENOMEM, "insert without room");
    uint64_t keys[] = {2, 3, 9, 0};
    uint8_t h[4];
    CHECK(tierlab_cache_access_many(c, keys, NULL, NULL, 4, h) == TIERLAB_EINVAL, "bad key in many");
    tierlab_cache_stats st;
    tierlab_cache_get_stats(c, &st);
    CHECK(st.misses == 3 && st.hits == 0 && st.keys == 2, "the accesses before it ran, none after");
    CHECK(tierlab_cache_remove(c, 3) == 1 && tierlab_cache_remove(c, 3) == 0, "remove");
    tierlab_cache_free(c);
    tierlab_cache_free(NULL);

    tierlab_lookahead *la = NULL;
    CHECK(tierlab_lookahead_new(8, 0, &la) == TIERLAB_EINVAL, "max_pending 0");
    CHECK(tierlab_lookahead_new(8, 2, &la) == 0, "new");
    CHECK(tierlab_lookahead_worker_done(la, 1) == 0 && tierlab_lookahead_worker_done(la, 2) == 0 &&
              tierlab_lookahead_worker_done(la, 3) == TIERLAB_ENOMEM,
          "FIFO full");
    CHECK(tierlab_lookahead_rolling_sum(la) == 3 && !tierlab_lookahead_may_evict(la, 6) &&
              tierlab_lookahead_may_evict(la, 5) && !tierlab_lookahead_may_evict(la, 9),
          "may_evict at the edge");
    tierlab_lookahead_free(la);
    tierlab_segcache *s = NULL;
    CHECK(tierlab_segcache_new(P("lru"), 4, 0, 32, NULL, &s) == TIERLAB_EINVAL,
          "no segments");
    CHECK(tierlab_segcache_new(P("lru"), 4, 1ull << 31, 32, NULL, &s) == TIERLAB_EINVAL,
          "more segments than 31 bits");
    CHECK(tierlab_segcache_new((int)tierlab_policy_count(), 4, 4, 32, NULL, &s) == TIERLAB_EINVAL,
          "bad policy");
}

int main(void) {
    test_example_1();
    test_example_2();
    test_lru_fifo_clock();
    test_s3fifo();
    test_textbook();
    test_lru_vs_reference();
    test_segcache_random();
    test_errors();
    printf("cache: %d checks, %d failed\n", tl_checks, tl_check_failures);
    return tl_check_failures != 0;
}
