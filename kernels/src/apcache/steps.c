/* steps.c — the cache decisions of APCache (docs/apcache.md "The segment cache",
 * "Adaptive lookahead") as non-blocking steps over one shard's segment
 * cache. The runtime's threads call them under the shard's mutex and wait
 * on its condition variable when a step says TL_STEP_WAIT; the step-driven
 * tests (kernels/tests/apcache.c) call the same functions in a fixed order.
 *
 * The bookkeeping itself — policy, segment chains and free list, the 4-byte
 * slot, rolling_sum and its FIFO — is kernels/src/cache/ (tierlab_segcache,
 * tierlab_lookahead), shared with the SimPy model. What is added here:
 *  - a pin count per term: terms the query thread is reading from the cache
 *    right now. Evicting a pinned term would pull memory from under a query,
 *    so a pinned victim always means wait. With adaptive lookahead the rule
 *    makes that impossible (tests count pinned_victim_waits == 0); with a
 *    fixed lookahead it is what keeps a too-large LA memory-safe;
 *  - a ready bit per term: set when its chain is filled and committed, so the
 *    query thread never reads a chain the worker is still writing. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "apcache.h"

int tl_cache_state_init(tl_cache_state *cs, int policy, uint64_t nterms, uint64_t nsegments,
                        uint64_t segment_bytes, void *memory, int adaptive,
                        uint64_t max_pending) {
    memset(cs, 0, sizeof *cs);
    cs->nsegments = nsegments;
    cs->segment_bytes = segment_bytes;
    cs->nterms = nterms;
    cs->adaptive = adaptive;
    int rc = tierlab_segcache_new(policy, nterms, nsegments, segment_bytes, memory, &cs->sc);
    if (rc) return rc;
    cs->pol = tierlab_segcache_policy(cs->sc);
    if (adaptive) {
        rc = tierlab_lookahead_new(nsegments, max_pending, &cs->la);
        if (rc) return rc;
    }
    cs->pins = calloc(nterms ? nterms : 1, sizeof *cs->pins);
    cs->ready = calloc(nterms ? nterms : 1, 1);
    return cs->pins && cs->ready ? 0 : TIERLAB_ENOMEM;
}

uint64_t tl_cache_state_bytes(int policy, uint64_t nterms, uint64_t nsegments, int adaptive,
                              uint64_t max_pending) {
    tl_cache_state *cs = NULL;
    uint64_t n = nterms ? nterms : 1;
    return tierlab_segcache_bytes(policy, nterms, nsegments) +
           (adaptive ? tierlab_lookahead_bytes(max_pending) : 0) +
           n * (sizeof *cs->pins + sizeof *cs->ready);
}

void tl_cache_state_free(tl_cache_state *cs) {
    tierlab_lookahead_free(cs->la);
    tierlab_segcache_free(cs->sc);
    free(cs->pins);
    free(cs->ready);
    memset(cs, 0, sizeof *cs);
}

uint64_t tl_term_segments(const tl_cache_state *cs, uint64_t bytes, uint64_t blocks) {
    return tierlab_segcache_segments(bytes, blocks, cs->segment_bytes);
}

uint64_t tl_cache_used_segments(const tl_cache_state *cs) {
    return cs->nsegments - tierlab_segcache_free_segments(cs->sc); /* chains being filled too */
}

/* Evict LRU terms until nseg segments are free. `rule`: apply the adaptive
 * lookahead rule. TL_STEP_FILL when there is room, else TL_STEP_WAIT. */
static int tl_make_room(tl_cache_state *cs, uint64_t nseg, int rule) {
    while (tierlab_cache_free_units(cs->pol) < nseg) {
        uint64_t v, vsize;
        if (tierlab_cache_victim(cs->pol, &v, &vsize) != 0) return TL_STEP_WAIT; /* empty?! */
        if (rule && !tierlab_lookahead_may_evict(cs->la, vsize)) {
            cs->rule_waits++;
            return TL_STEP_WAIT;
        }
        if (cs->pins[v]) { /* the rule let it through: only with a fixed lookahead */
            cs->pinned_victim_waits++;
            return TL_STEP_WAIT;
        }
        int64_t got = tierlab_cache_evict(cs->pol);
        if (got >= 0) cs->ready[got] = 0;
    }
    return TL_STEP_FILL;
}

/* Allocate term's chain (tl_chain_map walks it with tierlab_segcache_next). */
static int tl_alloc(tl_cache_state *cs, uint64_t term, uint64_t nseg) {
    if (tierlab_segcache_alloc(cs->sc, term, nseg) < 0) return -1;
    cs->filling = term;
    return TL_STEP_FILL;
}

int tl_prefetch_step(tl_cache_state *cs, uint64_t term, uint64_t nseg, uint64_t next_use) {
    if (nseg > cs->nsegments) return TL_STEP_BYPASS;
    if (tierlab_cache_contains(cs->pol, term)) {
        tierlab_cache_touch(cs->pol, term, next_use);
        if (cs->la) tierlab_lookahead_worker_done(cs->la, nseg);
        return TL_STEP_HIT;
    }
    int r = tl_make_room(cs, nseg, cs->la != NULL);
    return r == TL_STEP_FILL ? tl_alloc(cs, term, nseg) : r;
}

void tl_worker_commit(tl_cache_state *cs, uint64_t term, uint64_t nseg, uint64_t next_use,
                      int count) {
    if (!tierlab_cache_contains(cs->pol, term))
        tierlab_cache_insert(cs->pol, term, nseg, next_use);
    cs->ready[term] = 1;
    cs->filling = TL_NO_TERM;
    if (count && cs->la) tierlab_lookahead_worker_done(cs->la, nseg);
}

void tl_prefetch_bypass(tl_cache_state *cs) {
    if (cs->la) tierlab_lookahead_worker_done(cs->la, 0);
    cs->bypassed++;
}

int tl_copy_step(tl_cache_state *cs, uint64_t term, uint64_t nseg, uint64_t next_use) {
    (void)next_use;
    if (nseg > cs->nsegments) return TL_STEP_BYPASS;
    if (tierlab_cache_contains(cs->pol, term)) return TL_STEP_HIT;
    int r = tl_make_room(cs, nseg, 0);
    return r == TL_STEP_FILL ? tl_alloc(cs, term, nseg) : r;
}

int tl_query_acquire(tl_cache_state *cs, uint64_t term, int touch, uint64_t next_use) {
    if (!cs->ready[term] || !tierlab_cache_contains(cs->pol, term)) return 0;
    if (touch) tierlab_cache_touch(cs->pol, term, next_use);
    cs->pins[term]++;
    return 1;
}

void tl_query_release(tl_cache_state *cs, uint64_t term) {
    if (cs->pins[term]) cs->pins[term]--;
}

void tl_query_term_done(tl_cache_state *cs) {
    if (cs->la) tierlab_lookahead_query_done(cs->la);
}
