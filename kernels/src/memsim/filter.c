/* Cache filter: recorded accesses in, the memory-side stream out
 * (tierlab.h "Cache filter"; docs/tiers.md "The memory-tier model").
 *
 * Each level is set-associative with LRU replacement kept as per-way stamps,
 * write-back and write-allocate. A line's tag is its line number + 1 (0 is an
 * empty way). Fills go bottom-up (last level first), so a dirty victim of an
 * upper level is written into the level below it, which then holds the line;
 * a dirty victim of the last level, or a dirty upper copy invalidated by an
 * inclusive last level, leaves as a TIERLAB_REQ_WRITEBACK.
 *
 * Prefetchers follow the Intel Optimization Reference Manual's description
 * ("Data Prefetching"): the DCU (next-line) prefetcher fetches the next line
 * into L1 on an ascending access to recently loaded data, here an L1 miss on
 * line L when the previous line looked up was L - 1, or the first demand hit
 * on a line it prefetched (tagged prefetching); the L2 streamer watches L2
 * lookups per 4 KiB page, confirms a forward or backward stream on the
 * second step and then runs up to `stream_distance` lines ahead of the load,
 * `stream_degree` prefetches per lookup, never across the page. */
#include <stdlib.h>
#include <string.h>

#include "tierlab.h"

#define TL_DIRTY 1u
#define TL_PREF 2u
#define TL_PAGE_BYTES 4096u
#define TL_MAX_DEGREE 8u

typedef struct {
    uint64_t tag;   /* line + 1, 0 = empty           */
    uint64_t stamp; /* LRU: larger = more recent     */
} tl_way;           /* together: a set's search touches one array */

typedef struct {
    tl_way *w;        /* sets x ways */
    uint8_t *flags;
    uint8_t *region;
    uint64_t sets, mask; /* mask != 0: sets is a power of two */
    uint32_t ways;
    uint64_t clock;
} tl_level;

typedef struct {
    uint64_t page, last, next, stamp;
    int dir, confirmed;
} tl_stream;

struct tierlab_filter {
    tierlab_filter_config cfg;
    tl_level lv[TIERLAB_FILTER_MAX_LEVELS];
    tl_stream *streams;
    uint64_t stream_clock;
    unsigned line_shift, page_lines_shift;
    /* the most recently used L1 line and where it sits (fast path) */
    uint64_t mru_line;
    size_t mru_idx;
    int mru_valid;
    uint64_t last_line; /* previous line looked up in L1 (next-line trigger) */
    /* the access in progress (a record cut by a full output) */
    uint64_t cur_next_line, cur_end_line;
    int cur_active;
    unsigned cur_missed; /* bit per level: a line of this access missed there */
    int cur_emitted;
    uint32_t since;      /* accesses served by the caches since the last request */
    /* output of the line being processed */
    tierlab_mem_request *out;
    size_t nout;
    uint32_t query;
    size_t min_cap;
    tierlab_filter_counts counts;
};

static int tl_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static uint64_t tl_set(const tl_level *l, uint64_t line)
{
    return l->mask ? (line & l->mask) : (line % l->sets);
}

/* Way index (set * ways + way) holding line, or SIZE_MAX. */
static size_t tl_find(const tl_level *l, uint64_t line)
{
    size_t base = (size_t)tl_set(l, line) * l->ways;
    uint64_t t = line + 1;
    for (uint32_t w = 0; w < l->ways; w++)
        if (l->w[base + w].tag == t)
            return base + w;
    return SIZE_MAX;
}

static void tl_emit(tierlab_filter *f, uint64_t line, uint8_t kind, uint8_t region)
{
    tierlab_mem_request *r = &f->out[f->nout++];
    r->addr = line << f->line_shift;
    r->query = f->query;
    r->gap = f->cur_emitted ? 0 : f->since;
    r->kind = kind;
    r->region = region;
    r->pad = 0;
    r->pad2 = 0;
    f->cur_emitted = 1;
    f->since = 0;
    if (kind == TIERLAB_REQ_READ)
        f->counts.reads[region]++;
    else if (kind == TIERLAB_REQ_PREFETCH)
        f->counts.prefetches[region]++;
    else
        f->counts.writebacks[region]++;
}

static void tl_insert(tierlab_filter *f, unsigned li, uint64_t line, uint8_t flags, uint8_t region);

/* Level li lost (line, flags, region): write a dirty line back below, and
 * under an inclusive last level take the line out of the upper levels. */
static void tl_evicted(tierlab_filter *f, unsigned li, uint64_t line, uint8_t flags, uint8_t region)
{
    unsigned last = f->cfg.levels - 1;
    if (li == last && f->cfg.inclusive) {
        for (unsigned u = 0; u < last; u++) {
            size_t i = tl_find(&f->lv[u], line);
            if (i != SIZE_MAX) {
                flags |= f->lv[u].flags[i] & TL_DIRTY;
                f->lv[u].w[i].tag = 0;
                f->lv[u].flags[i] = 0;
                if (u == 0 && f->mru_valid && f->mru_idx == i)
                    f->mru_valid = 0;
            }
        }
    }
    if (!(flags & TL_DIRTY))
        return;
    if (li == last) {
        tl_emit(f, line, TIERLAB_REQ_WRITEBACK, region);
        return;
    }
    size_t i = tl_find(&f->lv[li + 1], line);
    if (i != SIZE_MAX)
        f->lv[li + 1].flags[i] |= TL_DIRTY;
    else
        tl_insert(f, li + 1, line, TL_DIRTY, region);
}

/* Puts line into level li as its most recent way, evicting the LRU way. */
static void tl_insert(tierlab_filter *f, unsigned li, uint64_t line, uint8_t flags, uint8_t region)
{
    tl_level *l = &f->lv[li];
    size_t base = (size_t)tl_set(l, line) * l->ways, v = base;
    for (uint32_t w = 0; w < l->ways; w++) {
        if (l->w[base + w].tag == 0) {
            v = base + w;
            goto put;
        }
        if (l->w[base + w].stamp < l->w[v].stamp)
            v = base + w;
    }
    {
        uint64_t old = l->w[v].tag - 1;
        uint8_t of = l->flags[v], orr = l->region[v];
        l->w[v].tag = 0;
        if (li == 0 && f->mru_valid && f->mru_idx == v)
            f->mru_valid = 0;
        tl_evicted(f, li, old, of, orr);
    }
put:
    l->w[v].tag = line + 1;
    l->w[v].stamp = ++l->clock;
    l->flags[v] = flags;
    l->region[v] = region;
}

/* Brings line into levels top..last-most that lack it: from the first level
 * below top that holds it, or from memory as request `kind`. */
static void tl_fetch(tierlab_filter *f, unsigned top, uint64_t line, uint8_t region, uint8_t kind,
                     uint8_t top_flags)
{
    unsigned levels = f->cfg.levels, from = levels;
    for (unsigned li = top + 1; li < levels; li++) {
        size_t i = tl_find(&f->lv[li], line);
        if (i != SIZE_MAX) {
            f->lv[li].w[i].stamp = ++f->lv[li].clock;
            from = li;
            break;
        }
    }
    if (from == levels)
        tl_emit(f, line, kind, region);
    for (unsigned li = from; li-- > top;)
        tl_insert(f, li, line, li == top ? top_flags : 0, region);
}

static void tl_prefetch(tierlab_filter *f, unsigned li, uint64_t line, uint8_t region)
{
    for (unsigned u = 0; u <= li; u++)
        if (tl_find(&f->lv[u], line) != SIZE_MAX)
            return;
    tl_fetch(f, li, line, region, TIERLAB_REQ_PREFETCH, TL_PREF);
}

/* The streamer sees a lookup of line at its level. */
static void tl_stream_train(tierlab_filter *f, uint64_t line, uint8_t region)
{
    uint64_t page = line >> f->page_lines_shift;
    uint32_t n = f->cfg.streams;
    tl_stream *s = NULL, *lru = &f->streams[0];
    for (uint32_t i = 0; i < n; i++) {
        if (f->streams[i].stamp && f->streams[i].page == page) {
            s = &f->streams[i];
            break;
        }
        if (f->streams[i].stamp < lru->stamp)
            lru = &f->streams[i];
    }
    if (!s) {
        lru->page = page;
        lru->last = line;
        lru->next = line;
        lru->dir = 0;
        lru->confirmed = 0;
        lru->stamp = ++f->stream_clock;
        return;
    }
    s->stamp = ++f->stream_clock;
    if (line == s->last)
        return;
    int dir = line > s->last ? 1 : -1;
    if (dir == s->dir) {
        s->confirmed = 1;
    } else {
        s->dir = dir;
        s->confirmed = 0;
        s->next = line;
    }
    s->last = line;
    if (!s->confirmed)
        return;
    unsigned lv = f->cfg.levels > 1 ? 1 : 0;
    uint64_t dist = f->cfg.stream_distance;
    if (dir > 0) {
        if (s->next <= line)
            s->next = line + 1;
        for (uint32_t k = 0; k < f->cfg.stream_degree && s->next <= line + dist &&
                             (s->next >> f->page_lines_shift) == page; k++)
            tl_prefetch(f, lv, s->next++, region);
    } else {
        if (s->next >= line)
            s->next = line - 1;
        for (uint32_t k = 0; k < f->cfg.stream_degree && s->next + dist >= line &&
                             s->next != UINT64_MAX && (s->next >> f->page_lines_shift) == page; k++)
            tl_prefetch(f, lv, s->next--, region);
    }
}

/* One line of a demand access. */
static void tl_line(tierlab_filter *f, uint64_t line, int store, uint8_t region)
{
    tl_level *l1 = &f->lv[0];
    if (f->mru_valid && line == f->mru_line) { /* the line just used: an L1 hit */
        if (store)
            l1->flags[f->mru_idx] |= TL_DIRTY;
        f->last_line = line;
        return;
    }
    size_t i = tl_find(l1, line);
    if (i != SIZE_MAX) {
        l1->w[i].stamp = ++l1->clock;
        uint8_t fl = l1->flags[i];
        if (store)
            fl |= TL_DIRTY;
        if (fl & TL_PREF) {
            fl &= (uint8_t)~TL_PREF;
            f->counts.useful_prefetches[region]++;
            if (f->cfg.prefetch_next_line && ((line + 1) >> f->page_lines_shift) ==
                                                 (line >> f->page_lines_shift))
                tl_prefetch(f, 0, line + 1, region);
        }
        l1->flags[i] = fl;
    } else {
        f->cur_missed |= 1u;
        unsigned levels = f->cfg.levels, from = levels;
        if (levels > 1 && f->cfg.prefetch_stream)
            tl_stream_train(f, line, region);
        for (unsigned li = 1; li < levels; li++) {
            size_t j = tl_find(&f->lv[li], line);
            if (j != SIZE_MAX) {
                tl_level *l = &f->lv[li];
                l->w[j].stamp = ++l->clock;
                if (l->flags[j] & TL_PREF) {
                    l->flags[j] &= (uint8_t)~TL_PREF;
                    f->counts.useful_prefetches[region]++;
                }
                from = li;
                break;
            }
            f->cur_missed |= 1u << li;
        }
        if (from == levels) {
            if (levels == 1 && f->cfg.prefetch_stream)
                tl_stream_train(f, line, region);
            tl_emit(f, line, TIERLAB_REQ_READ, region);
        }
        for (unsigned li = from; li-- > 0;)
            tl_insert(f, li, line, li == 0 && store ? TL_DIRTY : 0, region);
        i = tl_find(l1, line);
        if (f->cfg.prefetch_next_line && f->last_line + 1 == line &&
            ((line + 1) >> f->page_lines_shift) == (line >> f->page_lines_shift))
            tl_prefetch(f, 0, line + 1, region);
        i = tl_find(l1, line); /* a prefetch may have moved things; the line stays (MRU) */
    }
    f->last_line = line;
    if (l1->ways > 1 && i != SIZE_MAX) {
        f->mru_line = line;
        f->mru_idx = i;
        f->mru_valid = 1;
    } else {
        f->mru_valid = 0;
    }
}

static void tl_level_free(tl_level *l)
{
    free(l->w);
    free(l->flags);
    free(l->region);
    memset(l, 0, sizeof *l);
}

void tierlab_filter_free(tierlab_filter *f)
{
    if (!f)
        return;
    for (unsigned i = 0; i < TIERLAB_FILTER_MAX_LEVELS; i++)
        tl_level_free(&f->lv[i]);
    free(f->streams);
    free(f);
}

void tierlab_filter_reset(tierlab_filter *f)
{
    for (unsigned i = 0; i < f->cfg.levels; i++) {
        tl_level *l = &f->lv[i];
        size_t n = (size_t)l->sets * l->ways;
        memset(l->w, 0, n * sizeof *l->w);
        memset(l->flags, 0, n);
        memset(l->region, 0, n);
        l->clock = 0;
    }
    memset(f->streams, 0, f->cfg.streams * sizeof *f->streams);
    f->stream_clock = 0;
    f->mru_valid = 0;
    f->last_line = UINT64_MAX - 1;
    f->cur_active = 0;
    f->since = 0;
    memset(&f->counts, 0, sizeof f->counts);
}

int tierlab_filter_new(const tierlab_filter_config *cfg, tierlab_filter **out)
{
    if (!cfg || !out)
        return TIERLAB_EINVAL;
    *out = NULL;
    if (!tl_pow2(cfg->line_bytes) || cfg->line_bytes < 16 || cfg->line_bytes > 4096 ||
        cfg->levels < 1 || cfg->levels > TIERLAB_FILTER_MAX_LEVELS || cfg->inclusive > 1 ||
        cfg->prefetch_next_line > 1 || cfg->prefetch_stream > 1)
        return TIERLAB_EINVAL;
    if (cfg->prefetch_stream &&
        (cfg->stream_distance < 1 || cfg->stream_distance > 64 || cfg->stream_degree < 1 ||
         cfg->stream_degree > TL_MAX_DEGREE || cfg->streams < 1 || cfg->streams > 256))
        return TIERLAB_EINVAL;
    for (unsigned i = 0; i < cfg->levels; i++) {
        uint64_t set_bytes = (uint64_t)cfg->level_ways[i] * cfg->line_bytes;
        if (cfg->level_ways[i] < 1 || cfg->level_ways[i] > 64 || cfg->level_bytes[i] == 0 ||
            cfg->level_bytes[i] % set_bytes || cfg->level_bytes[i] > ((uint64_t)1 << 36))
            return TIERLAB_EINVAL;
    }
    tierlab_filter *f = calloc(1, sizeof *f);
    if (!f)
        return TIERLAB_ENOMEM;
    f->cfg = *cfg;
    if (!cfg->prefetch_stream)
        f->cfg.streams = 1;
    while ((1u << f->line_shift) < cfg->line_bytes)
        f->line_shift++;
    f->page_lines_shift = 12 - (f->line_shift < 12 ? f->line_shift : 12);
    for (unsigned i = 0; i < cfg->levels; i++) {
        tl_level *l = &f->lv[i];
        l->ways = cfg->level_ways[i];
        l->sets = cfg->level_bytes[i] / ((uint64_t)l->ways * cfg->line_bytes);
        l->mask = tl_pow2(l->sets) ? l->sets - 1 : 0;
        if (l->sets == 1)
            l->mask = 0, l->sets = 1;
        size_t n = (size_t)l->sets * l->ways;
        l->w = calloc(n, sizeof *l->w);
        l->flags = calloc(n, 1);
        l->region = calloc(n, 1);
        if (!l->w || !l->flags || !l->region) {
            tierlab_filter_free(f);
            return TIERLAB_ENOMEM;
        }
    }
    f->streams = calloc(f->cfg.streams, sizeof *f->streams);
    if (!f->streams) {
        tierlab_filter_free(f);
        return TIERLAB_ENOMEM;
    }
    /* Requests one line can cause: its read, each fill's victim written back
     * (an inclusive eviction adds one), for the demand line and every prefetch. */
    size_t per_fill = 1 + 2 * (size_t)cfg->levels;
    size_t fills = 1 + (cfg->prefetch_next_line ? 1 : 0) +
                   (cfg->prefetch_stream ? cfg->stream_degree : 0);
    f->min_cap = per_fill * fills;
    tierlab_filter_reset(f);
    *out = f;
    return 0;
}

size_t tierlab_filter_min_cap(const tierlab_filter *f) { return f->min_cap; }

void tierlab_filter_get_counts(const tierlab_filter *f, tierlab_filter_counts *out)
{
    *out = f->counts;
}

int64_t tierlab_filter_run(tierlab_filter *f, const tierlab_memtrace_record *in, size_t n,
                           size_t *consumed, tierlab_mem_request *out, size_t cap)
{
    *consumed = 0;
    if (cap < f->min_cap)
        return TIERLAB_EINVAL;
    f->out = out;
    f->nout = 0;
    size_t k = 0;
    const unsigned shift = f->line_shift;
    while (k < n) {
        const tierlab_memtrace_record *r = &in[k];
        uint8_t region = r->region < TIERLAB_REGIONS ? r->region : TIERLAB_REGION_OTHER;
        int store = r->kind == TIERLAB_ACCESS_STORE;
        uint64_t first = r->addr >> shift;
        uint64_t lastl = (r->addr + (r->size ? r->size : 1) - 1) >> shift;
        /* fast path: a one-line access to the line just used, nothing to emit */
        if (!f->cur_active && first == lastl && f->mru_valid && first == f->mru_line) {
            if (store)
                f->lv[0].flags[f->mru_idx] |= TL_DIRTY;
            f->counts.accesses[region]++;
            f->counts.loads[region] += !store;
            f->last_line = first;
            f->since++;
            k++;
            continue;
        }
        if (!f->cur_active) {
            f->cur_active = 1;
            f->cur_next_line = first;
            f->cur_end_line = lastl;
            f->cur_missed = 0;
            f->cur_emitted = 0;
            f->counts.accesses[region]++;
            f->counts.loads[region] += !store;
        }
        f->query = r->query;
        while (f->cur_next_line <= f->cur_end_line) {
            if (cap - f->nout < f->min_cap)
                goto full;
            tl_line(f, f->cur_next_line++, store, region);
        }
        for (unsigned li = 0; li < f->cfg.levels; li++)
            if (f->cur_missed & (1u << li))
                f->counts.misses[li][region]++;
        if (!f->cur_emitted)
            f->since++;
        f->cur_active = 0;
        k++;
    }
full:
    *consumed = k;
    return (int64_t)f->nout;
}
