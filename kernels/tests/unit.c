/* unit.c — the codec contract of tierlab.h, checked for every codec of the
 * registry and every configuration's freq codec (iterated, so a new codec
 * needs no edit here). A plain main: exit status 0 when all checks pass; one
 * summary line per codec and a last line "N passed, N failed".
 *
 * Usage: tierlab-unit [SEED]   (data is generated from a fixed seed)
 *
 * Per codec: round trips for block lengths around the SIMD and block edges x
 * every bit width 0..32 x value patterns, encoded and decoded on the SIMD and
 * the forced-scalar path (byte-identical encodings, identical decodes); the
 * max_encoded_bytes bound; decoding from a longer buffer; delta semantics
 * (`prev`); every strict prefix of every encoding is ECORRUPT; mutated and
 * random bytes give ECORRUPT or a byte count within the input; n > 256 is
 * EINVAL. tests/kernels/test_native_builds.py also runs this under ASan and
 * UBSan, where the exactly-sized buffers below turn any out-of-bounds read
 * or write into a report; without ASan, canary words catch stray writes. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tierlab.h"

#if defined(__SANITIZE_ADDRESS__)
#define TL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TL_ASAN 1
#endif
#endif
#ifndef TL_ASAN
#define TL_ASAN 0
#endif

/* Canary words after every output buffer when ASan cannot watch the edge
 * (a variable, not a macro: a constant 0 bound draws -Wtype-limits). */
static size_t tl_guard = TL_ASAN ? 0 : 8;
#define TL_CANARY 0xA5C3E1F7u
#define TL_MAX_REPORTS 12 /* failure messages printed per codec */

static long tl_passed, tl_failed, tl_codec_failed;
static const char *tl_codec_name = "";

static void tl_check(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void tl_check(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        tl_passed++;
        return;
    }
    tl_failed++;
    if (++tl_codec_failed <= TL_MAX_REPORTS) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "FAIL %s:%d [%s] ", file, line, tl_codec_name);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}
#define CHECK(ok, ...) tl_check((ok) != 0, __FILE__, __LINE__, __VA_ARGS__)

/* --- deterministic data ------------------------------------------------- */

static uint64_t tl_state;
static uint32_t tl_rand(void) { /* splitmix64 */
    uint64_t z = (tl_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static uint32_t tl_mask(unsigned w) { return w >= 32 ? 0xFFFFFFFFu : (1u << w) - 1; }
static uint32_t tl_below(unsigned w) { return tl_rand() & tl_mask(w); } /* [0, 2^w) */
/* Exactly w bits wide (top bit set), so a block really needs width w. */
static uint32_t tl_wide(unsigned w) { return w == 0 ? 0 : tl_below(w) | (1u << (w - 1)); }

enum {
    PAT_RANDOM,      /* values below 2^w                                  */
    PAT_SORTED,      /* prev + running sum of gaps below 2^w (wraps)       */
    PAT_RUNS,        /* runs of equal values                              */
    PAT_SORTED_RUNS, /* sorted with runs of equal gaps, zero gaps included */
    PAT_MAX,         /* every value 2^w - 1 (all-ones at w = 32)          */
    PAT_EXCEPTIONS,  /* mostly 0..3, one in 8 exactly w bits wide          */
    PAT_SORTED_EXC,  /* sorted, gaps as PAT_EXCEPTIONS                     */
    PAT_EDGES,       /* zeros with w-bit values at the first and last slot */
    PAT_COUNT
};
static const char *const tl_pat_name[PAT_COUNT] = {
    "random", "sorted", "runs", "sorted-runs", "max", "exceptions", "sorted-exceptions", "edges"};

static uint32_t tl_exc(unsigned w) { return tl_rand() % 8 == 0 ? tl_wide(w) : tl_below(w < 2 ? w : 2); }

static void tl_fill(uint32_t *v, size_t n, unsigned w, int pat, uint32_t prev) {
    uint32_t acc = prev, run = 0, x = 0;
    for (size_t i = 0; i < n; i++) {
        if (run == 0) run = 1 + tl_rand() % 40, x = tl_below(w);
        run--;
        switch (pat) {
        case PAT_RANDOM: v[i] = tl_below(w); break;
        case PAT_SORTED: v[i] = acc += tl_below(w); break;
        case PAT_RUNS: v[i] = x; break;
        case PAT_SORTED_RUNS: v[i] = acc += (tl_rand() % 3 ? x : 0); break;
        case PAT_MAX: v[i] = tl_mask(w); break;
        case PAT_EXCEPTIONS: v[i] = tl_exc(w); break;
        case PAT_SORTED_EXC: v[i] = acc += tl_exc(w); break;
        default: v[i] = (i == 0 || i == n - 1) ? tl_wide(w) : 0; break;
        }
    }
}

/* --- buffers the sanitizers can watch ----------------------------------- */

static void *tl_alloc(size_t bytes) {
    /* malloc(0) gives a zero-sized block on glibc and under ASan, so even
     * one byte past an empty input is reported; 1 byte only as a fallback. */
    void *p = malloc(bytes);
    if (!p && bytes == 0) p = malloc(1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}
/* Room for n words, then tl_guard canaries. */
static uint32_t *tl_out_new(size_t n) {
    uint32_t *p = tl_alloc((n + tl_guard) * sizeof *p);
    for (size_t i = 0; i < tl_guard; i++) p[n + i] = TL_CANARY;
    return p;
}
static int tl_out_intact(const uint32_t *p, size_t n) {
    for (size_t i = 0; i < tl_guard; i++)
        if (p[n + i] != TL_CANARY) return 0;
    return 1;
}
/* An exactly-sized copy: under ASan, reading in[len] is a report. */
static uint8_t *tl_exact(const uint8_t *src, size_t len) {
    uint8_t *p = tl_alloc(len);
    if (len) memcpy(p, src, len);
    return p;
}

/* --- one block ----------------------------------------------------------- */

/* Decode on the current path, checking the return value range and the guard.
 * Returns the decode result; values land in out[0..n). */
static int64_t tl_decode(const tierlab_codec *c, const uint8_t *in, size_t len, size_t n,
                         uint32_t prev, uint32_t *out) {
    for (size_t i = 0; i < tl_guard; i++) out[n + i] = TL_CANARY;
    int64_t r = c->decode(in, len, n, prev, out);
    CHECK(r == TIERLAB_ECORRUPT || (r >= 0 && (size_t)r <= len),
          "decode of %zu bytes, n=%zu returned %lld", len, n, (long long)r);
    CHECK(tl_out_intact(out, n), "decode of %zu bytes, n=%zu wrote past out[n-1]", len, n);
    return r;
}

typedef struct {
    const tierlab_codec *c;
    const uint32_t *v;
    size_t n;
    uint32_t prev;
    unsigned w;
    const char *pat;
    int simd; /* impl() is "simd" when not forced scalar */
} tl_case;

#define CASEFMT "n=%zu w=%u %s prev=%u"
#define CASEARG(k) (k)->n, (k)->w, (k)->pat, (unsigned)(k)->prev

/* Encode on one path into an exactly bound-sized buffer (+ canaries). */
static int64_t tl_encode(const tl_case *k, int scalar, uint8_t **enc) {
    size_t bound = k->c->max_encoded_bytes(k->n);
    uint8_t *out = tl_alloc(bound + tl_guard);
    memset(out + bound, 0xA5, tl_guard);
    tierlab_force_scalar(scalar);
    int64_t len = k->c->encode(k->v, k->n, k->prev, out);
    int intact = 1;
    for (size_t i = 0; i < tl_guard; i++) intact &= out[bound + i] == 0xA5;
    CHECK(len >= 0 && (size_t)len <= bound && intact,
          CASEFMT " %s: encode returned %lld, max_encoded_bytes %zu%s", CASEARG(k),
          scalar ? "scalar" : "simd", (long long)len, bound, intact ? "" : ", wrote past it");
    CHECK(len != 0 || k->n == 0, CASEFMT ": encode wrote 0 bytes for n > 0", CASEARG(k));
    *enc = out;
    return len;
}

static void tl_run_case(const tl_case *k) {
    const tierlab_codec *c = k->c;
    size_t n = k->n;
    uint8_t *enc, *enc_scalar;
    int64_t len = tl_encode(k, 0, &enc);
    int64_t len_scalar = tl_encode(k, 1, &enc_scalar);
    CHECK(len == len_scalar && (len < 0 || memcmp(enc, enc_scalar, (size_t)len) == 0),
          CASEFMT ": SIMD and scalar encodings differ (%lld vs %lld bytes)", CASEARG(k),
          (long long)len, (long long)len_scalar);
    free(enc_scalar);
    if (len < 0) {
        free(enc);
        return;
    }
    size_t L = (size_t)len;
    uint32_t *out = tl_out_new(n);
    /* Same block followed by unrelated bytes, as blocks sit in a file. */
    uint8_t *longer = tl_alloc(L + 64);
    memcpy(longer, enc, L);
    for (size_t i = 0; i < 64; i++) longer[L + i] = (uint8_t)tl_rand();
    uint8_t *exact = tl_exact(enc, L), *tail = tl_alloc(L);

    for (int scalar = 0; scalar < 2; scalar++) {
        const char *path = scalar ? "scalar" : "simd";
        tierlab_force_scalar(scalar);
        CHECK(!scalar || strcmp(c->impl(), "scalar") == 0, "impl() is '%s' while scalar is forced",
              c->impl());
        int64_t got = tl_decode(c, exact, L, n, k->prev, out);
        CHECK(got == len && memcmp(out, k->v, n * sizeof *out) == 0,
              CASEFMT " %s: decode returned %lld of %zu bytes%s", CASEARG(k), path, (long long)got,
              L, got == len ? ", wrong values" : "");
        got = tl_decode(c, longer, L + 64, n, k->prev, out);
        CHECK(got == len && memcmp(out, k->v, n * sizeof *out) == 0,
              CASEFMT " %s: decode with 64 trailing bytes returned %lld, block is %zu", CASEARG(k),
              path, (long long)got, L);
        /* Delta semantics: values are prev + wrapping gaps, so another prev
         * shifts every value by the same amount; non-delta codecs ignore it. */
        uint32_t shift = tl_rand() | 1, bad = 0;
        got = tl_decode(c, exact, L, n, k->prev + shift, out);
        for (size_t i = 0; i < n && got == len; i++)
            bad += out[i] != k->v[i] + (c->delta ? shift : 0);
        CHECK(got == len && bad == 0, CASEFMT " %s: decode with prev+%u is not %s", CASEARG(k), path,
              (unsigned)shift, c->delta ? "shifted by the same amount" : "independent of prev");
        /* Every strict prefix, placed at the end of an exactly-sized buffer
         * so that any read past it leaves the allocation. Quadratic, so
         * done once when both paths run the same (scalar) decoder. */
        for (size_t cut = 0; cut < L && (scalar || k->simd); cut++) {
            memcpy(tail + (L - cut), enc, cut);
            int64_t r = tl_decode(c, tail + (L - cut), cut, n, k->prev, out);
            if (r != TIERLAB_ECORRUPT) {
                CHECK(0, CASEFMT " %s: the %zu-byte prefix of a %zu-byte block returned %lld",
                      CASEARG(k), path, cut, L, (long long)r);
                break;
            }
        }
    }
    /* A few single-byte mutations: the bytes may or may not be valid, but
     * both paths must agree and stay in bounds. */
    if (L > 0) {
        uint32_t *out2 = tl_out_new(n);
        for (int m = 0; m < 3; m++) {
            memcpy(exact, enc, L);
            exact[tl_rand() % L] ^= (uint8_t)(1u << (tl_rand() % 8));
            tierlab_force_scalar(0);
            int64_t a = tl_decode(c, exact, L, n, k->prev, out);
            tierlab_force_scalar(1);
            int64_t b = tl_decode(c, exact, L, n, k->prev, out2);
            CHECK(a == b && (a < 0 || memcmp(out, out2, n * sizeof *out) == 0),
                  CASEFMT ": a mutated block decodes differently on the two paths (%lld vs %lld)",
                  CASEARG(k), (long long)a, (long long)b);
        }
        free(out2);
    }
    tierlab_force_scalar(0);
    free(enc);
    free(exact);
    free(tail);
    free(longer);
    free(out);
}

/* --- per codec ------------------------------------------------------------ */

static const size_t tl_lengths[] = {0, 1, 2, 7, 8, 31, 32, 127, 128, 129, 255, 256};

static void tl_roundtrips(const tierlab_codec *c) {
    uint32_t v[TIERLAB_MAX_BLOCK];
    long i = 0;
    tierlab_force_scalar(0);
    int simd = strcmp(c->impl(), "simd") == 0;
    for (size_t l = 0; l < sizeof tl_lengths / sizeof tl_lengths[0]; l++)
        for (unsigned w = 0; w <= 32; w++)
            for (int pat = 0; pat < PAT_COUNT; pat++, i++) {
                /* prev 0 (a first block), random, or near the top (wraps). */
                uint32_t prev = i % 3 == 0 ? 0 : i % 3 == 1 ? tl_rand() : 0xFFFFFFFFu - tl_below(4);
                tl_fill(v, tl_lengths[l], w, pat, prev);
                tl_case k = {c, v, tl_lengths[l], prev, w, tl_pat_name[pat], simd};
                tl_run_case(&k);
            }
}

/* Random bytes of random length for random n: ECORRUPT or a count within
 * the input, and the same answer on both paths. */
static void tl_garbage(const tierlab_codec *c) {
    enum { MAXLEN = 1400 };
    uint8_t junk[MAXLEN];
    uint32_t *a = tl_out_new(TIERLAB_MAX_BLOCK), *b = tl_out_new(TIERLAB_MAX_BLOCK);
    for (int t = 0; t < 3000; t++) {
        size_t n = tl_rand() % (TIERLAB_MAX_BLOCK + 1);
        size_t len = t % 2 ? tl_rand() % MAXLEN : tl_rand() % (5 * n + 16);
        int sparse = t % 3 == 0; /* mostly zero bytes look like small values */
        for (size_t i = 0; i < len; i++) junk[i] = sparse && tl_rand() % 4 ? 0 : (uint8_t)tl_rand();
        uint8_t *in = tl_exact(junk, len);
        uint32_t prev = tl_rand();
        uint32_t *oa = a + (TIERLAB_MAX_BLOCK - n), *ob = b + (TIERLAB_MAX_BLOCK - n);
        tierlab_force_scalar(0);
        int64_t ra = tl_decode(c, in, len, n, prev, oa);
        tierlab_force_scalar(1);
        int64_t rb = tl_decode(c, in, len, n, prev, ob);
        CHECK(ra == rb && (ra < 0 || memcmp(oa, ob, n * sizeof *oa) == 0),
              "random %zu bytes, n=%zu: the paths disagree (%lld vs %lld)", len, n, (long long)ra,
              (long long)rb);
        free(in);
    }
    tierlab_force_scalar(0);
    free(a);
    free(b);
}

static void tl_arguments(const tierlab_codec *c) {
    uint32_t v[TIERLAB_MAX_BLOCK + 1] = {0};
    size_t bound = c->max_encoded_bytes(TIERLAB_MAX_BLOCK);
    uint8_t *buf = tl_alloc(bound + 4096);
    memset(buf, 0, bound + 4096);
    uint32_t *out = tl_out_new(TIERLAB_MAX_BLOCK + 1);
    const size_t big[] = {TIERLAB_MAX_BLOCK + 1, 1000, SIZE_MAX};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        int64_t e = c->encode(v, big[i], 0, buf);
        CHECK(e == TIERLAB_EINVAL, "encode with n=%zu returned %lld, not EINVAL", big[i], (long long)e);
        int64_t d = c->decode(buf, bound + 4096, big[i], 0, out);
        CHECK(d == TIERLAB_EINVAL, "decode with n=%zu returned %lld, not EINVAL", big[i], (long long)d);
    }
    /* n = 0 needs no bytes. */
    int64_t d = c->decode(buf, 0, 0, 7, out);
    CHECK(d == 0, "decode of n=0 from 0 bytes returned %lld", (long long)d);
    free(buf);
    free(out);
}

static double tl_now(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC); /* C11; wall time is fine for a summary */
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void tl_test_codec(const tierlab_codec *c) {
    long passed = tl_passed;
    double t0 = tl_now();
    tl_codec_name = c->name;
    tl_codec_failed = 0;
    tierlab_force_scalar(0);
    const char *impl = c->impl();
    tl_roundtrips(c);
    tl_garbage(c);
    tl_arguments(c);
    printf("%-16s %-6s %-5s %8ld checks passed, %4ld failed  %5.2fs\n", c->name, impl,
           c->delta ? "delta" : "", tl_passed - passed, tl_codec_failed, tl_now() - t0);
    if (tl_codec_failed > TL_MAX_REPORTS)
        fprintf(stderr, "[%s] %ld more failures not shown\n", c->name, tl_codec_failed - TL_MAX_REPORTS);
    fflush(stdout);
}

/* The registry itself: unique names, lookups, freq codecs. */
static void tl_registry(void) {
    tl_codec_name = "registry";
    size_t count = tierlab_codec_count();
    CHECK(count > 0, "the registry is empty");
    CHECK(tierlab_codec_at(count) == NULL, "codec_at(count) is not NULL");
    CHECK(tierlab_codec_find("no-such-codec") == NULL, "an unknown name was found");
    CHECK(tierlab_codec_find("") == NULL, "the empty name was found");
    CHECK(tierlab_codec_find(NULL) == NULL, "find(NULL) is not NULL");
    for (size_t i = 0; i < count; i++) {
        const tierlab_codec *c = tierlab_codec_at(i);
        CHECK(c && c->name && c->name[0] && c->max_encoded_bytes && c->encode && c->decode && c->impl,
              "entry %zu is incomplete", i);
        if (!c || !c->name) continue;
        CHECK(tierlab_codec_find(c->name) == c, "find('%s') is not entry %zu", c->name, i);
        const tierlab_codec *f = tierlab_codec_freq(c);
        CHECK(f && !f->delta, "%s: freq codec is NULL or delta-coded", c->name);
        CHECK(c->delta || f == c, "%s: a non-delta configuration uses another freq codec", c->name);
    }
    tierlab_force_scalar(1);
    CHECK(tierlab_scalar_forced() == 1, "force_scalar(1) not reflected");
    tierlab_force_scalar(0);
    CHECK(tierlab_scalar_forced() == 0, "force_scalar(0) not reflected");
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 20240611u;
    tl_state = seed;
    printf("tierlab-unit: seed %llu, cpu features '%s'%s\n", (unsigned long long)seed,
           tierlab_cpu_features(), TL_ASAN ? ", ASan" : "");
    tl_registry();
    /* Each configuration, then its freq codec unless already tested. */
    const tierlab_codec *done[2 * 64];
    size_t ndone = 0;
    for (size_t i = 0; i < tierlab_codec_count(); i++) {
        const tierlab_codec *pair[2] = {tierlab_codec_at(i), tierlab_codec_freq(tierlab_codec_at(i))};
        for (int j = 0; j < 2; j++) {
            int seen = pair[j] == NULL;
            for (size_t d = 0; d < ndone && !seen; d++) seen = done[d] == pair[j];
            if (seen || ndone == sizeof done / sizeof done[0]) continue;
            done[ndone++] = pair[j];
            tl_test_codec(pair[j]);
        }
    }
    printf("%ld passed, %ld failed\n", tl_passed, tl_failed);
    return tl_failed != 0;
}
