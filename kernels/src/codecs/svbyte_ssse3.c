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

/* `delta` is a constant in both calls below: two branch-free loops. */
static inline TL_SSE void tl_svb_quads(const uint8_t *ctrl, size_t nquads, const uint8_t **data,
                                       const uint8_t *limit, uint32_t *out, uint32_t prev,
                                       int delta) {
    const uint8_t *d = *data;
    __m128i carry = _mm_set1_epi32((int)prev);
    size_t q = 0;
    /* Every quad but the last three has >= 3 * 4 bytes of data after its own
     * >= 4 (each integer takes >= 1 byte), so its 16-byte load is in bounds:
     * no check, and a trip count fixed by n, which the branch predictor
     * learns (a data-dependent exit would be mispredicted once a block). */
    size_t safe = nquads > 3 ? nquads - 3 : 0;
    for (; safe - q >= 4; q += 4) {
        uint32_t c4;
        memcpy(&c4, ctrl + q, 4);
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

TL_SSE void tl_svbyte_decode_quads_ssse3(const uint8_t *ctrl, size_t nquads,
                                         const uint8_t **data, const uint8_t *limit,
                                         uint32_t *out, uint32_t prev, int delta) {
    if (delta) tl_svb_quads(ctrl, nquads, data, limit, out, prev, 1);
    else tl_svb_quads(ctrl, nquads, data, limit, out, prev, 0);
}

#else /* no x86 SIMD: the scalar loop does everything */

void tl_svbyte_decode_quads_ssse3(const uint8_t *ctrl, size_t nquads, const uint8_t **data,
                                  const uint8_t *limit, uint32_t *out, uint32_t prev, int delta) {
    (void)ctrl, (void)nquads, (void)data, (void)limit, (void)out, (void)prev, (void)delta;
}

#endif
