/* pfor_delta256.c — `pfor-delta256`: the PFor scheme of pfor_delta.c with
 * the 8-lane vertical bit packing for full 256-value blocks, unpacked eight
 * values per AVX2 instruction (pfor_delta256_avx2.c) with the gap prefix sum
 * fused in; partial blocks use pfor-delta's horizontal layout. This file
 * holds the scalar twin of the vertical layout (byte-identical encodings,
 * identical decodes) for CPUs without AVX2 and for tests. Format:
 * kernels/formats/pfor.md. */
#include <string.h>

#include "pfor.h"

/* Value i lives in lane i % 8 at position i / 8; a lane's values are packed
 * LSB first into its 32-bit words, lane word k at word index 8k + lane. */
void tl_vpack256(const uint32_t *in, unsigned b, uint8_t *out) {
    uint32_t words[8 * 32];
    memset(words, 0, 32 * b);
    for (unsigned lane = 0; lane < 8; lane++) {
        for (unsigned k = 0; k < 32; k++) {
            uint64_t v = in[8 * k + lane];
            unsigned bit = k * b, w = bit / 32, s = bit % 32;
            words[8 * w + lane] |= (uint32_t)(v << s);
            if (s + b > 32) words[8 * (w + 1) + lane] |= (uint32_t)(v >> (32 - s));
        }
    }
    memcpy(out, words, 32 * b);
}

void tl_vunpack256_scalar(const uint8_t *in, unsigned b, uint32_t *out) {
    uint32_t words[8 * 32];
    memcpy(words, in, 32 * b);
    uint32_t mask = b == 32 ? 0xFFFFFFFFu : (1u << b) - 1;
    for (unsigned lane = 0; lane < 8; lane++) {
        for (unsigned k = 0; k < 32; k++) {
            unsigned bit = k * b, w = bit / 32, s = bit % 32;
            uint64_t v = words[8 * w + lane] >> s;
            if (s + b > 32) v |= (uint64_t)words[8 * (w + 1) + lane] << (32 - s);
            out[8 * k + lane] = (uint32_t)v & mask;
        }
    }
}

static const char *tl_pfor256_impl(void) { return tierlab_cpu_has_avx2() ? "simd" : "scalar"; }

/* `pfor256`: the freq codec of `pfor-delta256` (not in the registry by itself). */
TL_PFOR_CODEC(tl_pfor256_plain, "pfor256", 0, 1, tl_pfor256_impl, NULL);
TL_PFOR_CODEC(tierlab_codec_pfor_delta256, "pfor-delta256", 1, 1, tl_pfor256_impl,
              &tl_pfor256_plain);
