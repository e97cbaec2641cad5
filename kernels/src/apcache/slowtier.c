/* slowtier.c — memory for the segment cache on the slow tier (docs/apcache.md,
 * docs/engine.md "Placement"): the same tier names as index placement, but an
 * empty, writable region instead of a copy of a file.
 *   dram     anonymous memory, populated, mlock'd when allowed;
 *   pm:PATH  a temporary file in directory PATH, sized, mmap'd shared and
 *            populated; unlinked as soon as it is mapped, so nothing is left
 *            behind even if the process is killed. On an fsdax mount (Optane
 *            App Direct) loads and stores go to persistent memory; elsewhere
 *            the file lives in the page cache (DRAM speed) and is mlock'd so
 *            that a memory limit cannot write it back and drop it;
 *   numa:N   anonymous memory bound to node N with mbind(MPOL_BIND) before
 *            first touch (CXL memory and Optane in KMEM mode are CPU-less
 *            nodes), verified page by page with move_pages.
 * The report sentence says what was done and verified. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "apcache.h"
#include "memtrace/memtrace.h"

#define TL_MPOL_BIND 2
#define TL_MAX_NODE 1024
#define TL_TMPFS_MAGIC 0x01021994

static int tl_lock(void *m, size_t len, char *why, size_t whylen) {
    if (mlock(m, len) == 0) return 1;
    snprintf(why, whylen, "not mlock'd (%s; raise RLIMIT_MEMLOCK)", strerror(errno));
    return 0;
}

static int tl_slow_pm(const char *dir, size_t len, tl_slow *s, char *err, size_t errlen) {
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return tl_err(err, errlen, TIERLAB_EINVAL, "slow tier pm:%s: not an existing directory",
                      dir);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/tierlab-segcache-%ld-XXXXXX", dir, (long)getpid());
    int fd = mkstemp(path);
    if (fd < 0)
        return tl_err(err, errlen, TIERLAB_EIO, "slow tier pm:%s: cannot create a file: %s", dir,
                      strerror(errno));
    void *m = MAP_FAILED;
    if (ftruncate(fd, (off_t)len) == 0)
        m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    int e = errno;
    struct statfs fs;
    int tmpfs = fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == TL_TMPFS_MAGIC;
    close(fd);
    unlink(path);
    if (m == MAP_FAILED)
        return tl_err(err, errlen, TIERLAB_EIO, "slow tier pm:%s: cannot size or map %zu bytes: %s",
                      dir, len, strerror(e));
    s->mem = m;
    s->len = len;
    s->anon = tmpfs; /* tmpfs pages are shared memory: they count in RSS */
    char why[160] = "mlock'd";
    s->locked = tl_lock(m, len, why, sizeof why);
    snprintf(s->detail, sizeof s->detail,
             "pm:%s: a %zu-byte file mmap'd shared (unlinked once mapped) on %s; %s; real "
             "persistent memory only on an fsdax mount",
             dir, len, tmpfs ? "tmpfs (DRAM)" : "a page-cache filesystem (DRAM speed)", why);
    return 0;
}

static int tl_slow_numa(const char *arg, size_t len, tl_slow *s, char *err, size_t errlen) {
    char *end;
    errno = 0;
    long node = strtol(arg, &end, 10);
    if (errno || *end || end == arg || node < 0 || node >= TL_MAX_NODE)
        return tl_err(err, errlen, TIERLAB_EINVAL, "slow tier numa:%s: the node must be 0..%d",
                      arg, TL_MAX_NODE - 1);
    char sys[64];
    struct stat st;
    snprintf(sys, sizeof sys, "/sys/devices/system/node/node%ld", node);
    if (stat(sys, &st) != 0)
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "slow tier numa:%ld: no such NUMA node on this machine (%s missing)", node,
                      sys);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return tl_err(err, errlen, TIERLAB_ENOMEM, "slow tier numa:%ld: cannot map %zu bytes",
                      node, len);
    s->mem = m;
    s->len = len;
    s->anon = 1;
    unsigned long mask[TL_MAX_NODE / (8 * sizeof(unsigned long))] = {0};
    mask[node / (8 * (long)sizeof(unsigned long))] |= 1ul << (node % (8 * (long)sizeof(unsigned long)));
    int bound = syscall(SYS_mbind, m, len, TL_MPOL_BIND, mask, (unsigned long)TL_MAX_NODE + 1, 0) == 0;
    memset(m, 0, len); /* first touch places the pages */
    long psz = sysconf(_SC_PAGESIZE);
    size_t pages = (len + (size_t)psz - 1) / (size_t)psz, on = 0, chunk = 4096;
    void **addrs = malloc(chunk * sizeof *addrs);
    int *status = malloc(chunk * sizeof *status);
    int verified = addrs && status;
    for (size_t p0 = 0; verified && p0 < pages; p0 += chunk) {
        size_t n = pages - p0 < chunk ? pages - p0 : chunk;
        for (size_t i = 0; i < n; i++) addrs[i] = (char *)m + (p0 + i) * (size_t)psz;
        if (syscall(SYS_move_pages, 0, n, addrs, NULL, status, 0) != 0) verified = 0;
        for (size_t i = 0; verified && i < n; i++) on += status[i] == node;
    }
    free(addrs);
    free(status);
    char why[160] = "mlock'd";
    s->locked = tl_lock(m, len, why, sizeof why);
    snprintf(s->detail, sizeof s->detail,
             "numa:%ld: anonymous memory, %s; %s; %s", node,
             bound ? "bound with mbind(MPOL_BIND)" : "mbind failed",
             verified ? (on == pages ? "move_pages: every page on the node"
                                     : "move_pages: some pages elsewhere")
                      : "move_pages could not verify",
             why);
    return 0;
}

static int tl_slow_dram(size_t len, tl_slow *s, char *err, size_t errlen) {
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (m == MAP_FAILED)
        return tl_err(err, errlen, TIERLAB_ENOMEM, "slow tier dram: cannot map %zu bytes", len);
    s->mem = m;
    s->len = len;
    s->anon = 1;
    char why[160] = "mlock'd";
    s->locked = tl_lock(m, len, why, sizeof why);
    snprintf(s->detail, sizeof s->detail, "dram: anonymous memory (MAP_POPULATE); %s", why);
    return 0;
}

int tl_slow_alloc(const char *spec, size_t len, tl_slow *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    if (len == 0) len = TL_PAGE;
    snprintf(s->spec, sizeof s->spec, "%s", spec);
    int rc = !strcmp(spec, "dram")                 ? tl_slow_dram(len, s, err, errlen)
             : !strncmp(spec, "pm:", 3) && spec[3]   ? tl_slow_pm(spec + 3, len, s, err, errlen)
             : !strncmp(spec, "numa:", 5) && spec[5] ? tl_slow_numa(spec + 5, len, s, err, errlen)
                                                     : 1;
    if (rc != 1) {
        if (!rc) TL_MT_REGION(TIERLAB_REGION_SEGMENT_CACHE, s->mem, s->len);
        return rc;
    }
    return tl_err(err, errlen, TIERLAB_EINVAL,
                  "unknown slow tier '%s' (dram, pm:PATH, numa:N)", spec);
}

void tl_slow_free(tl_slow *s) {
    if (s->mem) {
        TL_MT_UNREGION(s->mem);
        if (s->locked) munlock(s->mem, s->len);
        munmap(s->mem, s->len);
    }
    s->mem = NULL;
}
