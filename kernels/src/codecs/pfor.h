/* pfor.h — the PFor block scheme shared by pfor-delta and pfor-delta256
 * (internal). Byte format: kernels/formats/pfor.md.
 *
 * One implementation, two switches: `delta` (values are wrapping gaps from
 * prev, rebuilt in the decode loop) and `vertical` (the bit-packed sections
 * of a 256-value block use the 8-lane layout that AVX2 unpacks eight values
 * per instruction; other block lengths always use the horizontal layout). */
#ifndef TL_PFOR_H
#define TL_PFOR_H

#include <string.h>

#include "codecs.h"

/* Block types, in the top two bits of the header byte; the low six hold b. */
enum { TL_PFOR_PACK = 0, TL_PFOR_BITMAP = 1, TL_PFOR_VBYTE = 2, TL_PFOR_CONST = 3 };

/* The only block length with the vertical layout. */
#define TL_PFOR_VBLOCK 256

/* The freq codecs (same scheme, no delta); reached through tierlab_codec_freq. */
extern const tierlab_codec tl_pfor_plain;    /* freq codec of pfor-delta    */
extern const tierlab_codec tl_pfor256_plain; /* freq codec of pfor-delta256 */

size_t tl_pfor_max_bytes(size_t n);

/* The descriptor of one PFor flavour: NAME with entry points that fix delta
 * and the layout; FREQ is its freq codec (NULL: itself). */
#define TL_PFOR_CODEC(ident, NAME, DELTA, VERTICAL, IMPL, FREQ)                          \
    static int64_t ident##_enc(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out) { \
        return tl_pfor_encode(in, n, prev, out, DELTA, VERTICAL);                       \
    }                                                                                   \
    static int64_t ident##_dec(const uint8_t *in, size_t len, size_t n, uint32_t prev,  \
                               uint32_t *out) {                                         \
        return tl_pfor_decode(in, len, n, prev, out, DELTA, VERTICAL);                  \
    }                                                                                   \
    const tierlab_codec ident = {.name = NAME,                                          \
                                 .delta = DELTA,                                        \
                                 .max_encoded_bytes = tl_pfor_max_bytes,                \
                                 .encode = ident##_enc,                                 \
                                 .decode = ident##_dec,                                 \
                                 .impl = IMPL,                                          \
                                 .freq = FREQ}
/* AVX2: the 256 values of a constant block of gaps c after prev. */
void tl_const_delta256_avx2(uint32_t *out, uint32_t prev, uint32_t c);
/* AVX2 horizontal unpack of the first values of a packed section of `len`
 * bytes (see pfor_delta256_avx2.c); returns how many it decoded. */
size_t tl_hunpack_avx2(const uint8_t *in, size_t len, size_t n, unsigned b, uint32_t *out);

/* Set bits of the first `bytes` bytes of map (SWAR: no popcnt instruction
 * is assumed outside the SIMD target regions). */
static inline size_t tl_popcount_bytes(const uint8_t *map, size_t bytes) {
    size_t total = 0, k = 0;
    for (; bytes - k >= 8; k += 8) {
        uint64_t x;
        memcpy(&x, map + k, 8);
        x -= (x >> 1) & 0x5555555555555555ull;
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
        total += (size_t)((x * 0x0101010101010101ull) >> 56);
    }
    for (; k < bytes; k++) {
        unsigned x = map[k];
        x -= (x >> 1) & 0x55;
        x = (x & 0x33) + ((x >> 2) & 0x33);
        total += (x + (x >> 4)) & 0x0F;
    }
    return total;
}
int64_t tl_pfor_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out, int delta,
                       int vertical);
int64_t tl_pfor_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                       uint32_t *out, int delta, int vertical);

/* Vertical layout of 256 values at width b (0..32): lane j = i % 8 holds
 * values j, j+8, j+16, ... packed least-significant-bit first into 32-bit
 * words; word k of lane j is stored at 32-bit word index 8k + j. Size: 32*b
 * bytes exactly. Scalar versions in pfor_delta256.c, AVX2 in
 * pfor_delta256_avx2.c; both give identical results. */
void tl_vpack256(const uint32_t *in, unsigned b, uint8_t *out);
void tl_vunpack256_scalar(const uint8_t *in, unsigned b, uint32_t *out);
/* AVX2: unpack; OR in exception high parts (when excmap is not NULL: bit i
 * of excmap marks value i, high[] holds their high parts in position order,
 * readable 8 entries past the last); with delta rebuild the values from gaps
 * starting at prev — all in one pass. b <= 32, and b < 32 with exceptions. */
void tl_vunpack256_avx2(const uint8_t *in, unsigned b, uint32_t *out, int delta, uint32_t prev,
                        const uint8_t *excmap, const uint32_t *high);

#endif
