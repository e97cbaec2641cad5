/* numa.c — tier `numa:N`: anonymous memory bound to NUMA node N with
 * mbind(MPOL_BIND) before its pages are touched, then filled from the file.
 * CXL memory and Optane in KMEM mode show up as CPU-less nodes, so this is
 * how the index reaches them. Every page is then checked with move_pages
 * (query mode: no pages move). Raw syscalls, so no libnuma is needed. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tiers.h"

#define TL_MPOL_BIND 2
#define TL_MPOL_MF_STRICT 1
#define TL_MPOL_MF_MOVE 2
#define TL_MAX_NODE 1024

static int tl_numa_place(const char *path, const char *arg, tl_region *r, char *err,
                         size_t errlen) {
    char *end;
    errno = 0;
    long node = strtol(arg, &end, 10);
    if (errno || *end || end == arg || node < 0 || node >= TL_MAX_NODE) {
        if (err) snprintf(err, errlen, "numa:%s: the node must be a number 0..%d", arg, TL_MAX_NODE - 1);
        return TIERLAB_EINVAL;
    }
    char sys[64];
    snprintf(sys, sizeof sys, "/sys/devices/system/node/node%ld", node);
    struct stat st;
    if (stat(sys, &st) != 0) {
        if (err) snprintf(err, errlen, "numa:%ld: no such NUMA node on this machine (%s missing)", node, sys);
        return TIERLAB_EINVAL;
    }
    if (stat(path, &st) != 0) {
        if (err) snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        return TIERLAB_EIO;
    }
    size_t len = (size_t)st.st_size, maplen = len ? len : 1;
    void *m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        if (err) snprintf(err, errlen, "cannot allocate %zu bytes for %s: %s", len, path, strerror(errno));
        return TIERLAB_ENOMEM;
    }
    r->map = m;
    r->map_len = maplen;
    unsigned long mask[TL_MAX_NODE / (8 * sizeof(unsigned long))] = {0};
    mask[node / (8 * (long)sizeof(unsigned long))] |= 1ul << (node % (8 * (long)sizeof(unsigned long)));
    char bound[200];
    int bind_ok = syscall(SYS_mbind, m, maplen, TL_MPOL_BIND, mask, (unsigned long)TL_MAX_NODE + 1,
                          TL_MPOL_MF_STRICT | TL_MPOL_MF_MOVE) == 0;
    if (bind_ok) snprintf(bound, sizeof bound, "bound to node %ld with mbind(MPOL_BIND)", node);
    else snprintf(bound, sizeof bound, "mbind to node %ld failed: %s", node, strerror(errno));
    int rc = tl_copy_into(path, m, len, err, errlen); /* first touch: pages land on the node */
    if (rc) return rc;
    mprotect(m, maplen, PROT_READ);
    r->data = m;
    r->len = len;
    char why[160] = "";
    r->rep.locked = tl_try_mlock(m, maplen, why, sizeof why);

    /* Verify every page with move_pages(pid 0, nodes NULL): status = node. */
    long psz = sysconf(_SC_PAGESIZE);
    size_t pages = (maplen + (size_t)psz - 1) / (size_t)psz, on = 0, checked = 0, chunk = 4096;
    void **addrs = malloc(chunk * sizeof *addrs);
    int *status = malloc(chunk * sizeof *status);
    int verify_ok = addrs && status;
    char vtxt[200] = "";
    for (size_t p0 = 0; verify_ok && p0 < pages; p0 += chunk) {
        size_t n = pages - p0 < chunk ? pages - p0 : chunk;
        for (size_t i = 0; i < n; i++) addrs[i] = (char *)m + (p0 + i) * (size_t)psz;
        if (syscall(SYS_move_pages, 0, n, addrs, NULL, status, 0) != 0) {
            snprintf(vtxt, sizeof vtxt, "move_pages failed: %s", strerror(errno));
            verify_ok = 0;
            break;
        }
        for (size_t i = 0; i < n; i++) on += status[i] == node;
        checked += n;
    }
    free(addrs);
    free(status);
    if (verify_ok)
        snprintf(vtxt, sizeof vtxt, "move_pages: %zu of %zu pages on node %ld", on, checked, node);
    r->rep.resident_bytes = tl_resident_bytes(m, len);
    r->rep.honoured = bind_ok && verify_ok && on == pages;
    r->rep.numa_node = r->rep.honoured ? (int)node : -1;
    snprintf(r->rep.detail, sizeof r->rep.detail, "anonymous memory %s, filled from the file; %s; %s",
             bound, vtxt, r->rep.locked ? "mlock'd" : why);
    return 0;
}

const tl_tier tl_tier_numa = {"numa", 1, tl_numa_place};
