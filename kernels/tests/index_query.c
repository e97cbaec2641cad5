/* index_query.c — C-level test of the index build and the query kernels,
 * meant to run under ASan/UBSan (TIERLAB_SANITIZE=ON) without a Python host:
 * builds a generated corpus with every codec of the registry that can encode
 * (placeholders are skipped) and both block sizes, checks SINGLE and AND
 * results against a brute-force scan of the corpus, bounded-memory builds
 * against in-memory ones byte for byte, refusal of a corrupt header, and of
 * a flipped bit in a DID block by the query, the verified open and the check.
 * A plain main returning an exit status; prints what failed. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierlab.h"

#define DOCS 1500
#define VOCAB 300
#define K 40

#include "check.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static char *docs[DOCS];

static void make_corpus(const char *path) {
    FILE *f = fopen(path, "w");
    for (int d = 0; d < DOCS; d++) {
        char buf[2048];
        size_t n = 0;
        int words = 1 + (int)(rng() % 30);
        for (int w = 0; w < words; w++) {
            /* skewed: small ids far more likely */
            unsigned id = (unsigned)(rng() % VOCAB);
            id = id * id / VOCAB;
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s%u", w ? (rng() % 5 ? " " : ",\xc3\xa9") : "",
                                  rng() % 10 ? "w" : "W", id);
        }
        if (d >= 700 && d < 704) n += (size_t)snprintf(buf + n, sizeof buf - n, " rare");
        n += (size_t)snprintf(buf + n, sizeof buf - n, " every");
        docs[d] = strndup(buf, n);
        fprintf(f, "%s\n", buf);
    }
    fclose(f);
}

/* Frequency of `term` in document d (the tokeniser, written again). */
static uint32_t freq_in(const char *doc, const char *term) {
    uint32_t f = 0;
    size_t tl = strlen(term);
    const char *p = doc;
    while (*p) {
        char tok[256];
        size_t n = 0;
        while (*p && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9'))) p++;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) {
            char c = *p++;
            if (n < sizeof tok) tok[n++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        if (n == tl && memcmp(tok, term, n) == 0) f++;
    }
    return f;
}

typedef struct { uint32_t did; double s; } hit;
static int hit_cmp(const void *a, const void *b) {
    const hit *x = a, *y = b;
    if (x->s != y->s) return x->s < y->s ? 1 : -1;
    return (x->did > y->did) - (x->did < y->did);
}

/* Brute force: AND of terms[0..n), BM25 as tierlab.h specifies. */
static int brute(const char *const *terms, int n, hit *out) {
    static uint32_t f[8][DOCS];
    double idf[8];
    for (int t = 0; t < n; t++) {
        uint32_t df = 0;
        for (int d = 0; d < DOCS; d++) df += (f[t][d] = freq_in(docs[d], terms[t])) > 0;
        idf[t] = log(1.0 + ((double)DOCS - (double)df + 0.5) / ((double)df + 0.5));
    }
    static hit all[DOCS];
    int m = 0;
    for (int d = 0; d < DOCS; d++) {
        double s = 0.0;
        int ok = 1;
        for (int t = 0; t < n && ok; t++) {
            if (!f[t][d]) ok = 0;
            else {
                double x = (double)f[t][d];
                s += idf[t] * (x * (1.2 + 1.0)) / (x + 1.2);
            }
        }
        if (ok) all[m++] = (hit){(uint32_t)d, s};
    }
    qsort(all, (size_t)m, sizeof *all, hit_cmp);
    if (m > K) m = K;
    memcpy(out, all, (size_t)m * sizeof *out);
    return m;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static int can_encode(const tierlab_codec *c) {
    uint32_t v[3] = {1, 5, 9};
    uint8_t out[64];
    return c->encode(v, 3, 0, out) > 0;
}

static void run_queries(tierlab_index *ix, const char *label) {
    static const char *q1[][3] = {{"w0", 0, 0}, {"w1", 0, 0}, {"w17", 0, 0}, {"every", 0, 0},
                                  {"rare", 0, 0}, {"w299", 0, 0}, {"nope", 0, 0}};
    static const char *q2[][3] = {{"every", "rare", 0}, {"w0", "w1", 0}, {"w2", "w3", "w0"},
                                  {"w5", "w5", 0}, {"w0", "nope", 0}, {"w40", "w1", 0}};
    tierlab_query_ctx *q = tierlab_query_ctx_new(ix, K);
    tierlab_hit got[K];
    hit want[K];
    for (size_t i = 0; i < sizeof q1 / sizeof q1[0] + sizeof q2 / sizeof q2[0]; i++) {
        const char *const *terms = i < 7 ? q1[i] : q2[i - 7];
        uint32_t n = 0, lens[3];
        while (n < 3 && terms[n]) {
            lens[n] = (uint32_t)strlen(terms[n]);
            n++;
        }
        tierlab_query_stats st;
        int nh = tierlab_query(q, n == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND, terms, lens,
                               n, got, &st);
        int nw = brute(terms, (int)n, want);
        CHECK(nh == nw, "%s query %zu (%s): %d hits, want %d (%s)", label, i, terms[0], nh, nw,
              tierlab_query_error(q));
        for (int h = 0; h < nh && h < nw; h++)
            CHECK(got[h].did == want[h].did && got[h].score == want[h].s,
                  "%s query %zu hit %d: (%u, %.17g) want (%u, %.17g)", label, i, h, got[h].did,
                  got[h].score, want[h].did, want[h].s);
        if (i == 7) CHECK(st.blocks_decoded < st.blocks_total, "%s: every AND rare decoded %llu of %llu blocks",
                          label, (unsigned long long)st.blocks_decoded, (unsigned long long)st.blocks_total);
    }
    tierlab_query_ctx_free(q);
}

/* Extents: they tile dids.bin, freqs.bin and skip.bin in dictionary order,
 * tierlab_index_find inverts tierlab_index_term_at, and each term's DID span
 * decodes on its own (block lengths from what decode consumed) to the
 * postings tierlab_index_postings gives. */
static void check_extents(tierlab_index *ix, const char *dir, const char *label) {
    tierlab_index_info in;
    tierlab_index_get_info(ix, &in);
    tierlab_term_extent *e = calloc(in.terms, sizeof *e);
    uint32_t *dids = malloc(DOCS * sizeof *dids), *freqs = malloc(DOCS * sizeof *freqs);
    uint32_t *dec = calloc(DOCS + TIERLAB_MAX_BLOCK, sizeof *dec);
    char path[300];
    snprintf(path, sizeof path, "%s/dids.bin", dir);
    size_t file_len = 0;
    uint8_t *file = (uint8_t *)slurp(path, &file_len);
    CHECK(file != NULL, "%s: cannot read %s", label, path);
    if (!file) return;
    CHECK(tierlab_index_term_extents(ix, 0, in.terms, e) == (int64_t)in.terms, "%s: extents",
          label);
    CHECK(tierlab_index_term_extents(ix, 1, in.terms, e) == TIERLAB_EINVAL, "%s: range", label);
    const tierlab_codec *dc = tierlab_codec_find(in.codec);
    uint64_t did_end = 128, freq_end = 128, skip_end = 128, blocks = 0;
    for (uint64_t i = 0; i < in.terms; i++) {
        CHECK(e[i].did_offset == did_end && e[i].freq_offset == freq_end &&
                  e[i].skip_offset == skip_end,
              "%s: term %llu does not start where the previous ended", label,
              (unsigned long long)i);
        did_end = e[i].did_offset + e[i].did_bytes;
        freq_end = e[i].freq_offset + e[i].freq_bytes;
        skip_end = e[i].skip_offset + e[i].skip_bytes;
        blocks += e[i].blocks;
        const char *t;
        uint32_t len, post;
        uint64_t at = UINT64_MAX;
        tierlab_index_term_at(ix, i, &t, &len, &post);
        CHECK(tierlab_index_find(ix, t, len, &at) == 1 && at == i, "%s: find term %llu", label,
              (unsigned long long)i);
        CHECK(post == e[i].postings, "%s: postings of term %llu", label, (unsigned long long)i);
        char msg[TIERLAB_ERRMSG];
        if (tierlab_index_postings(ix, i, dids, freqs, msg, sizeof msg) != (int64_t)post) {
            CHECK(0, "%s: postings of term %llu: %s", label, (unsigned long long)i, msg);
            continue;
        }
        if (e[i].did_offset + e[i].did_bytes > file_len) continue; /* reported below */
        /* decode the span block by block, given only its bytes */
        const uint8_t *span = file + e[i].did_offset;
        size_t pos = 0;
        uint32_t prev = 0;
        for (uint64_t b = 0; b < e[i].blocks; b++) {
            uint32_t n = (uint32_t)(b + 1 < e[i].blocks ? in.block_size
                                                         : post - b * in.block_size);
            CHECK(pos < e[i].did_bytes, "%s: term %llu span too short", label,
                  (unsigned long long)i);
            if (pos >= e[i].did_bytes) break;
            int64_t got = dc->decode(span + pos, e[i].did_bytes - pos, n, prev,
                                     dec + b * in.block_size);
            CHECK(got > 0, "%s: term %llu block %llu does not decode", label,
                  (unsigned long long)i, (unsigned long long)b);
            if (got <= 0) break;
            pos += (size_t)got;
            prev = dc->delta ? dec[b * in.block_size + n - 1] : 0;
        }
        CHECK(pos == e[i].did_bytes && memcmp(dec, dids, post * sizeof *dids) == 0,
              "%s: the DID span of term %llu does not decode to its postings", label,
              (unsigned long long)i);
    }
    CHECK(did_end == in.file_bytes[TIERLAB_FILE_DIDS] &&
              freq_end == in.file_bytes[TIERLAB_FILE_FREQS] &&
              skip_end == in.file_bytes[TIERLAB_FILE_SKIP] && blocks == in.blocks,
          "%s: extents do not end at the file ends", label);
    uint64_t at = 7;
    CHECK(tierlab_index_find(ix, "nope", 4, &at) == 0 && at == 7, "%s: find nope", label);
    free(file);
    free(e);
    free(dids);
    free(freqs);
    free(dec);
}

int main(void) {
    char dir[] = "/tmp/tierlab-index-test-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char corpus[256], out[256], out2[256], cmd[512], err[TIERLAB_ERRMSG];
    snprintf(corpus, sizeof corpus, "%s/c.txt", dir);
    make_corpus(corpus);
    tierlab_build_params p;
    for (size_t ci = 0; ci < tierlab_codec_count(); ci++) {
        const tierlab_codec *c = tierlab_codec_at(ci);
        if (!can_encode(c) || !can_encode(tierlab_codec_freq(c))) {
            printf("skip %s (cannot encode yet)\n", c->name);
            continue;
        }
        for (uint32_t b = 128; b <= 256; b *= 2) {
            tierlab_build_params_default(&p);
            p.codec = c->name;
            p.block_size = b;
            snprintf(out, sizeof out, "%s/%s-%u", dir, c->name, b);
            tierlab_build_stats st;
            int rc = tierlab_index_build(corpus, out, &p, NULL, NULL, &st, err, sizeof err);
            CHECK(rc == 0, "build %s/%u: %s", c->name, b, err);
            if (rc) continue;
            CHECK(st.docs == DOCS, "docs %llu", (unsigned long long)st.docs);
            const char *places[] = {"storage", "dram", "dict=dram,skip=storage,did=dram,freq=storage"};
            for (int pl = 0; pl < 3; pl++) {
                tierlab_index *ix;
                rc = tierlab_index_open(out, places[pl], &ix, err, sizeof err);
                CHECK(rc == 0, "open %s: %s", out, err);
                if (rc) continue;
                char label[128];
                snprintf(label, sizeof label, "%s/%u/%s", c->name, b, places[pl]);
                run_queries(ix, label);
                if (pl == 0) check_extents(ix, out, label);
                tierlab_index_close(ix);
            }
        }
    }

    /* Bounded memory: several runs, the same bytes. */
    tierlab_build_params_default(&p);
    snprintf(out, sizeof out, "%s/mem", dir);
    snprintf(out2, sizeof out2, "%s/runs", dir);
    tierlab_build_stats s1, s2;
    CHECK(tierlab_index_build(corpus, out, &p, NULL, NULL, &s1, err, sizeof err) == 0, "%s", err);
    p.memory_budget_bytes = 64 * 1024;
    CHECK(tierlab_index_build(corpus, out2, &p, NULL, NULL, &s2, err, sizeof err) == 0, "%s", err);
    CHECK(s1.runs == 0 && s2.runs > 1, "runs %llu %llu", (unsigned long long)s1.runs,
          (unsigned long long)s2.runs);
    for (int f = 0; f < TIERLAB_FILES; f++) {
        char a[300], bpath[300];
        snprintf(a, sizeof a, "%s/%s", out, tierlab_index_file_name(f));
        snprintf(bpath, sizeof bpath, "%s/%s", out2, tierlab_index_file_name(f));
        size_t la = 0, lb = 0;
        char *x = slurp(a, &la), *y = slurp(bpath, &lb);
        CHECK(x && y && la == lb && memcmp(x, y, la) == 0, "%s differs between in-memory and runs",
              tierlab_index_file_name(f));
        free(x);
        free(y);
    }

    /* A flipped header byte is refused. */
    snprintf(cmd, sizeof cmd, "%s/skip.bin", out);
    FILE *f = fopen(cmd, "r+b");
    fseek(f, 20, SEEK_SET);
    fputc('X', f);
    fclose(f);
    tierlab_index *ix = NULL;
    CHECK(tierlab_index_open(out, NULL, &ix, err, sizeof err) == TIERLAB_EFORMAT && !ix,
          "corrupt header accepted");

    /* A flipped bit in a DID block: the query of its term fails with
     * TIERLAB_ECORRUPT naming the file and the term, at every check level
     * but off; tierlab_index_check names the bit. */
    int rc = tierlab_index_open(out2, NULL, &ix, err, sizeof err);
    CHECK(rc == 0, "open %s: %s", out2, err);
    const char *first;
    uint32_t first_len;
    tierlab_term_extent ext;
    CHECK(tierlab_index_term_at(ix, 0, &first, &first_len, NULL) == 0 &&
              tierlab_index_term_extent(ix, 0, &ext) == 0, "term 0");
    char term0[64];
    snprintf(term0, sizeof term0, "%.*s", (int)first_len, first);
    tierlab_index_close(ix);
    snprintf(cmd, sizeof cmd, "%s/dids.bin", out2);
    uint64_t at = ext.did_offset + ext.did_bytes / 2;
    f = fopen(cmd, "r+b");
    fseek(f, (long)at, SEEK_SET);
    int byte = fgetc(f);
    fseek(f, (long)at, SEEK_SET);
    fputc(byte ^ 0x20, f);
    fclose(f);
    CHECK(tierlab_index_open(out2, NULL, &ix, err, sizeof err) == 0, "%s", err);
    tierlab_query_ctx *q = tierlab_query_ctx_new(ix, K);
    const char *tq[1] = {term0};
    uint32_t tl[1] = {(uint32_t)strlen(term0)};
    tierlab_hit hits[K];
    for (int level = TIERLAB_CHECKS_DEFAULT; level <= TIERLAB_CHECKS_FULL; level++) {
        tierlab_query_ctx_set_checks(q, level);
        int got = tierlab_query(q, TIERLAB_QUERY_SINGLE, tq, tl, 1, hits, NULL);
        CHECK(got == TIERLAB_ECORRUPT && strstr(tierlab_query_error(q), "dids.bin: term") &&
                  strstr(tierlab_query_error(q), term0),
              "damaged block, checks %d: %d (%s)", level, got, tierlab_query_error(q));
    }
    tierlab_query_ctx_free(q);
    tierlab_index_close(ix);
    CHECK(tierlab_index_open_flags(out2, NULL, TIERLAB_OPEN_VERIFY, &ix, err, sizeof err) ==
              TIERLAB_ECORRUPT && !ix && strstr(err, "dids.bin"),
          "verify accepted a damaged body: %s", err);
    tierlab_check_report rep;
    CHECK(tierlab_index_check(out2, &rep, NULL, NULL) == 0 && !rep.ok &&
              rep.file == TIERLAB_FILE_DIDS && rep.exact && rep.offset == at && rep.bit == 5 &&
              rep.term == 0,
          "check: ok %d file %d offset %llu bit %d: %s", rep.ok, rep.file,
          (unsigned long long)rep.offset, rep.bit, rep.what);

    for (int d = 0; d < DOCS; d++) free(docs[d]);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    if (tl_check_failures) fprintf(stderr, "%d tl_check_failures\n", tl_check_failures);
    else printf("index_query: ok\n");
    return tl_check_failures ? 1 : 0;
}
