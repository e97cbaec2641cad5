/* pfor_delta256_avx2.c — AVX2 kernels of pfor-delta256 (and pfor256): unpack
 * a vertical section (layout below, formats/pfor.md) eight values per
 * instruction, OR in the exceptions' high parts and rebuild the values from
 * the gaps, all in one pass. One routine per (length, width, delta,
 * exception mode), generated from one always-inline body in which these are
 * compile-time constants: every shift is an immediate and the 16 or 32 steps
 * unroll. Also the encoder's vertical pack and the exceptions' high-part
 * unpack. Compiled in target regions only (no global -m flags); called only
 * when tierlab_cpu_has_avx2(). First, the scalar twin of the layout (pack
 * and unpack), used by the encoder and by the decoder without AVX2. */
#include <string.h>

#include "memtrace/memtrace.h"
#include "pfor.h"

/* ---- the vertical layout, scalar: on every CPU, identical results ---- */

/* Lane j's n/8 values form a bit stream of (n/8)*b bits, LSB first, cut into
 * 32-bit words; row r holds word r of all 8 lanes (lane j at bytes 32r+4j).
 * When n == 128 and b is odd the last row has 16 bits per lane and is stored
 * as eight 16-bit words (bytes 32r+2j), so the section is exactly n*b/8
 * bytes. words[] below holds rows as 8 uint32 each, the half row widened. */

void tl_vpack(const uint32_t *in, size_t n, unsigned b, uint8_t *out) {
    const size_t per = n / 8, bits = per * b, rows = bits / 32;
    uint32_t words[8 * 33] = {0};
    for (unsigned lane = 0; lane < 8; lane++) {
        uint64_t acc = 0;
        unsigned fill = 0;
        uint32_t *w = words + lane;
        for (size_t k = 0; k < per; k++) {
            acc |= (uint64_t)in[8 * k + lane] << fill;
            fill += b;
            if (fill >= 32) {
                *w = (uint32_t)acc;
                w += 8;
                acc >>= 32;
                fill -= 32;
            }
        }
        if (fill) *w = (uint32_t)acc;
    }
    memcpy(out, words, 32 * rows); /* little-endian host, as base.c */
    if (bits % 32)
        for (unsigned j = 0; j < 8; j++) {
            uint16_t h = (uint16_t)words[8 * rows + j];
            memcpy(out + 32 * rows + 2 * j, &h, 2);
        }
}

void tl_vunpack_scalar(const uint8_t *in, size_t n, unsigned b, uint32_t *out) {
    if (b == 0) {
        memset(out, 0, n * sizeof *out);
        return;
    }
    const size_t per = n / 8, bits = per * b, rows = bits / 32;
    uint32_t words[8 * 33];
    memcpy(words, in, 32 * rows);
    if (bits % 32)
        for (unsigned j = 0; j < 8; j++) {
            uint16_t h;
            memcpy(&h, in + 32 * rows + 2 * j, 2);
            words[8 * rows + j] = h;
        }
    const uint32_t mask = b == 32 ? 0xFFFFFFFFu : (1u << b) - 1;
    for (size_t k = 0; k < per; k++) {
        const size_t bit = k * b, r = bit / 32, s = bit % 32;
        for (unsigned lane = 0; lane < 8; lane++) {
            uint64_t x = words[8 * r + lane] >> s;
            if (s + b > 32) x |= (uint64_t)words[8 * (r + 1) + lane] << (32 - s);
            out[8 * k + lane] = (uint32_t)x & mask;
        }
    }
}

/* ---- AVX2 ---- */

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define TL_AVX2 __attribute__((target("avx2")))
/* 32 bytes each: reported to the memory-trace recorder by hand in the
 * tracing build (memtrace.h; its instrumentation covers 1..16 bytes). */
#define TL_LOAD(p) (TL_MT_LOAD(p, 32), _mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define TL_STORE(p, v) (TL_MT_STORE(p, 32), _mm256_storeu_si256((__m256i *)(void *)(p), v))

/* Exception modes of a kernel: none, a dense patch array, or the expand. */
enum { TL_X_NONE, TL_X_PATCH, TL_X_EXPAND };

/* For the 8-bit exception mask m of one step: tl_rank[m][j] is the vpermd
 * index of lane j (its rank among the set bits of m, i.e. which of the
 * step's high parts it takes; 0 when bit j is clear) and tl_keep[m][j] is
 * all ones when bit j is set, else 0. Built by the preprocessor; 8 KiB each,
 * used as memory operands so a step's expand is three vector uops. */
#define TL_PC(m)                                                                           \
    (((m) & 1) + ((m) >> 1 & 1) + ((m) >> 2 & 1) + ((m) >> 3 & 1) + ((m) >> 4 & 1) +        \
     ((m) >> 5 & 1) + ((m) >> 6 & 1) + ((m) >> 7 & 1))
#define TL_RANK(m, j) (((m) >> (j) & 1) ? TL_PC((m) & ((1 << (j)) - 1)) : 0)
#define TL_KEEP(m, j) (((m) >> (j) & 1) ? -1 : 0)
#define TL_ROW8(F, m) {F(m, 0), F(m, 1), F(m, 2), F(m, 3), F(m, 4), F(m, 5), F(m, 6), F(m, 7)},
#define TL_R4(F, m) TL_ROW8(F, m) TL_ROW8(F, m + 1) TL_ROW8(F, m + 2) TL_ROW8(F, m + 3)
#define TL_R16(F, m) TL_R4(F, m) TL_R4(F, m + 4) TL_R4(F, m + 8) TL_R4(F, m + 12)
#define TL_R64(F, m) TL_R16(F, m) TL_R16(F, m + 16) TL_R16(F, m + 32) TL_R16(F, m + 48)
#define TL_R256(F) {TL_R64(F, 0) TL_R64(F, 64) TL_R64(F, 128) TL_R64(F, 192)}
static _Alignas(32) const int32_t tl_rank[256][8] = TL_R256(TL_RANK);
static _Alignas(32) const int32_t tl_keep[256][8] = TL_R256(TL_KEEP);

/* Inclusive scan of 8 gaps plus carry (every lane: the last value so far):
 * two in-lane shift-adds, then lane 3 broadcast into the high half, then the
 * vector's total (lane 7) broadcast for the next carry. The carry chain is
 * one add per vector: the total does not depend on the carry. Ten vector
 * uops; the vector ports, not latency, bound the loop. */
TL_PFOR_INLINE TL_AVX2 __m256i tl_scan8(__m256i v, __m256i *carry) {
    v = _mm256_add_epi32(v, _mm256_slli_si256(v, 4));
    v = _mm256_add_epi32(v, _mm256_slli_si256(v, 8));
    const __m256i lo = _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(3));
    v = _mm256_add_epi32(v, _mm256_blend_epi32(_mm256_setzero_si256(), lo, 0xF0));
    const __m256i total = _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(7));
    v = _mm256_add_epi32(v, *carry);
    *carry = _mm256_add_epi32(*carry, total);
    return v;
}

/* Row r of a section: 8 lane words; the 16-bit half row of n == 128 at odd
 * widths is widened. */
TL_PFOR_INLINE TL_AVX2 __m256i tl_row(const uint8_t *in, const unsigned n, const unsigned b,
                                      const unsigned r) {
    if (n == 128 && (b & 1) && r == b / 2)
        return _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(in + 32 * r)));
    return TL_LOAD(in + 32 * r);
}

/* The exceptions of step k: the high parts from high[off[k]..], moved to
 * their lanes, other lanes zeroed. */
TL_PFOR_INLINE TL_AVX2 __m256i tl_expand(const uint8_t *map, const uint8_t *off,
                                         const uint32_t *high, unsigned k) {
    const unsigned m = map[k];
    const __m256i h = _mm256_permutevar8x32_epi32(TL_LOAD(high + off[k]), TL_LOAD(tl_rank[m]));
    return _mm256_and_si256(h, TL_LOAD(tl_keep[m]));
}

/* All loads of `in` stay inside the n*b/8 bytes of the section. */
TL_PFOR_INLINE TL_AVX2 void tl_vdec(const uint8_t *in, uint32_t *out, const unsigned n,
                                    const unsigned b, const int delta, const int exc,
                                    uint32_t prev, const tl_pfor_exc *x) {
    const __m256i mask = _mm256_set1_epi32(b >= 32 ? -1 : (int)((1u << b) - 1));
    __m256i carry = _mm256_set1_epi32((int)prev);
    /* Locals: the stores below may alias anything, so fields would be reloaded. */
    const uint8_t *map = exc ? x->map : NULL, *off = exc ? x->off : NULL;
    const uint32_t *high = exc ? x->high : NULL, *patch = exc ? x->patch : NULL;
#pragma GCC unroll 32
    for (unsigned k = 0; k < n / 8; k++) {
        const unsigned bit = k * b, r = bit / 32, s = bit % 32;
        __m256i v = _mm256_setzero_si256();
        if (b) {
            v = tl_row(in, n, b, r);
            if (s) v = _mm256_srli_epi32(v, (int)s);
            if (s + b > 32) /* the value continues in the next row */
                v = _mm256_or_si256(v, _mm256_slli_epi32(tl_row(in, n, b, r + 1), (int)(32 - s)));
            if (b < 32 && s + b != 32) v = _mm256_and_si256(v, mask);
        }
        if (exc == TL_X_PATCH) v = _mm256_or_si256(v, TL_LOAD(patch + 8 * k));
        if (exc == TL_X_EXPAND) v = _mm256_or_si256(v, tl_expand(map, off, high, k));
        if (delta) v = tl_scan8(v, &carry);
        TL_STORE(out + 8 * k, v);
    }
}

/* The second pass without delta: OR the exceptions into out. */
static TL_AVX2 void tl_or_avx2(uint32_t *out, size_t n, int mode, const tl_pfor_exc *x) {
    for (unsigned k = 0; k < n / 8; k++) {
        const __m256i p = mode == TL_X_PATCH ? TL_LOAD(x->patch + 8 * k)
                                             : tl_expand(x->map, x->off, x->high, k);
        TL_STORE(out + 8 * k, _mm256_or_si256(TL_LOAD(out + 8 * k), p));
    }
}

/* Kernels: without delta only the plain unpack (exceptions are ORed in by
 * a second pass: no scan to fuse with); with delta one per mode. */
typedef void (*tl_vkernel)(const uint8_t *, uint32_t *, uint32_t, const tl_pfor_exc *);
#define TL_VK(N, B, D, X)                                                                  \
    static TL_AVX2 void tl_vk_##N##_##B##_##D##_##X(const uint8_t *in, uint32_t *out,      \
                                                     uint32_t prev, const tl_pfor_exc *x) { \
        tl_vdec(in, out, N, B, D, X, prev, x);                                             \
    }
#define TL_VK_WIDTH(B)                                                                     \
    TL_VK(128, B, 0, 0) TL_VK(128, B, 1, 0) TL_VK(128, B, 1, 1) TL_VK(128, B, 1, 2)       \
    TL_VK(256, B, 0, 0) TL_VK(256, B, 1, 0) TL_VK(256, B, 1, 1) TL_VK(256, B, 1, 2)
TL_PFOR_WIDTHS(TL_VK_WIDTH)
#define TL_VK_ROW(N, B)                                                                    \
    {tl_vk_##N##_##B##_0_0, tl_vk_##N##_##B##_1_0, tl_vk_##N##_##B##_1_1,                  \
     tl_vk_##N##_##B##_1_2},
#define TL_VK_ROW128(B) TL_VK_ROW(128, B)
#define TL_VK_ROW256(B) TL_VK_ROW(256, B)
/* [b][0: no delta; 1 + mode: delta] */
static const tl_vkernel tl_vk128[33][4] = {TL_PFOR_WIDTHS(TL_VK_ROW128)};
static const tl_vkernel tl_vk256[33][4] = {TL_PFOR_WIDTHS(TL_VK_ROW256)};

void tl_vdecode_avx2(const uint8_t *packed, size_t n, unsigned b, int delta, uint32_t prev,
                     const tl_pfor_exc *x, uint32_t *out) {
    const int mode = x == NULL ? TL_X_NONE : x->patch ? TL_X_PATCH : TL_X_EXPAND;
    const tl_vkernel *row = (n == 256 ? tl_vk256 : tl_vk128)[b];
    if (delta) {
        row[1 + mode](packed, out, prev, x);
        return;
    }
    row[0](packed, out, prev, x);
    if (mode != TL_X_NONE) tl_or_avx2(out, n, mode, x);
}

/* Horizontal unpack of the exceptions' high parts (bx <= 25 bits), eight
 * per step without gathers: a group of 8 values is bx bytes; the low half
 * of a register gets the group's first 16 bytes, the high half the 16 from
 * byte 4*bx/8 (where value 4 starts); a byte shuffle puts the 4 bytes
 * holding value j in lane j, a per-lane shift and a mask finish it. The
 * shuffle and shift patterns depend on bx only: tables built by the
 * preprocessor. */
#define TL_HS(bx, j) ((j) * (bx) / 8 - ((j) >= 4 ? 4 * (bx) / 8 : 0)) /* start byte in its half */
#define TL_HCTL4(bx, j) TL_HS(bx, j), TL_HS(bx, j) + 1, TL_HS(bx, j) + 2, TL_HS(bx, j) + 3,
#define TL_HCTL(bx)                                                                        \
    {TL_HCTL4(bx, 0) TL_HCTL4(bx, 1) TL_HCTL4(bx, 2) TL_HCTL4(bx, 3)                       \
     TL_HCTL4(bx, 4) TL_HCTL4(bx, 5) TL_HCTL4(bx, 6) TL_HCTL4(bx, 7)},
#define TL_HSH(bx)                                                                         \
    {0, (bx) % 8, 2 * (bx) % 8, 3 * (bx) % 8, 4 * (bx) % 8, 5 * (bx) % 8, 6 * (bx) % 8,    \
     7 * (bx) % 8},
#define TL_HROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) \
    X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23) X(24) X(25)
static _Alignas(32) const uint8_t tl_hctl[26][32] = {TL_HROWS(TL_HCTL)};
static _Alignas(32) const int32_t tl_hsh[26][8] = {TL_HROWS(TL_HSH)};

TL_PFOR_INLINE TL_AVX2 void tl_hgroup_avx2(const uint8_t *in, unsigned bx, __m256i ctl, __m256i sh,
                                           __m256i mask, __m128i up, uint32_t *out) {
    __m256i w = _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)in));
    const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(in + 4 * bx / 8));
    w = _mm256_inserti128_si256(w, hi, 1);
    w = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi8(w, ctl), sh), mask);
    TL_STORE(out, _mm256_sll_epi32(w, up));
}

TL_AVX2 void tl_hunpack_avx2(const uint8_t *in, size_t avail, size_t n, unsigned bx,
                             unsigned shift, uint32_t *out) {
    const __m256i ctl = TL_LOAD(tl_hctl[bx]), sh = TL_LOAD(tl_hsh[bx]);
    const __m256i mask = _mm256_set1_epi32((int)((1u << bx) - 1));
    const __m128i up = _mm_cvtsi32_si128((int)shift);
    const size_t reach = 4 * bx / 8 + 16, groups = (n + 7) / 8; /* bytes one group reads */
    size_t g = 0;
    for (; g < groups && g * bx + reach <= avail; g++)
        tl_hgroup_avx2(in + g * bx, bx, ctl, sh, mask, up, out + 8 * g);
    if (g == groups) return;
    /* The rest from a zero-padded copy: (groups - g - 1) * bx < reach, so the
     * copy is under reach bytes and the loads stay under 2 * reach <= 56. */
    uint8_t tail[64] = {0};
    memcpy(tail, in + g * bx, (n * bx + 7) / 8 - g * bx);
    for (size_t t = 0; g < groups; g++, t++)
        tl_hgroup_avx2(tail + t * bx, bx, ctl, sh, mask, up, out + 8 * g);
}

/* The encoder's vertical pack: step k ORs values 8k..8k+7 into the row
 * accumulator at bit (k*b) % 32; a full row is stored, its overflow starts
 * the next. The 16-bit half row (n == 128, odd b) is narrowed at the end. */
TL_AVX2 void tl_vpack_avx2(const uint32_t *in, size_t n, unsigned b, uint8_t *out) {
    __m256i acc = _mm256_setzero_si256();
    unsigned fill = 0;
    for (size_t k = 0; k < n / 8 && b; k++) {
        const __m256i v = TL_LOAD(in + 8 * k);
        acc = _mm256_or_si256(acc, _mm256_sll_epi32(v, _mm_cvtsi32_si128((int)fill)));
        fill += b;
        if (fill >= 32) {
            TL_STORE(out, acc);
            out += 32;
            fill -= 32;
            /* The bits of v that did not fit (none when fill is now 0). */
            acc = fill ? _mm256_srl_epi32(v, _mm_cvtsi32_si128((int)(b - fill)))
                       : _mm256_setzero_si256();
        }
    }
    if (fill) { /* n == 128, odd b: 16 bits per lane left */
        const __m128i lo = _mm256_castsi256_si128(acc), hi = _mm256_extracti128_si256(acc, 1);
        const __m128i mask = _mm_set1_epi32(0xFFFF);
        _mm_storeu_si128((__m128i *)(void *)out,
                         _mm_packus_epi32(_mm_and_si128(lo, mask), _mm_and_si128(hi, mask)));
    }
}

TL_AVX2 void tl_zero_avx2(uint32_t *patch, size_t n) {
    for (size_t k = 0; k < n; k += 8) TL_STORE(patch + k, _mm256_setzero_si256());
}

TL_AVX2 void tl_const_avx2(uint32_t *out, size_t n, uint32_t prev, uint32_t c, int delta) {
    __m256i v = _mm256_set1_epi32((int)c), step = _mm256_setzero_si256();
    if (delta) {
        v = _mm256_add_epi32(_mm256_set1_epi32((int)prev),
                             _mm256_mullo_epi32(_mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8), v));
        step = _mm256_set1_epi32((int)(8 * c));
    }
    for (size_t k = 0; k < n; k += 8, v = _mm256_add_epi32(v, step)) TL_STORE(out + k, v);
}

#else /* no AVX2 on this architecture: never called (tierlab_cpu_has_avx2() is 0) */

void tl_vdecode_avx2(const uint8_t *packed, size_t n, unsigned b, int delta, uint32_t prev,
                     const tl_pfor_exc *x, uint32_t *out) {
    (void)packed, (void)n, (void)b, (void)delta, (void)prev, (void)x, (void)out;
}
void tl_hunpack_avx2(const uint8_t *in, size_t avail, size_t n, unsigned bx, unsigned shift,
                     uint32_t *out) {
    (void)in, (void)avail, (void)n, (void)bx, (void)shift, (void)out;
}
void tl_vpack_avx2(const uint32_t *in, size_t n, unsigned b, uint8_t *out) {
    (void)in, (void)n, (void)b, (void)out;
}
void tl_zero_avx2(uint32_t *patch, size_t n) { (void)patch, (void)n; }
void tl_const_avx2(uint32_t *out, size_t n, uint32_t prev, uint32_t c, int delta) {
    (void)out, (void)n, (void)prev, (void)c, (void)delta;
}

#endif
