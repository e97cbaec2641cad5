/* runtime.c — the native APCache runtime (docs/apcache.md "The four
 * configurations"): the parameters, the run's set-up (shards, CPUs, the
 * memory limit, readahead) and tierlab_apcache_run, which starts and joins
 * the threads. The threads are query_thread.c and config_*.c (one file per
 * configuration's worker), the sampler is sampler.c (apcache.h lists all).
 *
 * Per shard (one per core): its own copy of the index (a real-device run
 * with cores > 1 copies the index directory next to the original, removed
 * at the end; an emulated run gives each shard its own range of device
 * addresses and page-cache keys over the one set of files), one query
 * thread, and one worker (all configurations but base), a segment cache of
 * cache_bytes / cores (hybrid configurations), and the whole workload: every
 * core runs every query on its shard, back to back (closed loop; queries
 * are all queued at the start, so a query's latency is from the moment its
 * query thread takes it to its sorted results, waits included).
 *
 *   base            query thread reads blocks through the index mmap (real)
 *                   or the emulated page cache (emulated);
 *   base-prefetch   + a worker reading every term of queries q_taken ..
 *                   q_taken + LA - 1 through a 4096-byte buffer (pread, or
 *                   the emulated page cache); the query thread waits until
 *                   the worker has finished its query;
 *   hybrid          the query thread serves a term from the segment cache
 *                   when it is there (pinned while in use) and from storage
 *                   otherwise; the worker trails it, copying every term it
 *                   missed into the segment cache (from the page cache;
 *                   a term the page cache no longer holds whole is
 *                   skipped: only the query thread reads storage);
 *   hybrid-prefetch the worker prefetches the terms of upcoming queries
 *                   straight into the segment cache (pread into the chain,
 *                   or through the emulated page cache = the DRAM budget)
 *                   with adaptive lookahead (or a fixed LA when asked); the
 *                   query thread waits until all terms of its query are
 *                   prefetched and serves them from the cache.
 * Terms larger than a shard's segment cache are never cached (served from
 * storage, counted as segment misses). A hybrid-prefetch query whose terms
 * do not fit in the cache together would deadlock the rule (the worker
 * waits for the query thread, which waits for the worker): the worker then
 * serves the rest of that query from storage (counted in `bypassed`).
 *
 * Stopping: the progress callback (polled by the sampler at least every
 * 50 ms) returning non-zero stops every thread at its next step; what was
 * measured so far is written with partial = 1 and the call returns
 * TIERLAB_ECANCELED after the same cleanup as a complete run. */
#define _GNU_SOURCE
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "runtime.h"

void tierlab_apcache_params_default(tierlab_apcache_params *p) {
    memset(p, 0, sizeof *p);
    p->config = TL_APCACHE_HYBRID_PREFETCH;
    p->policy = tierlab_policy_find("lru");
    p->cores = 1;
    p->k = TIERLAB_K_DEFAULT;
    p->lookahead = TIERLAB_LOOKAHEAD_ADAPTIVE;
    p->sample_ns = 10000000;
    p->cache_bytes = 64ull << 20;
    p->segment_bytes = 32768;
    p->dram_budget_bytes = 50000000;
    p->readahead_bytes = 131072;
    p->emulated = 0;
    p->device_queue_depth = 1;
    p->memory_limit = 1;
    snprintf(p->slow_tier_placement, sizeof p->slow_tier_placement, "dram");
}

/* The CPUs this process may run on; 0 if unknown. */
static int tl_allowed_cpus(void) {
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
}

static int tl_check_params(const tierlab_apcache_params *p, char *err, size_t errlen) {
    if (p->config < 0 || !tierlab_apcache_config_name((size_t)p->config))
        return tl_err(err, errlen, TIERLAB_EINVAL, "config %d: not one of 0..%d", p->config,
                      (int)tierlab_apcache_config_count() - 1);
    if (p->policy < 0 || !tierlab_policy_name((size_t)p->policy))
        return tl_err(err, errlen, TIERLAB_EINVAL, "policy %d: unknown", p->policy);
    if (p->cores < 1 || p->cores > 1024)
        return tl_err(err, errlen, TIERLAB_EINVAL, "cores %u: must be 1..1024", p->cores);
    int cpus = tl_allowed_cpus();
    if (cpus > 0 && p->cores > (uint32_t)cpus)
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "cores %u: this process may run on %d CPU(s) (sched_getaffinity), so at "
                      "most %d here: the runtime measures cores that run at once, each with a "
                      "query thread%s of its own; more would take turns on the CPUs (the model, "
                      "`tierlab model run`, takes any number of cores)",
                      p->cores, cpus, cpus, p->config == TL_APCACHE_BASE ? "" : " and a worker");
    if (p->k < 1) return tl_err(err, errlen, TIERLAB_EINVAL, "k must be at least 1");
    if (p->sample_ns < 1000000)
        return tl_err(err, errlen, TIERLAB_EINVAL, "sample_ns must be >= 1000000 (1 ms)");
    if (p->lookahead == TIERLAB_LOOKAHEAD_ADAPTIVE && p->config == TL_APCACHE_BASE_PREFETCH)
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "lookahead: base-prefetch needs a fixed lookahead (>= 1 queries); "
                      "adaptive is for hybrid-prefetch");
    if (tl_is_hybrid(p->config)) {
        if (p->segment_bytes < 64 || p->segment_bytes % 8 || p->segment_bytes > (1ull << 30))
            return tl_err(err, errlen, TIERLAB_EINVAL,
                          "segment size %llu: must be a multiple of 8 from 64 bytes to 1 GiB",
                          (unsigned long long)p->segment_bytes);
        if (p->cache_bytes / p->cores < p->segment_bytes)
            return tl_err(err, errlen, TIERLAB_EINVAL,
                          "cache size %llu: less than one %llu-byte segment per core",
                          (unsigned long long)p->cache_bytes, (unsigned long long)p->segment_bytes);
    } else if (p->cache_bytes < TL_PAGE) {
        return tl_err(err, errlen, TIERLAB_EINVAL, "cache size %llu: the page-cache cap must be "
                      "at least one 4096-byte page", (unsigned long long)p->cache_bytes);
    }
    if ((p->readahead_bytes || p->emulated) &&
        (p->readahead_bytes < TL_PAGE || p->readahead_bytes > TL_MAX_RA_PAGES * TL_PAGE))
        return tl_err(err, errlen, TIERLAB_EINVAL, "readahead %llu: must be 4 KiB .. 1 MiB%s",
                      (unsigned long long)p->readahead_bytes,
                      p->emulated ? "" : " (or 0: the kernel's, real device)");
    if (p->emulated && (!(p->device_read_bandwidth_bytes_per_s > 0) ||
                        p->device_read_latency_ns < 0 || p->device_seek_ns < 0 ||
                        p->device_queue_depth < 1))
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "emulated device: read bandwidth > 0, latency and seek >= 0, queue depth "
                      ">= 1 needed");
    return 0;
}

/* Each query thread and worker gets an allowed CPU of its own when there are
 * enough (query thread of shard i, then its worker). Without pinning, the
 * scheduler wakes a blocked thread on the CPU of its waker when that looks
 * cheaper; the waker, an emulated read later, spins (TL_SPIN_FULL_NS), so
 * the woken thread waited for the next tick while the other CPU idled:
 * occasional query waits of up to a scheduler tick, each letting a
 * base-prefetch worker run LA queries ahead.
 * Emulated devices only: a real read ends in the disk's interrupt, and a
 * reader pinned away from the CPU that takes it waits for a cross-CPU
 * wake-up on every read, so every read is slower (unpinned, the scheduler
 * moves the reader). */
static void tl_plan_cpus(tl_run *r) {
    if (!r->p.emulated) {
        snprintf(r->pin_how, sizeof r->pin_how,
                 "no: real device (a reader pinned away from the CPU that takes the disk's "
                 "interrupts waits for a cross-CPU wake-up on every read)");
        return;
    }
    cpu_set_t set;
    int allowed[CPU_SETSIZE], n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) allowed[n++] = c;
    int workers = r->p.config != TL_APCACHE_BASE;
    uint64_t threads = (uint64_t)r->nshards * (workers ? 2 : 1);
    if (n == 0 || threads > (uint64_t)n) {
        snprintf(r->pin_how, sizeof r->pin_how,
                 "no: %llu query threads and workers on %d allowed CPU(s)",
                 (unsigned long long)threads, n);
        return;
    }
    int k = 0;
    for (uint32_t i = 0; i < r->nshards; i++) {
        r->sh[i].qt_cpu = allowed[k++];
        r->sh[i].wk_cpu = workers ? allowed[k++] : -1;
    }
    r->pin = 1;
    char wk[48] = "";
    if (workers) snprintf(wk, sizeof wk, ", its worker on CPU %d", r->sh[0].wk_cpu);
    snprintf(r->pin_how, sizeof r->pin_how,
             "yes: each query thread and worker on an allowed CPU of its own (shard 0: query "
             "thread on CPU %d%s; %d CPU(s) allowed)", r->sh[0].qt_cpu, wk, n);
}

static int tl_setup(tl_run *r, char *err, size_t errlen) {
    const tierlab_apcache_params *p = &r->p;
    int cfg = p->config;
    r->nshards = p->cores;
    r->sh = calloc(r->nshards, sizeof *r->sh);
    if (!r->sh) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    int rc = tl_device_init(&r->dev, p->emulated, p->device_read_bandwidth_bytes_per_s,
                            p->device_read_latency_ns, p->device_seek_ns, p->device_queue_depth);
    if (rc) return tl_err(err, errlen, rc, "bad device parameters");
    r->dev_inited = 1;
    tl_plan_cpus(r);
    if (r->pin) r->dev.spin_ns = TL_SPIN_FULL_NS;
    r->handoff_spin_ns = r->pin ? TL_HANDOFF_SPIN_NS : 0;
    /* Shard 0 and the workload first: the plan (plan.c) needs their sizes,
     * and is checked before the other shards take their copies. */
    uint64_t dev_addr = 0, key = 0;
    r->sh[0].id = 0;
    rc = tl_shard_open(r, &r->sh[0], &dev_addr, &key, err, errlen);
    if (rc) return rc;
    rc = tl_workload_parse(r, r->sh[0].ix, err, errlen);
    if (rc) return rc;
    tl_workload *w = &r->wl;
    tierlab_index_info info;
    tierlab_index_get_info(r->sh[0].ix, &info);
    r->k = info.docs && info.docs < p->k ? (uint32_t)info.docs : p->k;
    /* sizes: segments of every occurrence, the largest block, the largest term */
    size_t bounce = r->sh[0].ix->dc->max_encoded_bytes(TIERLAB_MAX_BLOCK);
    size_t fb = r->sh[0].ix->fc->max_encoded_bytes(TIERLAB_MAX_BLOCK);
    r->bounce_bytes = bounce > fb ? bounce : fb;
    r->nsegments = tl_is_hybrid(cfg) ? p->cache_bytes / p->cores / p->segment_bytes : 0;
    for (uint64_t j = 0; j < w->nocc; j++) {
        tl_extent x;
        rc = tl_term_extent(r->sh[0].ix, w->term[j], &x);
        if (rc) return tl_err(err, errlen, rc, "corrupt skip record of term %llu",
                              (unsigned long long)w->term[j]);
        uint64_t n = tl_is_hybrid(cfg)
                         ? tierlab_segcache_segments(x.did_len + x.freq_len, x.nb, p->segment_bytes)
                         : 0;
        w->nseg[j] = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
        if (n > r->max_term_segments) r->max_term_segments = n;
    }
    r->page_cap_bytes = tl_is_hybrid(cfg) ? p->dram_budget_bytes : p->cache_bytes;
    rc = tl_plan_check(r, err, errlen);
    if (rc) return rc;
    for (uint32_t i = 1; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        s->id = i;
        if (!p->emulated) {
            rc = tl_shard_copy(r, s, err, errlen);
            if (rc) return rc;
        }
        rc = tl_shard_open(r, s, &dev_addr, &key, err, errlen);
        if (rc) return rc;
    }
    if (p->emulated) {
        uint64_t cap = r->page_cap_bytes ? r->page_cap_bytes : key * TL_PAGE;
        rc = tl_pcache_init(&r->pc, &r->dev, key ? key : 1, cap, p->readahead_bytes);
        if (rc) return tl_err(err, errlen, rc, "cannot allocate the emulated page cache");
        r->pc_inited = 1;
    }
    for (uint32_t i = 0; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        if (tl_is_hybrid(cfg)) {
            rc = tl_slow_alloc(p->slow_tier_placement, r->nsegments * p->segment_bytes, &s->slow, err, errlen);
            if (rc) return rc;
            rc = tl_cache_state_init(&s->cs, p->policy, s->ix->terms, r->nsegments, p->segment_bytes,
                                     s->slow.mem,
                                     cfg == TL_APCACHE_HYBRID_PREFETCH &&
                                         p->lookahead == TIERLAB_LOOKAHEAD_ADAPTIVE,
                                     w->nocc + 1);
            if (rc) return tl_err(err, errlen, rc, "cannot create the segment cache");
            s->has_cache = 1;
        }
        s->qctx = tierlab_query_ctx_new(s->ix, r->k);
        s->rec = calloc(w->nq, sizeof *s->rec);
        s->missed = calloc(w->nocc + 1, 1);
        s->bypass = calloc(w->nocc + 1, 1);
        if (p->write_hits && i == 0) s->hits = malloc((size_t)w->nq * r->k * sizeof *s->hits);
        if (!s->qctx || !s->rec || !s->missed || !s->bypass || (p->write_hits && i == 0 && !s->hits))
            return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for shard %u", i);
        for (int t = 0; t < TIERLAB_QUERY_MAX_TERMS; t++)
            if (tl_src_init(&s->src[t], r->bounce_bytes, r->max_term_segments))
                return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for shard %u", i);
    }
    return 0;
}

/* Drop the index files from the page cache (docs/workload.md's protocol). An
 * emulated device then reads its medium — the DID and freq files — once, so
 * that the host's page cache holds it and only the injected delay is
 * storage time. */
static void tl_drop_caches(tl_run *r) {
    int ok = 1;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int f = 0; f < TIERLAB_FILES; f++) {
            char path[PATH_MAX + 32];
            snprintf(path, sizeof path, "%s/%s", r->sh[i].dir, tierlab_index_file_name(f));
            ok &= tierlab_file_dontneed(path) == 0;
        }
    snprintf(r->drop_how, sizeof r->drop_how, "%s", ok ? "fadvise" : "fadvise (failed on a file)");
    if (!r->p.emulated) return;
    char *buf = malloc(1 << 20);
    if (!buf) return;
    for (int k = 0; k < 2; k++) { /* shards share the files in emulated mode */
        const tl_file_ref *f = &r->sh[0].rd.f[k];
        for (uint64_t o = 0; o < f->len; o += 1 << 20)
            if (pread(f->fd, buf, 1 << 20, (off_t)o) < 0) break;
    }
    free(buf);
}

static void tl_memory_limit(tl_run *r, int entered, const char *why) {
    const tierlab_apcache_params *p = &r->p;
    uint64_t cap = r->page_cap_bytes;
    if (p->emulated) {
        snprintf(r->limit_how, sizeof r->limit_how,
                 "emulated: the runtime's own page cache holds at most %llu bytes (LRU over 4 KiB "
                 "pages); no cgroup needed",
                 (unsigned long long)r->pc.nframes * TL_PAGE);
        return;
    }
    if (!p->memory_limit) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: not requested");
        return;
    }
    if (!cap) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: no DRAM budget for this configuration");
        return;
    }
    if (!entered) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: %s", why);
        return;
    }
    /* No slack above the cap: what the run allocates from here on (thread
     * stacks, timeline samples; allocations of the setup were faulted in
     * below) is taken from the page cache — a slack would be page cache the
     * model is not told about (2 MiB of it gave a 4 MiB cap 6 MiB). Below a
     * floor the kernel cannot reclaim fast enough and OOM-kills the process:
     * seen at 64 KiB with the runtime's readahead (256 KiB and up ran), and
     * at 512 KiB under the kernel's mmap read-around (8 MiB windows). */
    const uint64_t floor = p->readahead_bytes ? 256ull << 10 : 4ull << 20;
    char raised[128] = "";
    if (cap < floor) {
        snprintf(raised, sizeof raised, " (raised from %llu: smaller caps get the process "
                 "OOM-killed)", (unsigned long long)cap);
        cap = floor;
        r->page_cap_bytes = cap; /* reported as page_cap_bytes */
    }
    uint64_t usage = tl_cgroup_usage(&r->cg);
    r->limit_bytes = usage + cap;
    char err[512];
    if (tl_cgroup_limit(&r->cg, r->limit_bytes, err, sizeof err)) {
        snprintf(r->limit_how, sizeof r->limit_how, "no: %s", err);
        r->limit_bytes = 0;
        return;
    }
    tl_cgroup_reset_peak(&r->cg); /* the peak of the run, not of the setup */
    snprintf(r->limit_how, sizeof r->limit_how,
             "cgroup v%d %s = %llu bytes: the runtime's memory at start %llu (slow tier "
             "included when it is DRAM-backed; allocations faulted in first: %llu bytes) + "
             "page-cache cap %llu%s (%s)",
             r->cg.version, r->cg.version == 2 ? "memory.max" : "memory.limit_in_bytes",
             (unsigned long long)r->limit_bytes, (unsigned long long)usage,
             (unsigned long long)r->populated, (unsigned long long)cap, raised, r->cg.path);
}

/* Real device: who reads ahead (terms.c "Readahead on the real device").
 * After the memory limit, whose page cap bounds the run as in the emulated
 * cache: a run never takes more than a quarter of the cap. */
static void tl_real_readahead(tl_run *r) {
    const tierlab_apcache_params *p = &r->p;
    if (p->emulated) return;
    if (!p->readahead_bytes) {
        snprintf(r->ra_how, sizeof r->ra_how, "the kernel's (read_ahead_kb of the disk, mmap "
                 "read-around on page faults)");
        return;
    }
    uint32_t ra = tl_readahead_run_pages(p->readahead_bytes, r->page_cap_bytes / TL_PAGE);
    int ok = 1;
    for (uint32_t i = 0; i < r->nshards; i++)
        for (int k = 0; k < 2; k++) {
            tl_file_ref *f = &r->sh[i].rd.f[k];
            f->ra_pages = ra;
            if (f->len) ok &= madvise((void *)f->map, f->len, MADV_RANDOM) == 0;
            ok &= posix_fadvise(f->fd, 0, 0, POSIX_FADV_RANDOM) == 0;
        }
    snprintf(r->ra_how, sizeof r->ra_how, "the runtime's: %llu KiB runs of missing pages by "
             "readahead(2), kernel read-around off (MADV_RANDOM, POSIX_FADV_RANDOM)%s",
             (unsigned long long)ra * TL_PAGE / 1024, ok ? "" : " - failed on a file");
}

static void tl_run_free(tl_run *r) {
    for (uint32_t i = 0; r->sh && i < r->nshards; i++) tl_shard_close(&r->sh[i]);
    free(r->sh);
    if (r->pc_inited) tl_pcache_destroy(&r->pc);
    if (r->dev_inited) tl_device_destroy(&r->dev);
    tl_workload_free(&r->wl);
    free(r->samples);
}

/* ---- the run ----------------------------------------------------------------------- */

int tierlab_apcache_run(const char *index_dir, const char *workload_path,
                        const tierlab_apcache_params *params, const char *out_dir,
                        tierlab_progress_fn progress, void *ctx, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!index_dir || !workload_path || !params || !out_dir)
        return tl_err(err, errlen, TIERLAB_EINVAL, "index, workload, params and out_dir needed");
    int rc = tl_check_params(params, err, errlen);
    if (rc) return rc;
    tl_run *r = calloc(1, sizeof *r);
    if (!r) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    r->p = *params;
    snprintf(r->index_dir, sizeof r->index_dir, "%s", index_dir);
    snprintf(r->workload_path, sizeof r->workload_path, "%s", workload_path);
    snprintf(r->out_dir, sizeof r->out_dir, "%s", out_dir);
    r->progress = progress;
    r->progress_ctx = ctx;
    int cfg = r->p.config;

    /* Into the cgroup first, so that everything the run allocates is charged. */
    char why[1100] = "";
    int entered = 0;
    if (!r->p.emulated && r->p.memory_limit)
        entered = tl_cgroup_enter(&r->cg, why, sizeof why) == 0;
    rc = tl_setup(r, err, errlen);
    if (!rc) {
        struct stat st;
        if (!r->p.emulated && fstat(r->sh[0].rd.f[0].fd, &st) == 0)
            snprintf(r->blk_dev, sizeof r->blk_dev, "%u:%u", major(st.st_dev), minor(st.st_dev));
        /* Every anonymous mapping written once before any thread starts: a
         * calloc'd array first read maps the shared zero page, and the first
         * write to it then is a copy-on-write fault whose TLB flush
         * interrupts the other CPU — the query thread's — with an IPI (found
         * in a hybrid run: the worker's inserts into the segment cache's
         * arrays made all-hit queries slower than their CPU trace). It
         * also charges those arrays before the cgroup limit is set. */
        r->populated = tl_populate_anon();
        tl_drop_caches(r);
        tl_memory_limit(r, entered, why);
        tl_real_readahead(r);
        r->io_read0 = tl_proc_io_read_bytes();
        if (tl_blk_stat(r->blk_dev, &r->blk_reads0, &r->blk_ticks0)) r->blk_dev[0] = 0;
        r->slow_static = tl_slow_static_bytes(r);
        if (tl_thread_create(&r->sampler, tl_sampler, r) == 0) r->sampler_started = 1;
        void *(*worker)(void *) = cfg == TL_APCACHE_BASE_PREFETCH ? tl_base_prefetch_worker
                                  : cfg == TL_APCACHE_HYBRID      ? tl_hybrid_worker
                                  : cfg == TL_APCACHE_HYBRID_PREFETCH ? tl_prefetch_worker
                                                                          : NULL;
        for (uint32_t i = 0; i < r->nshards; i++) {
            tl_shard *s = &r->sh[i];
            if (worker && tl_thread_create(&s->wk, worker, s) == 0) s->wk_started = 1;
            if (tl_thread_create(&s->qt, tl_query_thread, s) == 0) s->qt_started = 1;
            if (r->pin && s->wk_started) tl_pin_thread(s->wk, s->wk_cpu);
            if (r->pin && s->qt_started) tl_pin_thread(s->qt, s->qt_cpu);
            if ((worker && !s->wk_started) || !s->qt_started) {
                rc = tl_err(err, errlen, TIERLAB_ENOMEM, "cannot start the threads of shard %u", i);
                atomic_store(&r->failed, 1);
                tl_wake_all(r);
                break;
            }
        }
        uint32_t threads = r->sampler_started;
        for (uint32_t i = 0; i < r->nshards; i++)
            threads += (uint32_t)r->sh[i].wk_started + (uint32_t)r->sh[i].qt_started;
        tl_gate_open(r, threads);
        for (uint32_t i = 0; i < r->nshards; i++)
            if (r->sh[i].qt_started) pthread_join(r->sh[i].qt, NULL);
        r->t_end = tl_now_ns();
        for (uint32_t i = 0; i < r->nshards; i++) { /* a worker may wait for a query thread */
            tl_shard *s = &r->sh[i];
            pthread_mutex_lock(&s->mu);
            atomic_store(&s->qt_finished, 1);
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
        atomic_store(&r->sampler_quit, 1);
        for (uint32_t i = 0; i < r->nshards; i++)
            if (r->sh[i].wk_started) pthread_join(r->sh[i].wk, NULL);
        if (r->sampler_started) pthread_join(r->sampler, NULL);
        r->io_read1 = tl_proc_io_read_bytes();
        if (tl_blk_stat(r->blk_dev, &r->blk_reads1, &r->blk_ticks1)) r->blk_dev[0] = 0;
        for (uint32_t i = 0; i < r->nshards && !rc; i++)
            if (r->sh[i].rc) rc = tl_err(err, errlen, r->sh[i].rc, "%s", r->sh[i].err);
        if (!rc || rc == TIERLAB_ECANCELED) {
            int wrc = tl_report_write(r, err, errlen);
            if (wrc) rc = wrc;
        }
        if (!rc && atomic_load(&r->stop)) rc = TIERLAB_ECANCELED;
    }
    if (entered) tl_cgroup_leave(&r->cg);
    tl_run_free(r);
    free(r);
    return rc;
}
