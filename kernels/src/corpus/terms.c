/* terms.c — the term table of a corpus file, counted with docs/engine.md's
 * tokeniser (runs of ASCII letters and digits, lower-cased; every other byte
 * separates). Ingest writes the corpus in Python and counts here: a Python
 * dict costs several times more per token than this table.
 *
 * An open-addressing table (linear probing, load <= 1/2) of 32-byte buckets
 * holds the counts; short terms sit in their bucket, long ones in an arena.
 * At the end the buckets are listed, sorted and written.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text.h"
#include "tierlab.h"

/* One bucket of the table, 32 bytes (two per cache line): counting a
 * frequent term touches one line. Terms of up to 8 bytes live in the bucket
 * (zero-padded), longer ones in the arena. */
typedef struct {
    uint64_t word;        /* the term's bytes (len <= 8), else its arena offset */
    uint64_t occurrences;
    uint64_t last_doc;    /* 1-based number of the last document counted */
    uint32_t postings;
    uint32_t len;         /* 0: empty bucket */
} tl_bucket;

typedef struct {
    char *arena;
    uint64_t arena_len, arena_cap;
    tl_bucket *b;
    uint64_t n, mask;     /* terms; bucket count - 1 (load kept <= 1/2) */
} tl_table;

static uint64_t tl_mix(uint64_t h) {
    h ^= h >> 32;
    h *= UINT64_C(0xD6E8FEB86659FD93);
    h ^= h >> 32;
    h *= UINT64_C(0xD6E8FEB86659FD93);
    return h ^ (h >> 32);
}

/* The first len (<= 8) bytes at w, zero-padded, as they lie in memory. Reads
 * 8 bytes: every buffer here has TL_PAD readable bytes past its terms (a
 * variable-length memcpy would stall on store forwarding). */
enum { TL_PAD = 8 };
static uint64_t tl_pack(const char *w, size_t len) {
    uint64_t v;
    memcpy(&v, w, 8);
    if (len >= 8) return v;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return len ? v & ~(~UINT64_C(0) >> (8 * len)) : 0;
#else
    return v & ((UINT64_C(1) << (8 * len)) - 1);
#endif
}

static uint64_t tl_hash(const char *w, size_t len) {
    uint64_t h = len * UINT64_C(0x9E3779B97F4A7C15);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) h = tl_mix(h ^ tl_pack(w + i, 8));
    if (i < len || len == 0) h = tl_mix(h ^ tl_pack(w + i, len - i));
    return h;
}

static const char *tl_bytes(const tl_table *t, const tl_bucket *e) {
    return e->len <= 8 ? (const char *)&e->word : t->arena + e->word;
}

static int tl_grow(tl_table *t) {
    uint64_t count = (t->mask + 1) * 2;
    tl_bucket *b = calloc(count, sizeof(tl_bucket));
    if (!b) return TIERLAB_ENOMEM;
    for (uint64_t i = 0; i <= t->mask; i++) {
        const tl_bucket *e = &t->b[i];
        if (!e->len) continue;
        uint64_t j = tl_hash(tl_bytes(t, e), e->len) & (count - 1);
        while (b[j].len) j = (j + 1) & (count - 1);
        b[j] = *e;
    }
    free(t->b);
    t->b = b;
    t->mask = count - 1;
    return 0;
}

/* The bucket of w (hash h) in t: its own, or the empty one it would take. */
static tl_bucket *tl_find(const tl_table *t, const char *w, size_t len, uint64_t packed,
                          uint64_t h) {
    for (uint64_t j = h & t->mask;; j = (j + 1) & t->mask) {
        tl_bucket *e = &t->b[j];
        if (!e->len) return e;
        if (e->len == len &&
            (len <= 8 ? e->word == packed : memcmp(t->arena + e->word, w, len) == 0))
            return e;
    }
}

static void tl_bump(tl_bucket *e, uint64_t doc) {
    e->occurrences++;
    if (e->last_doc != doc) {
        e->last_doc = doc;
        e->postings++;
    }
}

/* Put w into t's empty bucket e with one occurrence in doc; grow t at load 1/2. */
static int tl_add(tl_table *t, tl_bucket *e, const char *w, size_t len, uint64_t packed,
                  uint64_t doc) {
    if (len > 8) {
        if (t->arena_len + len > t->arena_cap) {
            uint64_t cap = t->arena_cap * 2 + len;
            char *a = realloc(t->arena, cap + TL_PAD);
            if (!a) return TIERLAB_ENOMEM;
            t->arena = a;
            t->arena_cap = cap;
        }
        memcpy(t->arena + t->arena_len, w, len);
        e->word = t->arena_len;
        t->arena_len += len;
    } else {
        e->word = packed;
    }
    e->len = (uint32_t)len;
    e->occurrences = 1;
    e->last_doc = doc;
    e->postings = 1;
    return ++t->n * 2 > t->mask + 1 ? tl_grow(t) : 0;
}

/* Count one occurrence of w[0..len) in document doc. */
static int tl_count(tl_table *t, const char *w, size_t len, uint64_t doc) {
    if (len > UINT32_MAX) return TIERLAB_EINVAL;
    uint64_t packed = len <= 8 ? tl_pack(w, len) : 0;
    tl_bucket *e = tl_find(t, w, len, packed, tl_hash(w, len));
    if (!e->len) return tl_add(t, e, w, len, packed, doc);
    tl_bump(e, doc);
    return 0;
}

/* An entry of the sorted output. */
typedef struct {
    const char *bytes;
    uint64_t occurrences;
    uint32_t postings, len;
} tl_entry;

/* For qsort: occurrences descending, then term bytes ascending. */
static int tl_cmp_entry(const void *a, const void *b) {
    const tl_entry *x = a, *y = b;
    if (x->occurrences != y->occurrences) return x->occurrences > y->occurrences ? -1 : 1;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->bytes, y->bytes, n);
    if (c) return c;
    return (x->len > y->len) - (x->len < y->len);
}

static int tl_write_table(const char *path, const tl_entry *entries, uint64_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return TIERLAB_EIO;
    enum { CAP = 1 << 20 };
    char *buf = malloc(CAP + 64);
    if (!buf) {
        fclose(f);
        return TIERLAB_ENOMEM;
    }
    int rc = 0;
    static const char hdr[] = "term\tpostings\toccurrences\n";
    if (fwrite(hdr, 1, sizeof hdr - 1, f) != sizeof hdr - 1) rc = TIERLAB_EIO;
    size_t pos = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        const tl_entry *e = &entries[i];
        if (pos + e->len + 48 > CAP) {
            if (fwrite(buf, 1, pos, f) != pos) rc = TIERLAB_EIO;
            pos = 0;
        }
        if (e->len + 48 > CAP) { /* a term longer than the buffer: write it as is */
            if (fwrite(e->bytes, 1, e->len, f) != e->len) rc = TIERLAB_EIO;
        } else {
            memcpy(buf + pos, e->bytes, e->len);
            pos += e->len;
        }
        char *q = buf + pos;
        *q++ = '\t';
        q = tl_put_u64(q, e->postings);
        *q++ = '\t';
        q = tl_put_u64(q, e->occurrences);
        *q++ = '\n';
        pos = (size_t)(q - buf);
    }
    if (!rc && pos && fwrite(buf, 1, pos, f) != pos) rc = TIERLAB_EIO;
    free(buf);
    if (fclose(f) != 0 && !rc) rc = TIERLAB_EIO;
    return rc;
}

int tierlab_corpus_count_terms(const char *corpus_path, const char *terms_path,
                               tierlab_progress_fn progress, void *ctx,
                               tierlab_corpus_stats *stats) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tierlab_corpus_stats st;
    memset(&st, 0, sizeof st);
    if (stats) *stats = st;
    if (!corpus_path || !terms_path) return TIERLAB_EINVAL;

    /* Byte classes: 0 separates, else the lower-cased byte. */
    unsigned char cls[256] = {0};
    for (int c = '0'; c <= '9'; c++) cls[c] = (unsigned char)c;
    for (int c = 'a'; c <= 'z'; c++) cls[c] = (unsigned char)c;
    for (int c = 'A'; c <= 'Z'; c++) cls[c] = (unsigned char)(c - 'A' + 'a');

    int rc = 0;
    tl_table t;
    memset(&t, 0, sizeof t);
    t.arena_cap = 1 << 16;
    t.mask = (1 << 16) - 1;
    t.arena = calloc(t.arena_cap + TL_PAD, 1);
    t.b = calloc(t.mask + 1, sizeof(tl_bucket));
    size_t cap = 1 << 20; /* the input buffer; grows only for a term longer than it */
    unsigned char *in = calloc(cap + TL_PAD, 1);
    tl_entry *entries = NULL;
    FILE *f = NULL;
    if (!t.arena || !t.b || !in) {
        rc = TIERLAB_ENOMEM;
        goto out;
    }
    f = fopen(corpus_path, "rb");
    if (!f) {
        rc = TIERLAB_EIO;
        goto out;
    }
    uint64_t total = 0;
    if (fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        total = end > 0 ? (uint64_t)end : 0;
        rewind(f);
    }

    /* Scan a chunk: skip separators (counting newlines), lower-case a term
     * in place, count it. A term running into the end of the chunk is moved
     * to the front and finished with the next read. */
    uint64_t doc = 1, next_report = 4 << 20;
    unsigned char last = '\n';
    size_t carry = 0;
    for (;;) {
        if (carry == cap) {
            unsigned char *grown = realloc(in, (cap *= 2) + TL_PAD);
            if (!grown) {
                rc = TIERLAB_ENOMEM;
                goto out;
            }
            in = grown;
        }
        size_t got = fread(in + carry, 1, cap - carry, f);
        if (got == 0 && ferror(f)) {
            rc = TIERLAB_EIO;
            goto out;
        }
        int eof = got == 0;
        size_t n = carry + got, i = 0;
        if (got) last = in[n - 1];
        carry = 0;
        while (i < n) {
            while (i < n && !cls[in[i]]) {
                if (in[i] == '\n') {
                    st.docs++;
                    doc++;
                }
                i++;
            }
            size_t s0 = i;
            while (i < n && cls[in[i]]) {
                in[i] = cls[in[i]];
                i++;
            }
            if (i == n && !eof) { /* the term may go on in the next chunk */
                carry = n - s0;
                memmove(in, in + s0, carry);
                break;
            }
            if (i > s0) {
                if ((rc = tl_count(&t, (const char *)in + s0, i - s0, doc)) != 0) goto out;
                st.tokens++;
            }
        }
        st.bytes += got;
        if (eof) break;
        if (progress && st.bytes >= next_report) {
            next_report = st.bytes + (4 << 20);
            if (progress(ctx, st.bytes, total)) {
                rc = TIERLAB_ECANCELED;
                goto out;
            }
        }
    }
    if (last != '\n') st.docs++; /* a last line without '\n' */
    fclose(f);
    f = NULL;

    st.terms = t.n;
    entries = malloc(sizeof(tl_entry) * (t.n ? t.n : 1));
    if (!entries) {
        rc = TIERLAB_ENOMEM;
        goto out;
    }
    uint64_t k = 0;
    for (uint64_t j = 0; j <= t.mask; j++) {
        const tl_bucket *e = &t.b[j];
        if (!e->len) continue;
        entries[k].bytes = tl_bytes(&t, e);
        entries[k].len = e->len;
        entries[k].occurrences = e->occurrences;
        entries[k].postings = e->postings;
        if (e->postings > st.max_postings) st.max_postings = e->postings;
        k++;
    }
    qsort(entries, st.terms, sizeof(tl_entry), tl_cmp_entry);
    rc = tl_write_table(terms_path, entries, st.terms);
    if (!rc && progress && progress(ctx, st.bytes, total)) rc = TIERLAB_ECANCELED;

out:
    if (f) fclose(f);
    free(t.arena);
    free(t.b);
    free(entries);
    free(in);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    st.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (stats) *stats = st;
    return rc;
}
