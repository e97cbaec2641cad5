/* shard.c — a shard's files: its own copy of the index directory (shard
 * i > 0 of a real-device run), opening the index on its tiers and the DID
 * and freq files for the device, and closing it all again. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

static int tl_copy_file(const char *src, const char *dst, char *err, size_t errlen) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = 0;
    char *buf = malloc(1 << 20);
    if (in < 0 || out < 0 || !buf) {
        rc = tl_err(err, errlen, TIERLAB_EIO, "cannot copy %s to %s: %s", src, dst, strerror(errno));
    } else {
        for (;;) {
            ssize_t n = read(in, buf, 1 << 20);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 || (n > 0 && write(out, buf, (size_t)n) != n)) {
                rc = tl_err(err, errlen, TIERLAB_EIO, "cannot copy %s: %s", src, strerror(errno));
                break;
            }
            if (n == 0) break;
        }
        if (!rc && fsync(out) != 0) rc = tl_err(err, errlen, TIERLAB_EIO, "fsync %s", dst);
    }
    free(buf);
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return rc;
}

static const char *const tl_index_names[] = {"dict.bin", "skip.bin", "dids.bin", "freqs.bin",
                                             "manifest.json"};

static void tl_remove_copy(const char *dir) {
    char p[PATH_MAX + 32];
    for (int f = 0; f < 5; f++) {
        snprintf(p, sizeof p, "%s/%s", dir, tl_index_names[f]);
        unlink(p);
    }
    rmdir(dir);
}

/* Shard i > 0 of a real-device run gets its own copy of the index directory,
 * next to the original: <parent>/.tierlab-shard-<pid>-<i> (removed at the end). */
int tl_shard_copy(tl_run *r, tl_shard *s, char *err, size_t errlen) {
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", r->index_dir);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (slash == parent) parent[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(parent, sizeof parent, ".");
    snprintf(s->dir, sizeof s->dir, "%s/.tierlab-shard-%ld-%u", parent, (long)getpid(), s->id);
    if (mkdir(s->dir, 0755) != 0)
        return tl_err(err, errlen, TIERLAB_EIO, "cannot create the shard copy %s: %s", s->dir,
                      strerror(errno));
    s->is_copy = 1;
    for (int f = 0; f < 5; f++) {
        char a[PATH_MAX + 32], b[PATH_MAX + 32];
        snprintf(a, sizeof a, "%s/%s", r->index_dir, tl_index_names[f]);
        snprintf(b, sizeof b, "%s/%s", s->dir, tl_index_names[f]);
        int rc = tl_copy_file(a, b, err, errlen);
        if (rc) return rc;
    }
    return 0;
}

int tl_shard_open(tl_run *r, tl_shard *s, uint64_t *dev_addr, uint64_t *key, char *err,
                  size_t errlen) {
    s->run = r;
    if (tl_mutex_init_adaptive(&s->mu) || pthread_cond_init(&s->cv, NULL))
        return tl_err(err, errlen, TIERLAB_ENOMEM, "cannot create a mutex");
    if (!s->is_copy) snprintf(s->dir, sizeof s->dir, "%s", r->index_dir);
    char place[800];
    const char *pd = r->p.place_dict[0] ? r->p.place_dict : r->p.slow_tier_placement;
    const char *ps = r->p.place_skip[0] ? r->p.place_skip : r->p.slow_tier_placement;
    snprintf(place, sizeof place, "dict=%s,skip=%s,did=storage,freq=storage", pd, ps);
    int rc = tierlab_index_open(s->dir, place, &s->ix, err, errlen);
    if (rc) return rc;
    s->rd.dev = &r->dev;
    s->rd.pc = r->p.emulated ? &r->pc : NULL;
    for (int k = 0; k < 2; k++) {
        int file = k ? TIERLAB_FILE_FREQS : TIERLAB_FILE_DIDS;
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", s->dir, tierlab_index_file_name(file));
        tl_file_ref *f = &s->rd.f[k];
        f->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (f->fd < 0) return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", path, strerror(errno));
        f->len = s->ix->r[file].len;
        f->map = s->ix->r[file].data;
        f->dev_addr = *dev_addr;
        f->key0 = *key;
        uint64_t pages = (f->len + TL_PAGE - 1) / TL_PAGE;
        *dev_addr += (pages + 256) * TL_PAGE; /* a gap: files never look contiguous */
        *key += pages;
    }
    return 0;
}

void tl_shard_close(tl_shard *s) {
    for (int i = 0; i < TIERLAB_QUERY_MAX_TERMS; i++) tl_src_free(&s->src[i]);
    tierlab_query_ctx_free(s->qctx);
    if (s->has_cache) tl_cache_state_free(&s->cs);
    tl_slow_free(&s->slow);
    for (int k = 0; k < 2; k++)
        if (s->rd.f[k].fd > 0) close(s->rd.f[k].fd);
    tierlab_index_close(s->ix);
    if (s->is_copy) tl_remove_copy(s->dir);
    free(s->rec);
    free(s->hits);
    free(s->missed);
    free(s->bypass);
    if (s->run) {
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
}
