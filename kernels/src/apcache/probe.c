/* probe.c — the real device as the runtime's reads see it.
 *
 * tierlab validate calibrates the model's `real` device with this probe (no
 * runtime result enters the model): a miss on the real device is not an
 * O_DIRECT read but a readahead(2) of a run into the page cache (the
 * kernel's read-around off), pages charged to a memory cgroup at its limit
 * (so each read first reclaims as much as it brings in), then touched
 * through the index mapping (page faults). Measured here on a 2-vCPU VM:
 * a 128 KiB run took ~150 us this way against ~115 us with O_DIRECT.
 *
 * tierlab_apcache_read_probe does exactly that — tl_real_pages, the function
 * the runtime's reads call — on a scratch file, at random page-aligned
 * offsets, inside its own child cgroup capped at cap_bytes of page cache
 * (when one is writable). Reads that fill the cap come first and are not
 * timed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
