/* probe.c — the calibration probes: what the model is calibrated with,
 * measured with the runtime's own code (tierlab.h lists them):
 *   tierlab_apcache_read_probe      a real-device miss as the runtime reads it
 *   tierlab_apcache_handoff_ns/_samples  the hand-off between two threads
 *   tierlab_apcache_copy_rate       a worker's copy into segments
 *   tierlab_apcache_page_hit_ns     a hit in the emulated page cache
 *   tierlab_apcache_page_miss_ns    a miss's bookkeeping in it
 * They sit above the runtime's layers (apcache.h: device, page cache, terms,
 * cgroup) and nothing below calls them.
 *
 * The read probe: tierlab validate calibrates the model's `real` device with
 * it (no runtime result enters the model). A miss on the real device is not an
 * O_DIRECT read but a readahead(2) of a run into the page cache (the
 * kernel's read-around off), pages charged to a memory cgroup at its limit
 * (so each read first reclaims as much as it brings in), then touched
 * through the index mapping (page faults). Reclaim, page-cache insertion and
 * faults make a run read this way slower than an O_DIRECT read of it, so the
 * model is calibrated with this path, not with a raw device benchmark.
 *
 * tierlab_apcache_read_probe does exactly that — tl_real_pages, the function
 * the runtime's reads call — on a scratch file, at random page-aligned
 * offsets, inside its own child cgroup capped at cap_bytes of page cache
 * (when one is writable). Reads that fill the cap come first and are not
 * timed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "apcache.h"

static uint64_t tl_probe_rand(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int tierlab_apcache_read_probe(const char *path, uint64_t run_bytes, uint64_t cap_bytes,
                               uint32_t reads, uint64_t seed, double *ns, char *how,
                               size_t howlen, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (how && howlen) how[0] = 0;
    if (!path || !ns || reads == 0 || run_bytes < TL_PAGE || run_bytes > TL_MAX_RA_PAGES * TL_PAGE)
        return tl_err(err, errlen, TIERLAB_EINVAL, "read probe: a file, reads >= 1 and a run "
                      "of 4 KiB .. 1 MiB needed");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", path, strerror(e));
    }
    uint64_t pages = (uint64_t)st.st_size / TL_PAGE, run = run_bytes / TL_PAGE;
    if (pages < 4 * run || (uint64_t)st.st_size < 2 * cap_bytes) {
        close(fd);
        return tl_err(err, errlen, TIERLAB_EINVAL, "%s: too small for runs of %llu bytes and a "
                      "cap of %llu", path, (unsigned long long)run_bytes,
                      (unsigned long long)cap_bytes);
    }
    uint8_t *map = mmap(NULL, pages * TL_PAGE, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        close(fd);
        return tl_err(err, errlen, TIERLAB_EIO, "cannot mmap %s: %s", path, strerror(e));
    }
    madvise(map, pages * TL_PAGE, MADV_RANDOM);
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    tl_cgroup cg;
    memset(&cg, 0, sizeof cg);
    char why[1100] = "";
    int limited = 0;
    if (cap_bytes && tl_cgroup_enter(&cg, why, sizeof why) == 0) {
        tl_populate_anon();
        uint64_t limit = tl_cgroup_usage(&cg) + cap_bytes;
        limited = tl_cgroup_limit(&cg, limit, why, sizeof why) == 0;
        if (!limited) tl_cgroup_leave(&cg);
    }
    if (how && howlen && limited)
        snprintf(how, howlen, "cgroup v%d, page cache capped at %llu bytes", cg.version,
                 (unsigned long long)cap_bytes);
    else if (how && howlen)
        snprintf(how, howlen, "no memory cap: %s", cap_bytes ? why : "none asked");
    tl_file_ref f = {.fd = fd, .len = pages * TL_PAGE, .map = map, .ra_pages = (uint32_t)run};
    tl_pstats ps = {0, 0};
    uint64_t fill = cap_bytes / run_bytes + 1, rng = seed;
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < fill + reads; i++) {
        uint64_t off = tl_probe_rand(&rng) % (pages - run) * TL_PAGE;
        uint64_t t0 = tl_now_ns();
        tl_real_pages(&f, off, run_bytes, NULL, &ps);
        for (uint64_t p = 0; p < run; p++) sink += map[off + p * TL_PAGE];
        uint64_t t1 = tl_now_ns();
        if (i >= fill) ns[i - fill] = (double)(t1 - t0);
    }
    (void)sink;
    if (limited) tl_cgroup_leave(&cg);
    munmap(map, pages * TL_PAGE);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return 0;
}

/* ---- hand-off timing (tierlab_apcache_handoff_ns) ----------------------------- */

/* Two allowed CPUs for the probe's threads, as the runtime pins its query
 * thread and worker (emulated devices); -1 when fewer are allowed. */
static void tl_two_cpus(int *a, int *b) {
    cpu_set_t set;
    *a = *b = -1;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) {
            if (*a < 0) *a = c;
            else if (*b < 0) *b = c;
        }
    if (*b < 0) *a = -1;
}

typedef struct tl_handoff {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int waiting, gen, quit;
    _Atomic uint64_t woke_at;
    _Atomic int acked;
    int cpu; /* the waiter's CPU, or -1 */
} tl_handoff;

static void *tl_handoff_waiter(void *arg) {
    tl_thread_setup();
    tl_handoff *h = arg;
    tl_pin_thread(pthread_self(), h->cpu);
    pthread_mutex_lock(&h->mu);
    while (!h->quit) {
        int g = h->gen;
        h->waiting = 1;
        while (g == h->gen && !h->quit) pthread_cond_wait(&h->cv, &h->mu);
        h->waiting = 0;
        atomic_store(&h->woke_at, tl_now_ns());
        atomic_store(&h->acked, 1);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static int tl_cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int tierlab_apcache_handoff_samples(uint32_t n, double *wake_ns, double *signal_ns) {
    if (n == 0 || !wake_ns || !signal_ns) return TIERLAB_EINVAL;
    uint64_t *wake = malloc(n * sizeof *wake), *sig = malloc(n * sizeof *sig);
    tl_handoff h;
    memset(&h, 0, sizeof h);
    if (!wake || !sig || pthread_mutex_init(&h.mu, NULL) || pthread_cond_init(&h.cv, NULL)) {
        free(wake);
        free(sig);
        return TIERLAB_ENOMEM;
    }
    tl_thread_setup();
    int cpu_self, cpu_waiter;
    tl_two_cpus(&cpu_self, &cpu_waiter);
    cpu_set_t saved;
    int restore = cpu_self >= 0 && pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
    h.cpu = cpu_waiter;
    pthread_t t;
    int rc = pthread_create(&t, NULL, tl_handoff_waiter, &h) ? TIERLAB_ENOMEM : 0;
    if (!rc) tl_pin_thread(pthread_self(), cpu_self);
    for (uint32_t i = 0; i < n && !rc; i++) {
        for (;;) { /* the waiter is blocked in pthread_cond_wait */
            pthread_mutex_lock(&h.mu);
            int w = h.waiting;
            pthread_mutex_unlock(&h.mu);
            if (w) break;
        }
        tl_sleep_until(tl_now_ns() + 50000); /* let it sleep, as a worker waits */
        atomic_store(&h.acked, 0);
        uint64_t a = tl_now_ns();
        pthread_mutex_lock(&h.mu);
        h.gen++;
        uint64_t b = tl_now_ns();
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
        sig[i] = tl_now_ns() - a;
        while (!atomic_load(&h.acked)) {
        }
        uint64_t w = atomic_load(&h.woke_at);
        wake[i] = w > b ? w - b : 0;
    }
    if (!rc) {
        pthread_mutex_lock(&h.mu);
        h.quit = 1;
        pthread_cond_broadcast(&h.cv);
        pthread_mutex_unlock(&h.mu);
        pthread_join(t, NULL);
        qsort(wake, n, sizeof *wake, tl_cmp_u64);
        qsort(sig, n, sizeof *sig, tl_cmp_u64);
        for (uint32_t i = 0; i < n; i++) {
            wake_ns[i] = (double)wake[i];
            signal_ns[i] = (double)sig[i];
        }
    }
    if (restore) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
    free(wake);
    free(sig);
    return rc;
}

int tierlab_apcache_handoff_ns(uint32_t n, double *wake_ns, double *signal_ns) {
    if (n == 0 || !wake_ns || !signal_ns) return TIERLAB_EINVAL;
    double *w = malloc(n * sizeof *w), *s = malloc(n * sizeof *s);
    int rc = w && s ? tierlab_apcache_handoff_samples(n, w, s) : TIERLAB_ENOMEM;
    if (!rc) {
        *wake_ns = w[n / 2];
        *signal_ns = s[n / 2];
    }
    free(w);
    free(s);
    return rc;
}

/* ---- copy rate (tierlab_apcache_copy_rate) ------------------------------------------ */

int tierlab_apcache_copy_rate(uint64_t bytes, uint32_t reps, double *bytes_per_s) {
    const uint64_t frames_bytes = 1u << 20, seg = 32768;
    if (bytes < frames_bytes || reps == 0 || !bytes_per_s) return TIERLAB_EINVAL;
    uint64_t pages = bytes / TL_PAGE, nseg = (bytes + seg - 1) / seg;
    uint8_t *frames = malloc(frames_bytes), *mem = malloc(nseg * seg);
    uint8_t **segs = malloc(nseg * sizeof *segs);
    uint64_t *t = malloc(reps * sizeof *t);
    tierlab_cache *pol = NULL;
    int rc = frames && mem && segs && t ? 0 : TIERLAB_ENOMEM;
    if (!rc) rc = tierlab_cache_new(tierlab_policy_find("lru"), frames_bytes / TL_PAGE,
                                    frames_bytes / TL_PAGE, &pol);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    if (!rc) {
        memset(frames, 1, frames_bytes);
        for (uint64_t i = 0; i < frames_bytes / TL_PAGE; i++)
            tierlab_cache_insert(pol, i, 1, TIERLAB_NEVER);
        for (uint64_t s = 0; s < nseg; s++) segs[s] = mem + s * seg;
        memset(mem, 0, nseg * seg); /* mapped, as the runtime's segment cache is */
        for (uint32_t r = 0; r < reps; r++) {
            uint64_t a = tl_now_ns();
            for (uint64_t p = 0; p < pages; p++) {
                uint64_t key = p % (frames_bytes / TL_PAGE);
                pthread_mutex_lock(&mu);
                tierlab_cache_touch(pol, key, TIERLAB_NEVER);
                tl_chain_write(segs, seg, p * TL_PAGE, frames + key * TL_PAGE, TL_PAGE);
                pthread_mutex_unlock(&mu);
            }
            t[r] = tl_now_ns() - a;
        }
        qsort(t, reps, sizeof *t, tl_cmp_u64);
        *bytes_per_s = (double)(pages * TL_PAGE) * 1e9 / (double)(t[reps / 2] ? t[reps / 2] : 1);
    }
    tierlab_cache_free(pol);
    free(frames);
    free(mem);
    free(segs);
    free(t);
    return rc;
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
