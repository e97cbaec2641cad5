/* pfor_delta256_avx2.c — AVX2 kernels of pfor-delta256: unpack a vertical
 * 256-value section (see pfor.h) eight values per instruction, with the gap
 * prefix sum fused into the same pass. One routine per bit width, generated
 * from one always-inline body with b a compile-time constant, so every shift
 * is an immediate and the 32 steps unroll; exception high parts are expanded
 * into place with a permutation (pfor_tables.h) in the same pass. Compiled in a target region only
 * (no global -m flags); called only when tierlab_cpu_has_avx2(). */
#include "pfor.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "pfor_tables.h"

#define TL_AVX2 __attribute__((target("avx2,popcnt"))) /* every AVX2 CPU has POPCNT */
#define TL_INLINE static inline __attribute__((always_inline))

/* Inclusive scan of the 8 lanes of v (gaps -> running sums), plus carry (the
 * previous vector's last sum in every lane). The carry chain is one add per
 * vector: the vector's own total is broadcast independently of the carry. */
TL_INLINE TL_AVX2 __m256i tl_scan8(__m256i v, __m256i *carry) {
    v = _mm256_add_epi32(v, _mm256_slli_si256(v, 4));
    v = _mm256_add_epi32(v, _mm256_slli_si256(v, 8));
    __m256i low_total = _mm256_shuffle_epi32(v, 0xFF);
    v = _mm256_add_epi32(v, _mm256_permute2x128_si256(low_total, low_total, 0x08));
    __m256i total = _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(7));
    v = _mm256_add_epi32(v, *carry);
    *carry = _mm256_add_epi32(*carry, total);
    return v;
}

/* The exception high parts of vector k: lane j takes high[e + rank of bit j
 * in m] where bit j of m is set, 0 elsewhere; e advances by popcount(m). */
TL_INLINE TL_AVX2 __m256i tl_expand(unsigned m, const uint32_t *high, size_t *e) {
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    __m128i idx8 = _mm_loadl_epi64((const __m128i *)(const void *)tl_pfor_expand[m]);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(high + *e));
    h = _mm256_permutevar8x32_epi32(h, _mm256_cvtepu8_epi32(idx8));
    __m256i sel = _mm256_and_si256(_mm256_set1_epi32((int)m), lane_bit);
    *e += (size_t)__builtin_popcount(m);
    return _mm256_and_si256(h, _mm256_cmpeq_epi32(sel, lane_bit));
}

/* b, delta and exc are compile-time constants in every instantiation. */
TL_INLINE TL_AVX2 void tl_vunpack(const uint8_t *in, uint32_t *out, const unsigned b,
                                  const int delta, uint32_t prev, const int exc,
                                  const uint8_t *map, const uint32_t *high) {
    const __m256i mask = _mm256_set1_epi32(b >= 32 ? -1 : (int)((1u << b) - 1));
    __m256i carry = _mm256_set1_epi32((int)prev);
    size_t e = 0;
#pragma GCC unroll 32
    for (unsigned k = 0; k < 32; k++) {
        const unsigned bit = k * b, w = bit / 32, s = bit % 32;
        __m256i v = _mm256_setzero_si256();
        if (b) {
            v = _mm256_loadu_si256((const __m256i *)(const void *)(in + 32 * w));
            v = _mm256_srli_epi32(v, (int)s);
            if (s + b > 32) {
                __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)(in + 32 * w + 32));
                v = _mm256_or_si256(v, _mm256_slli_epi32(hi, (int)(32 - s)));
            }
            if (b < 32) v = _mm256_and_si256(v, mask);
        }
        if (exc) v = _mm256_or_si256(v, _mm256_slli_epi32(tl_expand(map[k], high, &e), (int)b));
        if (delta) v = tl_scan8(v, &carry);
        _mm256_storeu_si256((__m256i *)(void *)(out + 8 * k), v);
    }
}

/* One function per (width, delta, exceptions) in a table. */
typedef void (*tl_vunpack_kernel)(const uint8_t *, uint32_t *, uint32_t, const uint8_t *,
                                  const uint32_t *);
#define TL_KERNEL_1(B, D, X)                                                               \
    static TL_AVX2 void tl_vunpack_##B##_##D##_##X(const uint8_t *in, uint32_t *out,       \
                                                    uint32_t prev, const uint8_t *map,     \
                                                    const uint32_t *high) {                \
        tl_vunpack(in, out, B, D, prev, X, map, high);                                     \
    }
#define TL_KERNEL(B) TL_KERNEL_1(B, 0, 0) TL_KERNEL_1(B, 1, 0) TL_KERNEL_1(B, 0, 1) TL_KERNEL_1(B, 1, 1)
TL_KERNEL(0) TL_KERNEL(1) TL_KERNEL(2) TL_KERNEL(3) TL_KERNEL(4) TL_KERNEL(5) TL_KERNEL(6)
TL_KERNEL(7) TL_KERNEL(8) TL_KERNEL(9) TL_KERNEL(10) TL_KERNEL(11) TL_KERNEL(12)
TL_KERNEL(13) TL_KERNEL(14) TL_KERNEL(15) TL_KERNEL(16) TL_KERNEL(17) TL_KERNEL(18)
TL_KERNEL(19) TL_KERNEL(20) TL_KERNEL(21) TL_KERNEL(22) TL_KERNEL(23) TL_KERNEL(24)
TL_KERNEL(25) TL_KERNEL(26) TL_KERNEL(27) TL_KERNEL(28) TL_KERNEL(29) TL_KERNEL(30)
TL_KERNEL(31)
/* Width 32 has no exceptions (nothing is wider). */
TL_KERNEL_1(32, 0, 0) TL_KERNEL_1(32, 1, 0)

#define TL_ROW(B) {{tl_vunpack_##B##_0_0, tl_vunpack_##B##_0_1}, {tl_vunpack_##B##_1_0, tl_vunpack_##B##_1_1}}
static const tl_vunpack_kernel tl_kernels[33][2][2] = {
    TL_ROW(0),  TL_ROW(1),  TL_ROW(2),  TL_ROW(3),  TL_ROW(4),  TL_ROW(5),  TL_ROW(6),
    TL_ROW(7),  TL_ROW(8),  TL_ROW(9),  TL_ROW(10), TL_ROW(11), TL_ROW(12), TL_ROW(13),
    TL_ROW(14), TL_ROW(15), TL_ROW(16), TL_ROW(17), TL_ROW(18), TL_ROW(19), TL_ROW(20),
    TL_ROW(21), TL_ROW(22), TL_ROW(23), TL_ROW(24), TL_ROW(25), TL_ROW(26), TL_ROW(27),
    TL_ROW(28), TL_ROW(29), TL_ROW(30), TL_ROW(31),
    {{tl_vunpack_32_0_0, NULL}, {tl_vunpack_32_1_0, NULL}},
};

void tl_vunpack256_avx2(const uint8_t *in, unsigned b, uint32_t *out, int delta, uint32_t prev,
                        const uint8_t *excmap, const uint32_t *high) {
    tl_kernels[b][delta != 0][excmap != NULL](in, out, prev, excmap, high);
}

/* A constant block of 256 gaps c: values prev + c, prev + 2c, ... with one
 * vector add per 8 values (the scalar loop needs a multiply per value). */
TL_AVX2 void tl_const_delta256_avx2(uint32_t *out, uint32_t prev, uint32_t c) {
    __m256i v = _mm256_add_epi32(
        _mm256_set1_epi32((int)prev),
        _mm256_mullo_epi32(_mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8), _mm256_set1_epi32((int)c)));
    const __m256i step = _mm256_set1_epi32((int)(8 * c));
    for (unsigned k = 0; k < 32; k++) {
        _mm256_storeu_si256((__m256i *)(void *)(out + 8 * k), v);
        v = _mm256_add_epi32(v, step);
    }
}

/* Horizontal unpack (pfor_delta.c's layout) of the exceptions' high parts,
 * 8 values per gather: lane j loads the 4 bytes holding bits
 * [(i+j)*b, (i+j)*b + b) and shifts them into place. Only for b <= 25, where
 * a value spans at most 4 bytes, and only for groups whose loads stay inside
 * the section's `len` bytes; returns how many values it decoded (a multiple
 * of 8) and leaves the rest to the scalar loop. */
TL_AVX2 size_t tl_hunpack_avx2(const uint8_t *in, size_t len, size_t n, unsigned b,
                               uint32_t *out) {
    if (b == 0 || b > 25) return 0;
    const __m256i lane_bits = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                 _mm256_set1_epi32((int)b));
    const __m256i mask = _mm256_set1_epi32((int)((1u << b) - 1)), seven = _mm256_set1_epi32(7);
    size_t i = 0;
    for (; n - i >= 8 && ((i + 7) * b) / 8 + 4 <= len; i += 8) {
        __m256i bits = _mm256_add_epi32(_mm256_set1_epi32((int)(i * b)), lane_bits);
        __m256i w = _mm256_i32gather_epi32((const int *)(const void *)in,
                                           _mm256_srli_epi32(bits, 3), 1);
        w = _mm256_srlv_epi32(w, _mm256_and_si256(bits, seven));
        _mm256_storeu_si256((__m256i *)(void *)(out + i), _mm256_and_si256(w, mask));
    }
    return i;
}

#else /* no AVX2 on this architecture: never called (tierlab_cpu_has_avx2() is 0) */

void tl_vunpack256_avx2(const uint8_t *in, unsigned b, uint32_t *out, int delta, uint32_t prev,
                        const uint8_t *excmap, const uint32_t *high) {
    (void)in, (void)b, (void)out, (void)delta, (void)prev, (void)excmap, (void)high;
}
size_t tl_hunpack_avx2(const uint8_t *in, size_t len, size_t n, unsigned b, uint32_t *out) {
    (void)in, (void)len, (void)n, (void)b, (void)out;
    return 0;
}
void tl_const_delta256_avx2(uint32_t *out, uint32_t prev, uint32_t c) {
    (void)out, (void)prev, (void)c;
}

#endif
