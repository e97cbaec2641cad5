/* terms.c — reading a term's postings for the APCache runtime: its extent in
 * the index, the block sources query cursors read through (index mmap,
 * emulated page cache, segment chain), copies of whole terms into segment
 * chains, and page-cache accounting.
 *
 * A term in the segment cache (docs/apcache.md "The segment cache") is laid out
 * in its chain as: one 8-byte entry per block {u32 offset of the DID block,
 * u32 offset of the freq block}, offsets from the start of the chain; then
 * all its DID blocks; then all its freq blocks (both exactly as in the
 * index files). Blocks may straddle segments; a straddling block is
 * gathered into the cursor's bounce buffer before it is decoded.
 *
 * Page accounting (both device modes): a page access is one distinct 4 KiB
 * page of dids.bin or freqs.bin touched by a term occurrence — by the blocks
 * a query decoded (a page shared by consecutive blocks counts once), or by
 * the whole term when a worker reads it. Real device: counted with mincore
 * on the index mapping just before the bytes are touched (resident = hit).
 * Emulated device: counted by the emulated page cache.
 *
 * Readahead on the real device (tl_real_pages): the run's readahead_bytes
 * decide what a miss reads, by the emulated page cache's rule (pagecache.c):
 * a missing page starts one readahead(2) of the run of missing pages from
 * it, at most ra_pages, to the end of the file or the first resident page,
 * and the pages of that run count as hits when touched. The kernel's own
 * read-around is off for these files (MADV_RANDOM on the mapping,
 * POSIX_FADV_RANDOM on the descriptors): otherwise the disk's read_ahead_kb
 * decides, and a read-around larger than the run's cgroup cap evicts pages
 * before they are touched, reading the index many times over. ra_pages 0
 * leaves it to the kernel. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "apcache.h"

int tl_term_extent(const struct tierlab_index *ix, uint64_t term, tl_extent *x) {
    tierlab_term_extent te; /* kernels/src/index/extent.c checks the record */
    int rc = tierlab_index_term_extent(ix, term, &te);
    if (rc) return rc;
    x->e = (const tl_skip_entry *)(ix->skip + te.skip_offset + sizeof(tl_skip_head));
    x->nb = (uint32_t)te.blocks;
    x->did_off = te.did_offset;
    x->did_len = te.did_bytes;
    x->freq_off = te.freq_offset;
    x->freq_len = te.freq_bytes;
    if ((x->did_len + x->freq_len + 8ull * x->nb) >> 32) return TIERLAB_EFORMAT; /* u32 offsets */
    return 0;
}

uint64_t tl_chain_bytes(const tl_extent *x) { return 8ull * x->nb + x->did_len + x->freq_len; }

int tl_chain_map(tl_cache_state *cs, uint64_t term, uint64_t n, uint8_t **segs) {
    uint32_t slot = tierlab_segcache_slot(cs->sc, term);
    if (!(slot & 0x80000000u)) return TIERLAB_EINVAL;
    int64_t g = slot & 0x7FFFFFFFu;
    for (uint64_t i = 0; i < n; i++) {
        if (g < 0 || (uint64_t)g >= cs->nsegments) return TIERLAB_EINVAL;
        segs[i] = tierlab_segcache_segment_ptr(cs->sc, g);
        g = tierlab_segcache_next(cs->sc, g);
    }
    return g == -1 ? 0 : TIERLAB_EINVAL; /* the chain has exactly n segments */
}

void tl_chain_write(uint8_t **segs, uint64_t segment_bytes, uint64_t pos, const void *p,
                    size_t n) {
    const uint8_t *src = p;
    while (n) {
        uint64_t s = pos / segment_bytes, o = pos % segment_bytes;
        size_t k = segment_bytes - o < n ? (size_t)(segment_bytes - o) : n;
        memcpy(segs[s] + o, src, k);
        src += k;
        pos += k;
        n -= k;
    }
}

static void tl_chain_read(uint8_t **segs, uint64_t segment_bytes, uint64_t pos, void *p,
                          size_t n) {
    uint8_t *dst = p;
    while (n) {
        uint64_t s = pos / segment_bytes, o = pos % segment_bytes;
        size_t k = segment_bytes - o < n ? (size_t)(segment_bytes - o) : n;
        memcpy(dst, segs[s] + o, k);
        dst += k;
        pos += k;
        n -= k;
    }
}

void tl_chain_write_table(uint8_t **segs, uint64_t segment_bytes, const tl_extent *x) {
    uint64_t head = 8ull * x->nb;
    for (uint32_t b = 0; b < x->nb; b++) {
        uint32_t ent[2] = {(uint32_t)(head + x->e[b].did_offset - x->did_off),
                           (uint32_t)(head + x->did_len + x->e[b].freq_offset - x->freq_off)};
        tl_chain_write(segs, segment_bytes, 8ull * b, ent, 8);
    }
}

/* ---- page accounting ------------------------------------------------------- */

void tl_real_pages(const tl_file_ref *f, uint64_t off, uint64_t len, uint64_t *last_page,
                   tl_pstats *ps) {
    if (!len) return;
    uint64_t p0 = off / TL_PAGE, p1 = (off + len - 1) / TL_PAGE;
    if (last_page && *last_page == p0) p0++;
    if (last_page) *last_page = p1;
    uint64_t file_pages = (f->len + TL_PAGE - 1) / TL_PAGE;
    unsigned char vec[TL_MAX_RA_PAGES];
    uint64_t w0 = 0, wn = 0; /* vec: residency of pages [w0, w0 + wn) */
    uint64_t issued = 0;     /* pages below it (from p0 on) we just read ahead */
    for (uint64_t p = p0; p <= p1; p++) {
        if (p < issued) { /* in our readahead run: a hit, as in the emulated cache */
            ps->hits++;
            continue;
        }
        /* a missing page needs the residency of up to ra_pages after it */
        uint64_t need = p + (f->ra_pages ? f->ra_pages : 1);
        if (need > file_pages) need = file_pages;
        if (p < w0 || need > w0 + wn) {
            /* the rest of this range, or a readahead run if longer, not a
             * fixed 1 MiB: a query's cursor calls this for every page it
             * enters, and mincore's cost grows with its window */
            uint64_t want = p1 - p + 1 > need - p ? p1 - p + 1 : need - p;
            if (want > TL_MAX_RA_PAGES) want = TL_MAX_RA_PAGES;
            w0 = p;
            wn = file_pages - p < want ? file_pages - p : want;
            if (mincore((void *)(f->map + p * TL_PAGE), wn * TL_PAGE, vec) != 0)
                memset(vec, 0, wn); /* cannot tell: count as read */
        }
        if (vec[p - w0] & 1) {
            ps->hits++;
            continue;
        }
        ps->misses++;
        if (!f->ra_pages) continue; /* the kernel reads it on the fault */
        uint64_t run = 1;
        while (run < f->ra_pages && p + run < w0 + wn && !(vec[p + run - w0] & 1)) run++;
        /* asynchronous: the touch that follows waits for the pages */
        (void)readahead(f->fd, (off_t)(p * TL_PAGE), (size_t)(run * TL_PAGE));
        issued = p + run;
    }
}

static int tl_range_held(const tl_reader *rd, const tl_file_ref *f, uint64_t off,
                         uint64_t len) {
    if (!len) return 1;
    if (rd->pc) return tl_pcache_holds(rd->pc, f, off, len);
    uint64_t p = off / TL_PAGE, p1 = (off + len - 1) / TL_PAGE;
    unsigned char vec[TL_MAX_RA_PAGES];
    while (p <= p1) {
        uint64_t n = p1 - p + 1 < TL_MAX_RA_PAGES ? p1 - p + 1 : TL_MAX_RA_PAGES;
        if (mincore((void *)(f->map + p * TL_PAGE), n * TL_PAGE, vec) != 0)
            return 1; /* cannot tell: copy it, reading what is missing */
        for (uint64_t i = 0; i < n; i++)
            if (!(vec[i] & 1)) return 0;
        p += n;
    }
    return 1;
}

int tl_term_held(const tl_reader *rd, const tl_extent *x) {
    return tl_range_held(rd, &rd->f[0], x->did_off, x->did_len) &&
           tl_range_held(rd, &rd->f[1], x->freq_off, x->freq_len);
}

/* ---- block sources ------------------------------------------------------------ */

static void tl_sink_copy(void *ctx, uint64_t pos, const uint8_t *p, size_t n) {
    memcpy((uint8_t *)ctx + pos, p, n);
}

static const uint8_t *tl_src_block(tl_block_src *bs, int kind, uint32_t b, uint64_t a,
                                   uint64_t z) {
    tl_src *s = (tl_src *)bs;
    size_t len = (size_t)(z - a);
    if (s->kind == TL_SRC_MAP) {
        tl_real_pages(&s->rd->f[kind], a, len, &s->last_page[kind], s->ps);
        return s->rd->f[kind].map + a;
    }
    if (len > s->bounce_len) {
        s->fail = 1;
        return NULL;
    }
    if (s->kind == TL_SRC_PCACHE) {
        if (tl_pcache_read(s->rd->pc, &s->rd->f[kind], a, len, tl_sink_copy, s->bounce,
                           &s->last_page[kind], s->ps)) {
            s->fail = 1;
            return NULL;
        }
        return s->bounce;
    }
    /* chain: the in-cache offset of the block, from the term's table */
    if (b >= s->nb) {
        s->fail = 1;
        return NULL;
    }
    uint32_t ent[2];
    tl_chain_read(s->segs, s->segment_bytes, 8ull * b, ent, 8);
    uint64_t pos = ent[kind];
    uint64_t head = 8ull * s->nb;
    /* the table must agree with the skip list (a wrong chain is a bug, not data) */
    uint64_t want = kind == 0 ? head + (a - s->did_base) : head + s->did_len + (a - s->freq_base);
    if (pos != want || a < (kind == 0 ? s->did_base : s->freq_base)) {
        s->fail = 1;
        return NULL;
    }
    uint64_t seg = pos / s->segment_bytes, o = pos % s->segment_bytes;
    if (o + len <= s->segment_bytes) return s->segs[seg] + o;
    tl_chain_read(s->segs, s->segment_bytes, pos, s->bounce, len);
    return s->bounce;
}

int tl_src_init(tl_src *s, size_t bounce_len, uint64_t max_segments) {
    memset(s, 0, sizeof *s);
    s->base.block = tl_src_block;
    s->base.ctx = s;
    s->bounce_len = bounce_len;
    s->bounce = malloc(bounce_len ? bounce_len : 1);
    s->nsegs_cap = max_segments;
    s->segs = malloc((max_segments ? max_segments : 1) * sizeof *s->segs);
    return s->bounce && s->segs ? 0 : TIERLAB_ENOMEM;
}

void tl_src_free(tl_src *s) {
    free(s->bounce);
    free(s->segs);
    s->bounce = NULL;
    s->segs = NULL;
}

void tl_src_storage(tl_src *s, const tl_reader *rd, tl_pstats *ps) {
    s->kind = rd->pc ? TL_SRC_PCACHE : TL_SRC_MAP;
    s->rd = rd;
    s->ps = ps;
    s->last_page[0] = s->last_page[1] = UINT64_MAX;
    s->fail = 0;
}

int tl_src_chain(tl_src *s, tl_cache_state *cs, uint64_t term, uint64_t nseg,
                 const tl_extent *x) {
    if (nseg > s->nsegs_cap) return TIERLAB_EINVAL;
    int rc = tl_chain_map(cs, term, nseg, s->segs);
    if (rc) return rc;
    s->kind = TL_SRC_CHAIN;
    s->segment_bytes = cs->segment_bytes;
    s->nb = x->nb;
    s->did_base = x->did_off;
    s->freq_base = x->freq_off;
    s->did_len = x->did_len;
    s->fail = 0;
    return 0;
}

/* ---- whole-term reads (workers) ------------------------------------------------ */

typedef struct tl_chain_sink {
    uint8_t **segs;
    uint64_t segment_bytes, base;
} tl_chain_sink;

static void tl_sink_chain(void *ctx, uint64_t pos, const uint8_t *p, size_t n) {
    tl_chain_sink *c = ctx;
    tl_chain_write(c->segs, c->segment_bytes, c->base + pos, p, n);
}

static void tl_sink_4k(void *ctx, uint64_t pos, const uint8_t *p, size_t n) {
    (void)pos;
    memcpy(ctx, p, n); /* n <= one page */
}

int tl_read_term_touch(const tl_reader *rd, const tl_extent *x, uint8_t *buf4k, tl_pstats *ps) {
    uint64_t off[2] = {x->did_off, x->freq_off}, len[2] = {x->did_len, x->freq_len};
    for (int k = 0; k < 2; k++) {
        const tl_file_ref *f = &rd->f[k];
        uint64_t last = UINT64_MAX;
        if (rd->pc) {
            int rc = tl_pcache_read(rd->pc, f, off[k], len[k], tl_sink_4k, buf4k, &last, ps);
            if (rc) return rc;
            continue;
        }
        tl_real_pages(f, off[k], len[k], &last, ps);
        for (uint64_t a = off[k]; a < off[k] + len[k];) {
            uint64_t n = TL_PAGE - a % TL_PAGE; /* page-aligned 4 KiB reads */
            if (n > off[k] + len[k] - a) n = off[k] + len[k] - a;
            struct iovec v = {buf4k, (size_t)n};
            int rc = tl_device_read(rd->dev, f->fd, &v, 1, a, f->dev_addr + a, n);
            if (rc) return rc;
            a += n;
        }
    }
    return 0;
}

int tl_read_term_chain(const tl_reader *rd, const tl_extent *x, uint8_t **segs,
                       uint64_t segment_bytes, int direct, tl_pstats *ps) {
    tl_chain_write_table(segs, segment_bytes, x);
    uint64_t off[2] = {x->did_off, x->freq_off}, len[2] = {x->did_len, x->freq_len};
    uint64_t pos[2] = {8ull * x->nb, 8ull * x->nb + x->did_len};
    for (int k = 0; k < 2; k++) {
        const tl_file_ref *f = &rd->f[k];
        uint64_t last = UINT64_MAX;
        if (!len[k]) continue;
        if (rd->pc) {
            tl_chain_sink cs = {segs, segment_bytes, pos[k]};
            int rc = tl_pcache_read(rd->pc, f, off[k], len[k], tl_sink_chain, &cs, &last, ps);
            if (rc) return rc;
            continue;
        }
        tl_real_pages(f, off[k], len[k], &last, ps);
        if (!direct) { /* from the page cache, through the mapping */
            tl_chain_write(segs, segment_bytes, pos[k], f->map + off[k], (size_t)len[k]);
            continue;
        }
        /* pread straight into the segments */
        uint64_t first = pos[k] / segment_bytes, lastseg = (pos[k] + len[k] - 1) / segment_bytes;
        int n = (int)(lastseg - first + 1);
        struct iovec *v = malloc((size_t)n * sizeof *v);
        if (!v) return TIERLAB_ENOMEM;
        uint64_t p = pos[k], left = len[k];
        for (int i = 0; i < n; i++) {
            uint64_t o = p % segment_bytes, m = segment_bytes - o < left ? segment_bytes - o : left;
            v[i].iov_base = segs[first + (uint64_t)i] + o;
            v[i].iov_len = (size_t)m;
            p += m;
            left -= m;
        }
        int rc = tl_device_read(rd->dev, f->fd, v, n, off[k], f->dev_addr + off[k], len[k]);
        free(v);
        if (rc) return rc;
    }
    return 0;
}
