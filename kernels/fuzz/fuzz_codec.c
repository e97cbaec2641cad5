/* fuzz_codec.c — one libFuzzer harness for every codec of the registry.
 * The codec under test is named by TIERLAB_FUZZ_CODEC (a registry name or a
 * freq codec such as "pfor"); without it the first input byte picks one.
 *
 * Input byte 0 (after the codec byte when unset) selects the mode:
 *   even: decode the rest as an encoded block of n values (n from byte 1)
 *         into an exactly sized heap buffer from an exactly sized copy, so
 *         ASan reports any read or write out of bounds; the return must be
 *         ECORRUPT or a byte count within the input;
 *   odd:  read the rest as uint32 values, encode them (SIMD and forced
 *         scalar), require identical bytes, decode on both paths and require
 *         the original values. Any mismatch aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tierlab.h"

static const tierlab_codec *tl_pick(const uint8_t **data, size_t *size) {
    static const tierlab_codec *named;
    static int looked;
    if (!looked) {
        const char *name = getenv("TIERLAB_FUZZ_CODEC");
        looked = 1;
        if (name) {
            named = tierlab_codec_find(name);
            for (size_t i = 0; !named && i < tierlab_codec_count(); i++) {
                const tierlab_codec *f = tierlab_codec_freq(tierlab_codec_at(i));
                if (strcmp(f->name, name) == 0) named = f;
            }
            if (!named) abort(); /* a typo must not fuzz nothing */
        }
    }
    if (named) return named;
    if (*size == 0) return NULL;
    size_t k = (*data)[0] % (2 * tierlab_codec_count());
    (*data)++, (*size)--;
    const tierlab_codec *c = tierlab_codec_at(k / 2);
    return k % 2 ? tierlab_codec_freq(c) : c;
}

static void tl_fuzz_decode(const tierlab_codec *c, const uint8_t *data, size_t size) {
    if (size < 1) return;
    size_t n = data[0] % (TIERLAB_MAX_BLOCK + 1);
    data++, size--;
    uint8_t *in = malloc(size + 1);
    uint32_t *out = malloc((n + 1) * sizeof *out);
    memcpy(in, data, size);
    for (int path = 0; path < 2; path++) {
        tierlab_force_scalar(path);
        int64_t r = c->decode(in, size, n, 12345u, out);
        if (!(r == TIERLAB_ECORRUPT || (r >= 0 && (size_t)r <= size))) abort();
    }
    tierlab_force_scalar(0);
    free(in);
    free(out);
}

static void tl_fuzz_roundtrip(const tierlab_codec *c, const uint8_t *data, size_t size) {
    size_t n = size / 4 > TIERLAB_MAX_BLOCK ? TIERLAB_MAX_BLOCK : size / 4;
    uint32_t v[TIERLAB_MAX_BLOCK], out[TIERLAB_MAX_BLOCK];
    memcpy(v, data, n * 4);
    uint32_t prev = size % 4 ? data[size - 1] : 0;
    size_t cap = c->max_encoded_bytes(n);
    uint8_t *a = malloc(cap + 1), *b = malloc(cap + 1);
    tierlab_force_scalar(0);
    int64_t la = c->encode(v, n, prev, a);
    tierlab_force_scalar(1);
    int64_t lb = c->encode(v, n, prev, b);
    if (la < 0 || la != lb || (size_t)la > cap || memcmp(a, b, (size_t)la)) abort();
    for (int path = 0; path < 2; path++) {
        tierlab_force_scalar(path);
        uint8_t *exact = malloc((size_t)la + 1);
        memcpy(exact, a, (size_t)la);
        if (c->decode(exact, (size_t)la, n, prev, out) != la || memcmp(out, v, n * 4)) abort();
        free(exact);
    }
    tierlab_force_scalar(0);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const tierlab_codec *c = tl_pick(&data, &size);
    if (!c || size < 1) return 0;
    if (data[0] % 2) tl_fuzz_roundtrip(c, data + 1, size - 1);
    else tl_fuzz_decode(c, data + 1, size - 1);
    return 0;
}
