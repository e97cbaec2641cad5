/* fuzz_codec.c — one libFuzzer harness for every codec (registry entries and
 * their freq codecs), so a new codec needs no new harness.
 *
 * Codec: TIERLAB_FUZZ_CODEC names it (read once; a registry name or a freq
 * codec such as "pfor"; an unknown name aborts, so a typo cannot fuzz
 * nothing). When it is unset, the first input byte picks one and is dropped.
 *
 * Then byte 0 selects the mode (low bit):
 *  even: decode. n = (byte 1 | byte 2 << 8) % 257, prev = 0x9E3779B9, the
 *        rest is the block. It is copied to an exactly-sized heap buffer and
 *        decoded into an exactly-n-sized heap buffer on both paths, so ASan
 *        reports any read or write out of bounds. The return must be
 *        ECORRUPT or a byte count within the input, and both paths must give
 *        the same result.
 *  odd:  round trip. Byte 1 is prev's low byte (times 0x01010101); the rest
 *        is up to 256 little-endian uint32 values. Encode on the SIMD and the
 *        forced-scalar path (identical bytes, within max_encoded_bytes),
 *        decode both ways (the same values and byte count), and a strict
 *        prefix must be ECORRUPT.
 * Any violation aborts. tests/kernels/test_native_builds.py seeds a corpus
 * in this layout and runs each codec for a few seconds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tierlab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const tierlab_codec *tl_named(const char *name) {
    const tierlab_codec *c = tierlab_codec_find(name);
    for (size_t i = 0; !c && i < tierlab_codec_count(); i++) {
        const tierlab_codec *f = tierlab_codec_freq(tierlab_codec_at(i));
        if (strcmp(f->name, name) == 0) c = f;
    }
    return c;
}

static const tierlab_codec *tl_pick(const uint8_t **data, size_t *size) {
    static const tierlab_codec *fixed;
    static int looked;
    if (!looked) {
        const char *name = getenv("TIERLAB_FUZZ_CODEC");
        looked = 1;
        if (name && name[0] && !(fixed = tl_named(name))) abort();
    }
    if (fixed) return fixed;
    if (*size == 0) return NULL;
    /* Even: the entry itself; odd: its freq codec. */
    size_t k = (*data)[0] % (2 * tierlab_codec_count());
    (*data)++, (*size)--;
    const tierlab_codec *c = tierlab_codec_at(k / 2);
    return k % 2 ? tierlab_codec_freq(c) : c;
}

static void *tl_alloc(size_t bytes) {
    /* malloc(0) gives a zero-sized block on glibc and under ASan, so even
     * one byte past an empty input is reported; 1 byte only as a fallback. */
    void *p = malloc(bytes);
    if (!p && bytes == 0) p = malloc(1);
    if (!p) abort();
    return p;
}

static void tl_fuzz_decode(const tierlab_codec *c, const uint8_t *data, size_t size) {
    if (size < 2) return;
    size_t n = (size_t)(data[0] | data[1] << 8) % (TIERLAB_MAX_BLOCK + 1);
    data += 2, size -= 2;
    uint8_t *in = tl_alloc(size);
    if (size) memcpy(in, data, size);
    uint32_t *out[2] = {tl_alloc(n * sizeof(uint32_t)), tl_alloc(n * sizeof(uint32_t))};
    int64_t r[2];
    for (int scalar = 0; scalar < 2; scalar++) {
        tierlab_force_scalar(scalar);
        r[scalar] = c->decode(in, size, n, 0x9E3779B9u, out[scalar]);
        if (!(r[scalar] == TIERLAB_ECORRUPT || (r[scalar] >= 0 && (size_t)r[scalar] <= size))) abort();
    }
    tierlab_force_scalar(0);
    if (r[0] != r[1] || (r[0] >= 0 && n && memcmp(out[0], out[1], n * sizeof(uint32_t)))) abort();
    free(in);
    free(out[0]);
    free(out[1]);
}

static void tl_fuzz_roundtrip(const tierlab_codec *c, const uint8_t *data, size_t size) {
    if (size < 1) return;
    uint32_t prev = data[0] * 0x01010101u;
    data++, size--;
    size_t n = size / 4 > TIERLAB_MAX_BLOCK ? TIERLAB_MAX_BLOCK : size / 4;
    uint32_t v[TIERLAB_MAX_BLOCK];
    for (size_t i = 0; i < n; i++) /* little-endian, whatever the host */
        v[i] = (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 |
               (uint32_t)data[4 * i + 2] << 16 | (uint32_t)data[4 * i + 3] << 24;
    size_t bound = c->max_encoded_bytes(n);
    uint8_t *enc[2] = {tl_alloc(bound), tl_alloc(bound)};
    int64_t len[2];
    for (int scalar = 0; scalar < 2; scalar++) {
        tierlab_force_scalar(scalar);
        len[scalar] = c->encode(v, n, prev, enc[scalar]);
    }
    if (len[0] < 0 || (size_t)len[0] > bound || (len[0] == 0 && n > 0)) abort();
    if (len[0] != len[1] || memcmp(enc[0], enc[1], (size_t)len[0])) abort();
    size_t L = (size_t)len[0];
    uint8_t *exact = tl_alloc(L);
    if (L) memcpy(exact, enc[0], L);
    uint32_t *out = tl_alloc(n * sizeof(uint32_t));
    for (int scalar = 0; scalar < 2; scalar++) {
        tierlab_force_scalar(scalar);
        if (c->decode(exact, L, n, prev, out) != len[0]) abort();
        if (n && memcmp(out, v, n * sizeof(uint32_t))) abort();
        /* One strict prefix, at the end of its own exact buffer. */
        if (L > 0) {
            size_t cut = (size_t)prev % L;
            uint8_t *prefix = tl_alloc(cut);
            if (cut) memcpy(prefix, exact, cut);
            if (c->decode(prefix, cut, n, prev, out) != TIERLAB_ECORRUPT) abort();
            free(prefix);
        }
    }
    tierlab_force_scalar(0);
    free(enc[0]);
    free(enc[1]);
    free(exact);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const tierlab_codec *c = tl_pick(&data, &size);
    if (!c || size < 1) return 0;
    if (data[0] & 1)
        tl_fuzz_roundtrip(c, data + 1, size - 1);
    else
        tl_fuzz_decode(c, data + 1, size - 1);
    return 0;
}
