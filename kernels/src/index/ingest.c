/* ingest.c — corpus -> in-memory table term -> chain of posting chunks
 * (docs/engine.md "Indexing"). Chunks hold DIDs and freqs as a structure
 * of arrays; they start small and double up to 256 postings, so the many
 * rare terms of real text do not each pin a full block. When the table
 * exceeds the memory budget after a document, it is sorted and written as a
 * run (DID ranges of runs are disjoint and increasing, so transform merges
 * them by concatenation per term). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build.h"

struct tl_slab {
    tl_slab *next;
    size_t cap;
    uint8_t mem[];
};

#define TL_CHUNK_FIRST 4
#define TL_CHUNK_MAX 256
#define TL_READ_BYTES (4u << 20)
#define TL_SLOTS_MIN 1024

/* Lower-case map of the tokeniser: [A-Za-z0-9] -> lower-case byte, else 0
 * (separator; bytes >= 0x80 included). */
static const uint8_t tl_tok[256] = {
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
     48,  49,  50,  51,  52,  53,  54,  55,  56,  57,   0,   0,   0,   0,   0,   0,
      0,  97,  98,  99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122,   0,   0,   0,   0,   0,
      0,  97,  98,  99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
      0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
};

/* s must be readable up to n rounded up to 8 bytes (the token buffer is
 * padded): the last partial word is loaded whole and masked, which avoids a
 * byte-wise copy and the store-forwarding stall it causes. */
static inline uint64_t tl_hash(const uint8_t *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (n * 0xff51afd7ed558ccdULL);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    if (i < n) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        w &= ~0ULL >> (64 - 8 * (n - i));
        h = (h ^ w) * 0x94d049bb133111ebULL;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
}

/* Equal term bytes? Both sides are readable in whole 8-byte words (arena
 * allocations and the token buffer are padded), the last word masked. */
static inline int tl_same(const uint8_t *a, const uint8_t *b, size_t n) {
    size_t i = 0;
    uint64_t x, y;
    for (; i + 8 <= n; i += 8) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y) return 0;
    }
    if (i == n) return 1;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    return ((x ^ y) & (~0ULL >> (64 - 8 * (n - i)))) == 0;
}

/* ---- arena ---- */
static void *tl_alloc(tl_ingest *g, size_t n) {
    n = (n + 7) & ~(size_t)7;
    if ((size_t)(g->end - g->ptr) < n) {
        tl_slab *s = g->cur ? g->cur->next : g->first;
        if (!s || s->cap < n) {
            size_t cap = n > g->slab_bytes ? n : g->slab_bytes;
            tl_slab *ns = malloc(sizeof *ns + cap);
            if (!ns) return NULL;
            ns->cap = cap;
            if (g->cur) {
                ns->next = g->cur->next;
                g->cur->next = ns;
            } else {
                ns->next = g->first;
                g->first = ns;
            }
            s = ns;
        }
        g->cur = s;
        g->ptr = s->mem;
        g->end = s->mem + s->cap;
    }
    void *p = g->ptr;
    g->ptr += n;
    g->used += n;
    return p;
}

static void tl_arena_reset(tl_ingest *g) {
    g->cur = NULL;
    g->ptr = g->end = NULL;
    g->used = 0;
}

static void tl_arena_free(tl_ingest *g) {
    for (tl_slab *s = g->first, *nx; s; s = nx) {
        nx = s->next;
        free(s);
    }
    g->first = NULL;
    tl_arena_reset(g);
}

static uint64_t tl_table_bytes(const tl_ingest *g) { return g->used + g->cap * sizeof(tl_term *); }

/* ---- the table ---- */
static int tl_grow(tl_ingest *g) {
    size_t ncap = g->cap * 2;
    tl_term **ns = calloc(ncap, sizeof *ns);
    if (!ns) return tl_err(g->err, g->errlen, TIERLAB_ENOMEM, "out of memory (hash table)");
    for (size_t i = 0; i < g->cap; i++) {
        tl_term *t = g->slots[i];
        if (!t) continue;
        size_t j = t->hash & (ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = t;
    }
    free(g->slots);
    g->slots = ns;
    g->cap = ncap;
    return 0;
}

static tl_chunk *tl_new_chunk(tl_ingest *g, uint32_t cap) {
    tl_chunk *c = tl_alloc(g, sizeof *c + 2 * sizeof(uint32_t) * cap);
    if (!c) return NULL;
    c->next = NULL;
    c->n = 0;
    c->cap = cap;
    return c;
}

/* Add one occurrence of term s (hash h) in document did. The term keeps its
 * tail chunk's fill and capacity, so appending only stores into the chunk
 * (a store miss does not stall; a load would). */
static int tl_add(tl_ingest *g, const uint8_t *s, size_t len, uint64_t h, uint32_t did) {
    size_t mask = g->cap - 1, i = h & mask;
    tl_term *t;
    while ((t = g->slots[i]) != NULL) {
        if (t->hash == h && t->len == len && tl_same((const uint8_t *)t->s, s, len)) break;
        i = (i + 1) & mask;
    }
    g->tokens++;
    if (t) {
        tl_chunk *c = t->tail;
        if (t->last_did == did) { /* repeat in this document: aggregate */
            c->v[t->tail_cap + t->tail_n - 1]++;
            return 0;
        }
        if (t->tail_n == t->tail_cap) {
            uint32_t ncap = t->tail_cap * 2u > TL_CHUNK_MAX ? TL_CHUNK_MAX : t->tail_cap * 2u;
            tl_chunk *nc = tl_new_chunk(g, ncap);
            if (!nc) goto oom;
            c->next = nc;
            t->tail = c = nc;
            t->tail_n = 0;
            t->tail_cap = (uint16_t)ncap;
        }
        uint32_t n = t->tail_n;
        c->v[n] = did;
        c->v[t->tail_cap + n] = 1;
        c->n = n + 1;
        t->tail_n = (uint16_t)(n + 1);
        t->count++;
        t->last_did = did;
        g->postings++;
        return 0;
    }
    t = tl_alloc(g, sizeof *t + len);
    tl_chunk *c = t ? tl_new_chunk(g, TL_CHUNK_FIRST) : NULL;
    if (!c) goto oom;
    t->hash = h;
    t->head = t->tail = c;
    t->len = (uint32_t)len;
    t->count = 1;
    t->last_did = did;
    t->tail_n = 1;
    t->tail_cap = TL_CHUNK_FIRST;
    memcpy(t->s, s, len);
    c->v[0] = did;
    c->v[c->cap] = 1;
    c->n = 1;
    g->slots[i] = t;
    g->postings++;
    if (++g->n * 2 > g->cap) return tl_grow(g);
    return 0;
oom:
    return tl_err(g->err, g->errlen, TIERLAB_ENOMEM, "out of memory (ingest table)");
}

/* First 8 bytes, big-endian, zero-padded: compares like memcmp. */
static inline uint64_t tl_prefix(const tl_term *t) {
    uint64_t w;
    memcpy(&w, t->s, 8); /* padded allocation */
    if (t->len < 8) w &= ~0ULL >> (64 - 8 * t->len);
    return __builtin_bswap64(w);
}

/* Sort entry: the prefix next to the pointer, so most compares touch no term. */
typedef struct tl_sortkey {
    uint64_t prefix;
    tl_term *t;
} tl_sortkey;

static int tl_key_cmp(const void *a, const void *b) {
    const tl_sortkey *p = a, *q = b;
    if (p->prefix != q->prefix) return p->prefix < q->prefix ? -1 : 1;
    const tl_term *x = p->t, *y = q->t;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = m > 8 ? memcmp(x->s + 8, y->s + 8, m - 8) : 0;
    if (c) return c;
    return (x->len > y->len) - (x->len < y->len);
}

/* Move the terms to slots[0..n) sorted by bytes; the table is unusable for
 * lookups afterwards (until reset). The (prefix, pointer) pairs are laid out
 * in the slot array itself: n <= cap / 2, so 16 n bytes fit in 8 cap. */
static void tl_sort_terms(tl_ingest *g) {
    size_t k = 0;
    for (size_t i = 0; i < g->cap; i++)
        if (g->slots[i]) g->slots[k++] = g->slots[i];
    tl_sortkey *keys = (tl_sortkey *)(void *)g->slots;
    for (size_t i = k; i-- > 0;) { /* expand from the back: pair i covers slots 2i, 2i+1 */
        tl_term *t = g->slots[i];
        keys[i].t = t;
        keys[i].prefix = tl_prefix(t);
    }
    qsort(keys, k, sizeof *keys, tl_key_cmp);
    for (size_t i = 0; i < k; i++) g->slots[i] = keys[i].t; /* contract forwards */
    for (size_t i = k; i < g->cap; i++) g->slots[i] = NULL;
}

void tl_run_path(char *out, size_t len, const char *dir, uint32_t run) {
    snprintf(out, len, "%s/run-%06u.tmp", dir, run);
}

/* Run file (temporary, this build only): per term in sorted order
 *   u32 len, len bytes, u32 count, count x (u32 did, u32 freq). */
static int tl_flush_run(tl_ingest *g) {
    tl_sort_terms(g);
    char path[4096];
    tl_run_path(path, sizeof path, g->dir, g->nruns);
    tl_wbuf w;
    int rc = tl_wbuf_open(&w, path, 1u << 20, g->err, g->errlen);
    if (rc) return rc;
    uint32_t pair[2 * 64];
    for (size_t i = 0; i < g->n && !rc; i++) {
        const tl_term *t = g->slots[i];
        uint32_t hd[2] = {t->len, t->count};
        rc = tl_wbuf_write(&w, &hd[0], 4, g->err, g->errlen);
        if (!rc) rc = tl_wbuf_write(&w, t->s, t->len, g->err, g->errlen);
        if (!rc) rc = tl_wbuf_write(&w, &hd[1], 4, g->err, g->errlen);
        for (const tl_chunk *c = t->head; c && !rc; c = c->next) {
            for (uint32_t j = 0; j < c->n && !rc;) {
                uint32_t m = 0;
                for (; j < c->n && m < 64; j++, m++) {
                    pair[2 * m] = c->v[j];
                    pair[2 * m + 1] = c->v[c->cap + j];
                }
                rc = tl_wbuf_write(&w, pair, 8 * (size_t)m, g->err, g->errlen);
            }
        }
    }
    int rc2 = tl_wbuf_close(&w, 0, g->err, g->errlen);
    if (rc) return rc;
    if (rc2) return rc2;
    g->nruns++;
    memset(g->slots, 0, g->cap * sizeof *g->slots);
    g->n = 0;
    tl_arena_reset(g);
    return 0;
}

/* One document: tokenise it whole (lower-cased tokens back to back in
 * g->tokbuf, offsets and hashes in g->toks), then add the tokens while
 * prefetching the hash slots 8 tokens ahead and the terms 4 ahead, so the
 * cache misses of rare terms overlap instead of queueing. */
#define TL_PF_SLOT 8
#define TL_PF_TERM 4
static int tl_doc(tl_ingest *g, const uint8_t *line, size_t len) {
    if (g->docs >= TL_MAX_DOCS - 1)
        return tl_err(g->err, g->errlen, TIERLAB_EINVAL,
                      "corpus has more than %llu documents, the DID limit",
                      (unsigned long long)(TL_MAX_DOCS - 1));
    uint32_t did = (uint32_t)g->docs;
    uint8_t *tb = g->tokbuf;
    tl_token *tk = g->toks;
    size_t pos = 0, nt = 0, start = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = tl_tok[line[i]];
        if (c) {
            tb[pos++] = c;
        } else if (pos > start) {
            tk[nt].off = (uint32_t)start;
            tk[nt++].len = (uint32_t)(pos - start);
            start = pos;
        }
    }
    if (pos > start) {
        tk[nt].off = (uint32_t)start;
        tk[nt++].len = (uint32_t)(pos - start);
    }
    memset(tb + pos, 0, 8); /* the masked word loads of tl_hash stay inside */
    for (size_t i = 0; i < nt; i++) tk[i].hash = tl_hash(tb + tk[i].off, tk[i].len);
    for (size_t i = 0; i < nt; i++) {
        size_t mask = g->cap - 1;
        if (i + TL_PF_SLOT < nt) __builtin_prefetch(&g->slots[tk[i + TL_PF_SLOT].hash & mask]);
        if (i + TL_PF_TERM < nt) {
            const tl_term *t = g->slots[tk[i + TL_PF_TERM].hash & mask];
            if (t) __builtin_prefetch(t);
        }
        int rc = tl_add(g, tb + tk[i].off, tk[i].len, tk[i].hash, did);
        if (rc) return rc;
    }
    g->docs++;
    uint64_t bytes = tl_table_bytes(g);
    if (bytes > g->peak) g->peak = bytes;
    if (bytes > g->budget && g->n) return tl_flush_run(g);
    return 0;
}

int tl_ingest_corpus(tl_ingest *g, const char *corpus, tierlab_progress_fn progress,
                     void *ctx) {
    tl_xxh64_init(&g->digest, 0);
    g->slab_bytes = g->budget / 16;
    if (g->slab_bytes > (4u << 20)) g->slab_bytes = 4u << 20;
    if (g->slab_bytes < (16u << 10)) g->slab_bytes = 16u << 10;
    g->cap = TL_SLOTS_MIN;
    g->slots = calloc(g->cap, sizeof *g->slots);
    uint8_t *buf = malloc(TL_READ_BYTES);
    uint8_t *carry = malloc(g->doc_bytes);
    g->tokbuf = malloc((size_t)g->doc_bytes + 16);
    g->toks = malloc(((size_t)g->doc_bytes / 2 + 2) * sizeof *g->toks);
    int fd = -1, rc = 0;
    if (!g->slots || !buf || !carry || !g->tokbuf || !g->toks) {
        rc = tl_err(g->err, g->errlen, TIERLAB_ENOMEM, "out of memory");
        goto done;
    }
    fd = open(corpus, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        rc = tl_err(g->err, g->errlen, TIERLAB_EIO, "cannot open corpus %s: %s", corpus,
                    strerror(errno));
        goto done;
    }
    if (S_ISDIR(st.st_mode)) {
        rc = tl_err(g->err, g->errlen, TIERLAB_EIO, "corpus %s is a directory", corpus);
        goto done;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint64_t total = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    size_t clen = 0;     /* bytes of the current line kept in carry */
    int cut = 0;         /* the current line was longer than doc_bytes */
    for (;;) {
        ssize_t got = read(fd, buf, TL_READ_BYTES);
        if (got < 0) {
            if (errno == EINTR) continue;
            rc = tl_err(g->err, g->errlen, TIERLAB_EIO, "cannot read corpus %s: %s", corpus,
                        strerror(errno));
            goto done;
        }
        if (got == 0) break;
        tl_xxh64_update(&g->digest, buf, (size_t)got);
        g->corpus_bytes += (uint64_t)got;
        const uint8_t *p = buf, *end = buf + got;
        while (p < end) {
            const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
            const uint8_t *stop = nl ? nl : end;
            size_t seg = (size_t)(stop - p);
            if (nl && clen == 0 && !cut) { /* the whole line is in the buffer */
                if (seg > g->doc_bytes) {
                    seg = g->doc_bytes;
                    g->truncated++;
                }
                rc = tl_doc(g, p, seg);
            } else {
                size_t room = g->doc_bytes - clen;
                if (seg > room) {
                    seg = room;
                    cut = 1;
                }
                memcpy(carry + clen, p, seg);
                clen += seg;
                if (nl) {
                    g->truncated += (uint64_t)cut;
                    rc = tl_doc(g, carry, clen);
                    clen = 0;
                    cut = 0;
                }
            }
            if (rc) goto done;
            p = nl ? nl + 1 : end;
        }
        if (progress && progress(ctx, g->corpus_bytes, total)) {
            rc = tl_err(g->err, g->errlen, TIERLAB_ECANCELED, "build cancelled");
            goto done;
        }
    }
    if (clen || cut) { /* last line without '\n' */
        g->truncated += (uint64_t)cut;
        rc = tl_doc(g, carry, clen);
        if (rc) goto done;
    }
    if (g->nruns) {
        if (g->n) rc = tl_flush_run(g);
        free(g->slots);
        g->slots = NULL;
        g->cap = g->n = 0;
        tl_arena_free(g);
    } else {
        tl_sort_terms(g);
    }
done:
    if (fd >= 0) close(fd);
    free(buf);
    free(carry);
    return rc;
}

void tl_ingest_free(tl_ingest *g) {
    free(g->tokbuf);
    free(g->toks);
    g->tokbuf = NULL;
    g->toks = NULL;
    free(g->slots);
    g->slots = NULL;
    g->cap = g->n = 0;
    tl_arena_free(g);
}
