/* io.c — small buffered writer/reader over file descriptors, so every write
 * error (ENOSPC, EIO) surfaces with the path and errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"

int tl_wbuf_open(tl_wbuf *w, const char *path, size_t cap, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->path = path;
    w->buf = malloc(cap);
    if (!w->buf) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory (write buffer)");
    w->cap = cap;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        free(w->buf);
        w->buf = NULL;
        return tl_err(err, errlen, TIERLAB_EIO, "cannot create %s: %s", path, strerror(e));
    }
    return 0;
}

static int tl_write_all(int fd, const uint8_t *p, size_t n, const char *path, char *err,
                        size_t errlen) {
    while (n) {
        ssize_t got = write(fd, p, n);
        if (got < 0) {
            if (errno == EINTR) continue;
            return tl_err(err, errlen, TIERLAB_EIO, "cannot write %s: %s", path, strerror(errno));
        }
        p += got;
        n -= (size_t)got;
    }
    return 0;
}

int tl_wbuf_flush(tl_wbuf *w, char *err, size_t errlen) {
    if (w->n == 0) return 0;
    int rc = tl_write_all(w->fd, w->buf, w->n, w->path, err, errlen);
    w->n = 0;
    return rc;
}

int tl_wbuf_write(tl_wbuf *w, const void *p, size_t n, char *err, size_t errlen) {
    const uint8_t *s = p;
    w->pos += n;
    if (w->crc_on) w->crc = tl_crc32c(w->crc, s, n);
    if (w->n + n <= w->cap) {
        memcpy(w->buf + w->n, s, n);
        w->n += n;
        return 0;
    }
    int rc = tl_wbuf_flush(w, err, errlen);
    if (rc) return rc;
    if (n >= w->cap) return tl_write_all(w->fd, s, n, w->path, err, errlen);
    memcpy(w->buf, s, n);
    w->n = n;
    return 0;
}

int tl_wbuf_pwrite(tl_wbuf *w, const void *p, size_t n, uint64_t off, char *err,
                   size_t errlen) {
    const uint8_t *s = p;
    while (n) {
        ssize_t got = pwrite(w->fd, s, n, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return tl_err(err, errlen, TIERLAB_EIO, "cannot write %s: %s", w->path,
                          strerror(errno));
        }
        s += got;
        off += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

int tl_wbuf_close(tl_wbuf *w, int sync, char *err, size_t errlen) {
    int rc = 0;
    if (w->fd >= 0) {
        rc = tl_wbuf_flush(w, err, errlen);
        if (!rc && sync && fsync(w->fd) != 0)
            rc = tl_err(err, errlen, TIERLAB_EIO, "cannot fsync %s: %s", w->path,
                        strerror(errno));
        if (close(w->fd) != 0 && !rc)
            rc = tl_err(err, errlen, TIERLAB_EIO, "cannot close %s: %s", w->path,
                        strerror(errno));
        w->fd = -1;
    }
    free(w->buf);
    w->buf = NULL;
    return rc;
}

int tl_rbuf_open(tl_rbuf *r, const char *path, size_t cap, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return tl_err(err, errlen, TIERLAB_EIO, "cannot open %s: %s", path, strerror(errno));
    r->buf = malloc(cap);
    if (!r->buf) {
        close(r->fd);
        r->fd = -1;
        return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory (read buffer)");
    }
    r->cap = cap;
    posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

int tl_rbuf_read(tl_rbuf *r, void *p, size_t n, char *err, size_t errlen) {
    uint8_t *d = p;
    size_t want = n;
    while (want) {
        if (r->at == r->n) {
            if (r->eof) break;
            ssize_t got = read(r->fd, r->buf, r->cap);
            if (got < 0) {
                if (errno == EINTR) continue;
                return tl_err(err, errlen, TIERLAB_EIO, "cannot read %s: %s", r->path,
                              strerror(errno));
            }
            r->n = (size_t)got;
            r->at = 0;
            if (got == 0) {
                r->eof = 1;
                break;
            }
        }
        size_t take = r->n - r->at < want ? r->n - r->at : want;
        memcpy(d, r->buf + r->at, take);
        r->at += take;
        d += take;
        want -= take;
    }
    if (want == 0) return 0;
    if (want == n) return 1;
    return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: truncated", r->path);
}

void tl_rbuf_close(tl_rbuf *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    free(r->buf);
    r->buf = NULL;
}
