/* plan.c — the resources a run plans, checked before it takes them
 * (tierlab.h "Resource guards"). tl_setup calls tl_plan_check once shard 0
 * is open and the workload parsed, before the other shards are opened: each
 * number below is what tl_setup, shard.c and the tiers then allocate, from
 * the allocating file's own *_bytes function (cache.c, segcache.c,
 * lookahead.c, steps.c, pagecache.c, query.c).
 *
 *   per core  the dictionary and skip list on their tier (dram, numa:N:
 *             anonymous memory, populated and mlock'd when allowed; pm:PATH:
 *             a file in PATH), the segment-cache share on the slow tier and
 *             its bookkeeping (hybrid configurations), the query buffers
 *             (3 x k entries), the per-query records and per-occurrence
 *             flags, the block sources, on an emulated device the page
 *             cache's keys of the shard's own device addresses, and the
 *             stacks of its query thread and worker (TL_THREAD_STACK_BYTES
 *             each: tl_thread_create sets it, so it bounds what they touch);
 *   once      the page cache (emulated: the runtime's frames; real device:
 *             the cap, at most the DID and freq files of all shards), the
 *             workload, core 0's hits (write_hits), the sampler's stack and
 *             the timeline's first allocation (TL_TIMELINE_FIRST_SAMPLES);
 *   copies    a real-device run's index copies, one per core but the first.
 * Files (pm:PATH, the copies) are memory when their filesystem is (tmpfs,
 * ramfs), else they must fit in its free space (statvfs). k is at most the
 * index's documents here (tl_run.k). Not planned: the timeline beyond its
 * first allocation, which grows with the run's length, not known here: one
 * sizeof(tl_sample) per core per sample_ns, in doublings. The rule itself is
 * tierlab_memory_guard (cgroup.c), which the model applies too. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>

#include "runtime.h"

#define TL_TMPFS_MAGIC 0x01021994L
#define TL_RAMFS_MAGIC 0x858458f6L

typedef struct tl_item {
    const char *name;
    uint64_t bytes;
} tl_item;

enum { TL_MAX_ITEMS = 12 };

typedef struct tl_items {
    tl_item it[TL_MAX_ITEMS];
    int n;
    uint64_t total;
} tl_items;

static void tl_add(tl_items *l, const char *name, uint64_t bytes) {
    if (!bytes) return;
    l->total += bytes;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->it[i].name, name)) {
            l->it[i].bytes += bytes;
            return;
        }
    if (l->n < TL_MAX_ITEMS) l->it[l->n++] = (tl_item){name, bytes};
}

/* "name size, name size" largest first, into buf at *at. */
static void tl_items_text(tl_items *l, char *buf, size_t len, size_t *at) {
    for (int i = 0; i < l->n; i++)
        for (int j = i + 1; j < l->n; j++)
            if (l->it[j].bytes > l->it[i].bytes) {
                tl_item t = l->it[i];
                l->it[i] = l->it[j];
                l->it[j] = t;
            }
    for (int i = 0; i < l->n && *at < len; i++) {
        char b[32];
        int w = snprintf(buf + *at, len - *at, "%s%s %s", i ? ", " : "", l->it[i].name,
                         tl_bytes_text(l->it[i].bytes, b, sizeof b));
        if (w > 0) *at += (size_t)w;
    }
    if (*at > len) *at = len;
}

static uint64_t tl_file_bytes(const char *dir, const char *name) {
    char path[PATH_MAX + 32];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Whether files in dir take memory (tmpfs, ramfs); its free space in *free_bytes. */
static int tl_memory_fs(const char *dir, uint64_t *free_bytes) {
    struct statfs fs;
    struct statvfs vfs;
    *free_bytes = statvfs(dir, &vfs) == 0 ? (uint64_t)vfs.f_bavail * vfs.f_frsize : UINT64_MAX;
    return statfs(dir, &fs) == 0 &&
           ((long)fs.f_type == TL_TMPFS_MAGIC || (long)fs.f_type == TL_RAMFS_MAGIC);
}

/* The folder holding the index directory (where tl_shard_copy puts copies). */
static void tl_parent_dir(const char *dir, char *out, size_t len) {
    snprintf(out, len, "%s", dir);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') out[--n] = 0;
    char *slash = strrchr(out, '/');
    if (slash == out) out[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(out, len, ".");
}

/* A file of `bytes` per core in `dir` (pm:PATH): memory, or disk space. */
static int tl_plan_file(tl_items *mem, const char *name, const char *dir, uint64_t bytes,
                        uint32_t copies, const char *what, char *err, size_t errlen) {
    uint64_t free_bytes;
    if (tl_memory_fs(dir, &free_bytes)) {
        tl_add(mem, name, bytes);
        return 0;
    }
    uint64_t need = bytes * copies;
    if (need <= free_bytes) return 0;
    char a[32], b[32];
    return tl_err(err, errlen, TIERLAB_ENOMEM, "%s: %u x %s of %s in %s need %s, more than its "
                  "%s free; lower cores or use another directory", what, copies,
                  tl_bytes_text(bytes, a, sizeof a), name, dir, tl_bytes_text(need, b, sizeof b),
                  tl_bytes_text(free_bytes, a, sizeof a));
}

int tl_plan_check(tl_run *r, char *err, size_t errlen) {
    const tierlab_apcache_params *p = &r->p;
    const tl_shard *s0 = &r->sh[0];
    const tl_workload *w = &r->wl;
    uint32_t n = r->nshards;
    tl_items core = {0}, once = {0};
    char what[64];
    snprintf(what, sizeof what, "the run (%u core%s)", n, n == 1 ? "" : "s");

    /* the dictionary and the skip list on their tiers (shard.c tl_shard_open) */
    const char *place[2] = {p->place_dict[0] ? p->place_dict : p->slow_tier_placement,
                            p->place_skip[0] ? p->place_skip : p->slow_tier_placement};
    const int file[2] = {TIERLAB_FILE_DICT, TIERLAB_FILE_SKIP};
    for (int f = 0; f < 2; f++) {
        uint64_t bytes = tl_file_bytes(r->index_dir, tierlab_index_file_name(file[f]));
        if (!strcmp(place[f], "dram") || !strncmp(place[f], "numa:", 5))
            tl_add(&core, "dictionary and skip list in memory", bytes);
        else if (!strncmp(place[f], "pm:", 3)) {
            int rc = tl_plan_file(&core, "dictionary and skip list in memory", place[f] + 3,
                                  bytes, n, what, err, errlen);
            if (rc) return rc;
        }
    }
    /* the segment cache's share and its bookkeeping (tl_setup) */
    if (tl_is_hybrid(p->config)) {
        uint64_t seg = r->nsegments * p->segment_bytes;
        if (!strncmp(p->slow_tier_placement, "pm:", 3)) {
            int rc = tl_plan_file(&core, "segment-cache share", p->slow_tier_placement + 3, seg,
                                  n, what, err, errlen);
            if (rc) return rc;
        } else {
            tl_add(&core, "segment-cache share", seg);
        }
        int adaptive = p->config == TL_APCACHE_HYBRID_PREFETCH &&
                       p->lookahead == TIERLAB_LOOKAHEAD_ADAPTIVE;
        tl_add(&core, "segment-cache bookkeeping (per term of the index)",
               tl_cache_state_bytes(p->policy, s0->ix->terms, r->nsegments, adaptive,
                                    w->nocc + 1));
    }
    /* the query thread's buffers and records (tl_setup) */
    tl_add(&core, "query buffers (k)", tl_query_ctx_bytes(r->k));
    tl_add(&core, "per-query records",
           (uint64_t)w->nq * sizeof(tl_qrec) + 2 * (w->nocc + 1) + sizeof(tl_shard));
    tl_add(&core, "block sources",
           TIERLAB_QUERY_MAX_TERMS * (r->bounce_bytes + r->max_term_segments * sizeof(uint8_t *)));
    uint64_t keys = 0; /* page keys of one shard (tl_shard_open) */
    for (int k = 0; k < 2; k++) keys += (s0->rd.f[k].len + TL_PAGE - 1) / TL_PAGE;
    if (p->emulated) tl_add(&core, "page-cache keys of its device addresses", tl_pcache_bytes(keys, 0));
    /* the stacks of its threads (tl_thread_create's size bounds what they
     * touch): the query thread, and the worker of the configurations with one */
    int worker = p->config == TL_APCACHE_BASE_PREFETCH || tl_is_hybrid(p->config);
    tl_add(&core, "thread stacks", (uint64_t)(1 + worker) * TL_THREAD_STACK_BYTES);

    /* once: the page cache, the workload, the hits */
    uint64_t files = (s0->rd.f[0].len + s0->rd.f[1].len) * n;
    if (p->emulated) {
        uint64_t cap = r->page_cap_bytes ? r->page_cap_bytes : keys * n * TL_PAGE;
        uint64_t frames = cap / TL_PAGE < keys * n ? cap / TL_PAGE : keys * n;
        tl_add(&once, "page cache", tl_pcache_bytes(0, frames ? frames : 1));
    } else if (r->page_cap_bytes) {
        tl_add(&once, "page cache", r->page_cap_bytes < files ? r->page_cap_bytes : files);
    }
    tl_add(&once, "workload",
           (w->file.nterms ? w->file.term_off[w->file.nterms] : 0) + w->file.nterms * 8 +
               (uint64_t)w->nq * (sizeof *w->qfirst + sizeof *w->type + sizeof *w->nterms +
                                  sizeof *w->known) +
               w->nocc * (sizeof *w->term + sizeof *w->next_use + sizeof *w->nseg));
    if (p->write_hits) tl_add(&once, "hits of core 0", (uint64_t)w->nq * r->k * sizeof(tierlab_hit));
    /* the sampler: its stack, and the timeline's first allocation (sampler.c) */
    tl_add(&once, "sampler stack", TL_THREAD_STACK_BYTES);
    tl_add(&once, "timeline (first samples)", TL_TIMELINE_FIRST_SAMPLES * sizeof(tl_sample));

    /* a real-device run's index copies next to the index (shard.c tl_shard_copy) */
    uint64_t copies = 0;
    if (!p->emulated && n > 1) {
        char parent[PATH_MAX];
        tl_parent_dir(r->index_dir, parent, sizeof parent);
        uint64_t ix = 0;
        for (int f = 0; f < TIERLAB_FILES; f++)
            ix += tl_file_bytes(r->index_dir, tierlab_index_file_name(f));
        uint64_t free_bytes;
        if (tl_memory_fs(parent, &free_bytes)) {
            copies = ix * (n - 1);
        } else if (ix * (n - 1) > free_bytes) {
            char a[32], b[32], c[32];
            return tl_err(err, errlen, TIERLAB_ENOMEM, "%s: %u copies of the index (%s each, "
                          "%s) next to it need more than the %s free in %s; lower cores",
                          what, n - 1, tl_bytes_text(ix, a, sizeof a),
                          tl_bytes_text(ix * (n - 1), b, sizeof b),
                          tl_bytes_text(free_bytes, c, sizeof c), parent);
        }
    }

    char detail[1024], a[32], b[32];
    size_t at = (size_t)snprintf(detail, sizeof detail, "%u x %s per core: ", n,
                                 tl_bytes_text(core.total, a, sizeof a));
    tl_items_text(&core, detail, sizeof detail, &at);
    if (once.total && at < sizeof detail) {
        at += (size_t)snprintf(detail + at, sizeof detail - at, "; once %s: ",
                               tl_bytes_text(once.total, b, sizeof b));
        tl_items_text(&once, detail, sizeof detail, &at);
    }
    if (copies && at < sizeof detail)
        snprintf(detail + at, sizeof detail - at, "; %u index copies on a memory filesystem %s",
                 n - 1, tl_bytes_text(copies, a, sizeof a));
    uint64_t planned = core.total * n + once.total + copies;
    r->planned_bytes = planned;
    return tierlab_memory_guard(planned, what, detail, "lower cores (or k, cache_bytes), or "
                                "place the dictionary and skip list on storage", err, errlen);
}
