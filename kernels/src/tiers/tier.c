/* tier.c — the single table of placement tiers, request parsing, and helpers
 * the tiers share (copying a file in, residency, mlock). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tiers.h"

static const tl_tier *const tl_tiers[] = {&tl_tier_storage, &tl_tier_dram, &tl_tier_pm,
                                          &tl_tier_numa};
#define TL_NTIERS (sizeof tl_tiers / sizeof tl_tiers[0])

size_t tierlab_tier_count(void) { return TL_NTIERS; }

const char *tierlab_tier_name(size_t i) { return i < TL_NTIERS ? tl_tiers[i]->name : NULL; }

const char *tierlab_tier_at(size_t i, int *takes_arg) {
    if (i >= TL_NTIERS) return NULL;
    if (takes_arg) *takes_arg = tl_tiers[i]->arg;
    return tl_tiers[i]->name;
}

int tierlab_tier_find(const char *name) {
    if (name == NULL) return -1;
    for (size_t i = 0; i < TL_NTIERS; i++)
        if (strcmp(tl_tiers[i]->name, name) == 0) return (int)i;
    return -1;
}

static int tl_errf(char *err, size_t errlen, int code, const char *fmt, const char *a,
                   const char *b) {
    if (err && errlen) snprintf(err, errlen, fmt, a, b);
    return code;
}

int tl_place(const char *path, const char *request, tl_region *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    const char *colon = strchr(request, ':');
    size_t nlen = colon ? (size_t)(colon - request) : strlen(request);
    const tl_tier *t = NULL;
    for (size_t i = 0; i < TL_NTIERS; i++)
        if (strlen(tl_tiers[i]->name) == nlen && strncmp(tl_tiers[i]->name, request, nlen) == 0)
            t = tl_tiers[i];
    if (!t)
        return tl_errf(err, errlen, TIERLAB_EINVAL,
                       "unknown tier '%s' (tiers: storage, dram, pm:PATH, numa:N)%s", request, "");
    if (t->arg && (!colon || !colon[1]))
        return tl_errf(err, errlen, TIERLAB_EINVAL, "tier '%s' needs an argument: %s:...",
                       request, t->name);
    if (!t->arg && colon)
        return tl_errf(err, errlen, TIERLAB_EINVAL, "tier '%s' takes no argument (%s)", request,
                       t->name);
    snprintf(r->rep.tier, sizeof r->rep.tier, "%s", t->name);
    snprintf(r->rep.request, sizeof r->rep.request, "%s", request);
    r->rep.locked = -1;
    r->rep.numa_node = -1;
    int rc = t->place(path, colon ? colon + 1 : NULL, r, err, errlen);
    if (rc) {
        tl_region_release(r);
        return rc;
    }
    r->rep.bytes = r->len;
    return 0;
}

void tl_region_release(tl_region *r) {
    if (r->map) {
        if (r->rep.locked == 1) munlock(r->map, r->map_len);
        munmap(r->map, r->map_len);
    }
    r->map = NULL;
    r->data = NULL;
}

int tl_copy_into(const char *path, uint8_t *dst, size_t len, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tl_errf(err, errlen, TIERLAB_EIO, "cannot open %s: %s", path, strerror(errno));
    size_t done = 0;
    while (done < len) {
        ssize_t got = pread(fd, dst + done, len - done, (off_t)done);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int e = got < 0 ? errno : EIO;
            close(fd);
            return tl_errf(err, errlen, TIERLAB_EIO, "cannot read %s: %s", path, strerror(e));
        }
        done += (size_t)got;
    }
    close(fd);
    return 0;
}

uint64_t tl_resident_bytes(const void *addr, size_t len) {
    long psz = sysconf(_SC_PAGESIZE);
    size_t pages = (len + (size_t)psz - 1) / (size_t)psz;
    if (!pages) return 0;
    unsigned char *vec = malloc(pages);
    if (!vec) return 0;
    uint64_t res = 0;
    if (mincore((void *)addr, len, vec) == 0)
        for (size_t i = 0; i < pages; i++) res += vec[i] & 1;
    free(vec);
    res *= (uint64_t)psz;
    return res > len ? len : res;
}

int tl_try_mlock(const void *addr, size_t len, char *why, size_t whylen) {
    if (mlock(addr, len) == 0) return 1;
    snprintf(why, whylen, "mlock failed: %s (raise RLIMIT_MEMLOCK)", strerror(errno));
    return 0;
}
