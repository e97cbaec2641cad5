/* transform.c — the sorted table (or the merged runs) -> dict.bin, skip.bin,
 * dids.bin, freqs.bin (docs/engine.md "Indexing"; layout in format.h).
 * Terms arrive sorted, so the dictionary is written in order and needs no
 * sort of its own; a term's postings are re-cut into blocks of block_size
 * whatever the chunking of the table or the runs. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"

/* ---- sources: the in-memory table or one run file ---- */
typedef struct tl_src {
    uint32_t idx; /* run number: ties between equal terms go in run order */
    int is_run;
    /* memory */
    tl_term *const *terms;
    size_t nterms, ti;
    const tl_chunk *chunk;
    uint32_t ci;
    /* run */
    tl_rbuf rb;
    char *term_buf;
    uint32_t pairs[2 * 256];
    /* current term */
    const char *term;
    uint32_t len, count;
} tl_src;

/* 1 = a term is current, 0 = exhausted, < 0 error. */
static int tl_src_next(tl_src *s, uint32_t max_len, char *err, size_t errlen) {
    if (!s->is_run) {
        if (s->ti == s->nterms) return 0;
        const tl_term *t = s->terms[s->ti++];
        s->term = t->s;
        s->len = t->len;
        s->count = t->count;
        s->chunk = t->head;
        s->ci = 0;
        return 1;
    }
    uint32_t v;
    int rc = tl_rbuf_read(&s->rb, &v, 4, err, errlen);
    if (rc == 1) return 0;
    if (rc) return rc;
    if (v == 0 || v > max_len)
        return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: bad term length %u", s->rb.path, v);
    s->len = v;
    rc = tl_rbuf_read(&s->rb, s->term_buf, v, err, errlen);
    if (!rc) rc = tl_rbuf_read(&s->rb, &s->count, 4, err, errlen);
    if (rc) return rc < 0 ? rc : tl_err(err, errlen, TIERLAB_EFORMAT, "%s: truncated", s->rb.path);
    s->term = s->term_buf;
    return 1;
}

/* Read the next n (<= 256) postings of the current term. */
static int tl_src_read(tl_src *s, uint32_t *dids, uint32_t *freqs, uint32_t n, char *err,
                       size_t errlen) {
    if (!s->is_run) {
        for (uint32_t i = 0; i < n;) {
            const tl_chunk *c = s->chunk;
            uint32_t take = c->n - s->ci < n - i ? c->n - s->ci : n - i;
            memcpy(dids + i, c->v + s->ci, 4 * (size_t)take);
            memcpy(freqs + i, c->v + c->cap + s->ci, 4 * (size_t)take);
            i += take;
            s->ci += take;
            if (s->ci == c->n) {
                s->chunk = c->next;
                s->ci = 0;
            }
        }
        return 0;
    }
    int rc = tl_rbuf_read(&s->rb, s->pairs, 8 * (size_t)n, err, errlen);
    if (rc) return rc < 0 ? rc : tl_err(err, errlen, TIERLAB_EFORMAT, "%s: truncated", s->rb.path);
    for (uint32_t i = 0; i < n; i++) {
        dids[i] = s->pairs[2 * i];
        freqs[i] = s->pairs[2 * i + 1];
    }
    return 0;
}

static int tl_src_less(const tl_src *a, const tl_src *b) {
    uint32_t m = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->term, b->term, m);
    if (c) return c < 0;
    if (a->len != b->len) return a->len < b->len;
    return a->idx < b->idx;
}

static void tl_heap_down(tl_src **h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && tl_src_less(h[l], h[m])) m = l;
        if (l + 1 < n && tl_src_less(h[l + 1], h[m])) m = l + 1;
        if (m == i) return;
        tl_src *t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* ---- the writer (also behind tierlab_index_writer) ---- */
static int tl_emit_block(tl_tx *x) {
    uint32_t n = x->nstage;
    for (uint32_t i = 0; i < n; i++) { /* strictly increasing DIDs, below the document count */
        if ((x->started && x->dbuf[i] <= x->checked_last) || x->dbuf[i] >= x->p.docs)
            return tl_err(x->err, x->errlen, TIERLAB_EINVAL,
                          "term %.*s: DID %u after %u (DIDs must increase and be < %llu)",
                          (int)(x->last_len < 64 ? x->last_len : 64), x->last_term, x->dbuf[i],
                          x->started ? x->checked_last : 0, (unsigned long long)x->p.docs);
        x->checked_last = x->dbuf[i];
        x->started = 1;
    }
    tl_skip_entry e = {x->dbuf[0], x->prev_last, x->w[TIERLAB_FILE_DIDS].pos,
                       x->w[TIERLAB_FILE_FREQS].pos, 0, 0};
    int64_t nd = x->dc->encode(x->dbuf, n, x->prev_last, x->enc);
    if (nd <= 0)
        return tl_err(x->err, x->errlen, nd < 0 ? (int)nd : TIERLAB_EINVAL,
                      "codec %s cannot encode a DID block (error %lld)", x->dc->name,
                      (long long)nd);
    x->did_cum = tl_crc32c(x->did_cum, x->enc, (size_t)nd);
    e.did_crc = x->did_cum; /* of the term's DID bytes up to here */
    int rc = tl_wbuf_write(&x->w[TIERLAB_FILE_DIDS], x->enc, (size_t)nd, x->err, x->errlen);
    if (rc) return rc;
    int64_t nf = x->fc->encode(x->fbuf, n, 0, x->enc);
    if (nf <= 0)
        return tl_err(x->err, x->errlen, nf < 0 ? (int)nf : TIERLAB_EINVAL,
                      "codec %s cannot encode a freq block (error %lld)", x->fc->name,
                      (long long)nf);
    x->freq_cum = tl_crc32c(x->freq_cum, x->enc, (size_t)nf);
    e.freq_crc = x->freq_cum;
    rc = tl_wbuf_write(&x->w[TIERLAB_FILE_FREQS], x->enc, (size_t)nf, x->err, x->errlen);
    x->rec_crc = tl_crc32c(x->rec_crc, &e, sizeof e);
    if (!rc) rc = tl_wbuf_write(&x->w[TIERLAB_FILE_SKIP], &e, sizeof e, x->err, x->errlen);
    x->did_bytes += (uint64_t)nd;
    x->freq_bytes += (uint64_t)nf;
    x->prev_last = x->dbuf[n - 1];
    x->blocks++;
    x->nstage = 0;
    return rc;
}

int tl_tx_open(tl_tx *x, const tl_tx_params *p, char *err, size_t errlen) {
    memset(x, 0, sizeof *x);
    x->p = *p;
    x->dc = p->codec;
    x->fc = tierlab_codec_freq(p->codec);
    x->err = err;
    x->errlen = errlen;
    for (int f = 0; f < TIERLAB_FILES; f++) x->w[f].fd = -1;
    x->pool.fd = -1;
    snprintf(x->pool_path, sizeof x->pool_path, "%s/dict.pool.tmp", p->dir);
    size_t eb = x->dc->max_encoded_bytes(p->block_size), fb = x->fc->max_encoded_bytes(p->block_size);
    x->enc = malloc(eb > fb ? eb : fb);
    if (!x->enc) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    int rc = 0;
    for (int f = 0; f < TIERLAB_FILES && !rc; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", p->dir, tierlab_index_file_name(f));
        x->paths[f] = strdup(path);
        rc = tl_wbuf_open(&x->w[f], x->paths[f], 1u << 20, err, errlen);
        static const uint8_t zero[TL_HDR_BYTES];
        if (!rc) rc = tl_wbuf_write(&x->w[f], zero, sizeof zero, err, errlen);
        x->w[f].crc_on = 1; /* the body's CRC, for the header */
    }
    if (!rc) rc = tl_wbuf_open(&x->pool, x->pool_path, 1u << 20, err, errlen);
    return rc;
}

int tl_tx_term(tl_tx *x, const char *s, uint32_t len, uint64_t count) {
    if (count == 0 || count > UINT32_MAX || count > x->p.docs)
        return tl_err(x->err, x->errlen, TIERLAB_EINVAL, "term %.*s: %llu postings (1..%llu)",
                      (int)(len < 64 ? len : 64), s, (unsigned long long)count,
                      (unsigned long long)x->p.docs);
    if (len == 0 || memchr(s, 0, len))
        return tl_err(x->err, x->errlen, TIERLAB_EINVAL, "terms must be non-empty, without NUL bytes");
    if (x->terms) { /* strictly increasing terms: the dictionary is a sorted array */
        uint32_t m = len < x->last_len ? len : x->last_len;
        int c = memcmp(x->last_term, s, m);
        if (c > 0 || (c == 0 && x->last_len >= len))
            return tl_err(x->err, x->errlen, TIERLAB_EINVAL,
                          "terms out of order: '%.*s' after '%.*s' (byte order, no repeats)",
                          (int)(len < 64 ? len : 64), s,
                          (int)(x->last_len < 64 ? x->last_len : 64), x->last_term);
    }
    if (len > x->last_cap) {
        char *t = realloc(x->last_term, len);
        if (!t) return tl_err(x->err, x->errlen, TIERLAB_ENOMEM, "out of memory");
        x->last_term = t;
        x->last_cap = len;
    }
    memcpy(x->last_term, s, len);
    x->last_len = len;
    uint32_t B = x->p.block_size;
    tl_skip_head h = {(uint32_t)count, (uint32_t)((count + B - 1) / B)};
    uint64_t prefix = 0;
    for (uint32_t i = 0; i < 8; i++) prefix = (prefix << 8) | (i < len ? (uint8_t)s[i] : 0u);
    tl_dict_entry d = {prefix, x->w[TIERLAB_FILE_SKIP].pos, x->pool.pos, len, (uint32_t)count,
                       tl_crc32c(0, s, len), 0};
    d.entry_crc = tl_crc32c(0, &d, TL_DICT_CRC_BYTES);
    int rc = tl_wbuf_write(&x->w[TIERLAB_FILE_DICT], &d, sizeof d, x->err, x->errlen);
    if (!rc) rc = tl_wbuf_write(&x->pool, s, len, x->err, x->errlen);
    if (!rc) rc = tl_wbuf_write(&x->w[TIERLAB_FILE_SKIP], &h, sizeof h, x->err, x->errlen);
    x->rec_crc = tl_crc32c(0, &h, sizeof h);
    x->did_cum = x->freq_cum = 0;
    x->nstage = 0;
    x->prev_last = 0;
    x->started = 0;
    x->term_left = count;
    x->terms++;
    x->postings += count;
    return rc;
}

int tl_tx_add(tl_tx *x, const uint32_t *dids, const uint32_t *freqs, uint64_t n) {
    if (n > x->term_left)
        return tl_err(x->err, x->errlen, TIERLAB_EINVAL, "term %.*s: more postings than declared",
                      (int)(x->last_len < 64 ? x->last_len : 64), x->last_term);
    x->term_left -= n;
    while (n) {
        uint32_t room = x->p.block_size - x->nstage;
        uint32_t take = n < room ? (uint32_t)n : room;
        memcpy(x->dbuf + x->nstage, dids, 4 * (size_t)take);
        memcpy(x->fbuf + x->nstage, freqs, 4 * (size_t)take);
        x->nstage += take;
        dids += take;
        freqs += take;
        n -= take;
        if (x->nstage == x->p.block_size) {
            int rc = tl_emit_block(x);
            if (rc) return rc;
        }
    }
    return 0;
}

int tl_tx_end_term(tl_tx *x) {
    if (x->term_left)
        return tl_err(x->err, x->errlen, TIERLAB_EINVAL, "term %.*s: %llu postings missing",
                      (int)(x->last_len < 64 ? x->last_len : 64), x->last_term,
                      (unsigned long long)x->term_left);
    int rc = x->nstage ? tl_emit_block(x) : 0;
    if (rc) return rc;
    tl_skip_entry e = {TL_SKIP_END_DID, x->prev_last, x->w[TIERLAB_FILE_DIDS].pos,
                       x->w[TIERLAB_FILE_FREQS].pos, 0, 0};
    /* the record's last 4 bytes: the CRC of all its bytes before them */
    e.freq_crc = tl_crc32c(x->rec_crc, &e, offsetof(tl_skip_entry, freq_crc));
    return tl_wbuf_write(&x->w[TIERLAB_FILE_SKIP], &e, sizeof e, x->err, x->errlen);
}

/* Append the term pool to dict.bin. */
static int tl_append_pool(tl_tx *x) {
    tl_rbuf r;
    int rc = tl_rbuf_open(&r, x->pool_path, 1u << 20, x->err, x->errlen);
    if (rc) return rc;
    for (;;) {
        ssize_t got = read(r.fd, r.buf, r.cap);
        if (got < 0) {
            rc = tl_err(x->err, x->errlen, TIERLAB_EIO, "cannot read %s", x->pool_path);
            break;
        }
        if (got == 0) break;
        rc = tl_wbuf_write(&x->w[TIERLAB_FILE_DICT], r.buf, (size_t)got, x->err, x->errlen);
        if (rc) break;
    }
    tl_rbuf_close(&r);
    return rc;
}

int tl_tx_finish(tl_tx *x, tl_tx_result *res) {
    int rc = tl_wbuf_close(&x->pool, 0, x->err, x->errlen);
    if (!rc) rc = tl_append_pool(x);
    unlink(x->pool_path);
    /* Headers, now that the totals are known. */
    for (int f = 0; f < TIERLAB_FILES && !rc; f++) {
        tl_file_header h;
        memset(&h, 0, sizeof h);
        h.format_version = TIERLAB_INDEX_FORMAT_VERSION;
        h.block_size = x->p.block_size;
        snprintf(h.codec, sizeof h.codec, "%s", x->p.codec->name);
        h.build_id = x->p.build_id;
        h.file_bytes = x->w[f].pos;
        h.docs = x->p.docs;
        h.terms = x->terms;
        h.postings = x->postings;
        h.blocks = x->blocks;
        h.doc_bytes = x->p.doc_bytes;
        h.body_crc = x->w[f].crc;
        tl_header_seal(&h, f);
        rc = tl_wbuf_flush(&x->w[f], x->err, x->errlen);
        if (!rc) rc = tl_wbuf_pwrite(&x->w[f], &h, sizeof h, 0, x->err, x->errlen);
        res->file_bytes[f] = x->w[f].pos;
    }
    for (int f = 0; f < TIERLAB_FILES; f++) {
        int rc2 = tl_wbuf_close(&x->w[f], 1, x->err, x->errlen);
        if (!rc) rc = rc2;
    }
    res->terms = x->terms;
    res->postings = x->postings;
    res->blocks = x->blocks;
    res->did_block_bytes = x->did_bytes;
    res->freq_block_bytes = x->freq_bytes;
    tl_tx_abort(x);
    return rc;
}

void tl_tx_abort(tl_tx *x) {
    for (int f = 0; f < TIERLAB_FILES; f++) {
        tl_wbuf_close(&x->w[f], 0, NULL, 0);
        free(x->paths[f]);
        x->paths[f] = NULL;
    }
    tl_wbuf_close(&x->pool, 0, NULL, 0);
    free(x->enc);
    free(x->last_term);
    x->enc = NULL;
    x->last_term = NULL;
}

int tl_transform(const tl_tx_params *p, tl_ingest *g, tl_tx_result *res,
                 tierlab_progress_fn progress, void *ctx, uint64_t done, char *err,
                 size_t errlen) {
    tl_tx x;
    uint32_t nsrc = g->nruns ? g->nruns : 1;
    tl_src *srcs = calloc(nsrc, sizeof *srcs);
    tl_src **heap = calloc(nsrc, sizeof *heap);
    tl_src **group = calloc(nsrc, sizeof *group);
    int rc = tl_tx_open(&x, p, err, errlen);
    if (!rc && (!srcs || !heap || !group)) rc = tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    if (rc) goto done;

    /* Sources into the heap. */
    size_t nheap = 0;
    uint64_t rbuf = g->nruns ? p->budget / (2 * (uint64_t)g->nruns) : 0;
    if (rbuf > (1u << 20)) rbuf = 1u << 20;
    if (rbuf < (64u << 10)) rbuf = 64u << 10;
    for (uint32_t i = 0; i < nsrc; i++) {
        tl_src *s = &srcs[i];
        s->idx = i;
        s->rb.fd = -1;
        if (!g->nruns) {
            s->terms = g->slots;
            s->nterms = g->n;
        } else {
            char rp[4096];
            tl_run_path(rp, sizeof rp, p->dir, i);
            s->is_run = 1;
            s->term_buf = malloc(p->doc_bytes);
            if (!s->term_buf) {
                rc = tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
                goto done;
            }
            rc = tl_rbuf_open(&s->rb, strdup(rp), (size_t)rbuf, err, errlen);
            if (rc) goto done;
        }
        rc = tl_src_next(s, p->doc_bytes, err, errlen);
        if (rc < 0) goto done;
        if (rc == 1) heap[nheap++] = s;
        rc = 0;
    }
    for (size_t i = nheap; i-- > 0;) tl_heap_down(heap, nheap, i);

    /* Merge: all sources holding the smallest term, in run order. */
    uint32_t dids[256], freqs[256];
    uint32_t since = 0; /* terms since the last progress call */
    while (nheap && !rc) {
        if (progress && ++since == TL_TX_PROGRESS_TERMS) {
            since = 0;
            if (progress(ctx, done, done)) {
                rc = tl_err(err, errlen, TIERLAB_ECANCELED, "build cancelled");
                break;
            }
        }
        size_t ng = 0;
        uint64_t count = 0;
        tl_src *top = heap[0];
        do {
            group[ng++] = heap[0];
            count += heap[0]->count;
            heap[0] = heap[--nheap];
            tl_heap_down(heap, nheap, 0);
        } while (nheap && heap[0]->len == top->len &&
                 memcmp(heap[0]->term, top->term, top->len) == 0);
        rc = tl_tx_term(&x, top->term, top->len, count);
        for (size_t k = 0; k < ng && !rc; k++) {
            tl_src *s = group[k];
            for (uint32_t left = s->count; left && !rc;) {
                uint32_t take = left < 256 ? left : 256;
                rc = tl_src_read(s, dids, freqs, take, err, errlen);
                if (!rc) rc = tl_tx_add(&x, dids, freqs, take);
                left -= take;
            }
        }
        if (!rc) rc = tl_tx_end_term(&x);
        /* Next terms of the group go back into the heap (after the term is
         * written: run sources reuse their term buffer). */
        for (size_t k = 0; k < ng && !rc; k++) {
            int got = tl_src_next(group[k], p->doc_bytes, err, errlen);
            if (got < 0) rc = got;
            else if (got == 1) {
                heap[nheap++] = group[k];
                for (size_t i = nheap - 1; i > 0;) { /* sift up */
                    size_t up = (i - 1) / 2;
                    if (!tl_src_less(heap[i], heap[up])) break;
                    tl_src *t = heap[i];
                    heap[i] = heap[up];
                    heap[up] = t;
                    i = up;
                }
            }
        }
    }
    if (!rc) rc = tl_tx_finish(&x, res);
done:
    tl_tx_abort(&x);
    if (srcs) {
        for (uint32_t i = 0; i < nsrc; i++) {
            if (srcs[i].is_run) {
                free((char *)srcs[i].rb.path);
                tl_rbuf_close(&srcs[i].rb);
                free(srcs[i].term_buf);
            }
        }
    }
    free(srcs);
    free(heap);
    free(group);
    return rc;
}
