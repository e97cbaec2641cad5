/* dram.c — tier `dram`: the file copied into anonymous memory, populated up
 * front and mlock'd when RLIMIT_MEMLOCK allows (so it cannot be paged out). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tiers.h"

static int tl_dram_place(const char *path, const char *arg, tl_region *r, char *err,
                         size_t errlen) {
    (void)arg;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (err) snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        return TIERLAB_EIO;
    }
    size_t len = (size_t)st.st_size;
    void *m = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (m == MAP_FAILED) {
        if (err) snprintf(err, errlen, "cannot allocate %zu bytes of DRAM for %s: %s", len, path,
                          strerror(errno));
        return TIERLAB_ENOMEM;
    }
    r->map = m;
    r->map_len = len ? len : 1;
    int rc = tl_copy_into(path, m, len, err, errlen);
    if (rc) return rc;
    mprotect(m, r->map_len, PROT_READ);
    r->data = m;
    r->len = len;
    char why[160] = "";
    r->rep.locked = tl_try_mlock(m, r->map_len, why, sizeof why);
    r->rep.resident_bytes = tl_resident_bytes(m, len);
    r->rep.honoured = 1;
    snprintf(r->rep.detail, sizeof r->rep.detail,
             "copied into anonymous memory (MAP_POPULATE); %s; %.1f%% resident (mincore)",
             r->rep.locked ? "mlock'd" : why,
             len ? 100.0 * (double)r->rep.resident_bytes / (double)len : 100.0);
    return 0;
}

const tl_tier tl_tier_dram = {"dram", 0, tl_dram_place};
