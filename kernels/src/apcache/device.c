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
 * (the default, 50 us per prctl(2) PR_SET_TIMERSLACK, lets each emulated
 * request's sleep end up to that much late; see tl_thread_setup): sleep until
 * spin_ns before the deadline, then spin. */
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

/* ---- pinning --------------------------------------------------------------- */

void tl_pin_thread(pthread_t t, int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(t, sizeof set, &set); /* best effort: a failure leaves it free */
}
