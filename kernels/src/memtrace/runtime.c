/* runtime.c — the memory-trace recorder of the tracing build (traces/memtrace.md).
 *
 * The query and codec sources of the tracing build are compiled by clang with
 * -fsanitize-coverage=func,trace-loads,trace-stores: before every load and
 * store of 1, 2, 4, 8 or 16 bytes the compiler calls __sanitizer_cov_loadN /
 * __sanitizer_cov_storeN with its address (clang's SanitizerCoverage
 * documentation, "Tracing data flow": "-fsanitize-coverage=trace-loads" /
 * "trace-stores"). What it cannot see is reported by hand: 32-byte AVX loads
 * and stores (TL_MT_LOAD / TL_MT_STORE next to the intrinsics), and the C
 * library's memcpy, memmove, memset, memcmp and bcmp (below, through the
 * linker's --wrap). -mprefer-vector-width=128 keeps the compiler's own
 * vectorised loops within the 16 bytes the hooks cover. This file is never
 * instrumented itself.
 *
 * Contract:
 *  - one recording thread; every record is {address, query, size, kind,
 *    region}, appended in program order between query_begin and query_end;
 *  - the region is that of the registered range holding the access's first
 *    byte (TL_MT_REGION in the kernels), else TIERLAB_REGION_OTHER;
 *  - hand-reported spans longer than TL_MT_CHUNK bytes become one record per
 *    TL_MT_CHUNK bytes (a copy: load then store per chunk);
 *  - the byte budget keeps whole queries: a query whose records would take
 *    the file past max_bytes is cut off, its records removed, and recording
 *    stops (flags TIERLAB_MEMTRACE_BUDGET_HIT).
 * Every function sits in the section tlmt_text, so a cross-check against an
 * independent tracer (valgrind's lackey) can leave the recorder's own
 * accesses out by instruction address (tierlab_memtrace_text). Hooks are
 * hidden: the instrumented code calls them directly, not through the PLT
 * (whose GOT loads would otherwise show up as data accesses). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memtrace.h"

#define TL_MT_FN __attribute__((section("tlmt_text"), visibility("hidden")))
#define TL_MT_API __attribute__((section("tlmt_text")))
#define TL_MT_LOCAL __attribute__((section("tlmt_text")))
#define TL_MT_CAP 65536 /* records buffered between writes (1 MiB) */
#define TL_MT_RANGES 64 /* registered ranges at a time; more are region other */
#define TL_MT_CHUNK 32  /* bytes per record of a hand-reported span */

/* A registered range, or (in the lookup cache) a gap between ranges. */
typedef struct tl_mt_range {
    uintptr_t lo, len;
    int region;
} tl_mt_range;

static struct {
    int on;    /* recording the current query */
    int active; /* between query_begin and query_end */
    uint32_t query;
    uint32_t n; /* records buffered */
    tl_mt_range hit[2]; /* the intervals of the last two lookups (ranges or gaps) */
    int nr;
    tl_mt_range r[TL_MT_RANGES]; /* sorted by address, not overlapping */
    int fd;      /* -1: no trace open */
    int over;    /* the current query ran past the budget */
    int full;    /* the budget is spent: nothing more is recorded */
    int io_errno;
    uint64_t off;    /* bytes in the file */
    uint64_t qstart; /* file offset where the current query's records start */
    tierlab_memtrace_header h;
    tierlab_memtrace_record buf[TL_MT_CAP];
} tl_mt = {.fd = -1};

extern const char __start_tlmt_text[], __stop_tlmt_text[];

TL_MT_API void tierlab_memtrace_text(uint64_t *lo, uint64_t *hi) {
    if (lo) *lo = (uint64_t)(uintptr_t)__start_tlmt_text;
    if (hi) *hi = (uint64_t)(uintptr_t)__stop_tlmt_text;
}

/* --- registry of ranges ------------------------------------------------------------------ */

TL_MT_API size_t tierlab_memtrace_ranges(uint64_t *lo, uint64_t *len, uint8_t *region,
                                         size_t max) {
    for (size_t i = 0; i < (size_t)tl_mt.nr && i < max; i++) {
        lo[i] = tl_mt.r[i].lo;
        len[i] = tl_mt.r[i].len;
        region[i] = (uint8_t)tl_mt.r[i].region;
    }
    return (size_t)tl_mt.nr;
}

/* Registration keeps the ranges sorted; a range that overlaps one already
 * registered (and is not the same start) is left out, so every address has
 * one region. Either empties the lookup cache. */
TL_MT_FN void tl_mt_register(int region, const void *p, size_t n) {
    uintptr_t lo = (uintptr_t)p;
    if (!p || !n || region < 0 || region >= TIERLAB_REGIONS) return;
    memset(tl_mt.hit, 0, sizeof tl_mt.hit);
    int i = 0;
    while (i < tl_mt.nr && tl_mt.r[i].lo < lo) i++;
    if (i < tl_mt.nr && tl_mt.r[i].lo == lo) { /* registered again: its new size and region */
        if (i + 1 < tl_mt.nr && lo + n > tl_mt.r[i + 1].lo) return;
        tl_mt.r[i].len = n;
        tl_mt.r[i].region = region;
        return;
    }
    if (tl_mt.nr == TL_MT_RANGES || (i > 0 && tl_mt.r[i - 1].lo + tl_mt.r[i - 1].len > lo) ||
        (i < tl_mt.nr && lo + n > tl_mt.r[i].lo))
        return;
    memmove(&tl_mt.r[i + 1], &tl_mt.r[i], (size_t)(tl_mt.nr - i) * sizeof tl_mt.r[0]);
    tl_mt.r[i] = (tl_mt_range){lo, n, region};
    tl_mt.nr++;
}

TL_MT_FN void tl_mt_unregister(const void *p) {
    memset(tl_mt.hit, 0, sizeof tl_mt.hit);
    for (int i = 0; i < tl_mt.nr; i++)
        if (tl_mt.r[i].lo == (uintptr_t)p) {
            memmove(&tl_mt.r[i], &tl_mt.r[i + 1], (size_t)(tl_mt.nr - i - 1) * sizeof tl_mt.r[0]);
            tl_mt.nr--;
            return;
        }
}

/* The interval holding a: its range, or the gap around it (region other),
 * found by binary search over the sorted ranges. */
TL_MT_LOCAL __attribute__((noinline)) static tl_mt_range tl_mt_find(uintptr_t a) {
    int lo = 0, hi = tl_mt.nr; /* first range starting above a: hi */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (tl_mt.r[mid].lo <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && a - tl_mt.r[lo - 1].lo < tl_mt.r[lo - 1].len) return tl_mt.r[lo - 1];
    uintptr_t start = lo > 0 ? tl_mt.r[lo - 1].lo + tl_mt.r[lo - 1].len : 0;
    uintptr_t end = lo < tl_mt.nr ? tl_mt.r[lo].lo : UINTPTR_MAX;
    return (tl_mt_range){start, end - start, TIERLAB_REGION_OTHER};
}

/* Region of address a: two compares when a lies in one of the last two
 * intervals looked up (an access stream alternates between few of them:
 * a block and the decode buffer, the heap and the cursors). */
static inline __attribute__((always_inline)) uint8_t tl_mt_region_of(uintptr_t a) {
    if (a - tl_mt.hit[0].lo < tl_mt.hit[0].len) return (uint8_t)tl_mt.hit[0].region;
    tl_mt_range r = a - tl_mt.hit[1].lo < tl_mt.hit[1].len ? tl_mt.hit[1] : tl_mt_find(a);
    tl_mt.hit[1] = tl_mt.hit[0];
    tl_mt.hit[0] = r;
    return (uint8_t)r.region;
}

/* --- the file ------------------------------------------------------------------------------ */

TL_MT_LOCAL static int tl_mt_write_all(uint64_t at, const void *p, size_t len) {
    const char *c = p;
    while (len) {
        ssize_t w = pwrite(tl_mt.fd, c, len, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            tl_mt.io_errno = w < 0 ? errno : EIO;
            return -1;
        }
        c += w, at += (uint64_t)w, len -= (size_t)w;
    }
    return 0;
}

/* Write the buffered records; past the budget the query is marked over and
 * recording stops (query_end removes what it wrote). */
TL_MT_LOCAL __attribute__((noinline)) static void tl_mt_flush(void) {
    uint64_t bytes = (uint64_t)tl_mt.n * sizeof(tierlab_memtrace_record);
    if (tl_mt.h.max_bytes && tl_mt.off + bytes > tl_mt.h.max_bytes) {
        tl_mt.over = 1;
        tl_mt.on = 0;
    } else if (bytes && !tl_mt.io_errno) {
        if (tl_mt_write_all(tl_mt.off, tl_mt.buf, (size_t)bytes)) tl_mt.on = 0;
        else tl_mt.off += bytes;
    }
    tl_mt.n = 0;
}

static inline __attribute__((always_inline)) void tl_mt_rec(uintptr_t a, uint32_t size,
                                                             uint8_t kind) {
    if (__builtin_expect(!tl_mt.on, 0)) return;
    if (__builtin_expect(tl_mt.n == TL_MT_CAP, 0)) {
        tl_mt_flush();
        if (!tl_mt.on) return;
    }
    tierlab_memtrace_record *r = &tl_mt.buf[tl_mt.n++];
    r->addr = a;
    r->query = tl_mt.query;
    r->size = (uint16_t)size;
    r->kind = kind;
    r->region = tl_mt_region_of(a);
}

/* --- the compiler's hooks (clang SanitizerCoverage, trace-loads / trace-stores) ------------- */

#define TL_MT_HOOK(N, T)                                                                  \
    TL_MT_FN void __sanitizer_cov_load##N(T *p) {                                         \
        tl_mt_rec((uintptr_t)p, N, TIERLAB_ACCESS_LOAD);                                  \
    }                                                                                     \
    TL_MT_FN void __sanitizer_cov_store##N(T *p) {                                        \
        tl_mt_rec((uintptr_t)p, N, TIERLAB_ACCESS_STORE);                                 \
    }
TL_MT_HOOK(1, uint8_t)
TL_MT_HOOK(2, uint16_t)
TL_MT_HOOK(4, uint32_t)
TL_MT_HOOK(8, uint64_t)
TL_MT_HOOK(16, __int128)
#undef TL_MT_HOOK

/* --- reports by hand -------------------------------------------------------------------- */

TL_MT_FN void tl_mt_access(const void *p, size_t n, int kind) {
    uintptr_t a = (uintptr_t)p;
    for (; n > TL_MT_CHUNK; n -= TL_MT_CHUNK, a += TL_MT_CHUNK)
        tl_mt_rec(a, TL_MT_CHUNK, (uint8_t)kind);
    if (n) tl_mt_rec(a, (uint32_t)n, (uint8_t)kind);
}

static inline __attribute__((always_inline)) void tl_mt_copy(void *d, const void *s, size_t n) {
    uintptr_t a = (uintptr_t)s, b = (uintptr_t)d;
    for (; n; a += TL_MT_CHUNK, b += TL_MT_CHUNK) {
        uint32_t c = n < TL_MT_CHUNK ? (uint32_t)n : TL_MT_CHUNK;
        tl_mt_rec(a, c, TIERLAB_ACCESS_LOAD);
        tl_mt_rec(b, c, TIERLAB_ACCESS_STORE);
        n -= c;
    }
}

/* The library's memcpy, memmove, memset, memcmp and bcmp, as the tracing
 * library is linked with --wrap for each: the calls the compiler left as
 * calls (sizes not known at compile time, long runs, loops it recognised as
 * a copy or a fill) are reported here, then done by the C library. Copies
 * the compiler expands into loads and stores are instrumented instead. */
void *__real_memcpy(void *d, const void *s, size_t n);
void *__real_memmove(void *d, const void *s, size_t n);
void *__real_memset(void *d, int c, size_t n);
int __real_memcmp(const void *a, const void *b, size_t n);

TL_MT_FN void *__wrap_memcpy(void *d, const void *s, size_t n) {
    if (tl_mt.on) tl_mt_copy(d, s, n);
    return __real_memcpy(d, s, n);
}

TL_MT_FN void *__wrap_memmove(void *d, const void *s, size_t n) {
    if (tl_mt.on) tl_mt_copy(d, s, n);
    return __real_memmove(d, s, n);
}

TL_MT_FN void *__wrap_memset(void *d, int c, size_t n) {
    if (tl_mt.on) tl_mt_access(d, n, TIERLAB_ACCESS_STORE);
    return __real_memset(d, c, n);
}

/* memcmp reads both up to the first byte that differs (reported so). */
TL_MT_FN int __wrap_memcmp(const void *a, const void *b, size_t n) {
    if (!tl_mt.on) return __real_memcmp(a, b, n);
    const unsigned char *x = a, *y = b;
    size_t m = 0;
    while (m < n && x[m] == y[m]) m++;
    size_t used = m < n ? m + 1 : n;
    tl_mt_access(a, used, TIERLAB_ACCESS_LOAD);
    tl_mt_access(b, used, TIERLAB_ACCESS_LOAD);
    return m < n ? (int)x[m] - (int)y[m] : 0;
}

TL_MT_FN int __wrap_bcmp(const void *a, const void *b, size_t n) { return __wrap_memcmp(a, b, n); }

/* --- the API (tierlab.h) ------------------------------------------------------------------- */

TL_MT_LOCAL static int tl_mt_fail(char *err, size_t errlen, int code, const char *what) {
    if (err && errlen) snprintf(err, errlen, "%s", what);
    return code;
}

TL_MT_API int tierlab_memtrace_open(const char *path, const tierlab_memtrace_header *h,
                                    char *err, size_t errlen) {
    if (!path || !h || h->every == 0)
        return tl_mt_fail(err, errlen, TIERLAB_EINVAL, "memtrace: bad arguments");
    if (tl_mt.fd >= 0) return tl_mt_fail(err, errlen, TIERLAB_EINVAL, "memtrace: a trace is open");
    if (h->max_bytes && h->max_bytes < TIERLAB_MEMTRACE_HEADER_BYTES)
        return tl_mt_fail(err, errlen, TIERLAB_EINVAL,
                          "memtrace: the byte budget is below the header's 256 bytes");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        if (err && errlen) snprintf(err, errlen, "%s: cannot create (%s)", path, strerror(errno));
        return TIERLAB_EIO;
    }
    tl_mt.fd = fd;
    tl_mt.h = *h;
    memcpy(tl_mt.h.magic, "TLMTRACE", 8);
    tl_mt.h.version = TIERLAB_MEMTRACE_VERSION;
    tl_mt.h.header_bytes = TIERLAB_MEMTRACE_HEADER_BYTES;
    tl_mt.h.record_bytes = sizeof(tierlab_memtrace_record);
    tl_mt.h.records = tl_mt.h.queries_traced = 0;
    tl_mt.h.flags = 0;
    if (!tl_mt.h.line_bytes) tl_mt.h.line_bytes = 64;
    memset(tl_mt.h.reserved, 0, sizeof tl_mt.h.reserved);
    tl_mt.h.stack_lo = tl_mt.h.stack_hi = 0;
    pthread_attr_t at;
    void *sa;
    size_t ss;
    if (pthread_getattr_np(pthread_self(), &at) == 0) {
        if (pthread_attr_getstack(&at, &sa, &ss) == 0) {
            tl_mt.h.stack_lo = (uint64_t)(uintptr_t)sa;
            tl_mt.h.stack_hi = (uint64_t)(uintptr_t)sa + ss;
        }
        pthread_attr_destroy(&at);
    }
    tl_mt.on = tl_mt.over = tl_mt.full = 0;
    tl_mt.io_errno = 0;
    tl_mt.n = 0;
    tl_mt.off = TIERLAB_MEMTRACE_HEADER_BYTES;
    if (tl_mt_write_all(0, &tl_mt.h, sizeof tl_mt.h)) {
        if (err && errlen) snprintf(err, errlen, "%s: cannot write (%s)", path, strerror(tl_mt.io_errno));
        close(fd);
        tl_mt.fd = -1;
        return TIERLAB_EIO;
    }
    return 0;
}

TL_MT_API int tierlab_memtrace_query_begin(uint32_t query) {
    if (tl_mt.fd < 0 || tl_mt.full || tl_mt.io_errno) return 0;
    tl_mt.query = query;
    tl_mt.qstart = tl_mt.off;
    tl_mt.n = 0;
    tl_mt.over = 0;
    tl_mt.on = tl_mt.active = 1;
    return 1;
}

TL_MT_API int tierlab_memtrace_query_end(void) {
    if (tl_mt.fd < 0 || !tl_mt.active) return 0;
    tl_mt.on = tl_mt.active = 0;
    tl_mt_flush();
    if (tl_mt.over || tl_mt.io_errno) {
        if (ftruncate(tl_mt.fd, (off_t)tl_mt.qstart) && !tl_mt.io_errno) tl_mt.io_errno = errno;
        tl_mt.off = tl_mt.qstart;
        if (tl_mt.over) tl_mt.h.flags |= TIERLAB_MEMTRACE_BUDGET_HIT;
        tl_mt.full = 1;
        tl_mt.over = 0;
        return 0;
    }
    tl_mt.h.records += (tl_mt.off - tl_mt.qstart) / sizeof(tierlab_memtrace_record);
    tl_mt.h.queries_traced++;
    return 1;
}

TL_MT_API int tierlab_memtrace_close(tierlab_memtrace_header *out, char *err, size_t errlen) {
    if (tl_mt.fd < 0) return tl_mt_fail(err, errlen, TIERLAB_EINVAL, "memtrace: no trace open");
    if (tl_mt.active) tierlab_memtrace_query_end();
    int rc = 0;
    if (!tl_mt.io_errno) tl_mt_write_all(0, &tl_mt.h, sizeof tl_mt.h);
    if (!tl_mt.io_errno && fsync(tl_mt.fd)) tl_mt.io_errno = errno;
    if (close(tl_mt.fd) && !tl_mt.io_errno) tl_mt.io_errno = errno;
    if (tl_mt.io_errno) {
        if (err && errlen)
            snprintf(err, errlen, "memtrace: cannot write the trace (%s)", strerror(tl_mt.io_errno));
        rc = TIERLAB_EIO;
    }
    tl_mt.fd = -1;
    if (out) *out = tl_mt.h;
    return rc;
}

_Static_assert(sizeof(tierlab_memtrace_record) == 16, "the record is 16 bytes");
_Static_assert(sizeof(tierlab_memtrace_header) == TIERLAB_MEMTRACE_HEADER_BYTES,
               "the header is 256 bytes");
