/* svbyte_ssse3.c — StreamVByte decode kernel (pshufb with the 256-entry
 * tables of svbyte_tables.h), the gap prefix sum done in register, the
 * bounds checked as it goes: one pass over the block. One always-inline
 * body compiled twice, for SSSE3 + SSE4.1 and for AVX2 (the same
 * instructions VEX-encoded: three-operand forms, fewer register copies).
 * Compiled in target regions only (no global -m flags); called only when
 * tierlab_cpu_has_ssse3() (and the AVX2 copy when tierlab_cpu_has_avx2()). */
#include <string.h>

#include "svbyte.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "svbyte_tables.h"

#define TL_SSE __attribute__((target("ssse3,sse4.1")))
#define TL_SVB_AVX2 __attribute__((target("avx2")))
/* The kernel's helpers: SSSE3 + SSE4.1 code inlined into each of the two
 * targets (AVX2 includes both), where it is encoded for that target. */
#define TL_SVB_INLINE static inline __attribute__((always_inline)) TL_SSE

/* The four integers of control byte c, from 16 bytes loaded at data. */
TL_SVB_INLINE __m128i tl_svb_unpack(const uint8_t *data, unsigned c) {
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)data);
    return _mm_shuffle_epi8(bytes, _mm_load_si128((const __m128i *)(const void *)tl_svb_shuf[c]));
}

/* Gaps -> values: inclusive scan of the 4 lanes (two shifted adds) plus the
 * carry, the previous quad's last value in every lane. The quad's total
 * (lane 3 of the scan, broadcast) is added to the carry off the path of the
 * values: the chain from quad to quad is one add, not three, for one more
 * uop. */
TL_SVB_INLINE __m128i tl_svb_scan(__m128i v, __m128i *carry) {
    v = _mm_add_epi32(v, _mm_slli_si128(v, 4));
    v = _mm_add_epi32(v, _mm_slli_si128(v, 8));
    const __m128i out = _mm_add_epi32(v, *carry);
    *carry = _mm_add_epi32(*carry, _mm_shuffle_epi32(v, 0xFF));
    return out;
}

/* Finishes a quad: scan if delta, store. */
TL_SVB_INLINE void tl_svb_put(__m128i v, uint32_t *out, __m128i *carry, int delta) {
    if (delta) v = tl_svb_scan(v, carry);
    _mm_storeu_si128((__m128i *)(void *)out, v);
}

/* One quad whose 16-byte load is known to be readable. */
TL_SVB_INLINE void tl_svb_quad(const uint8_t **d, unsigned c, uint32_t *out,
                                      __m128i *carry, int delta) {
    __m128i v = tl_svb_unpack(*d, c);
    *d += tl_svb_len[c];
    tl_svb_put(v, out, carry, delta);
}

/* 8 bytes into the low half of a vector (movq; reads exactly 8 bytes). */
TL_SVB_INLINE __m128i tl_svb_load8(const uint8_t *p) {
    return _mm_loadl_epi64((const __m128i *)(const void *)p);
}

/* 16 integers of one byte each (four control bytes 0), the common case of
 * small gaps and of freqs: no table lookups. With delta, the prefix sum runs
 * on 16-bit lanes (16 gaps < 2^8 sum below 2^16), with fewer shuffles than
 * four 32-bit quad scans, and is widened at the end. */
TL_SVB_INLINE void tl_svb_ones(const uint8_t *d, uint32_t *out, __m128i *carry,
                                      int delta) {
    if (!delta) {
        for (int k = 0; k < 4; k++) {
            uint32_t w;
            memcpy(&w, d + 4 * k, 4);
            _mm_storeu_si128((__m128i *)(void *)(out + 4 * k),
                             _mm_cvtepu8_epi32(_mm_cvtsi32_si128((int)w)));
        }
        return;
    }
    __m128i lo = _mm_cvtepu8_epi16(tl_svb_load8(d));     /* gaps 0..7  */
    __m128i hi = _mm_cvtepu8_epi16(tl_svb_load8(d + 8)); /* gaps 8..15 */
    /* Scan of 8 lanes in three steps: lane 2k to lane 2k+1 (a bit shift, not
     * a shuffle); lanes 1 and 5 to lanes 2-3 and 6-7; lane 3 to lanes 4-7. */
    const __m128i pair = _mm_setr_epi8(-1, -1, -1, -1, 2, 3, 2, 3, -1, -1, -1, -1, 10, 11, 10, 11);
    const __m128i half = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, 6, 7, 6, 7, 6, 7, 6, 7);
    lo = _mm_add_epi16(lo, _mm_slli_epi32(lo, 16));
    hi = _mm_add_epi16(hi, _mm_slli_epi32(hi, 16));
    lo = _mm_add_epi16(lo, _mm_shuffle_epi8(lo, pair));
    hi = _mm_add_epi16(hi, _mm_shuffle_epi8(hi, pair));
    lo = _mm_add_epi16(lo, _mm_shuffle_epi8(lo, half));
    hi = _mm_add_epi16(hi, _mm_shuffle_epi8(hi, half));
    hi = _mm_add_epi16(hi, _mm_shuffle_epi8(lo, _mm_set1_epi16(0x0F0E))); /* + lane 7 of lo */
    const __m128i zero = _mm_setzero_si128();
    __m128i v0 = _mm_add_epi32(_mm_cvtepu16_epi32(lo), *carry);
    __m128i v1 = _mm_add_epi32(_mm_unpackhi_epi16(lo, zero), *carry);
    __m128i v2 = _mm_add_epi32(_mm_cvtepu16_epi32(hi), *carry);
    __m128i v3 = _mm_add_epi32(_mm_unpackhi_epi16(hi, zero), *carry);
    _mm_storeu_si128((__m128i *)(void *)out, v0);
    _mm_storeu_si128((__m128i *)(void *)(out + 4), v1);
    _mm_storeu_si128((__m128i *)(void *)(out + 8), v2);
    _mm_storeu_si128((__m128i *)(void *)(out + 12), v3);
    /* The 16 gaps' total (lane 7 of hi) widened into every lane: the carry
     * chain is one add per 16 integers. */
    *carry = _mm_add_epi32(*carry, _mm_shuffle_epi8(hi, _mm_set1_epi32((int)0x80800F0E)));
}

/* The AVX2 copy of tl_svb_ones with delta: the 16 gaps in one register of
 * 16-bit lanes, each 128-bit half scanned in three shifted adds, widened to
 * two registers of 8 values; the second half gets the first's total, both
 * the carry. The next carry is the carry plus the 16 gaps' total: one add on
 * the chain. About 19 uops for 16 integers, against 30 in 128-bit lanes. */
typedef void (*tl_svb_ones_fn)(const uint8_t *, uint32_t *, __m128i *, int);
static inline __attribute__((always_inline)) TL_SVB_AVX2 void
tl_svb_ones_avx2(const uint8_t *d, uint32_t *out, __m128i *carry, int delta) {
    if (!delta) {
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)d);
        _mm256_storeu_si256((__m256i *)(void *)out, _mm256_cvtepu8_epi32(b));
        _mm256_storeu_si256((__m256i *)(void *)(out + 8),
                            _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
        return;
    }
    __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)d));
    w = _mm256_add_epi16(w, _mm256_slli_si256(w, 2));
    w = _mm256_add_epi16(w, _mm256_slli_si256(w, 4));
    w = _mm256_add_epi16(w, _mm256_slli_si256(w, 8));
    const __m256i last = _mm256_set1_epi32(7);
    const __m256i lo = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(w));
    __m256i hi = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(w, 1));
    hi = _mm256_add_epi32(hi, _mm256_permutevar8x32_epi32(lo, last));
    const __m256i c = _mm256_broadcastd_epi32(*carry);
    _mm256_storeu_si256((__m256i *)(void *)out, _mm256_add_epi32(lo, c));
    _mm256_storeu_si256((__m256i *)(void *)(out + 8), _mm256_add_epi32(hi, c));
    *carry = _mm_add_epi32(*carry,
                           _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(hi, last)));
}

/* Data bytes of the 32 integers of 8 control bytes: 32 + the sum of their
 * codes (SWAR). */
TL_SVB_INLINE size_t tl_svb_group_len(uint64_t keys) {
    uint64_t x = (keys & 0x3333333333333333ull) + ((keys >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return 32 + (size_t)((x * 0x0101010101010101ull) >> 56);
}

/* Four quads (control word c4) or, when all 16 integers take one byte, the
 * 16-bit fast path. */
TL_SVB_INLINE void tl_svb_four(const uint8_t **d, uint32_t c4, uint32_t *out, __m128i *carry,
                               int delta, tl_svb_ones_fn ones) {
    if (c4 == 0) {
        ones(*d, out, carry, delta);
        *d += 16;
        return;
    }
    tl_svb_quad(d, c4 & 0xFF, out, carry, delta);
    tl_svb_quad(d, (c4 >> 8) & 0xFF, out + 4, carry, delta);
    tl_svb_quad(d, (c4 >> 16) & 0xFF, out + 8, carry, delta);
    tl_svb_quad(d, c4 >> 24, out + 12, carry, delta);
}

/* The whole quads of a block in one pass (svbyte.h). Groups of 8 quads (32
 * integers, 8 control bytes, at most 128 data bytes): with 128 + 16 bytes
 * left at d, or else L + 12 where L is the group's data length from its
 * control bytes (its last quad starts at most L - 4 bytes on), every 16-byte
 * load of the group is in bounds and the group runs unchecked. For the rest,
 * the length of their data is checked once; then the quads run unchecked
 * while 16 bytes are left, and the last few load the 16 bytes ending at
 * `limit` with the shuffle indices moved up (saturating: 0xFF, "zero this
 * byte", stays). Returns the data pointer after the quads, or NULL when
 * their data runs past limit. */
TL_SVB_INLINE const uint8_t *tl_svb_quads(const uint8_t *ctrl, size_t nquads, const uint8_t *d,
                                          const uint8_t *limit, uint32_t *out, uint32_t prev,
                                          int delta, tl_svb_ones_fn ones) {
    __m128i carry = _mm_set1_epi32((int)prev);
    size_t q = 0;
    for (; nquads - q >= 8; q += 8) {
        uint64_t keys;
        memcpy(&keys, ctrl + q, 8);
        const size_t left = (size_t)(limit - d);
        if (left < 128 + 16 && left < tl_svb_group_len(keys) + 12) break;
        tl_svb_four(&d, (uint32_t)keys, out + 4 * q, &carry, delta, ones);
        tl_svb_four(&d, (uint32_t)(keys >> 32), out + 4 * q + 16, &carry, delta, ones);
    }
    if (q == nquads) return d;
    if (limit - ctrl < 16) {
        /* A block under 16 bytes: decode from a zero-padded copy. */
        _Alignas(16) uint8_t tail[32] = {0};
        memcpy(tail, d, (size_t)(limit - d));
        const uint8_t *t = tail;
        for (; q < nquads; q++) {
            if ((size_t)(limit - d) - (size_t)(t - tail) < tl_svb_len[ctrl[q]]) return NULL;
            tl_svb_quad(&t, ctrl[q], out + 4 * q, &carry, delta);
        }
        return d + (t - tail);
    }
    size_t rest = 0;
    for (size_t r = q; r < nquads; r++) rest += tl_svb_len[ctrl[r]];
    if ((size_t)(limit - d) < rest) return NULL;
    for (; q < nquads && limit - d >= 16; q++) tl_svb_quad(&d, ctrl[q], out + 4 * q, &carry, delta);
    for (; q < nquads; q++) { /* all their data lies in the last 16 bytes */
        const unsigned c = ctrl[q];
        const uint8_t *p = limit - 16;
        __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i idx = _mm_adds_epu8(_mm_load_si128((const __m128i *)(const void *)tl_svb_shuf[c]),
                                    _mm_set1_epi8((char)(d - p)));
        d += tl_svb_len[c];
        tl_svb_put(_mm_shuffle_epi8(bytes, idx), out + 4 * q, &carry, delta);
    }
    return d;
}

/* The two targets, each with delta a constant: four loops, no test of
 * delta or of the target inside. */
static TL_SSE const uint8_t *tl_svb_quads_sse(const uint8_t *ctrl, size_t nquads,
                                              const uint8_t *d, const uint8_t *limit,
                                              uint32_t *out, uint32_t prev, int delta) {
    return delta ? tl_svb_quads(ctrl, nquads, d, limit, out, prev, 1, tl_svb_ones)
                 : tl_svb_quads(ctrl, nquads, d, limit, out, prev, 0, tl_svb_ones);
}

static TL_SVB_AVX2 const uint8_t *tl_svb_quads_avx2(const uint8_t *ctrl, size_t nquads,
                                                    const uint8_t *d, const uint8_t *limit,
                                                    uint32_t *out, uint32_t prev, int delta) {
    return delta ? tl_svb_quads(ctrl, nquads, d, limit, out, prev, 1, tl_svb_ones_avx2)
                 : tl_svb_quads(ctrl, nquads, d, limit, out, prev, 0, tl_svb_ones_avx2);
}

const uint8_t *tl_svbyte_decode_quads(const uint8_t *ctrl, size_t nquads, const uint8_t *data,
                                      const uint8_t *limit, uint32_t *out, uint32_t prev,
                                      int delta) {
    return (tl_cpu_now() & TL_CPU_AVX2) ? tl_svb_quads_avx2(ctrl, nquads, data, limit, out, prev, delta)
                                  : tl_svb_quads_sse(ctrl, nquads, data, limit, out, prev, delta);
}

#else /* no x86 SIMD: the scalar loop does everything */

const uint8_t *tl_svbyte_decode_quads(const uint8_t *ctrl, size_t nquads, const uint8_t *data,
                                      const uint8_t *limit, uint32_t *out, uint32_t prev,
                                      int delta) {
    (void)ctrl, (void)nquads, (void)limit, (void)out, (void)prev, (void)delta;
    return data;
}

#endif
