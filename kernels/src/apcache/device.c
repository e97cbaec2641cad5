/* device.c — the one storage device layer of the APCache runtime. Every read
 * of index postings from storage goes through tl_device_read.
 *
 * Real mode: preadv, counted.
 * Emulated mode (a storage spec of sim-configs/): preadv from the host file
 * (kept in the host page cache: it is the emulated medium), then a sleep
 * until the request's completion time under the device timing rule shared
 * with the SimPy model (sim-configs/README.md):
 *   cost = positioning + bytes / read_bandwidth_bytes_per_s
 *   positioning = 0 when the request starts at the device address where the
 *                 device's previous request ended, else read_latency_ns
 *                 (+ seek_ns when the spec has it);
 *   queue_depth requests are in service at once: a request takes the slot
 *   that frees first and positions there, but the transfers of all slots
 *   share the one read bandwidth (one at a time, in arrival order):
 *   start = max(now, slot free); transfer from max(start + positioning,
 *   previous transfer's end); completion = that + bytes / bandwidth.
 * Device addresses: every file of every shard gets its own range of one
 * address space (tl_device_address), so "where the previous request ended"
 * is one comparison and duplicated shards sit apart on the device. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "apcache.h"

uint64_t tl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleeping is precise to a few microseconds only with a small timer slack
 * (the default, 50 us, would add ~60 us to every emulated request; see
 * tl_thread_setup): sleep until spin_ns before the deadline, then spin. */
#define TL_LATE_NS 2000u /* a read returning later than this past its plan is late */
static void tl_sleep_spin(uint64_t t_ns, uint64_t spin_ns) {
    uint64_t now = tl_now_ns();
    if (now >= t_ns) return;
    if (t_ns - now > spin_ns) {
        uint64_t w = t_ns - spin_ns;
        struct timespec ts = {(time_t)(w / 1000000000u), (long)(w % 1000000000u)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
    while (tl_now_ns() < t_ns) {
    }
}

void tl_sleep_until(uint64_t t_ns) { tl_sleep_spin(t_ns, TL_SPIN_NS); }

void tl_thread_setup(void) { prctl(PR_SET_TIMERSLACK, 1ul, 0ul, 0ul, 0ul); }

uint32_t tl_readahead_run_pages(uint64_t readahead_bytes, uint64_t cap_pages) {
    uint64_t ra = readahead_bytes / TL_PAGE, quarter = cap_pages / 4;
    if (cap_pages && quarter < ra) ra = quarter;
    return ra ? (uint32_t)ra : 1;
}

int tl_mutex_init_adaptive(pthread_mutex_t *m) {
    pthread_mutexattr_t a;
    if (pthread_mutexattr_init(&a)) return -1;
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP); /* best effort */
    int rc = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return rc;
}

int tl_device_init(tl_device *d, int emulated, double bytes_per_s, double latency_ns,
                   double seek_ns, uint32_t queue_depth) {
    memset(d, 0, sizeof *d);
    d->emulated = emulated;
    if (emulated) {
        if (!(bytes_per_s > 0) || latency_ns < 0 || seek_ns < 0 || queue_depth == 0)
            return TIERLAB_EINVAL;
        d->ns_per_byte = 1e9 / bytes_per_s;
        d->position_ns = (uint64_t)(latency_ns + seek_ns + 0.5);
        d->queue_depth = queue_depth;
        d->slot_free = calloc(queue_depth, sizeof *d->slot_free);
        if (!d->slot_free) return TIERLAB_ENOMEM;
    }
    d->last_end = UINT64_MAX;
    d->spin_ns = TL_SPIN_NS;
    if (tl_mutex_init_adaptive(&d->mu)) {
        free(d->slot_free);
        return TIERLAB_ENOMEM;
    }
    return 0;
}

void tl_device_destroy(tl_device *d) {
    pthread_mutex_destroy(&d->mu);
    free(d->slot_free);
    d->slot_free = NULL;
}

uint64_t tl_device_plan(tl_device *d, uint64_t addr, uint64_t len, uint64_t now) {
    uint64_t xfer = (uint64_t)((double)len * d->ns_per_byte + 0.5);
    uint64_t pos = addr != d->last_end ? d->position_ns : 0;
    uint32_t best = 0;
    for (uint32_t i = 1; i < d->queue_depth; i++)
        if (d->slot_free[i] < d->slot_free[best]) best = i;
    uint64_t start = d->slot_free[best] > now ? d->slot_free[best] : now;
    uint64_t xstart = start + pos > d->xfer_free ? start + pos : d->xfer_free;
    uint64_t done = xstart + xfer;
    d->slot_free[best] = done;
    d->xfer_free = done;
    d->last_end = addr + len;
    atomic_fetch_add_explicit(&d->busy_ns, pos + xfer, memory_order_relaxed);
    return done;
}

int tl_device_read(tl_device *d, int fd, struct iovec *iov, int iovcnt, uint64_t off,
                   uint64_t addr, uint64_t len) {
    uint64_t done = 0;
    if (d->emulated) {
        pthread_mutex_lock(&d->mu);
        done = tl_device_plan(d, addr, len, tl_now_ns());
        pthread_mutex_unlock(&d->mu);
    }
    /* Read everything asked for; past the end of the file the buffers are
     * zero-filled (the last page of a file is partial). */
    uint64_t got = 0;
    while (iovcnt > 0) {
        ssize_t r = preadv(fd, iov, iovcnt > IOV_MAX ? IOV_MAX : iovcnt, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return TIERLAB_EIO;
        size_t left = (size_t)r;
        got += left;
        while (iovcnt > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            iovcnt--;
        }
        if (iovcnt > 0) {
            if (r == 0) { /* end of file: zero the rest */
                for (int i = 0; i < iovcnt; i++) memset(iov[i].iov_base, 0, iov[i].iov_len);
                break;
            }
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    atomic_fetch_add_explicit(&d->reads, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->bytes, len, memory_order_relaxed);
    if (d->emulated) {
        if (tl_now_ns() > done + TL_LATE_NS)
            atomic_fetch_add_explicit(&d->late_preads, 1, memory_order_relaxed);
        tl_sleep_spin(done, d->spin_ns);
        uint64_t t = tl_now_ns();
        if (t > done + TL_LATE_NS) {
            atomic_fetch_add_explicit(&d->late_reads, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&d->late_ns, t - done, memory_order_relaxed);
        }
    }
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

void tl_pin_thread(pthread_t t, int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(t, sizeof set, &set); /* best effort: a failure leaves it free */
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
    if (!rc) rc = tierlab_cache_new(TIERLAB_POLICY_LRU, frames_bytes / TL_PAGE,
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
