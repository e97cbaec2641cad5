/* workload.c — the one reader of query files (tierlab.h, "Query files"):
 * the APCache runtime reads its workload with it, and Python's
 * tierlab.workload.read_queries calls it through cffi, so both accept and
 * refuse exactly the same files with the same messages.
 *
 * The rules, as the Python reader had them (tests/workload/ holds them to):
 * the file is split at '\n' (line 1 is the first); a line must be valid
 * UTF-8 (strict: no overlong forms, no surrogates, nothing above U+10FFFF);
 * it is stripped of whitespace at both ends and split into words at runs of
 * whitespace, whitespace being what Python's str.isspace() says (ASCII
 * \t \n \v \f \r, U+001C..U+001F and space, and the Unicode spaces below);
 * an empty line or one whose first word starts with '#' is skipped; a word
 * is `AND` (only between two terms) or a term of [a-z0-9]+. Errors name
 * `path:line`; the first offending word of a line is the one reported. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index/format.h"
#include "tierlab.h"

/* ---- reading the file ----------------------------------------------------- */

/* The whole file into *buf (its size in *len; one spare byte). */
static int tl_read_all(const char *path, char **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return tl_err(err, errlen, TIERLAB_EIO, "%s: cannot read (%s)", path, strerror(e));
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *b = malloc(cap);
    if (!b) {
        close(fd);
        return tl_err(err, errlen, TIERLAB_ENOMEM, "%s: out of memory reading it", path);
    }
    for (;;) {
        if (n == cap) { /* the file grew, or st_size was 0 (a pipe, /proc) */
            char *g = realloc(b, 2 * cap);
            if (!g) {
                free(b);
                close(fd);
                return tl_err(err, errlen, TIERLAB_ENOMEM, "%s: out of memory reading it", path);
            }
            b = g;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(b);
            close(fd);
            return tl_err(err, errlen, TIERLAB_EIO, "%s: cannot read (%s)", path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    *buf = b;
    *len = n;
    return 0;
}

/* ---- UTF-8 and whitespace ----------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (< end), or 0 if it is not one. */
static size_t tl_utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    size_t n;
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F; /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F; /* <= U+10FFFF */
    else return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return n;
}

/* Bytes of the whitespace character at p (valid UTF-8, < end), or 0. */
static size_t tl_space_len(const unsigned char *p, const unsigned char *end) {
    unsigned c = p[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
    if (c < 0x80) return 0;
    size_t n = tl_utf8_len(p, end);
    uint32_t u;
    if (n == 2) u = (c & 0x1Fu) << 6 | (p[1] & 0x3Fu);
    else if (n == 3) u = (c & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu);
    else return 0;
    int space = u == 0x85 || u == 0xA0 || u == 0x1680 || (u >= 0x2000 && u <= 0x200A) ||
                u == 0x2028 || u == 0x2029 || u == 0x202F || u == 0x205F || u == 0x3000;
    return space ? n : 0;
}

static int tl_is_term(const unsigned char *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((w[i] >= 'a' && w[i] <= 'z') || (w[i] >= '0' && w[i] <= '9'))) return 0;
    return n > 0;
}

/* ---- the output arrays ---------------------------------------------------------- */

/* a, grown to hold `need` elements of `elem` bytes (*cap: elements now);
 * NULL when out of memory (a is then unchanged and still owned). */
static void *tl_grow(void *a, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap && a) return a;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *g = realloc(a, c * elem);
    if (g) *cap = c;
    return g;
}

typedef struct tl_wl_build {
    tierlab_workload *w;
    size_t text_cap, term_cap, first_cap, line_cap, type_cap; /* elements allocated */
} tl_wl_build;

/* Append one query of nw words (AND already dropped) at file line `line`. */
static int tl_add_query(tl_wl_build *b, const unsigned char *const *word, const size_t *wlen,
                        size_t nw, uint64_t line) {
    tierlab_workload *w = b->w;
    size_t bytes = 0;
    for (size_t i = 0; i < nw; i++) bytes += wlen[i] + 1;
    void *g;
    if (!(g = tl_grow(w->text, &b->text_cap, w->term_off[w->nterms] + bytes, 1)))
        return TIERLAB_ENOMEM;
    w->text = g;
    if (!(g = tl_grow(w->term_off, &b->term_cap, w->nterms + nw + 1, sizeof *w->term_off)))
        return TIERLAB_ENOMEM;
    w->term_off = g;
    if (!(g = tl_grow(w->query_first, &b->first_cap, w->nqueries + 2, sizeof *w->query_first)))
        return TIERLAB_ENOMEM;
    w->query_first = g;
    if (!(g = tl_grow(w->line, &b->line_cap, w->nqueries + 1, sizeof *w->line)))
        return TIERLAB_ENOMEM;
    w->line = g;
    if (!(g = tl_grow(w->type, &b->type_cap, w->nqueries + 1, 1))) return TIERLAB_ENOMEM;
    w->type = g;
    for (size_t i = 0; i < nw; i++) {
        uint64_t off = w->term_off[w->nterms];
        memcpy(w->text + off, word[i], wlen[i]);
        w->text[off + wlen[i]] = 0;
        w->term_off[++w->nterms] = off + wlen[i] + 1;
    }
    w->line[w->nqueries] = line;
    w->type[w->nqueries] = nw == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND;
    w->query_first[++w->nqueries] = w->nterms;
    return 0;
}

/* ---- one line --------------------------------------------------------------------- */

/* Parse the line [p, end) (number lineno): 0 and its query appended (or
 * nothing for a blank or comment line), or an error with a message. */
static int tl_parse_line(tl_wl_build *b, const char *path, uint64_t lineno,
                         const unsigned char *p, const unsigned char *end, char *err,
                         size_t errlen) {
    for (const unsigned char *q = p; q < end;) {
        size_t n = tl_utf8_len(q, end);
        if (!n)
            return tl_err(err, errlen, TIERLAB_EINVAL, "%s:%llu: invalid UTF-8 at byte %llu", path,
                          (unsigned long long)lineno, (unsigned long long)(q - p + 1));
        q += n;
    }
    /* the stripped line: from the first word's start to the last word's end */
    const unsigned char *first = NULL, *last_end = NULL;
    for (const unsigned char *q = p; q < end;) {
        size_t sp = tl_space_len(q, end);
        if (sp) {
            q += sp;
            continue;
        }
        if (!first) first = q;
        q += tl_utf8_len(q, end);
        last_end = q;
    }
    if (!first || *first == '#') return 0; /* blank or comment */
    enum { MAXW = TIERLAB_QUERY_MAX_TERMS };
    const unsigned char *word[MAXW], *prev = NULL;
    size_t wlen[MAXW], nterms = 0, prev_len = 0, nwords = 0;
    for (const unsigned char *q = first; q < last_end;) {
        size_t sp = tl_space_len(q, end);
        if (sp) {
            q += sp;
            continue;
        }
        const unsigned char *w0 = q;
        while (q < last_end && !tl_space_len(q, end)) q += tl_utf8_len(q, end);
        size_t n = (size_t)(q - w0);
        int is_and = n == 3 && memcmp(w0, "AND", 3) == 0;
        if (is_and) {
            int next_word = 0; /* is there a word after this one? */
            for (const unsigned char *r = q; r < last_end;) {
                size_t s = tl_space_len(r, end);
                if (!s) {
                    next_word = 1;
                    break;
                }
                r += s;
            }
            if (nwords == 0 || !next_word || (prev_len == 3 && !memcmp(prev, "AND", 3)))
                return tl_err(err, errlen, TIERLAB_EINVAL,
                              "%s:%llu: 'AND' must stand between two terms: '%.*s'", path,
                              (unsigned long long)lineno, (int)(last_end - first),
                              (const char *)first);
        } else if (!tl_is_term(w0, n)) {
            return tl_err(err, errlen, TIERLAB_EINVAL,
                          "%s:%llu: '%.*s' is not a term: terms are lower-case ASCII letters "
                          "and digits (as the index tokenises text), and only 'AND' joins them",
                          path, (unsigned long long)lineno, (int)n, (const char *)w0);
        } else {
            if (nterms < MAXW) {
                word[nterms] = w0;
                wlen[nterms] = n;
            }
            nterms++;
        }
        prev = w0;
        prev_len = n;
        nwords++;
    }
    if (nterms > MAXW)
        return tl_err(err, errlen, TIERLAB_EINVAL,
                      "%s:%llu: %zu terms: a query has at most %d (TIERLAB_QUERY_MAX_TERMS)",
                      path, (unsigned long long)lineno, nterms, MAXW);
    if (tl_add_query(b, word, wlen, nterms, lineno))
        return tl_err(err, errlen, TIERLAB_ENOMEM, "%s: out of memory reading it", path);
    return 0;
}

/* ---- the public calls --------------------------------------------------------------- */

void tierlab_workload_free(tierlab_workload *w) {
    if (!w) return;
    free(w->text);
    free(w->term_off);
    free(w->query_first);
    free(w->line);
    free(w->type);
    memset(w, 0, sizeof *w);
}

int tierlab_workload_read(const char *path, tierlab_workload *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return tl_err(err, errlen, TIERLAB_EINVAL, "workload: no output given");
    memset(out, 0, sizeof *out);
    if (!path) return tl_err(err, errlen, TIERLAB_EINVAL, "workload: no path given");
    char *data;
    size_t len;
    int rc = tl_read_all(path, &data, &len, err, errlen);
    if (rc) return rc;
    tl_wl_build b = {.w = out};
    /* the first entries of the offset arrays (0), so that every call appends */
    out->term_off = tl_grow(NULL, &b.term_cap, 1, sizeof *out->term_off);
    out->query_first = tl_grow(NULL, &b.first_cap, 1, sizeof *out->query_first);
    if (!out->term_off || !out->query_first) {
        rc = tl_err(err, errlen, TIERLAB_ENOMEM, "%s: out of memory reading it", path);
    } else {
        out->term_off[0] = 0;
        out->query_first[0] = 0;
    }
    const unsigned char *p = (const unsigned char *)data, *end = p + len;
    uint64_t lineno = 0;
    while (!rc) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        const unsigned char *e = nl ? nl : end;
        rc = tl_parse_line(&b, path, ++lineno, p, e, err, errlen);
        if (!nl) break;
        p = nl + 1;
    }
    free(data);
    if (!rc && out->nqueries == 0) rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s: no queries", path);
    if (rc) tierlab_workload_free(out);
    return rc;
}
