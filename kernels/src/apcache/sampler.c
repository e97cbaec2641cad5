/* sampler.c — the sampler thread (the timeline, the progress callback,
 * the peaks of DRAM and slow-tier use) and what it reads: /proc/self/status
 * and /proc/self/io, the block device's stat in /sys, mincore residency. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>

#include "runtime.h"

/* kB fields of /proc/self/status. */
static uint64_t tl_status_bytes(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(field);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10) * 1024;
            break;
        }
    fclose(f);
    return v;
}

uint64_t tl_proc_io_read_bytes(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "read_bytes:", 11)) v = strtoull(line + 11, NULL, 10);
    fclose(f);
    return v;
}

/* Reads completed and io_ticks (ms) of the block device holding `path`. */
int tl_blk_stat(const char *dev, uint64_t *reads, uint64_t *ticks) {
    if (!*dev) return -1;
    char p[128];
    snprintf(p, sizeof p, "/sys/dev/block/%s/stat", dev);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    unsigned long long v[11] = {0};
    int n = fscanf(f, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10]);
    fclose(f);
    if (n < 10) return -1;
    *reads = v[0];
    *ticks = v[9];
    return 0;
}

static uint64_t tl_region_resident(const void *addr, size_t len) {
    if (!addr || !len) return 0;
    size_t pages = (len + TL_PAGE - 1) / TL_PAGE;
    unsigned char vec[1024];
    uint64_t res = 0;
    for (size_t p = 0; p < pages; p += sizeof vec) {
        size_t n = pages - p < sizeof vec ? pages - p : sizeof vec;
        size_t bytes = n * TL_PAGE;
        if ((p + n) * TL_PAGE > len) bytes = len - p * TL_PAGE;
        if (mincore((void *)((const uint8_t *)addr + p * TL_PAGE), bytes, vec) != 0) continue;
        for (size_t i = 0; i < n; i++) res += vec[i] & 1;
    }
    return res * TL_PAGE;
}

static int tl_on_tmpfs(const char *dir) {
    struct statfs fs;
    return statfs(dir, &fs) == 0 && (unsigned long)fs.f_type == 0x01021994ul;
}

/* Bytes of the dict/skip copies that live on the slow tier and are counted
 * in RssAnon/RssShmem (dram, numa:N, pm on tmpfs): not DRAM of the budget. */
uint64_t tl_slow_static_bytes(tl_run *r) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int f = TIERLAB_FILE_DICT; f <= TIERLAB_FILE_SKIP; f++) {
            const tl_region *g = &r->sh[i].ix->r[f];
            if (strcmp(g->rep.request, r->p.slow_tier_placement) != 0) continue;
            if (!strcmp(g->rep.tier, "dram") || !strcmp(g->rep.tier, "numa") ||
                (!strcmp(g->rep.tier, "pm") && tl_on_tmpfs(g->rep.request + 3)))
                b += tl_region_resident(g->map, g->map_len);
        }
    return b;
}

/* Index bytes in the host page cache (real device: the budget's page cache). */
static uint64_t tl_index_cached_bytes(tl_run *r) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int f = 0; f < TIERLAB_FILES; f++) {
            const tl_region *g = &r->sh[i].ix->r[f];
            if (!strcmp(g->rep.tier, "storage")) b += tl_region_resident(g->data, g->len);
        }
    return b;
}

static void tl_take_sample(tl_run *r, uint64_t slow_static) {
    uint64_t t = tl_now_ns() - r->t0;
    uint64_t slow_used = 0, slow_resident = 0;
    uint64_t storage = r->p.emulated ? atomic_load(&r->dev.bytes)
                                     : tl_proc_io_read_bytes() - r->io_read0;
    if (r->nsamples + r->nshards > r->cap_samples) {
        size_t cap = r->cap_samples ? 2 * r->cap_samples : TL_TIMELINE_FIRST_SAMPLES;
        tl_sample *g = realloc(r->samples, cap * sizeof *g);
        if (!g) return;
        r->samples = g;
        r->cap_samples = cap;
    }
    for (uint32_t i = 0; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        tl_sample *x = &r->samples[r->nsamples++];
        x->core = i;
        x->t_ns = t;
        x->queries_done = atomic_load_explicit(&s->q_done, memory_order_relaxed);
        uint64_t taken = atomic_load_explicit(&s->q_taken, memory_order_relaxed);
        x->lookahead = tl_worker_ahead(s, taken ? taken - 1 : 0);
        x->rolling_sum = 0;
        x->storage_bytes_read = storage;
        if (s->has_cache) {
            pthread_mutex_lock(&s->mu);
            uint64_t used = tl_cache_used_segments(&s->cs);
            if (s->cs.la) x->rolling_sum = tierlab_lookahead_rolling_sum(s->cs.la);
            pthread_mutex_unlock(&s->mu);
            x->cache_used_bytes = used * s->cs.segment_bytes;
            slow_used += x->cache_used_bytes;
            if (s->slow.anon) slow_resident += tl_region_resident(s->slow.mem, s->slow.len);
        } else if (r->pc_inited) {
            x->cache_used_bytes = tl_pcache_used_bytes(&r->pc);
        } else {
            x->cache_used_bytes = 0;
            for (int f = 0; f < 2; f++)
                x->cache_used_bytes += tl_region_resident(s->rd.f[f].map, s->rd.f[f].len);
        }
    }
    uint64_t anon = tl_status_bytes("RssAnon") + tl_status_bytes("RssShmem");
    uint64_t not_dram = slow_resident + slow_static;
    uint64_t dram = anon > not_dram ? anon - not_dram : 0;
    if (!r->p.emulated) dram += tl_index_cached_bytes(r);
    if (dram > r->peak_dram) r->peak_dram = dram;
    if (slow_used > r->peak_slow) r->peak_slow = slow_used;
}

void *tl_sampler(void *arg) {
    tl_thread_setup();
    tl_run *r = arg;
    uint64_t slow_static = r->slow_static;
    tl_gate_wait(r);
    uint64_t period = r->p.sample_ns;
    uint64_t tick = period < 50000000u ? period : 50000000u;
    uint64_t next_sample = r->t0, next_progress = r->t0, now = r->t0;
    uint64_t total = (uint64_t)r->wl.nq * r->nshards;
    while (!atomic_load(&r->sampler_quit)) {
        if (now >= next_sample) {
            tl_take_sample(r, slow_static);
            next_sample += period;
            if (next_sample < now) next_sample = now + period;
        }
        if (now >= next_progress && r->progress) {
            uint64_t done = 0;
            for (uint32_t i = 0; i < r->nshards; i++)
                done += atomic_load_explicit(&r->sh[i].q_done, memory_order_relaxed);
            if (r->progress(r->progress_ctx, done, total) && !atomic_load(&r->stop)) {
                atomic_store(&r->stop, 1);
                tl_wake_all(r);
            }
            next_progress = now + 100000000u;
        }
        uint64_t wake = next_sample < now + tick ? next_sample : now + tick;
        tl_sleep_until(wake);
        now = tl_now_ns();
    }
    tl_take_sample(r, slow_static); /* the end state */
    return NULL;
}
