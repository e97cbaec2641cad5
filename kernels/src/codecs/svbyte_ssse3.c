/* svbyte_ssse3.c — StreamVByte decode kernel for SSSE3 + SSE4.1 (pshufb with
 * the 256-entry tables of svbyte_tables.h), the gap prefix sum done in
 * register. Compiled in target regions only (no global -m flags); called
 * only when tierlab_cpu_has_ssse3(). */
#include <string.h>

#include "svbyte.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "svbyte_tables.h"

#define TL_SSE __attribute__((target("ssse3,sse4.1")))

/* The four integers of control byte c, from 16 bytes loaded at data. */
static inline TL_SSE __m128i tl_svb_unpack(const uint8_t *data, unsigned c) {
    __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)data);
    return _mm_shuffle_epi8(bytes, _mm_load_si128((const __m128i *)(const void *)tl_svb_shuf[c]));
}

/* Gaps -> values: inclusive scan of the 4 lanes (two shifted adds) plus the
 * carry, the previous quad's last value in every lane. (Adding the quad's
 * total to the carry off its path shortens the chain but costs a uop, and
 * the loop is bound by uops, not by this 2-3 cycle chain.) */
static inline TL_SSE __m128i tl_svb_scan(__m128i v, __m128i *carry) {
    v = _mm_add_epi32(v, _mm_slli_si128(v, 4));
    v = _mm_add_epi32(v, _mm_slli_si128(v, 8));
    v = _mm_add_epi32(v, *carry);
    *carry = _mm_shuffle_epi32(v, 0xFF);
    return v;
}

/* Finishes a quad: scan if delta, store. */
static inline TL_SSE void tl_svb_put(__m128i v, uint32_t *out, __m128i *carry, int delta) {
    if (delta) v = tl_svb_scan(v, carry);
    _mm_storeu_si128((__m128i *)(void *)out, v);
}

/* One quad whose 16-byte load is known to be readable. */
static inline TL_SSE void tl_svb_quad(const uint8_t **d, unsigned c, uint32_t *out,
                                      __m128i *carry, int delta) {
    __m128i v = tl_svb_unpack(*d, c);
    *d += tl_svb_len[c];
    tl_svb_put(v, out, carry, delta);
}

/* 8 bytes into the low half of a vector (movq; reads exactly 8 bytes). */
static inline TL_SSE __m128i tl_svb_load8(const uint8_t *p) {
    return _mm_loadl_epi64((const __m128i *)(const void *)p);
}

/* 16 integers of one byte each (four control bytes 0), the common case of
 * small gaps and of freqs: no table lookups. With delta, the prefix sum runs
 * on 16-bit lanes (16 gaps < 2^8 sum below 2^16), with fewer shuffles than
 * four 32-bit quad scans, and is widened at the end. */
static inline TL_SSE void tl_svb_ones(const uint8_t *d, uint32_t *out, __m128i *carry,
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
    *carry = _mm_shuffle_epi32(v3, 0xFF);
}

/* `delta` is a constant in both calls below: two loops with no test of
 * delta inside. */
static inline TL_SSE void tl_svb_quads(const uint8_t *ctrl, size_t nquads, const uint8_t **data,
                                       const uint8_t *limit, uint32_t *out, uint32_t prev,
                                       int delta) {
    const uint8_t *d = *data;
    __m128i carry = _mm_set1_epi32((int)prev);
    size_t q = 0;
    /* A quad followed by >= 3 more has >= 12 data bytes after its own >= 4
     * (each integer takes >= 1), so its 16-byte load is in bounds: no check,
     * and a trip count fixed by n, which the branch predictor learns (a
     * data-dependent exit would be mispredicted about once a block). Only
     * the last three quads take the checked path below. */
    size_t safe = nquads > 3 ? nquads - 3 : 0;
    for (; safe - q >= 4; q += 4) {
        uint32_t c4;
        memcpy(&c4, ctrl + q, 4);
        if (c4 == 0) {
            tl_svb_ones(d, out + 4 * q, &carry, delta);
            d += 16;
            continue;
        }
        tl_svb_quad(&d, c4 & 0xFF, out + 4 * q, &carry, delta);
        tl_svb_quad(&d, (c4 >> 8) & 0xFF, out + 4 * q + 4, &carry, delta);
        tl_svb_quad(&d, (c4 >> 16) & 0xFF, out + 4 * q + 8, &carry, delta);
        tl_svb_quad(&d, c4 >> 24, out + 4 * q + 12, &carry, delta);
    }
    for (; q < safe; q++) tl_svb_quad(&d, ctrl[q], out + 4 * q, &carry, delta);
    if (limit - ctrl >= 16) {
        /* The last quads: load the 16 bytes ending at limit when fewer than
         * 16 are left at d, and move the shuffle indices up by the distance
         * (saturating add: 0xFF, "zero this byte", stays 0xFF). Branch-free. */
        for (; q < nquads; q++) {
            unsigned c = ctrl[q];
            const uint8_t *p = limit - d >= 16 ? d : limit - 16;
            __m128i bytes = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i idx = _mm_adds_epu8(_mm_load_si128((const __m128i *)(const void *)tl_svb_shuf[c]),
                                        _mm_set1_epi8((char)(d - p)));
            d += tl_svb_len[c];
            tl_svb_put(_mm_shuffle_epi8(bytes, idx), out + 4 * q, &carry, delta);
        }
    } else if (q < nquads) {
        /* A block under 16 bytes: decode from a zero-padded copy. */
        _Alignas(16) uint8_t tail[32] = {0};
        memcpy(tail, d, (size_t)(limit - d));
        const uint8_t *t = tail;
        for (; q < nquads; q++) tl_svb_quad(&t, ctrl[q], out + 4 * q, &carry, delta);
        d += t - tail;
    }
    *data = d;
}

TL_SSE size_t tl_svbyte_code_sum_ssse3(const uint8_t *ctrl, size_t nvec) {
    /* A nibble holds two codes: its sum from a 16-entry pshufb table. */
    const __m128i sums = _mm_setr_epi8(0, 1, 2, 3, 1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6);
    const __m128i nib = _mm_set1_epi8(0x0F), zero = _mm_setzero_si128();
    __m128i acc = zero;
    for (size_t i = 0; i < nvec; i++) {
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(ctrl + 16 * i));
        __m128i s = _mm_add_epi8(_mm_shuffle_epi8(sums, _mm_and_si128(c, nib)),
                                 _mm_shuffle_epi8(sums, _mm_and_si128(_mm_srli_epi16(c, 4), nib)));
        acc = _mm_add_epi64(acc, _mm_sad_epu8(s, zero)); /* <= 12 per byte */
    }
    acc = _mm_add_epi64(acc, _mm_srli_si128(acc, 8));
    return (size_t)(uint32_t)_mm_cvtsi128_si32(acc);
}

TL_SSE void tl_svbyte_decode_quads_ssse3(const uint8_t *ctrl, size_t nquads,
                                         const uint8_t **data, const uint8_t *limit,
                                         uint32_t *out, uint32_t prev, int delta) {
    if (delta) tl_svb_quads(ctrl, nquads, data, limit, out, prev, 1);
    else tl_svb_quads(ctrl, nquads, data, limit, out, prev, 0);
}

#else /* no x86 SIMD: the scalar loop does everything */

size_t tl_svbyte_code_sum_ssse3(const uint8_t *ctrl, size_t nvec) {
    (void)ctrl, (void)nvec;
    return 0;
}

void tl_svbyte_decode_quads_ssse3(const uint8_t *ctrl, size_t nquads, const uint8_t **data,
                                  const uint8_t *limit, uint32_t *out, uint32_t prev, int delta) {
    (void)ctrl, (void)nquads, (void)data, (void)limit, (void)out, (void)prev, (void)delta;
}

#endif
