/* storage.c — tier `storage`: the index file mmap'd read-only through the
 * page cache of its block device. Also the page-cache helpers of the
 * measurement protocol (posix_fadvise DONTNEED, mincore residency). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiers.h"

static int tl_storage_place(const char *path, const char *arg, tl_region *r, char *err,
                            size_t errlen) {
    (void)arg;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        if (err) snprintf(err, errlen, "cannot open %s: %s", path, strerror(e));
        return TIERLAB_EIO;
    }
    size_t len = (size_t)st.st_size;
    void *m = len ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    close(fd);
    if (m == MAP_FAILED) {
        if (err) snprintf(err, errlen, "cannot mmap %s: %s", path, strerror(errno));
        return TIERLAB_EIO;
    }
    r->map = m;
    r->map_len = len;
    r->data = m;
    r->len = len;
    r->rep.resident_bytes = tl_resident_bytes(m, len);
    r->rep.honoured = 1;
    snprintf(r->rep.detail, sizeof r->rep.detail,
             "mmap (MAP_SHARED, read-only) of %s through the page cache; %.1f%% resident at "
             "open (mincore)",
             path, len ? 100.0 * (double)r->rep.resident_bytes / (double)len : 100.0);
    return 0;
}

const tl_tier tl_tier_storage = {"storage", 0, tl_storage_place};

int tierlab_file_dontneed(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return TIERLAB_EIO;
    fdatasync(fd); /* dirty pages cannot be dropped */
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return rc == 0 ? 0 : TIERLAB_EIO;
}

int tierlab_file_resident(const char *path, uint64_t *resident, uint64_t *total) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        if (fd >= 0) close(fd);
        return TIERLAB_EIO;
    }
    size_t len = (size_t)st.st_size;
    uint64_t res = 0;
    if (len) {
        void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return TIERLAB_EIO;
        }
        res = tl_resident_bytes(m, len);
        munmap(m, len);
    }
    close(fd);
    if (resident) *resident = res;
    if (total) *total = len;
    return 0;
}
