/* pfor.h — the PFor block scheme shared by pfor-delta and pfor-delta256
 * (internal). Byte format and the reasons for it: kernels/formats/pfor.md.
 *
 * One implementation with two switches: `delta` (the values are wrapping
 * gaps from prev, rebuilt inside the decode loop) and `vertical` (the packed
 * low bits of a 128- or 256-value block use the 8-lane layout that AVX2
 * unpacks eight values per instruction; other lengths always use the
 * horizontal layout of pfor-delta; the 256 flavours also store values minus
 * one). Both layouts of n values at width b
 * take exactly n*b/8 bytes, so the encoder's choice of block type does not
 * depend on the layout. */
#ifndef TL_PFOR_H
#define TL_PFOR_H

#include <stddef.h>
#include <stdint.h>

#include "codecs.h"

/* Block types, in the top two bits of the header byte; the low six bits
 * hold the low width b (0..32). */
enum { TL_PFOR_PACK = 0, TL_PFOR_BITMAP = 1, TL_PFOR_VBYTE = 2, TL_PFOR_CONST = 3 };

/* The freq codecs: the same scheme, never delta-coded (tierlab_codec_freq).
 * Not in the registry; the lead decides about exposing them by name. */
extern const tierlab_codec tl_pfor_plain;    /* "pfor":    freq codec of pfor-delta    */
extern const tierlab_codec tl_pfor256_plain; /* "pfor256": freq codec of pfor-delta256 */

/* X(b) for every bit width b = 0..32: generates one specialised routine per
 * width (constant shifts and offsets) and the tables that select them. */
#define TL_PFOR_WIDTHS(X)                                                                  \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)  \
    X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27) X(28) X(29)   \
    X(30) X(31) X(32)

#define TL_PFOR_INLINE static inline __attribute__((always_inline))
/* Internal functions are hidden: calls between the codec files then skip
 * the PLT (they cost a few ns per block otherwise). */
#define TL_PFOR_HIDDEN __attribute__((visibility("hidden")))

/* True when a block of n values uses the vertical layout (pfor-delta256). */
static inline int tl_pfor_vertical_len(size_t n) { return n == 128 || n == 256; }

/* Bit width of v: 0 for 0, else 1 + index of the highest set bit. */
static inline unsigned tl_pfor_bits(uint32_t v) {
    return v ? 32u - (unsigned)__builtin_clz(v) : 0u;
}

/* The scheme (pfor_delta.c). `vertical` selects the 256 flavour: values are
 * stored minus one (every freq; every gap but a block's first: pfor.md
 * "Values") and the vertical layout is used when tl_pfor_vertical_len(n).
 * Contract of tierlab_codec. */
TL_PFOR_HIDDEN size_t tl_pfor_max_bytes(size_t n);
TL_PFOR_HIDDEN int64_t tl_pfor_encode(const uint32_t *in, size_t n, uint32_t prev,
                                      uint8_t *out, int delta, int vertical);
TL_PFOR_HIDDEN int64_t tl_pfor_decode(const uint8_t *in, size_t in_len, size_t n,
                                      uint32_t prev, uint32_t *out, int delta, int vertical);

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

/* Vertical layout, scalar (pfor_delta256_avx2.c): n in {128, 256} values at width
 * b; value i is bit-packed into lane i % 8 at position i / 8. Writes or reads
 * exactly n*b/8 bytes. */
TL_PFOR_HIDDEN void tl_vpack(const uint32_t *in, size_t n, unsigned b, uint8_t *out);
/* AVX2 twin of tl_vpack (same bytes), eight values per step. */
TL_PFOR_HIDDEN void tl_vpack_avx2(const uint32_t *in, size_t n, unsigned b, uint8_t *out);
TL_PFOR_HIDDEN void tl_vunpack_scalar(const uint8_t *in, size_t n, unsigned b, uint32_t *out);

/* AVX2 kernels (pfor_delta256_avx2.c); call only when tierlab_cpu_has_avx2(). */

/* The exceptions of a vertical block, in one of two forms. Dense: patch[i]
 * is the high part of value i shifted left by b, 0 elsewhere (patch not
 * NULL). Expand: bit i of map marks value i; high[] holds their high parts
 * shifted left by b, in position order, with 8 readable entries past the
 * last; off[k] = set bits in map bytes 0..k-1. */
typedef struct {
    const uint32_t *patch;
    const uint8_t *map, *off;
    const uint32_t *high;
} tl_pfor_exc;

/* Unpack a vertical section (n in {128, 256}, b 0..32), OR in the
 * exceptions' high parts (x may be NULL: none), and with delta rebuild the
 * values from the gaps starting at prev: one pass, eight values per step. */
TL_PFOR_HIDDEN void tl_vdecode_avx2(const uint8_t *packed, size_t n, unsigned b, int delta,
                                    uint32_t prev, const tl_pfor_exc *x, uint32_t *out);
/* n horizontal values of width bx (1..25) from in, `avail` >= ceil(n*bx/8)
 * bytes readable, each shifted left by `shift`, into out[0..ceil(n/8)*8). */
TL_PFOR_HIDDEN void tl_hunpack_avx2(const uint8_t *in, size_t avail, size_t n, unsigned bx,
                                    unsigned shift, uint32_t *out);
/* patch[0..n) = 0, n a multiple of 8. */
TL_PFOR_HIDDEN void tl_zero_avx2(uint32_t *patch, size_t n);
/* A constant block of the 256 flavours (stored c; values minus one, pfor.md):
 * out[i] = c + 1, or with delta prev + c + i*(c+1); n multiple of 8. */
TL_PFOR_HIDDEN void tl_const_avx2(uint32_t *out, size_t n, uint32_t prev, uint32_t c, int delta);

#endif
