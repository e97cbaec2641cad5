/* fuzz_build.c — libFuzzer harness for corpus ingest: tierlab_index_build
 * (kernels/src/index/ingest.c, transform.c, build.c: tokenising, the term
 * table, sorted runs, merge, encoding) and tierlab_corpus_count_terms
 * (kernels/src/corpus/terms.c) on any corpus bytes, checked against a
 * reference written here from tierlab.h's corpus rules. Public API only.
 * (The JSONL and WET readers are Python, tierlab/engine/ingest.py: they are
 * fuzzed from pytest, tests/corpus/test_ingest_fuzz.py.)
 *
 * An input:
 *   byte 0    the codec: registry entry byte % count
 *   byte 1    bit 0: block size 128 (else 256); bit 1: the smallest memory
 *             budget (64 KiB), so a larger table is spilled as sorted runs
 *             and merged; bits 2-7 (v): doc_bytes 1 + 3v, or 1024 for v = 63
 *   the rest  the corpus file
 *
 * Checks (any failure aborts):
 *  - the build succeeds (every byte string is a corpus) and its stats give
 *    the reference's documents, truncated documents, tokens, terms, postings
 *    and corpus bytes;
 *  - the index opens, and its dictionary and every posting list (DIDs and
 *    frequencies) are the reference's, term by term in dictionary order;
 *  - count_terms on the same file succeeds with the reference's documents,
 *    tokens and terms of the uncut lines, and its TSV is the reference's
 *    term table row by row (occurrences descending, then term bytes).
 * The reference: a document per '\n' (and a non-empty last line), each cut
 * to doc_bytes for the index, tokens the maximal runs of [A-Za-z0-9]
 * lower-cased, a term's repeats in a document adding up to its frequency. */
#include "fuzz_common.h"

#include "tierlab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct tl_tok {
    uint32_t off, len; /* in the lower-cased corpus */
    uint32_t did;
} tl_tok;

static const uint8_t *tl_lower; /* the lower-cased corpus, for the comparators */

static int tl_term_cmp(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int tl_tok_cmp(const void *x, const void *y) {
    const tl_tok *a = x, *b = y;
    int c = tl_term_cmp(tl_lower + a->off, a->len, tl_lower + b->off, b->len);
    return c ? c : (a->did > b->did) - (a->did < b->did);
}

static int tl_alnum(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The reference postings of corpus[0..n) with lines cut to doc_bytes (0: no
 * cut): tokens sorted by (term, DID) into *out (caller frees); returns the
 * token count. docs and truncated are set. */
static size_t tl_reference(const uint8_t *low, size_t n, uint32_t doc_bytes, tl_tok **out,
                           uint64_t *docs, uint64_t *truncated) {
    tl_tok *t = tl_fz_alloc((n / 2 + 1) * sizeof *t);
    size_t nt = 0;
    uint64_t did = 0;
    *truncated = 0;
    for (size_t start = 0; start < n; did++) {
        const uint8_t *nl = memchr(low + start, '\n', n - start);
        size_t stop = nl ? (size_t)(nl - low) : n, end = stop;
        if (doc_bytes && end - start > doc_bytes) {
            end = start + doc_bytes;
            ++*truncated;
        }
        for (size_t i = start; i < end;) {
            if (!tl_alnum(low[i])) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < end && tl_alnum(low[j])) j++;
            t[nt++] = (tl_tok){(uint32_t)i, (uint32_t)(j - i), (uint32_t)did};
            i = j;
        }
        start = stop + 1;
    }
    *docs = did;
    tl_lower = low;
    qsort(t, nt, sizeof *t, tl_tok_cmp);
    *out = t;
    return nt;
}

typedef struct tl_term_row {
    uint32_t off, len;
    uint64_t postings, occurrences;
} tl_term_row;

static int tl_row_cmp(const void *x, const void *y) {
    const tl_term_row *a = x, *b = y;
    if (a->occurrences != b->occurrences) return a->occurrences < b->occurrences ? 1 : -1;
    return tl_term_cmp(tl_lower + a->off, a->len, tl_lower + b->off, b->len);
}

/* count_terms against the reference of the uncut lines. */
static void tl_check_count_terms(const char *corpus, const uint8_t *low, size_t n) {
    tl_tok *t;
    uint64_t docs, cut;
    size_t nt = tl_reference(low, n, 0, &t, &docs, &cut);
    tl_term_row *rows = tl_fz_alloc((nt + 1) * sizeof *rows);
    size_t nr = 0;
    for (size_t i = 0; i < nt; i++) {
        if (!i || tl_tok_cmp(&(tl_tok){t[i].off, t[i].len, 0}, &(tl_tok){t[i - 1].off, t[i - 1].len, 0}))
            rows[nr++] = (tl_term_row){t[i].off, t[i].len, 0, 0};
        tl_term_row *r = &rows[nr - 1];
        if (!r->occurrences || t[i].did != t[i - 1].did) r->postings++;
        r->occurrences++;
    }
    qsort(rows, nr, sizeof *rows, tl_row_cmp);
    char tsv[1024];
    tl_fz_path(tsv, sizeof tsv, "terms.tsv");
    tierlab_corpus_stats st;
    memset(&st, 0, sizeof st);
    int rc = tierlab_corpus_count_terms(corpus, tsv, NULL, NULL, &st);
    TL_FZ_CHECK(rc == 0, "count_terms returned %d", rc);
    uint64_t maxp = 0;
    for (size_t i = 0; i < nr; i++) maxp = rows[i].postings > maxp ? rows[i].postings : maxp;
    TL_FZ_CHECK(st.docs == docs && st.bytes == n && st.tokens == nt && st.terms == nr &&
                    st.max_postings == maxp,
                "count_terms: docs %llu bytes %llu tokens %llu terms %llu max_postings %llu; "
                "the reference: %llu %zu %zu %zu %llu",
                (unsigned long long)st.docs, (unsigned long long)st.bytes,
                (unsigned long long)st.tokens, (unsigned long long)st.terms,
                (unsigned long long)st.max_postings, (unsigned long long)docs, n, nt, nr,
                (unsigned long long)maxp);
    FILE *f = fopen(tsv, "r");
    TL_FZ_CHECK(f != NULL, "count_terms wrote no %s", tsv);
    char *line = NULL;
    size_t cap = 0;
    ssize_t got = getline(&line, &cap, f);
    TL_FZ_CHECK(got > 0 && strcmp(line, "term\tpostings\toccurrences\n") == 0,
                "count_terms: the TSV's header is not term/postings/occurrences");
    for (size_t i = 0; i < nr; i++) {
        char want[64];
        got = getline(&line, &cap, f);
        int w = snprintf(want, sizeof want, "\t%llu\t%llu\n", (unsigned long long)rows[i].postings,
                         (unsigned long long)rows[i].occurrences);
        TL_FZ_CHECK(got == (ssize_t)(rows[i].len + w) && !memcmp(line, low + rows[i].off, rows[i].len) &&
                        !memcmp(line + rows[i].len, want, (size_t)w),
                    "count_terms: TSV row %zu is '%.*s', the reference '%.*s%.*s'", i + 1,
                    (int)(got > 0 ? got - 1 : 0), line, (int)rows[i].len,
                    (const char *)low + rows[i].off, (int)w - 1, want);
    }
    TL_FZ_CHECK(getline(&line, &cap, f) == -1, "count_terms: more TSV rows than the %zu terms", nr);
    free(line);
    fclose(f);
    free(rows);
    free(t);
}

/* The index in dir against the reference tokens (sorted by term, DID). */
static void tl_check_index(const char *dir, const uint8_t *low, const tl_tok *t, size_t nt,
                           uint64_t nterms, uint64_t npostings) {
    tierlab_index *ix;
    char err[TIERLAB_ERRMSG];
    int rc = tierlab_index_open(dir, NULL, &ix, err, sizeof err);
    TL_FZ_CHECK(rc == 0, "the built index does not open (%d): %s", rc, err);
    tierlab_index_info info;
    tierlab_index_get_info(ix, &info);
    TL_FZ_CHECK(info.terms == nterms && info.postings == npostings,
                "the index's header: %llu terms, %llu postings; the reference %llu, %llu",
                (unsigned long long)info.terms, (unsigned long long)info.postings,
                (unsigned long long)nterms, (unsigned long long)npostings);
    uint32_t *dids = tl_fz_alloc((nt + 1) * sizeof *dids), *freqs = tl_fz_alloc((nt + 1) * sizeof *freqs);
    size_t i = 0;
    for (uint64_t term = 0; term < nterms; term++) {
        const char *s;
        uint32_t len, p;
        TL_FZ_CHECK(tierlab_index_term_at(ix, term, &s, &len, &p) == 0, "term_at(%llu) failed",
                    (unsigned long long)term);
        TL_FZ_CHECK(i < nt && len == t[i].len && !memcmp(s, low + t[i].off, len),
                    "dictionary entry %llu is '%.*s', the reference '%.*s'",
                    (unsigned long long)term, (int)len, s, i < nt ? (int)t[i].len : 0,
                    i < nt ? (const char *)low + t[i].off : "");
        int64_t got = tierlab_index_postings(ix, term, dids, freqs, err, sizeof err);
        TL_FZ_CHECK(got == (int64_t)p, "postings of '%.*s': %lld (%s)", (int)len, s,
                    (long long)got, err);
        for (uint32_t j = 0; j < p; j++) {
            TL_FZ_CHECK(i < nt && t[i].len == len && !memcmp(low + t[i].off, s, len) &&
                            t[i].did == dids[j],
                        "term '%.*s', posting %u: DID %u, the reference's is %lld", (int)len, s,
                        j, dids[j],
                        i < nt && t[i].len == len && !memcmp(low + t[i].off, s, len)
                            ? (long long)t[i].did : -1LL);
            uint32_t f = 0;
            for (; i < nt && t[i].did == dids[j] && t[i].len == len &&
                   !memcmp(low + t[i].off, s, len); i++)
                f++;
            TL_FZ_CHECK(f == freqs[j], "term '%.*s', DID %u: frequency %u, the reference %u",
                        (int)len, s, dids[j], freqs[j], f);
        }
    }
    TL_FZ_CHECK(i == nt, "the index holds %zu of the reference's %zu tokens", i, nt);
    free(dids);
    free(freqs);
    tierlab_index_close(ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const tierlab_codec *codec = tierlab_codec_at(data[0] % tierlab_codec_count());
    uint32_t v = data[1] >> 2;
    tierlab_build_params p;
    tierlab_build_params_default(&p);
    p.codec = codec->name;
    p.block_size = data[1] & 1 ? 128 : 256;
    p.memory_budget_bytes = data[1] & 2 ? 1 : 0;
    p.doc_bytes = v == 63 ? 1024 : 1 + 3 * v;
    p.overwrite = 1;
    const uint8_t *text = data + 2;
    size_t n = size - 2;

    char corpus[1024], out[1024];
    tl_fz_path(corpus, sizeof corpus, "corpus.txt");
    tl_fz_path(out, sizeof out, "idx");
    tl_fz_write(corpus, text, n);
    uint8_t *low = tl_fz_alloc(n + 8);
    for (size_t i = 0; i < n; i++)
        low[i] = text[i] >= 'A' && text[i] <= 'Z' ? (uint8_t)(text[i] + 32) : text[i];

    tl_tok *t;
    uint64_t docs, truncated;
    size_t nt = tl_reference(low, n, p.doc_bytes, &t, &docs, &truncated);
    uint64_t terms = 0, postings = 0;
    for (size_t i = 0; i < nt; i++) {
        int new_term = !i || t[i].len != t[i - 1].len || memcmp(low + t[i].off, low + t[i - 1].off, t[i].len);
        terms += new_term;
        postings += new_term || t[i].did != t[i - 1].did;
    }

    tierlab_build_stats st;
    char err[TIERLAB_ERRMSG];
    memset(&st, 0, sizeof st);
    int rc = tierlab_index_build(corpus, out, &p, NULL, NULL, &st, err, sizeof err);
    TL_FZ_CHECK(rc == 0, "the build failed (%d): %s", rc, err);
    TL_FZ_CHECK(st.docs == docs && st.truncated_docs == truncated && st.tokens == nt &&
                    st.terms == terms && st.postings == postings && st.corpus_bytes == n,
                "build stats: docs %llu truncated %llu tokens %llu terms %llu postings %llu "
                "bytes %llu; the reference: %llu %llu %zu %llu %llu %zu",
                (unsigned long long)st.docs, (unsigned long long)st.truncated_docs,
                (unsigned long long)st.tokens, (unsigned long long)st.terms,
                (unsigned long long)st.postings, (unsigned long long)st.corpus_bytes,
                (unsigned long long)docs, (unsigned long long)truncated, nt,
                (unsigned long long)terms, (unsigned long long)postings, n);
    tl_check_index(out, low, t, nt, terms, postings);
    free(t);
    tl_check_count_terms(corpus, low, n);
    free(low);
    return 0;
}
