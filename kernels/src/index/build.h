/* build.h — internal interfaces of the index build: buffered file I/O, the
 * ingest table (ingest.c) and the transform into the four files (transform.c).
 * build.c drives them and owns the temporary directory. */
#ifndef TL_INDEX_BUILD_H
#define TL_INDEX_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* ---- buffered I/O (io.c) ---- */
typedef struct tl_wbuf {
    int fd;
    uint8_t *buf;
    size_t n, cap;
    uint64_t pos; /* bytes written so far, buffered ones included */
    const char *path;
    int crc_on;   /* 1: crc follows every tl_wbuf_write (not tl_wbuf_pwrite) */
    uint32_t crc; /* CRC-32C of the bytes written since crc_on was set */
} tl_wbuf;
int tl_wbuf_open(tl_wbuf *w, const char *path, size_t cap, char *err, size_t errlen);
int tl_wbuf_write(tl_wbuf *w, const void *p, size_t n, char *err, size_t errlen);
int tl_wbuf_flush(tl_wbuf *w, char *err, size_t errlen);
int tl_wbuf_pwrite(tl_wbuf *w, const void *p, size_t n, uint64_t off, char *err, size_t errlen);
/* Flush, optionally fsync, close. Safe on a never-opened (fd < 0) buffer. */
int tl_wbuf_close(tl_wbuf *w, int sync, char *err, size_t errlen);

typedef struct tl_rbuf {
    int fd;
    uint8_t *buf;
    size_t n, at, cap;
    int eof;
    const char *path;
} tl_rbuf;
int tl_rbuf_open(tl_rbuf *r, const char *path, size_t cap, char *err, size_t errlen);
/* Read exactly n bytes: 0, 1 at a clean EOF before any byte, or TIERLAB_EIO /
 * TIERLAB_EFORMAT (EOF inside the n bytes). */
int tl_rbuf_read(tl_rbuf *r, void *p, size_t n, char *err, size_t errlen);
void tl_rbuf_close(tl_rbuf *r);

/* ---- ingest (ingest.c) ---- */
typedef struct tl_chunk {
    struct tl_chunk *next;
    uint32_t n, cap;
    uint32_t v[]; /* v[0..cap) DIDs, v[cap..2cap) freqs */
} tl_chunk;

typedef struct tl_term {
    uint64_t hash;
    tl_chunk *head, *tail;
    uint32_t len, count, last_did;
    uint16_t tail_n, tail_cap; /* fill and capacity of the tail chunk */
    char s[];
} tl_term;

typedef struct tl_token {
    uint32_t off, len;
    uint64_t hash;
} tl_token;

typedef struct tl_slab tl_slab;

typedef struct tl_ingest {
    /* configuration */
    const char *dir; /* build directory: runs are written here */
    uint32_t doc_bytes;
    uint64_t budget;
    /* the table */
    tl_term **slots;
    size_t cap, n;
    tl_slab *first, *cur;
    uint8_t *ptr, *end;
    uint64_t used; /* bytes handed out by the arena since the last reset */
    size_t slab_bytes;
    /* runs written so far: dir/run-NNNNNN.tmp */
    uint32_t nruns;
    /* totals */
    uint64_t docs, truncated, tokens, postings, corpus_bytes, peak;
    uint8_t *tokbuf; /* one document's tokens, lower-cased, + 16 bytes of padding */
    tl_token *toks;
    tl_xxh64_state digest;
    char *err;
    size_t errlen;
} tl_ingest;

/* Read the corpus into g (configured: dir, doc_bytes, budget, err). At the end
 * either nruns == 0 and slots[0..n) are the terms sorted by bytes, or
 * nruns > 0 and the whole table has been written as runs (table freed). */
int tl_ingest_corpus(tl_ingest *g, const char *corpus, tierlab_progress_fn progress,
                     void *ctx);
void tl_ingest_free(tl_ingest *g);
void tl_run_path(char *out, size_t len, const char *dir, uint32_t run);

/* ---- transform (transform.c) ---- */
typedef struct tl_tx_result {
    uint64_t terms, postings, blocks;
    uint64_t file_bytes[TIERLAB_FILES];
    uint64_t did_block_bytes, freq_block_bytes;
} tl_tx_result;

typedef struct tl_tx_params {
    const char *dir;
    const tierlab_codec *codec;
    uint32_t block_size, doc_bytes;
    uint64_t docs, budget, build_id;
} tl_tx_params;

/* The writer of the four files: terms in strictly increasing byte order,
 * each with its postings (DIDs strictly increasing, < docs). */
typedef struct tl_tx {
    tl_tx_params p;
    const tierlab_codec *dc, *fc;
    tl_wbuf w[TIERLAB_FILES], pool;
    char *paths[TIERLAB_FILES];
    char pool_path[4096];
    uint8_t *enc;
    uint32_t dbuf[256], fbuf[256];
    uint32_t nstage, prev_last, checked_last, started;
    uint32_t rec_crc; /* CRC-32C of the current term's skip record so far */
    uint32_t did_cum, freq_cum; /* CRC-32C of the current term's DID / freq bytes so far */
    uint64_t term_left;
    char *last_term;
    uint32_t last_len, last_cap;
    uint64_t terms, postings, blocks, did_bytes, freq_bytes;
    char *err;
    size_t errlen;
} tl_tx;

int tl_tx_open(tl_tx *x, const tl_tx_params *p, char *err, size_t errlen);
int tl_tx_term(tl_tx *x, const char *s, uint32_t len, uint64_t count);
int tl_tx_add(tl_tx *x, const uint32_t *dids, const uint32_t *freqs, uint64_t n);
int tl_tx_end_term(tl_tx *x);
/* Append the pool, write the headers, fsync and close; then tl_tx_abort. */
int tl_tx_finish(tl_tx *x, tl_tx_result *res);
/* Close everything without finishing (idempotent). */
void tl_tx_abort(tl_tx *x);

/* Sorted table or runs -> the four files. `progress` (may be NULL) is called
 * with (done, done) every TL_TX_PROGRESS_TERMS terms, a chance to cancel
 * (TIERLAB_ECANCELED) during the merge as well as during the ingest. */
#define TL_TX_PROGRESS_TERMS 4096u
int tl_transform(const tl_tx_params *p, tl_ingest *g, tl_tx_result *res,
                 tierlab_progress_fn progress, void *ctx, uint64_t done, char *err,
                 size_t errlen);

#endif
