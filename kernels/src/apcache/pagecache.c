/* pagecache.c — the emulated page cache of the APCache runtime.
 *
 * In emulated-device mode page faults cannot be delayed, so postings are not
 * read through the index mmap: they are read through this cache, which plays
 * the OS page cache in DRAM. It holds 4 KiB frames of the shards' DID and
 * freq files in memory the runtime owns (`cap` bytes, the page-cache cap of
 * the configuration), LRU over pages with the shared tierlab_cache (the
 * SimPy model uses the same code). A missing page is read from the device
 * with a readahead window like Linux's (and the model's): one request for the
 * run of consecutive missing pages starting at it, at most `readahead`
 * bytes, ending at the end of the file or at the first page already cached.
 * Counting: an access to a resident page (or to one whose read is in flight)
 * is a hit, an access that issues a read is a miss; pages brought in by
 * readahead count when they are accessed, normally as hits.
 *
 * Concurrency: one mutex. Frames of a run being read are reserved and marked
 * loading, then the mutex is dropped for the device read (so other threads
 * keep hitting while the device is busy); threads that want a loading page
 * wait on `loaded`. A loading page is never chosen for eviction. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "apcache.h"

#define TL_NOFRAME UINT32_MAX

int tl_pcache_init(tl_pcache *pc, tl_device *dev, uint64_t nkeys, uint64_t cap_bytes,
                   uint64_t readahead_bytes) {
    memset(pc, 0, sizeof *pc);
    pc->dev = dev;
    pc->nkeys = nkeys;
    uint64_t frames = cap_bytes / TL_PAGE;
    if (frames > nkeys) frames = nkeys; /* more would never be used */
    if (frames < 1) frames = 1;
    if (frames >= TL_NOFRAME) return TIERLAB_EINVAL;
    pc->nframes = frames;
    /* A run never takes more than a quarter of the frames, so a thread never
     * needs to evict pages of its own run. */
    pc->max_run = tl_readahead_run_pages(readahead_bytes, frames);
    /* populated up front: a first-touch fault per frame inside the read
     * (~1-2 us each, 32 per readahead window) would make the pread outlast
     * the emulated service time; the OS page cache has no such cost */
    pc->frames = mmap(NULL, frames * TL_PAGE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (pc->frames == MAP_FAILED) {
        pc->frames = NULL;
        return TIERLAB_ENOMEM;
    }
    pc->frame_of = malloc(nkeys * sizeof *pc->frame_of);
    pc->loading = calloc(nkeys, 1);
    pc->free_frames = malloc(frames * sizeof *pc->free_frames);
    if (!pc->frame_of || !pc->loading || !pc->free_frames) return TIERLAB_ENOMEM;
    for (uint64_t i = 0; i < nkeys; i++) pc->frame_of[i] = TL_NOFRAME;
    for (uint64_t i = 0; i < frames; i++) pc->free_frames[i] = (uint32_t)(frames - 1 - i);
    pc->nfree = frames;
    int rc = tierlab_cache_new(TIERLAB_POLICY_LRU, nkeys, frames, &pc->pol);
    if (rc) return rc;
    if (tl_mutex_init_adaptive(&pc->mu) || pthread_cond_init(&pc->loaded, NULL))
        return TIERLAB_ENOMEM;
    pc->inited = 1;
    return 0;
}

void tl_pcache_destroy(tl_pcache *pc) {
    if (pc->inited) {
        pthread_mutex_destroy(&pc->mu);
        pthread_cond_destroy(&pc->loaded);
    }
    tierlab_cache_free(pc->pol);
    if (pc->frames) munmap(pc->frames, pc->nframes * TL_PAGE);
    free(pc->frame_of);
    free(pc->loading);
    free(pc->free_frames);
    memset(pc, 0, sizeof *pc);
}

/* A free frame, evicting the LRU page if needed; TL_NOFRAME when the victim
 * is being read by another thread (the caller waits or shortens its run).
 * Called with the mutex held. */
static uint32_t tl_take_frame(tl_pcache *pc) {
    if (pc->nfree) return pc->free_frames[--pc->nfree];
    uint64_t v, vsize;
    if (tierlab_cache_victim(pc->pol, &v, &vsize) != 0 || pc->loading[v]) return TL_NOFRAME;
    tierlab_cache_evict(pc->pol);
    uint32_t f = pc->frame_of[v];
    pc->frame_of[v] = TL_NOFRAME;
    return f;
}

int tl_pcache_read(tl_pcache *pc, const tl_file_ref *f, uint64_t off, uint64_t len,
                   tl_sink_fn sink, void *ctx, uint64_t *last_page, tl_pstats *ps) {
    if (len == 0) return 0;
    if (off + len > f->len) return TIERLAB_EINVAL;
    uint64_t p0 = off / TL_PAGE, p1 = (off + len - 1) / TL_PAGE;
    uint64_t file_pages = (f->len + TL_PAGE - 1) / TL_PAGE;
    struct iovec iov[TL_MAX_RA_PAGES];
    int rc = 0;
    pthread_mutex_lock(&pc->mu);
    for (uint64_t p = p0; p <= p1 && !rc; p++) {
        uint64_t key = f->key0 + p;
        int counted = last_page && *last_page == p;
        for (;;) {
            uint32_t fr = pc->frame_of[key];
            if (fr != TL_NOFRAME && pc->loading[key]) { /* another thread reads it */
                if (!counted) ps->hits++, counted = 1;
                pthread_cond_wait(&pc->loaded, &pc->mu);
                continue;
            }
            if (fr != TL_NOFRAME) {
                if (!counted) ps->hits++, counted = 1;
                tierlab_cache_touch(pc->pol, key, TIERLAB_NEVER);
                uint64_t a = p == p0 ? off % TL_PAGE : 0;
                uint64_t z = p == p1 ? (off + len - 1) % TL_PAGE + 1 : TL_PAGE;
                sink(ctx, p * TL_PAGE + a - off, pc->frames + (uint64_t)fr * TL_PAGE + a, z - a);
                break;
            }
            /* Miss: reserve frames for the run of missing pages from p. */
            uint32_t run = 0;
            while (run < pc->max_run && p + run < file_pages &&
                   pc->frame_of[key + run] == TL_NOFRAME) {
                uint32_t nf = tl_take_frame(pc);
                if (nf == TL_NOFRAME) break;
                pc->frame_of[key + run] = nf;
                pc->loading[key + run] = 1;
                tierlab_cache_insert(pc->pol, key + run, 1, TIERLAB_NEVER);
                iov[run].iov_base = pc->frames + (uint64_t)nf * TL_PAGE;
                iov[run].iov_len = TL_PAGE;
                run++;
            }
            if (run == 0) { /* every frame is being read by others: wait */
                pthread_cond_wait(&pc->loaded, &pc->mu);
                continue;
            }
            if (!counted) ps->misses++, counted = 1;
            pc->reads++;
            pthread_mutex_unlock(&pc->mu);
            uint64_t bytes = (uint64_t)run * TL_PAGE;
            if (p * TL_PAGE + bytes > f->len) bytes = f->len - p * TL_PAGE;
            rc = tl_device_read(pc->dev, f->fd, iov, (int)run, p * TL_PAGE,
                                f->dev_addr + p * TL_PAGE, bytes);
            pthread_mutex_lock(&pc->mu);
            for (uint32_t i = 0; i < run; i++) pc->loading[key + i] = 0;
            pthread_cond_broadcast(&pc->loaded);
            if (rc) { /* drop the pages we could not read */
                for (uint32_t i = 0; i < run; i++) {
                    pc->free_frames[pc->nfree++] = pc->frame_of[key + i];
                    pc->frame_of[key + i] = TL_NOFRAME;
                    tierlab_cache_remove(pc->pol, key + i);
                }
                break;
            }
            /* loop: the page is resident now (or was evicted meanwhile: read again) */
        }
    }
    pthread_mutex_unlock(&pc->mu);
    if (last_page) *last_page = p1;
    return rc;
}

int tl_pcache_holds(tl_pcache *pc, const tl_file_ref *f, uint64_t off, uint64_t len) {
    if (!len) return 1;
    uint64_t p0 = off / TL_PAGE, p1 = (off + len - 1) / TL_PAGE;
    int held = 1;
    pthread_mutex_lock(&pc->mu);
    for (uint64_t p = p0; p <= p1 && held; p++) held = pc->frame_of[f->key0 + p] != TL_NOFRAME;
    pthread_mutex_unlock(&pc->mu);
    return held;
}

uint64_t tl_pcache_used_bytes(tl_pcache *pc) {
    pthread_mutex_lock(&pc->mu);
    uint64_t used = (pc->nframes - pc->nfree) * TL_PAGE;
    pthread_mutex_unlock(&pc->mu);
    return used;
}

/* ---- a hit's cost (tierlab_apcache_page_hit_ns) -------------------------------- */

/* The median of the probes' few passes (sorts v: an insertion sort). */
static double tl_median(double *v, uint32_t n) {
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

static void tl_probe_copy(void *ctx, uint64_t pos, const uint8_t *p, size_t n) {
    memcpy((uint8_t *)ctx + pos, p, n);
}

int tierlab_apcache_page_hit_ns(uint64_t access_bytes, uint32_t passes, double *ns) {
    enum { PAGES = 4096 }; /* 16 MiB of frames: beyond the L2, as a page cache is */
    if (!ns || passes == 0 || access_bytes == 0 || access_bytes > TL_PAGE) return TIERLAB_EINVAL;
    tl_device dev;
    int rc = tl_device_init(&dev, 0, 0, 0, 0, 0); /* never read: every page is resident */
    if (rc) return rc;
    tl_pcache pc;
    rc = tl_pcache_init(&pc, &dev, PAGES, (uint64_t)PAGES * TL_PAGE, TL_PAGE);
    uint8_t *buf = malloc(TL_PAGE);
    double *pass_ns = calloc(passes, sizeof *pass_ns);
    if (!rc && (!buf || !pass_ns)) rc = TIERLAB_ENOMEM;
    for (uint64_t k = 0; !rc && k < PAGES; k++) { /* resident, as after their reads */
        pc.frame_of[k] = pc.free_frames[--pc.nfree];
        memset(pc.frames + (uint64_t)pc.frame_of[k] * TL_PAGE, (int)k, TL_PAGE);
        tierlab_cache_insert(pc.pol, k, 1, TIERLAB_NEVER);
    }
    tl_file_ref f = {.fd = -1, .len = (uint64_t)PAGES * TL_PAGE};
    tl_pstats ps = {0, 0};
    /* consecutive blocks, as a query decodes a posting list; never across a page */
    uint64_t per_page = TL_PAGE / access_bytes, n = (uint64_t)PAGES * per_page;
    for (uint32_t r = 0; !rc && r <= passes; r++) { /* pass 0 warms */
        uint64_t t0 = tl_now_ns(), last = UINT64_MAX;
        for (uint64_t i = 0; i < n && !rc; i++)
            rc = tl_pcache_read(&pc, &f, (i / per_page) * TL_PAGE + (i % per_page) * access_bytes,
                                access_bytes, tl_probe_copy, buf, &last, &ps);
        if (r) pass_ns[r - 1] = (double)(tl_now_ns() - t0) / (double)n;
    }
    if (!rc) *ns = tl_median(pass_ns, passes);
    free(buf);
    free(pass_ns);
    tl_pcache_destroy(&pc);
    tl_device_destroy(&dev);
    return rc;
}

/* ---- a miss's bookkeeping (tierlab_apcache_page_miss_ns) ------------------------ */

static void tl_probe_skip(void *ctx, uint64_t pos, const uint8_t *p, size_t n) {
    (void)ctx, (void)pos, (void)p, (void)n;
}

int tierlab_apcache_page_miss_ns(uint32_t run_pages, uint32_t passes, double *ns) {
    enum { FRAMES = 4096, FILE_PAGES = 2 * FRAMES };
    if (!ns || passes == 0 || passes > 1000 || run_pages == 0 || run_pages > TL_MAX_RA_PAGES)
        return TIERLAB_EINVAL;
    int fd = memfd_create("tierlab-miss-probe", MFD_CLOEXEC);
    if (fd < 0) return TIERLAB_EIO;
    int rc = ftruncate(fd, (off_t)FILE_PAGES * TL_PAGE) ? TIERLAB_EIO : 0;
    uint8_t *page = calloc(1, TL_PAGE);
    if (!rc && !page) rc = TIERLAB_ENOMEM;
    for (uint64_t p = 0; !rc && p < FILE_PAGES; p++) /* the medium, resident */
        if (pwrite(fd, page, TL_PAGE, (off_t)(p * TL_PAGE)) != TL_PAGE) rc = TIERLAB_EIO;
    tl_device dev;
    int dev_inited = 0;
    if (!rc) { /* a device that takes no time */
        rc = tl_device_init(&dev, 1, 1e18, 0, 0, 1);
        dev_inited = !rc;
    }
    tl_pcache pc;
    memset(&pc, 0, sizeof pc);
    if (!rc) rc = tl_pcache_init(&pc, &dev, FILE_PAGES, (uint64_t)FRAMES * TL_PAGE,
                                 (uint64_t)run_pages * TL_PAGE);
    double *miss = calloc(passes, sizeof *miss);
    struct iovec *iov = calloc(run_pages, sizeof *iov);
    if (!rc && (!miss || !iov)) rc = TIERLAB_ENOMEM;
    tl_file_ref f = {.fd = fd, .len = (uint64_t)FILE_PAGES * TL_PAGE};
    tl_pstats ps = {0, 0};
    uint64_t runs = FILE_PAGES / run_pages;
    for (uint32_t r = 0; !rc && r <= passes; r++) { /* pass 0 fills the cache */
        /* every run misses (the file is twice the cache, read in order); each
         * is timed next to its preadv alone into frames as scattered (inside
         * the device's service time in a real run, so not bookkeeping),
         * the two in alternating order: the second finds the source warm */
        double sum = 0;
        for (uint64_t i = 0; i < runs && !rc; i++) {
            for (uint32_t k = 0; k < run_pages; k++) {
                iov[k].iov_base = pc.frames + ((i * run_pages + k) * 7919 % FRAMES) * TL_PAGE;
                iov[k].iov_len = TL_PAGE;
            }
            uint64_t t[3];
            for (int step = 0; step < 2 && !rc; step++) {
                t[step] = tl_now_ns();
                if ((step == 0) == (i % 2 == 0))
                    rc = tl_pcache_read(&pc, &f, i * run_pages * TL_PAGE, TL_PAGE, tl_probe_skip,
                                        NULL, NULL, &ps);
                else if (preadv(fd, iov, (int)run_pages, (off_t)(i * run_pages * TL_PAGE)) < 0)
                    rc = TIERLAB_EIO;
            }
            t[2] = tl_now_ns();
            double first = (double)(t[1] - t[0]), second = (double)(t[2] - t[1]);
            sum += i % 2 == 0 ? first - second : second - first;
        }
        if (r) miss[r - 1] = sum / (double)runs;
    }
    if (!rc) {
        double m = tl_median(miss, passes);
        *ns = m > 0 ? m : 0;
    }
    free(miss);
    free(iov);
    free(page);
    if (pc.inited) tl_pcache_destroy(&pc);
    if (dev_inited) tl_device_destroy(&dev);
    close(fd);
    return rc;
}
