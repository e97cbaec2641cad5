/* fuzz_common.h — what the file-based libFuzzer harnesses share (fuzz_index.c,
 * fuzz_build.c, fuzz_workload.c): a scratch directory for the files an input
 * becomes, writing them, and XXH64 for fixing up index headers. Header-only
 * (static functions), public API only: the harnesses see what a caller sees.
 *
 * The scratch directory is made once per process under $TIERLAB_FUZZ_TMP
 * when that is set (the pytest driver points it at a folder it removes, so
 * a crash, which skips atexit, leaves nothing behind), else under /dev/shm
 * when it is writable (tmpfs: fsync and rename cost nothing, so a build or
 * an open per input stays cheap), else $TMPDIR or /tmp; removed at exit. */
#ifndef TL_FUZZ_COMMON_H
#define TL_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A broken contract: say which, then abort (libFuzzer keeps the input). */
__attribute__((format(printf, 1, 2), noreturn)) static inline void tl_fz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\ntierlab fuzz: contract broken: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    abort();
}
#define TL_FZ_CHECK(cond, ...) \
    do {                        \
        if (!(cond)) tl_fz_fail(__VA_ARGS__); \
    } while (0)

static char tl_fz_dir_path[512];

static inline int tl_fz_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static inline void tl_fz_cleanup(void) {
    if (tl_fz_dir_path[0]) nftw(tl_fz_dir_path, tl_fz_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch directory (made on first use; aborts if none can be made). */
static inline const char *tl_fz_dir(void) {
    if (tl_fz_dir_path[0]) return tl_fz_dir_path;
    const char *mine = getenv("TIERLAB_FUZZ_TMP"), *tmp = getenv("TMPDIR");
    const char *bases[] = {mine && mine[0] ? mine : "/dev/shm", "/dev/shm",
                           tmp && tmp[0] ? tmp : "/tmp", "/tmp"};
    for (size_t i = 0; i < sizeof bases / sizeof *bases; i++) {
        if (access(bases[i], W_OK) != 0) continue;
        snprintf(tl_fz_dir_path, sizeof tl_fz_dir_path, "%s/tierlab-fuzz-XXXXXX", bases[i]);
        if (mkdtemp(tl_fz_dir_path)) {
            atexit(tl_fz_cleanup);
            return tl_fz_dir_path;
        }
    }
    tl_fz_dir_path[0] = 0;
    abort();
}

/* dir/name into buf (aborts when it does not fit: a harness bug). */
static inline const char *tl_fz_path(char *buf, size_t cap, const char *name) {
    if ((size_t)snprintf(buf, cap, "%s/%s", tl_fz_dir(), name) >= cap) abort();
    return buf;
}

/* Replace the file at path with len bytes of data (aborts on an I/O error:
 * the harness, not the code under test, failed). */
static inline void tl_fz_write(const char *path, const void *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) abort();
    const uint8_t *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w <= 0) abort();
        p += w, len -= (size_t)w;
    }
    close(fd);
}

static inline uint32_t tl_fz_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t tl_fz_le64(const uint8_t *p) {
    return (uint64_t)tl_fz_le32(p) | (uint64_t)tl_fz_le32(p + 4) << 32;
}

static inline void tl_fz_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* XXH64 (the public xxHash specification), written again here rather than
 * taken from the library: the harness checks the library, so it shares no
 * code with it beyond tierlab.h. */
#define TL_FZ_P1 11400714785074694791ULL
#define TL_FZ_P2 14029467366897019727ULL
#define TL_FZ_P3 1609587929392839161ULL
#define TL_FZ_P4 9650029242287828579ULL
#define TL_FZ_P5 2870177450012600261ULL

static inline uint64_t tl_fz_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t tl_fz_round(uint64_t acc, uint64_t lane) {
    return tl_fz_rotl(acc + lane * TL_FZ_P2, 31) * TL_FZ_P1;
}

static inline uint64_t tl_fz_xxh64(const uint8_t *p, size_t n, uint64_t seed) {
    size_t i = 0;
    uint64_t h;
    if (n >= 32) {
        uint64_t v[4] = {seed + TL_FZ_P1 + TL_FZ_P2, seed + TL_FZ_P2, seed, seed - TL_FZ_P1};
        for (; i + 32 <= n; i += 32)
            for (int j = 0; j < 4; j++) v[j] = tl_fz_round(v[j], tl_fz_le64(p + i + 8 * j));
        h = tl_fz_rotl(v[0], 1) + tl_fz_rotl(v[1], 7) + tl_fz_rotl(v[2], 12) + tl_fz_rotl(v[3], 18);
        for (int j = 0; j < 4; j++) h = (h ^ tl_fz_round(0, v[j])) * TL_FZ_P1 + TL_FZ_P4;
    } else {
        h = seed + TL_FZ_P5;
    }
    h += n;
    for (; i + 8 <= n; i += 8) {
        h ^= tl_fz_round(0, tl_fz_le64(p + i));
        h = tl_fz_rotl(h, 27) * TL_FZ_P1 + TL_FZ_P4;
    }
    if (i + 4 <= n) {
        h ^= (uint64_t)tl_fz_le32(p + i) * TL_FZ_P1;
        h = tl_fz_rotl(h, 23) * TL_FZ_P2 + TL_FZ_P3;
        i += 4;
    }
    for (; i < n; i++) {
        h ^= p[i] * TL_FZ_P5;
        h = tl_fz_rotl(h, 11) * TL_FZ_P1;
    }
    h ^= h >> 33;
    h *= TL_FZ_P2;
    h ^= h >> 29;
    h *= TL_FZ_P3;
    h ^= h >> 32;
    return h;
}

static inline void *tl_fz_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    return p;
}

#endif /* TL_FUZZ_COMMON_H */
