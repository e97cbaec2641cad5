/* query.h — internals shared by the query kernels: the context, the term
 * cursor, BM25 and the top-k heap. Everything on the per-posting path is
 * static inline; the only indirect call is the per-block codec decode. */
#ifndef TL_QUERY_H
#define TL_QUERY_H

#include <math.h>
#include <string.h>

#include "index/index.h"

#define TL_K1 1.2
/* Scores of frequencies below this come from a per-term table. */
#define TL_WTAB 32
/* Terms with more postings than this get the table (cheaper than its setup otherwise). */
#define TL_WTAB_MIN_POSTINGS 512

__extension__ typedef unsigned __int128 tl_key;

/* Where a cursor reads its encoded blocks from. By default (no source) a
 * block is read in place from the index mapping (ix->dids / ix->freqs, the
 * placed file). A source serves them from elsewhere (the APCache runtime: a
 * term's chain in the segment cache, or its emulated page cache): given
 * block b of kind 0 (DIDs) or 1 (freqs), whose bytes are [a, z) of the file
 * (offsets from the skip list, already bounds-checked against the file), it
 * returns a pointer to those z - a bytes, valid until the next call on the
 * same source, or NULL when it cannot (the query then fails with
 * TIERLAB_ECORRUPT, "could not be read"; the source keeps its own reason).
 * The bytes are checked against the skip list's checksums wherever they came
 * from, so a source's copies are checked too. */
typedef struct tl_block_src {
    const uint8_t *(*block)(struct tl_block_src *s, int kind, uint32_t b, uint64_t a,
                            uint64_t z);
    void *ctx;
} tl_block_src;

/* One query term: its skip record, the decoded block and where we are in it. */
typedef struct tl_cursor {
    const tl_dict_entry *de; /* the term's dictionary entry (for messages) */
    const tl_skip_entry *e; /* nblocks + 1 entries (the last is the sentinel) */
    tl_block_src *src;      /* NULL: blocks in place from the index mapping */
    uint32_t nb, postings;
    uint32_t b;        /* current block */
    uint32_t dec_b;    /* block whose DIDs are in d (UINT32_MAX: none) */
    uint32_t fdec_b;   /* block whose freqs are in f */
    uint32_t n, pos;   /* length of the decoded block, position in it */
    uint32_t *d, *f;
    double idf;
    int table;
    double w[TL_WTAB];
    uint64_t visited; /* skip entries read */
    uint32_t decoded, fdecoded;
    /* Blocks decoded but not yet checked against their CRCs, per kind (DIDs,
     * freqs): span_b0 .. span_b0 + span_n - 1 (with small gaps of blocks not
     * decoded, checked too). Consecutive blocks lie back to back in their
     * file, so one CRC pass checks the run (tl_span_check) when it ends: at a
     * larger gap, and before the query returns. */
    uint32_t span_b0[2], span_n[2];
    /* The skip record (head h) not checked yet: with checks on, it is checked
     * once after the term's walk, while its bytes are still in the cache,
     * before any hit is returned, and first when a block of the term fails
     * (the walk only compares its DIDs and bounds-checks its offsets). */
    const tl_skip_head *h;
    int skip_pending;
} tl_cursor;

struct tierlab_query_ctx {
    const struct tierlab_index *ix;
    uint32_t k, size;
    int checks;        /* TIERLAB_CHECKS_* */
    tl_key *heap;      /* k keys */
    tierlab_hit *out;  /* k sorted hits of the last query */
    tl_key *tmp;       /* k keys: radix sort buffer */
    uint32_t hist[12][256];
    uint32_t *bufs; /* 2 * TIERLAB_QUERY_MAX_TERMS * 256 */
    tl_cursor cur[TIERLAB_QUERY_MAX_TERMS];
    tierlab_query_stats *st;
    char err[TIERLAB_ERRMSG];
};

/* The bytes tierlab_query_ctx_new allocates for k (a resource guard's plan). */
uint64_t tl_query_ctx_bytes(uint32_t k);

/* BM25 term weight; the expression is the specification (query.c's header). */
static inline double tl_bm25(double idf, uint32_t f) {
    double x = (double)f;
    return idf * (x * (TL_K1 + 1.0)) / (x + TL_K1);
}
static inline double tl_weight(const tl_cursor *c, uint32_t f) {
    return c->table && f < TL_WTAB ? c->w[f] : tl_bm25(c->idf, f);
}

/* Min-heap of the k best, the root being the worst kept hit. A hit is one
 * 128-bit key, (score bits << 64) | (UINT32_MAX - did): scores are >= 0, so
 * their IEEE bits order like the scores, and a larger key is a better hit
 * (higher score, then lower DID). One integer compare per step keeps the
 * heap branch-light even when most scores tie (SINGLE scores depend on f only). */

static inline tl_key tl_make_key(double s, uint32_t did) {
    uint64_t bits;
    memcpy(&bits, &s, 8);
    return ((tl_key)bits << 64) | (uint64_t)(UINT32_MAX - did);
}
static inline uint32_t tl_key_did(tl_key k) { return UINT32_MAX - (uint32_t)(uint64_t)k; }
static inline double tl_key_score(tl_key k) {
    uint64_t bits = (uint64_t)(k >> 64);
    double s;
    memcpy(&s, &bits, 8);
    return s;
}

static inline void tl_sift_down(tl_key *h, uint32_t n, uint32_t i) {
    tl_key x = h[i];
    for (;;) {
        uint32_t l = 2 * i + 1;
        if (l >= n) break;
        uint32_t m = l + (l + 1 < n && h[l + 1] < h[l]);
        if (h[m] >= x) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
}

/* Offer a hit. Until k hits are kept they are only appended (no heap: with
 * ascending DIDs and tied scores every insertion would climb to the root);
 * the k-th turns the buffer into a heap in O(k), and from then on a hit
 * better than the root replaces it. */
static inline void tl_offer(struct tierlab_query_ctx *q, uint32_t did, double s) {
    tl_key *h = q->heap, x = tl_make_key(s, did);
    if (q->size < q->k) {
        h[q->size++] = x;
        if (q->size == q->k)
            for (uint32_t i = q->k / 2; i-- > 0;) tl_sift_down(h, q->k, i);
    } else if (x > h[0]) {
        h[0] = x;
        tl_sift_down(h, q->size, 0);
    }
}

/* The root's score, for the cheap filter before tl_offer (-1 while not full). */
static inline double tl_threshold(const struct tierlab_query_ctx *q) {
    return q->size == q->k ? tl_key_score(q->heap[0]) : -1.0;
}

/* Open a cursor on a dictionary entry: bounds-check the skip record (and its
 * checksum, with checks). */
int tl_cursor_open(struct tierlab_query_ctx *q, tl_cursor *c, const tl_dict_entry *e,
                   uint32_t slot);
/* Decode block c->b's DIDs (and freqs when `freqs`) unless already there. */
int tl_cursor_decode(struct tierlab_query_ctx *q, tl_cursor *c);
int tl_cursor_decode_freqs(struct tierlab_query_ctx *q, tl_cursor *c);

/* Run one query over dictionary entries already looked up (ents[i] NULL =
 * unknown term), reading term i's blocks through srcs[i] (srcs or srcs[i]
 * NULL: the index mapping). Same checks, stats and results (q->out, q->size)
 * as tierlab_query; st->latency_ns covers this call only. Returns 0 or an
 * error (message in q->err). The APCache runtime's entry point. */
int tl_query_entries(struct tierlab_query_ctx *q, int type, const tl_dict_entry *const *ents,
                     uint32_t nterms, tl_block_src *const *srcs, tierlab_query_stats *st);

int tl_query_single(struct tierlab_query_ctx *q, tl_cursor *c);
int tl_query_and(struct tierlab_query_ctx *q, tl_cursor *c, uint32_t m);

#endif
