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
     * (one per page of the readahead window) would make the pread outlast
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
    int rc = tierlab_cache_new(tierlab_policy_find("lru"), nkeys, frames, &pc->pol);
    if (rc) return rc;
    if (tl_mutex_init_adaptive(&pc->mu) || pthread_cond_init(&pc->loaded, NULL))
        return TIERLAB_ENOMEM;
    pc->inited = 1;
    return 0;
}

uint64_t tl_pcache_bytes(uint64_t nkeys, uint64_t frames) {
    tl_pcache *pc = NULL;
    return frames * (TL_PAGE + sizeof *pc->free_frames) +
           nkeys * (sizeof *pc->frame_of + sizeof *pc->loading) +
           tierlab_cache_bytes(tierlab_policy_find("lru"), nkeys);
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
