/* Tier-timing model: the memory stall of one core's memory-side stream on the
 * tiers its regions live on (tierlab.h "Tier-timing model"; docs/tiers.md
 * "The memory-tier model" states the mechanisms and what is left out).
 *
 * The stream is cut into epochs. An epoch is a group of demand reads the core
 * has in flight together (memory-level parallelism, as in interval analysis:
 * Karkhanis and Smith, ISCA 2004; Chou, Fahs and Abraham, ISCA 2004): reads
 * within `window_ns` of core time after the epoch's first read (the reorder
 * buffer's reach: misses further apart cannot be in flight together), at most
 * at most fill_buffers of them (each 64 B miss holds a fill buffer), and at
 * most max_outstanding media accesses of the first read's tier (reads that
 * open a granule not in the tier's buffer: a 256 B XPLine serves the 64 B
 * lines after its first from the buffer), of one query. A read of a serial region (dependent loads, a search) closes the
 * epoch before and after itself. The epoch costs its longest read latency.
 * Prefetches and writebacks add no latency; every request adds device time
 * (bytes that reach the media over this core's share of the tier's
 * bandwidth), and when an epoch closes, the device time since the previous
 * close that the core's own work (cpu_ns_per_access per access) and the
 * epoch's latency do not cover is a bandwidth stall. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tierlab.h"

#define TL_BUF_WAYS 8u
#define TL_EPOCH_MAX 64u

typedef struct {
    tierlab_tier_params p;
    uint64_t *buf_tag;    /* sets x TL_BUF_WAYS: granule + 1, 0 = empty */
    uint64_t *buf_stamp;
    uint32_t buf_sets;
    uint64_t clock;
    uint64_t last_line;   /* previous line of any request on this tier (+1; 0 none) */
    unsigned granule_shift;
    double dev_ns;        /* device time since the last close */
} tl_tier;

struct tierlab_timing {
    tierlab_timing_config cfg;
    tl_tier tier[TIERLAB_TIMING_MAX_TIERS];
    unsigned line_shift;
    /* the open epoch */
    uint32_t members;
    uint8_t m_region[TL_EPOCH_MAX];
    uint32_t m_query[TL_EPOCH_MAX];
    double m_lat[TL_EPOCH_MAX];
    uint32_t cap;          /* members allowed in this epoch (fill buffers) */
    uint32_t media;        /* members that opened a granule (media accesses) */
    uint32_t media_cap;    /* media accesses allowed (the tier's max_outstanding) */
    double span;           /* core ns since the epoch's first read */
    /* since the last close */
    double seg_cpu_ns;
    double seg_region_dev[TIERLAB_REGIONS];
    uint32_t seg_query;
    int seg_any;
    tierlab_timing_result res;
};

static int tl_pow2(uint64_t x) { return x && !(x & (x - 1)); }

void tierlab_timing_free(tierlab_timing *t)
{
    if (!t)
        return;
    for (unsigned i = 0; i < TIERLAB_TIMING_MAX_TIERS; i++) {
        free(t->tier[i].buf_tag);
        free(t->tier[i].buf_stamp);
    }
    free(t);
}

/* No epoch open, nothing accumulated since the last close. */
static void tl_new_segment(tierlab_timing *t)
{
    t->members = 0;
    t->media = 0;
    t->span = 0;
    t->seg_cpu_ns = 0;
    memset(t->seg_region_dev, 0, sizeof t->seg_region_dev);
    t->seg_any = 0;
}

void tierlab_timing_reset(tierlab_timing *t)
{
    for (unsigned i = 0; i < t->cfg.tiers; i++) {
        tl_tier *x = &t->tier[i];
        if (x->buf_sets) {
            memset(x->buf_tag, 0, (size_t)x->buf_sets * TL_BUF_WAYS * sizeof *x->buf_tag);
            memset(x->buf_stamp, 0, (size_t)x->buf_sets * TL_BUF_WAYS * sizeof *x->buf_stamp);
        }
        x->clock = 0;
        x->last_line = 0;
        x->dev_ns = 0;
    }
    tl_new_segment(t);
    memset(&t->res, 0, sizeof t->res);
}

int tierlab_timing_new(const tierlab_timing_config *cfg, tierlab_timing **out)
{
    if (!cfg || !out)
        return TIERLAB_EINVAL;
    *out = NULL;
    if (cfg->tiers < 1 || cfg->tiers > TIERLAB_TIMING_MAX_TIERS || !tl_pow2(cfg->line_bytes) ||
        cfg->fill_buffers < 1 || !(cfg->cpu_ns_per_access >= 0) ||
        !isfinite(cfg->cpu_ns_per_access) || !(cfg->window_ns >= 0) || !isfinite(cfg->window_ns))
        return TIERLAB_EINVAL;
    for (unsigned r = 0; r < TIERLAB_REGIONS; r++)
        if (cfg->region_tier[r] >= cfg->tiers || cfg->region_serial[r] > 1)
            return TIERLAB_EINVAL;
    for (unsigned i = 0; i < cfg->tiers; i++) {
        const tierlab_tier_params *p = &cfg->tier[i];
        if (!(p->lat_seq_ns >= 0) || !(p->lat_random_ns >= 0) || !(p->read_bytes_per_s > 0) ||
            !(p->write_bytes_per_s > 0) || !isfinite(p->lat_seq_ns) ||
            !isfinite(p->lat_random_ns) || !tl_pow2(p->granule_bytes) ||
            p->granule_bytes < cfg->line_bytes || p->max_outstanding < 1)
            return TIERLAB_EINVAL;
    }
    tierlab_timing *t = calloc(1, sizeof *t);
    if (!t)
        return TIERLAB_ENOMEM;
    t->cfg = *cfg;
    while ((1u << t->line_shift) < cfg->line_bytes)
        t->line_shift++;
    for (unsigned i = 0; i < cfg->tiers; i++) {
        tl_tier *x = &t->tier[i];
        x->p = cfg->tier[i];
        while ((1u << x->granule_shift) < x->p.granule_bytes)
            x->granule_shift++;
        uint32_t g = x->p.buffer_granules;
        x->buf_sets = g ? (g + TL_BUF_WAYS - 1) / TL_BUF_WAYS : 0;
        if (x->buf_sets) {
            size_t n = (size_t)x->buf_sets * TL_BUF_WAYS;
            x->buf_tag = calloc(n, sizeof *x->buf_tag);
            x->buf_stamp = calloc(n, sizeof *x->buf_stamp);
            if (!x->buf_tag || !x->buf_stamp) {
                tierlab_timing_free(t);
                return TIERLAB_ENOMEM;
            }
        }
    }
    tierlab_timing_reset(t);
    *out = t;
    return 0;
}

/* Looks granule g up in the tier's buffer and makes it the most recent:
 * 1 on a hit. Without a buffer every access reaches the media. */
static int tl_buffer(tl_tier *x, uint64_t g)
{
    if (!x->buf_sets)
        return 0;
    size_t base = (size_t)(g % x->buf_sets) * TL_BUF_WAYS, v = base;
    for (unsigned w = 0; w < TL_BUF_WAYS; w++) {
        if (x->buf_tag[base + w] == g + 1) {
            x->buf_stamp[base + w] = ++x->clock;
            return 1;
        }
        if (x->buf_stamp[base + w] < x->buf_stamp[v])
            v = base + w;
    }
    x->buf_tag[v] = g + 1;
    x->buf_stamp[v] = ++x->clock;
    return 0;
}

static void tl_close(tierlab_timing *t, double *per_query, uint32_t nq)
{
    double lat = 0, sum = 0;
    for (uint32_t i = 0; i < t->members; i++) {
        if (t->m_lat[i] > lat)
            lat = t->m_lat[i];
        sum += t->m_lat[i];
    }
    for (uint32_t i = 0; i < t->members; i++) {
        double share = sum > 0 ? lat * t->m_lat[i] / sum : 0;
        uint8_t r = t->m_region[i];
        t->res.latency_ns[r] += share;
        t->res.stall_ns[r] += share;
        if (per_query && t->m_query[i] < nq)
            per_query[(size_t)t->m_query[i] * TIERLAB_REGIONS + r] += share;
    }
    double dev = 0, dev_sum = 0;
    for (unsigned i = 0; i < t->cfg.tiers; i++) {
        if (t->tier[i].dev_ns > dev)
            dev = t->tier[i].dev_ns; /* tiers serve in parallel */
        t->tier[i].dev_ns = 0;
    }
    for (unsigned r = 0; r < TIERLAB_REGIONS; r++)
        dev_sum += t->seg_region_dev[r];
    double extra = dev - t->seg_cpu_ns - lat;
    if (extra > 0 && dev_sum > 0) {
        for (unsigned r = 0; r < TIERLAB_REGIONS; r++) {
            double share = extra * t->seg_region_dev[r] / dev_sum;
            t->res.bandwidth_ns[r] += share;
            t->res.stall_ns[r] += share;
            if (per_query && t->seg_query < nq)
                per_query[(size_t)t->seg_query * TIERLAB_REGIONS + r] += share;
        }
    }
    if (t->members)
        t->res.epochs++;
    tl_new_segment(t);
}

void tierlab_timing_run(tierlab_timing *t, const tierlab_mem_request *req, size_t n, int final,
                        double *per_query, uint32_t nq)
{
    const double cpa = t->cfg.cpu_ns_per_access;
    const double window = t->cfg.window_ns;
    for (size_t k = 0; k < n; k++) {
        const tierlab_mem_request *q = &req[k];
        uint8_t r = q->region < TIERLAB_REGIONS ? q->region : TIERLAB_REGION_OTHER;
        /* queries do not overlap on a core: a new query closes the epoch */
        if (t->seg_any && q->query != t->seg_query)
            tl_close(t, per_query, nq);
        double cpu = (double)q->gap * cpa;
        if (t->members &&
            (t->span + cpu > window || t->members >= t->cap || t->media >= t->media_cap))
            tl_close(t, per_query, nq);
        t->seg_cpu_ns += cpu;
        t->res.cpu_ns += cpu;
        if (t->members)
            t->span += cpu;
        t->seg_query = q->query;
        t->seg_any = 1;

        tl_tier *x = &t->tier[t->cfg.region_tier[r]];
        uint64_t line = q->addr >> t->line_shift;
        uint64_t g = q->addr >> x->granule_shift;
        int seq = x->last_line && (line == x->last_line || /* last_line holds line + 1 */
                                   (line + 1) >> (x->granule_shift - t->line_shift) ==
                                       x->last_line >> (x->granule_shift - t->line_shift));
        x->last_line = line + 1;
        int hit = tl_buffer(x, g);
        double bytes = hit ? 0.0 : (double)x->p.granule_bytes;
        double ns;
        if (q->kind == TIERLAB_REQ_WRITEBACK) {
            /* a write into a buffered granule combines there; otherwise the
             * device writes (read-modify-writes) a whole granule */
            ns = bytes * 1e9 / x->p.write_bytes_per_s;
            t->res.writebacks[r]++;
        } else {
            ns = bytes * 1e9 / x->p.read_bytes_per_s;
            if (q->kind == TIERLAB_REQ_PREFETCH)
                t->res.prefetches[r]++;
            else
                t->res.reads[r]++;
        }
        t->res.buffer_hits[r] += (uint64_t)hit;
        t->res.media_bytes[r] += (uint64_t)bytes;
        x->dev_ns += ns;
        t->seg_region_dev[r] += ns;
        if (q->kind != TIERLAB_REQ_READ)
            continue;
        double lat = (hit || seq) ? x->p.lat_seq_ns : x->p.lat_random_ns;
        if (t->cfg.region_serial[r] && t->members)
            tl_close(t, per_query, nq);
        if (!t->members) {
            t->cap = t->cfg.fill_buffers < TL_EPOCH_MAX ? t->cfg.fill_buffers : TL_EPOCH_MAX;
            t->media_cap = x->p.max_outstanding;
            t->span = 0;
        }
        t->m_region[t->members] = r;
        t->m_query[t->members] = q->query;
        t->m_lat[t->members] = lat;
        t->members++;
        t->media += (uint32_t)!hit;
        if (t->cfg.region_serial[r])
            tl_close(t, per_query, nq);
    }
    if (final)
        tl_close(t, per_query, nq);
}

void tierlab_timing_get(const tierlab_timing *t, tierlab_timing_result *out) { *out = t->res; }
