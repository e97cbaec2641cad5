/* fuzz_index.c — libFuzzer harness for opening and querying an index
 * (tierlab_index_open and everything that reads an open index), public API
 * only.
 *
 * An input is a whole index directory, the files back to back:
 *   byte 0      flags: bit 0 place every file in "dram" (else "storage");
 *               bit 1 fix up each .bin header after the mutation (file size
 *               field = the file's length, header checksum recomputed), so
 *               mutations reach past the checksum; bit 2 (with bit 1) copy
 *               dict.bin's build id, codec, block size and totals into the
 *               other three headers first, so one mutated total reaches the
 *               checks that compare them; bits 3-4 pick k (1, 3, 10, 1024)
 *   bytes 1-16  the lengths of dict.bin, skip.bin, dids.bin and freqs.bin
 *               (u32, little-endian; each cut to the bytes left)
 *   the rest    those four files, then manifest.json (all remaining bytes)
 * tests/kernels/test_native_builds.py seeds it with small real indexes in
 * this layout (one per codec, both block sizes).
 *
 * The files are written into a scratch directory and opened. A refusal must
 * be TIERLAB_EFORMAT or TIERLAB_EIO with a message. An index that opens is
 * queried through every call that reads it (the first 64 terms: term_at,
 * lookup, find, term_extent(s), postings, SINGLE and AND queries, and a few
 * fixed terms); each must return a documented value: a result, or
 * TIERLAB_ECORRUPT (a checksum or invariant failed, kernels/formats/index.md
 * "Checksums"), TIERLAB_EFORMAT or TIERLAB_EINVAL for corrupt data. Results must keep the
 * contract whatever the bytes say (at most k hits, sorted by score, ties by
 * DID, finite scores; a DID may repeat: a corrupt block that decodes to a
 * repeated DID is not detected, see tl_fz_check_hits). Anything else aborts; ASan and UBSan catch the rest. */
#include "fuzz_common.h"

#include <math.h>

#include "tierlab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TL_FZ_TERMS 64          /* terms of an opened index exercised per input */
#define TL_FZ_MAX_POSTINGS 65536 /* larger posting counts are not decoded (memory) */

static const char *const tl_fz_names[5] = {"dict.bin", "skip.bin", "dids.bin", "freqs.bin",
                                           "manifest.json"};

/* Header fields (offsets of kernels/formats/index.md's common header). */
enum { H_BLOCK = 12, H_CODEC = 16, H_BUILD = 48, H_FILE_BYTES = 56, H_DOCS = 64, H_HASH = 120 };

static void tl_fz_fix_headers(uint8_t *file[4], size_t len[4], int copy_dict) {
    for (int f = 0; f < 4; f++) {
        if (len[f] < 128) continue;
        if (copy_dict && f && len[0] >= 128) {
            memcpy(file[f] + H_BLOCK, file[0] + H_BLOCK, 4);
            memcpy(file[f] + H_CODEC, file[0] + H_CODEC, 32 + 8); /* codec, build id */
            memcpy(file[f] + H_DOCS, file[0] + H_DOCS, 36);       /* totals, doc_bytes */
        }
        tl_fz_put64(file[f] + H_FILE_BYTES, len[f]);
        tl_fz_put64(file[f] + H_HASH, tl_fz_xxh64(file[f], 120, 0));
    }
}

static void tl_fz_check_hits(const tierlab_hit *hits, int r, uint32_t k, const tierlab_query_stats *st) {
    if (r < 0) {
        TL_FZ_CHECK(r == TIERLAB_EFORMAT || r == TIERLAB_EINVAL || r == TIERLAB_ECORRUPT,
                    "tierlab_query returned %d", r);
        return;
    }
    TL_FZ_CHECK((uint32_t)r <= k && st->results == (uint32_t)r,
                "tierlab_query: %d hits, k %u, stats.results %u", r, k, st->results);
    for (int i = 0; i < r; i++) {
        TL_FZ_CHECK(isfinite(hits[i].score), "hit %d: score %g", i, hits[i].score);
        /* <= on DIDs: a corrupt block may repeat a DID, which the query does not
         * check (tierlab.h promises EFORMAT for corrupt blocks it detects, not
         * that it detects every one); the order itself must hold */
        TL_FZ_CHECK(!i || hits[i - 1].score > hits[i].score ||
                        (hits[i - 1].score == hits[i].score && hits[i - 1].did <= hits[i].did),
                    "hits %d and %d out of order: (did %u, score %.17g) then (did %u, score %.17g)",
                    i - 1, i, hits[i - 1].did, hits[i - 1].score, hits[i].did, hits[i].score);
    }
}

static void tl_fz_query(tierlab_query_ctx *q, uint32_t k, tierlab_hit *hits, const char *const *t,
                        const uint32_t *len, uint32_t n) {
    tierlab_query_stats st;
    memset(&st, 0, sizeof st);
    int r = tierlab_query(q, n == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND, t, len, n, hits, &st);
    tl_fz_check_hits(hits, r, k, &st);
    TL_FZ_CHECK(r >= 0 || tierlab_query_error(q)[0], "tierlab_query failed without a message");
}

static void tl_fz_exercise(tierlab_index *ix, uint32_t k) {
    tierlab_index_info info;
    tierlab_index_get_info(ix, &info);
    /* the dictionary an accepted index claims must lie inside dict.bin */
    TL_FZ_CHECK(info.file_bytes[0] >= 128 && info.terms <= (info.file_bytes[0] - 128) / 32,
                "an index of %llu terms opened with a dict.bin of %llu bytes",
                (unsigned long long)info.terms, (unsigned long long)info.file_bytes[0]);
    tierlab_query_ctx *q = tierlab_query_ctx_new(ix, k);
    TL_FZ_CHECK(q != NULL, "tierlab_query_ctx_new failed");
    tierlab_hit *hits = tl_fz_alloc(k * sizeof *hits);
    char err[TIERLAB_ERRMSG];
    uint64_t n = info.terms < TL_FZ_TERMS ? info.terms : TL_FZ_TERMS;
    const char *prev = NULL;
    uint32_t prev_len = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *t;
        uint32_t len, p;
        int r = tierlab_index_term_at(ix, i, &t, &len, &p);
        if (r == TIERLAB_EFORMAT || r == TIERLAB_ECORRUPT) continue; /* refused, documented */
        TL_FZ_CHECK(r == 0, "term_at(%llu) returned %d", (unsigned long long)i, r);
        volatile char sink = 0; /* the term bytes must be readable */
        for (uint32_t j = 0; j < len; j++) sink ^= t[j];
        (void)sink;
        uint64_t post = 0, at = 0;
        r = tierlab_index_lookup(ix, t, len, &post);
        TL_FZ_CHECK(r == 0 || r == 1 || r == TIERLAB_ECORRUPT, "lookup returned %d", r);
        r = tierlab_index_find(ix, t, len, &at);
        TL_FZ_CHECK(r == 0 || r == 1 || r == TIERLAB_EFORMAT || r == TIERLAB_ECORRUPT,
                    "find returned %d", r);
        TL_FZ_CHECK(r != 1 || at < info.terms, "find: position %llu of %llu terms",
                    (unsigned long long)at, (unsigned long long)info.terms);
        tierlab_term_extent e;
        r = tierlab_index_term_extent(ix, i, &e);
        TL_FZ_CHECK(r == 0 || r == TIERLAB_EFORMAT || r == TIERLAB_ECORRUPT,
                    "term_extent returned %d", r);
        if (p <= TL_FZ_MAX_POSTINGS) {
            uint32_t *dids = tl_fz_alloc((size_t)p * sizeof *dids);
            uint32_t *freqs = tl_fz_alloc((size_t)p * sizeof *freqs);
            int64_t got = tierlab_index_postings(ix, i, dids, freqs, err, sizeof err);
            TL_FZ_CHECK(got == (int64_t)p ||
                            ((got == TIERLAB_EFORMAT || got == TIERLAB_ECORRUPT) && err[0]),
                        "postings(%llu) of %u returned %lld", (unsigned long long)i, p, (long long)got);
            free(dids);
            free(freqs);
            tl_fz_query(q, k, hits, &t, &len, 1);
            if (prev) {
                const char *two[2] = {prev, t};
                uint32_t lens[2] = {prev_len, len};
                tl_fz_query(q, k, hits, two, lens, 2);
            }
        }
        prev = t;
        prev_len = len;
    }
    if (n) {
        tierlab_term_extent *ext = tl_fz_alloc(n * sizeof *ext);
        int64_t r = tierlab_index_term_extents(ix, 0, n, ext);
        TL_FZ_CHECK(r == (int64_t)n || r == TIERLAB_EFORMAT || r == TIERLAB_ECORRUPT,
                    "term_extents returned %lld", (long long)r);
        free(ext);
    }
    /* terms that may or may not be there: short, exactly 8 bytes, longer (pool) */
    static const char *const fixed[] = {"a", "t0", "every", "abcdefgh", "abcdefghijk", "zzzzzzzzzz"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) {
        uint32_t len = (uint32_t)strlen(fixed[i]);
        uint64_t at;
        int r = tierlab_index_find(ix, fixed[i], len, &at);
        TL_FZ_CHECK(r == 0 || r == 1 || r == TIERLAB_EFORMAT || r == TIERLAB_ECORRUPT,
                    "find returned %d", r);
        tl_fz_query(q, k, hits, &fixed[i], &len, 1);
    }
    free(hits);
    tierlab_query_ctx_free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 17) return 0;
    static const uint32_t ks[4] = {1, 3, 10, 1024};
    uint8_t flags = data[0];
    uint32_t k = ks[(flags >> 3) & 3];
    const uint8_t *p = data + 17, *end = data + size;
    uint8_t *file[5];
    size_t len[5];
    for (int f = 0; f < 5; f++) {
        size_t left = (size_t)(end - p);
        len[f] = f < 4 ? tl_fz_le32(data + 1 + 4 * f) : left;
        if (len[f] > left) len[f] = left;
        file[f] = tl_fz_alloc(len[f]);
        if (len[f]) memcpy(file[f], p, len[f]);
        p += len[f];
    }
    if (flags & 2) tl_fz_fix_headers(file, len, flags & 4);
    char path[1024];
    for (int f = 0; f < 5; f++) tl_fz_write(tl_fz_path(path, sizeof path, tl_fz_names[f]), file[f], len[f]);
    for (int f = 0; f < 5; f++) free(file[f]);

    tierlab_index *ix = NULL;
    char err[TIERLAB_ERRMSG];
    int rc = tierlab_index_open(tl_fz_dir(), flags & 1 ? "dram" : "storage", &ix, err, sizeof err);
    if (rc != 0) {
        TL_FZ_CHECK((rc == TIERLAB_EFORMAT || rc == TIERLAB_EIO) && !ix && err[0],
                    "tierlab_index_open returned %d (message '%s')", rc, err);
        return 0;
    }
    tl_fz_exercise(ix, k);
    tierlab_index_close(ix);
    return 0;
}
