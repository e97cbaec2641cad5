/* unit.c — codec unit tests over the whole registry (and each configuration's
 * freq codec), so a new codec needs no edit here. A plain main: exit status 0
 * when everything passed; the last line reads "N passed, N failed".
 *
 * For every codec: round trips for block lengths around the SIMD and block
 * boundaries x every bit width 0..32 x several value patterns, on both the
 * SIMD and the forced-scalar path (encodings must be byte-identical); every
 * strict prefix of an encoding is rejected; random garbage never crashes
 * (run under ASan/UBSan by tests/kernels/test_native_builds.py); argument
 * errors are reported. Data is generated here from a fixed seed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierlab.h"

static int tl_failed, tl_passed;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (cond) {                                              \
            tl_passed++;                                         \
        } else {                                                 \
            tl_failed++;                                         \
            if (tl_failed <= 20) {                               \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                    \
                fputc('\n', stderr);                             \
            }                                                    \
        }                                                        \
    } while (0)

static uint64_t tl_rng = 0x9E3779B97F4A7C15ull;
static uint32_t tl_rand(void) { /* splitmix64 */
    uint64_t z = (tl_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static uint32_t tl_below(unsigned width) { /* uniform in [0, 2^width) */
    return width >= 32 ? tl_rand() : width == 0 ? 0 : tl_rand() & ((1u << width) - 1);
}

enum { PAT_RANDOM, PAT_SORTED, PAT_RUNS, PAT_MAX, PAT_EXCEPTIONS, PAT_COUNT };

static void tl_fill(uint32_t *v, size_t n, unsigned width, int pattern, uint32_t prev) {
    uint32_t acc = prev;
    for (size_t i = 0; i < n; i++) {
        switch (pattern) {
        case PAT_RANDOM: v[i] = tl_below(width); break;
        case PAT_SORTED: v[i] = acc += tl_below(width); break; /* gaps of width bits */
        case PAT_RUNS: v[i] = (i / 7) % 2 ? tl_below(width) : (i ? v[i - 1] : tl_below(width)); break;
        case PAT_MAX: v[i] = width >= 32 ? 0xFFFFFFFFu : (1u << width) - 1; break;
        default: v[i] = tl_rand() % 16 == 0 ? tl_below(width) : tl_below(width < 3 ? width : 3);
        }
    }
}

static void tl_roundtrip(const tierlab_codec *c, const uint32_t *v, size_t n, uint32_t prev,
                         const char *what, unsigned width) {
    size_t cap = c->max_encoded_bytes(n);
    uint8_t *simd = malloc(cap + 1), *scalar = malloc(cap + 1);
    uint32_t *out = malloc((n ? n : 1) * sizeof *out);
    tierlab_force_scalar(0);
    int64_t len = c->encode(v, n, prev, simd);
    tierlab_force_scalar(1);
    int64_t len_scalar = c->encode(v, n, prev, scalar);
    CHECK(len >= 0 && (size_t)len <= cap, "%s n=%zu w=%u %s: encode returned %lld (bound %zu)",
          c->name, n, width, what, (long long)len, cap);
    CHECK(len == len_scalar && (len < 0 || memcmp(simd, scalar, (size_t)len) == 0),
          "%s n=%zu w=%u %s: SIMD and scalar encodings differ", c->name, n, width, what);
    if (len >= 0) {
        for (int path = 0; path < 2; path++) {
            tierlab_force_scalar(path);
            /* An exactly-sized copy: ASan sees any read past the block. */
            uint8_t *exact = malloc((size_t)len + 1);
            memcpy(exact, simd, (size_t)len);
            int64_t got = c->decode(exact, (size_t)len, n, prev, out);
            CHECK(got == len && memcmp(out, v, n * sizeof *v) == 0,
                  "%s n=%zu w=%u %s %s: decode returned %lld of %lld bytes or wrong values",
                  c->name, n, width, what, path ? "scalar" : "simd", (long long)got,
                  (long long)len);
            /* A strict prefix is not a block of n values: the first and last
             * 8 cuts and 8 random ones (all of them would be quadratic). */
            for (int64_t k = 0; path == 0 && k < 24 && k < len; k++) {
                int64_t cut = k < 8 ? k : k < 16 ? len - 1 - (k - 8) : (int64_t)(tl_rand() % (uint64_t)len);
                uint8_t *prefix = malloc((size_t)cut + 1);
                memcpy(prefix, simd, (size_t)cut);
                int64_t r = c->decode(prefix, (size_t)cut, n, prev, out);
                free(prefix);
                if (r != TIERLAB_ECORRUPT) {
                    CHECK(0, "%s n=%zu w=%u %s: a %lld-byte prefix of %lld decoded (%lld)",
                          c->name, n, width, what, (long long)cut, (long long)len, (long long)r);
                    break;
                }
            }
            free(exact);
        }
    }
    tierlab_force_scalar(0);
    free(simd);
    free(scalar);
    free(out);
}

static void tl_test_codec(const tierlab_codec *c) {
    static const size_t lens[] = {0, 1, 2, 7, 8, 31, 32, 127, 128, 129, 255, 256};
    static const char *names[] = {"random", "sorted", "runs", "max", "exceptions"};
    uint32_t v[TIERLAB_MAX_BLOCK];
    int before = tl_failed;
    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (unsigned w = 0; w <= 32; w++)
            for (int pat = 0; pat < PAT_COUNT; pat++) {
                uint32_t prev = c->delta ? tl_rand() : 0;
                tl_fill(v, lens[l], w, pat, prev);
                tl_roundtrip(c, v, lens[l], prev, names[pat], w);
            }
    /* Garbage: any bytes, any n; only the contract's return values. */
    uint8_t junk[2048];
    uint32_t out[TIERLAB_MAX_BLOCK];
    for (int t = 0; t < 2000; t++) {
        size_t len = tl_rand() % sizeof junk, n = tl_rand() % (TIERLAB_MAX_BLOCK + 1);
        for (size_t i = 0; i < len; i++) junk[i] = (uint8_t)tl_rand();
        uint8_t *exact = malloc(len + 1);
        memcpy(exact, junk, len);
        tierlab_force_scalar(t % 2);
        int64_t r = c->decode(exact, len, n, tl_rand(), out);
        free(exact);
        CHECK(r == TIERLAB_ECORRUPT || (r >= 0 && (size_t)r <= len),
              "%s: garbage decode returned %lld for %zu bytes", c->name, (long long)r, len);
    }
    tierlab_force_scalar(0);
    CHECK(c->encode(v, TIERLAB_MAX_BLOCK + 1, 0, (uint8_t *)junk) == TIERLAB_EINVAL,
          "%s: encode of n > max block is not EINVAL", c->name);
    CHECK(c->decode(junk, sizeof junk, TIERLAB_MAX_BLOCK + 1, 0, out) == TIERLAB_EINVAL,
          "%s: decode of n > max block is not EINVAL", c->name);
    printf("%-16s %-6s %s\n", c->name, c->impl(), tl_failed == before ? "ok" : "FAILED");
}

int main(void) {
    CHECK(tierlab_codec_find("no-such-codec") == NULL, "unknown codec name was found");
    CHECK(tierlab_codec_count() > 0, "empty registry");
    for (size_t i = 0; i < tierlab_codec_count(); i++) {
        const tierlab_codec *c = tierlab_codec_at(i);
        CHECK(tierlab_codec_find(c->name) == c, "%s: find does not return it", c->name);
        tl_test_codec(c);
        const tierlab_codec *f = tierlab_codec_freq(c);
        CHECK(f != NULL && !f->delta, "%s: freq codec missing or delta-coded", c->name);
        if (tierlab_codec_find(f->name) != f) tl_test_codec(f); /* not tested as itself */
    }
    CHECK(tierlab_codec_at(tierlab_codec_count()) == NULL, "codec_at past the end");
    printf("%d passed, %d failed\n", tl_passed, tl_failed);
    return tl_failed != 0;
}
