/* query.c — the query-type registry, query contexts, term cursors, the
 * SINGLE/AND entry points, the final sort and the batch loop (docs/engine.md
 * "Queries").
 *
 * BM25: w(t, f) = idf(t) * (f * (k1 + 1)) / (f + k1), k1 = 1.2, evaluated left
 * to right in double precision; idf(t) = log(1 + (N - n_t + 0.5) / (n_t + 0.5)).
 * A document's score is 0.0 + w(t1, f1) + w(t2, f2) + ... in query-term order.
 * Any reimplementation that evaluates these expressions in this order gets
 * bit-identical scores (tests/query/ does, in Python). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memtrace/memtrace.h"
#include "query.h"

/* The one table of query types: the names users type, at the index of their
 * TIERLAB_QUERY_* number (what tierlab_query and the batch take). */
static const char *const tl_query_types[] = {
    [TIERLAB_QUERY_SINGLE] = "single",
    [TIERLAB_QUERY_AND] = "and",
};
#define TL_NQUERY_TYPES (sizeof tl_query_types / sizeof tl_query_types[0])

size_t tierlab_query_type_count(void) { return TL_NQUERY_TYPES; }

const char *tierlab_query_type_name(size_t i) {
    return i < TL_NQUERY_TYPES ? tl_query_types[i] : NULL;
}

int tierlab_query_type_find(const char *name) {
    if (name == NULL) return -1;
    for (size_t i = 0; i < TL_NQUERY_TYPES; i++)
        if (strcmp(tl_query_types[i], name) == 0) return (int)i;
    return -1;
}

static uint64_t tl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tl_query_ctx_bytes(uint32_t k) {
    tierlab_query_ctx *q = NULL;
    return sizeof *q + (uint64_t)k * (sizeof *q->heap + sizeof *q->out + sizeof *q->tmp) +
           2u * TIERLAB_QUERY_MAX_TERMS * TIERLAB_MAX_BLOCK * sizeof *q->bufs;
}

tierlab_query_ctx *tierlab_query_ctx_new(const tierlab_index *ix, uint32_t k) {
    if (!ix || k == 0) return NULL;
    tierlab_query_ctx *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->ix = ix;
    q->k = k;
    q->checks = ix->checks;
    q->heap = malloc((size_t)k * sizeof *q->heap);
    q->out = malloc((size_t)k * sizeof *q->out);
    q->tmp = malloc((size_t)k * sizeof *q->tmp);
    q->bufs = malloc(2u * TIERLAB_QUERY_MAX_TERMS * TIERLAB_MAX_BLOCK * sizeof *q->bufs);
    if (!q->heap || !q->out || !q->tmp || !q->bufs) {
        tierlab_query_ctx_free(q);
        return NULL;
    }
    TL_MT_REGION(TIERLAB_REGION_TOPK_HEAP, q->heap, (size_t)k * sizeof *q->heap);
    TL_MT_REGION(TIERLAB_REGION_TOPK_HEAP, q->tmp, (size_t)k * sizeof *q->tmp);
    TL_MT_REGION(TIERLAB_REGION_TOPK_HEAP, q->out, (size_t)k * sizeof *q->out);
    TL_MT_REGION(TIERLAB_REGION_TOPK_HEAP, q->hist, sizeof q->hist);
    TL_MT_REGION(TIERLAB_REGION_DECODE_BUFFER, q->bufs,
                 2u * TIERLAB_QUERY_MAX_TERMS * TIERLAB_MAX_BLOCK * sizeof *q->bufs);
    return q;
}

void tierlab_query_ctx_free(tierlab_query_ctx *q) {
    if (!q) return;
    TL_MT_UNREGION(q->heap);
    TL_MT_UNREGION(q->tmp);
    TL_MT_UNREGION(q->out);
    TL_MT_UNREGION(q->hist);
    TL_MT_UNREGION(q->bufs);
    free(q->heap);
    free(q->out);
    free(q->tmp);
    free(q->bufs);
    free(q);
}

const char *tierlab_query_error(const tierlab_query_ctx *q) { return q ? q->err : ""; }

int tierlab_query_ctx_set_checks(tierlab_query_ctx *q, int level) {
    if (!q || level < TIERLAB_CHECKS_OFF || level > TIERLAB_CHECKS_FULL) return TIERLAB_EINVAL;
    q->checks = level;
    return 0;
}

int tierlab_query_ctx_checks(const tierlab_query_ctx *q) { return q ? q->checks : TIERLAB_EINVAL; }

int tl_cursor_open(tierlab_query_ctx *q, tl_cursor *c, const tl_dict_entry *e, uint32_t slot) {
    const struct tierlab_index *ix = q->ix;
    const tl_skip_head *h;
    int rc = tl_skip_open(ix, e, q->checks, &h, q->err, sizeof q->err);
    if (rc) return rc;
    c->de = e;
    c->e = (const tl_skip_entry *)(h + 1);
    c->src = NULL;
    c->nb = h->nblocks;
    c->postings = h->postings;
    c->b = 0;
    c->dec_b = c->fdec_b = UINT32_MAX;
    c->n = c->pos = 0;
    c->d = q->bufs + (size_t)slot * 2 * TIERLAB_MAX_BLOCK;
    c->f = c->d + TIERLAB_MAX_BLOCK;
    double N = (double)ix->info.docs, n = (double)c->postings;
    c->idf = log(1.0 + (N - n + 0.5) / (n + 0.5));
    c->table = c->postings > TL_WTAB_MIN_POSTINGS;
    if (c->table)
        for (uint32_t f = 0; f < TL_WTAB; f++) c->w[f] = tl_bm25(c->idf, f);
    c->visited = 0;
    c->decoded = c->fdecoded = 0;
    c->span_n[0] = c->span_n[1] = 0;
    return 0;
}

static inline uint32_t tl_block_len(const struct tierlab_index *ix, const tl_cursor *c) {
    uint32_t B = ix->info.block_size;
    return c->b + 1 < c->nb ? B : c->postings - c->b * B;
}

/* A run of blocks to check goes on over blocks not decoded (AND passes
 * some by, and decodes freq blocks only where DIDs match) while they hold at
 * most this many bytes: fewer, longer CRC passes cost less than the bytes. */
#define TL_SPAN_GAP_BYTES 512

/* Check the cursor's pending run of decoded blocks of one kind. */
static int tl_cursor_verify(tierlab_query_ctx *q, tl_cursor *c, int kind) {
    uint32_t n = c->span_n[kind];
    if (!n) return 0;
    c->span_n[kind] = 0;
    return tl_span_check(q->ix, c->de, c->e, c->nb, c->span_b0[kind], c->span_b0[kind] + n - 1,
                         kind, q->err, sizeof q->err);
}

/* Decode the current block's DIDs (kind 0) or freqs (kind 1) into the
 * cursor's buffer, checked at the context's level: its invariants now, its
 * CRC with the run of consecutive blocks it extends (bytes in place), or now
 * (bytes from a source, valid only until its next call). */
static int tl_cursor_block(tierlab_query_ctx *q, tl_cursor *c, int kind) {
    const struct tierlab_index *ix = q->ix;
    const tl_skip_entry *e = c->e;
    uint32_t b = c->b, at = 0;
    uint64_t a = tl_block_off(e, b, kind), z = tl_block_off(e, b + 1, kind);
    uint32_t *out = kind ? c->f : c->d;
    const uint8_t *p = NULL;
    int why, checks = q->checks;
    if (a < TL_HDR_BYTES || z < a || z > (kind ? ix->freqs_len : ix->dids_len))
        why = TL_BAD_OFFSET;
    else if (!(p = c->src ? c->src->block(c->src, kind, b, a, z) : (kind ? ix->freqs : ix->dids) + a))
        why = TL_BAD_READ;
    else
        why = tl_block_decode(ix, e, b, kind, p, z - a, tl_block_len(ix, c), out, checks, &at);
    if (!why && checks) {
        if (c->src) {
            uint32_t crc = tl_crc32c(tl_run_before(e, b, kind), p, (size_t)(z - a));
            if (crc != tl_run_crc(e, b, kind)) why = TL_BAD_CRC, at = crc;
        } else if (c->span_n[kind] && b >= c->span_b0[kind] + c->span_n[kind] &&
                   a - tl_block_off(e, c->span_b0[kind] + c->span_n[kind], kind) <=
                       TL_SPAN_GAP_BYTES) {
            /* the next block, or one a few blocks on: the run takes in the
             * blocks between (back to back in the file, checked as well) */
            c->span_n[kind] = b - c->span_b0[kind] + 1;
        } else {
            int rc = tl_cursor_verify(q, c, kind);
            if (rc) return rc;
            c->span_b0[kind] = b;
            c->span_n[kind] = 1;
        }
    }
    if (why)
        return tl_block_fail(ix, c->de, kind, b, c->nb, e, p, out, why, at, checks, q->err,
                             sizeof q->err);
    q->st->bytes_read[kind ? TIERLAB_FILE_FREQS : TIERLAB_FILE_DIDS] += z - a;
    return 0;
}

int tl_cursor_decode(tierlab_query_ctx *q, tl_cursor *c) {
    if (c->dec_b == c->b) return 0;
    int rc = tl_cursor_block(q, c, 0);
    if (rc) return rc;
    c->dec_b = c->b;
    c->n = tl_block_len(q->ix, c);
    c->pos = 0;
    c->decoded++;
    return 0;
}

int tl_cursor_decode_freqs(tierlab_query_ctx *q, tl_cursor *c) {
    if (c->fdec_b == c->b) return 0;
    int rc = tl_cursor_block(q, c, 1);
    if (rc) return rc;
    c->fdec_b = c->b;
    c->fdecoded++;
    return 0;
}

/* Heap -> q->out sorted by score descending, DID ascending. A heapsort is
 * bound by its chain of dependent loads (~60 ns a hit at k = 1024), so the
 * keys are radix-sorted instead: LSD, 8-bit digits over the 96 bits that vary
 * (32 of DID, 64 of score), all histograms in one pass, and digits that are
 * the same in every key (most exponent bytes, the top DID bytes) skipped. */
static void tl_sort_heap(tierlab_query_ctx *q) {
    uint32_t n = q->size;
    tl_key *a = q->heap, *b = q->tmp;
    if (n < 32) { /* insertion sort, descending */
        for (uint32_t i = 1; i < n; i++) {
            tl_key x = a[i];
            uint32_t j = i;
            for (; j > 0 && a[j - 1] < x; j--) a[j] = a[j - 1];
            a[j] = x;
        }
    } else {
        static const uint8_t shift[12] = {0, 8, 16, 24, 64, 72, 80, 88, 96, 104, 112, 120};
        uint32_t (*hist)[256] = q->hist;
        memset(hist, 0, 12 * sizeof hist[0]);
        for (uint32_t i = 0; i < n; i++)
            for (int d = 0; d < 12; d++) hist[d][(uint8_t)(a[i] >> shift[d])]++;
        for (int d = 0; d < 12; d++) {
            uint32_t *h = hist[d];
            if (h[(uint8_t)(a[0] >> shift[d])] == n) continue; /* one value: nothing to do */
            /* descending: bucket 255 first */
            uint32_t sum = 0;
            for (int v = 255; v >= 0; v--) {
                uint32_t c = h[v];
                h[v] = sum;
                sum += c;
            }
            for (uint32_t i = 0; i < n; i++) b[h[(uint8_t)(a[i] >> shift[d])]++] = a[i];
            tl_key *t = a;
            a = b;
            b = t;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        q->out[i].did = tl_key_did(a[i]);
        q->out[i].reserved = 0;
        q->out[i].score = tl_key_score(a[i]);
    }
}

/* Check the query shape; 0 or TIERLAB_EINVAL with a message. */
static int tl_check_shape(tierlab_query_ctx *q, int type, uint32_t nterms) {
    if ((type == TIERLAB_QUERY_SINGLE && nterms != 1) ||
        (type == TIERLAB_QUERY_AND && (nterms < 2 || nterms > TIERLAB_QUERY_MAX_TERMS)) ||
        (type != TIERLAB_QUERY_SINGLE && type != TIERLAB_QUERY_AND))
        return tl_err(q->err, sizeof q->err, TIERLAB_EINVAL,
                      "a SINGLE query has 1 term, an AND query 2..%d (got type %d, %u terms)",
                      TIERLAB_QUERY_MAX_TERMS, type, nterms);
    return 0;
}

/* Cursors over the entries, the query, the sort; st already zeroed with
 * nterms, unknown_terms and the dictionary bytes set. */
static int tl_run_entries(tierlab_query_ctx *q, int type, const tl_dict_entry *const *ents,
                          uint32_t nterms, tl_block_src *const *srcs, tierlab_query_stats *st) {
    int rc = 0;
    if (!st->unknown_terms) {
        for (uint32_t i = 0; i < nterms && !rc; i++) {
            rc = tl_cursor_open(q, &q->cur[i], ents[i], i);
            q->cur[i].src = srcs ? srcs[i] : NULL;
            st->term_postings[i] = ents[i]->postings;
            st->term_blocks_total[i] = q->cur[i].nb;
            st->blocks_total += q->cur[i].nb;
        }
        if (!rc)
            rc = type == TIERLAB_QUERY_SINGLE ? tl_query_single(q, &q->cur[0])
                                              : tl_query_and(q, q->cur, nterms);
        /* the runs of blocks not checked yet, before any hit is returned */
        for (uint32_t i = 0; i < nterms && !rc && q->checks; i++)
            for (int kind = 0; kind < 2 && !rc; kind++) rc = tl_cursor_verify(q, &q->cur[i], kind);
        for (uint32_t i = 0; i < nterms; i++) {
            tl_cursor *c = &q->cur[i];
            st->term_blocks_decoded[i] = c->decoded;
            st->blocks_decoded += c->decoded;
            st->freq_blocks_decoded += c->fdecoded;
            st->bytes_read[TIERLAB_FILE_SKIP] +=
                sizeof(tl_skip_head) + c->visited * sizeof(tl_skip_entry);
        }
    }
    tl_sort_heap(q);
    st->results = q->size;
    return rc;
}

static int tl_run(tierlab_query_ctx *q, int type, const char *const *terms,
                  const uint32_t *lens, uint32_t nterms, tierlab_query_stats *st) {
    memset(st, 0, sizeof *st);
    q->st = st;
    q->size = 0;
    st->nterms = nterms;
    int rc = tl_check_shape(q, type, nterms);
    if (rc) return rc;
    uint64_t t0 = tl_now_ns();
    const tl_dict_entry *ents[TIERLAB_QUERY_MAX_TERMS];
    for (uint32_t i = 0; i < nterms; i++) {
        rc = tl_dict_find(q->ix, terms[i], lens[i], q->checks, &ents[i],
                          &st->bytes_read[TIERLAB_FILE_DICT], q->err, sizeof q->err);
        if (rc < 0) {
            if (!q->err[0])
                tl_err(q->err, sizeof q->err, rc,
                       "corrupt index: dict.bin: an entry points outside the term pool");
            return rc;
        }
        if (!ents[i]) st->unknown_terms++;
    }
    rc = tl_run_entries(q, type, ents, nterms, NULL, st);
    st->latency_ns = tl_now_ns() - t0;
    return rc;
}

int tl_query_entries(tierlab_query_ctx *q, int type, const tl_dict_entry *const *ents,
                     uint32_t nterms, tl_block_src *const *srcs, tierlab_query_stats *st) {
    memset(st, 0, sizeof *st);
    q->st = st;
    q->size = 0;
    q->err[0] = 0;
    st->nterms = nterms;
    int rc = tl_check_shape(q, type, nterms);
    if (rc) return rc;
    uint64_t t0 = tl_now_ns();
    for (uint32_t i = 0; i < nterms; i++) st->unknown_terms += !ents[i];
    rc = tl_run_entries(q, type, ents, nterms, srcs, st);
    st->latency_ns = tl_now_ns() - t0;
    return rc;
}

int tierlab_query(tierlab_query_ctx *q, int type, const char *const *terms,
                  const uint32_t *lens, uint32_t nterms, tierlab_hit *hits,
                  tierlab_query_stats *st) {
    if (!q || !terms || !lens) return TIERLAB_EINVAL;
    tierlab_query_stats local;
    q->err[0] = 0;
    int rc = tl_run(q, type, terms, lens, nterms, st ? st : &local);
    if (rc) return rc;
    if (hits) memcpy(hits, q->out, (size_t)q->size * sizeof *hits);
    return (int)q->size;
}

int tierlab_query_batch(tierlab_query_ctx *q, const char *text, const uint64_t *term_off,
                        const uint32_t *tq_first, const uint8_t *types, size_t nqueries,
                        tierlab_query_stats *stats, tierlab_hit *hits, uint32_t *nhits,
                        uint64_t *wall_ns) {
    if (!q || !text || !term_off || !tq_first || !types || !stats) return TIERLAB_EINVAL;
    q->err[0] = 0;
    const char *tp[TIERLAB_QUERY_MAX_TERMS];
    uint32_t tl[TIERLAB_QUERY_MAX_TERMS];
    uint64_t t0 = tl_now_ns();
    int rc = 0;
    for (size_t i = 0; i < nqueries && !rc; i++) {
        uint32_t a = tq_first[i], z = tq_first[i + 1];
        uint32_t nt = z - a;
        if (z < a || nt > TIERLAB_QUERY_MAX_TERMS) {
            rc = tl_err(q->err, sizeof q->err, TIERLAB_EINVAL, "query %zu: %u terms", i, nt);
            break;
        }
        for (uint32_t j = 0; j < nt; j++) {
            tp[j] = text + term_off[a + j];
            tl[j] = (uint32_t)(term_off[a + j + 1] - term_off[a + j]);
        }
        rc = tl_run(q, types[i], tp, tl, nt, &stats[i]);
        if (rc) break;
        if (hits) memcpy(hits + i * q->k, q->out, (size_t)q->size * sizeof *hits);
        if (nhits) nhits[i] = q->size;
    }
    if (wall_ns) *wall_ns = tl_now_ns() - t0;
    return rc;
}
