/* svbyte_delta.c — `svbyte-delta` (StreamVByte of the DID gaps) and its freq
 * codec `svbyte` (StreamVByte of the values): one implementation with a
 * delta flag. Byte format (Lemire et al., IPL 2018; byte-compatible with
 * libstreamvbyte): kernels/formats/vbyte.md. Here: encode, the checks, and
 * the scalar decode (a partial last quad; everything without SSSE3/SSE4.1 or
 * when tierlab_force_scalar is on); whole quads go to svbyte_ssse3.c. */
#include <string.h>

#include "svbyte.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "svbyte: the data bytes are read and written as little-endian words"
#endif

/* Control bytes, then at most 4 data bytes per integer. */
static size_t tl_svbyte_max_bytes(size_t n) { return (n + 3) / 4 + 4 * n; }

/* Code of v: its byte length - 1 (0..3). */
static inline unsigned tl_svbyte_code(uint32_t v) {
    return (unsigned)(v > 0xFF) + (v > 0xFFFF) + (v > 0xFFFFFF);
}

/* Sum of the 32 2-bit codes packed in w (<= 96). */
static inline size_t tl_svbyte_code_sum(uint64_t w) {
    uint64_t x = (w & 0x3333333333333333ull) + ((w >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (size_t)((x * 0x0101010101010101ull) >> 56);
}

/* Data bytes of the n integers described by ctrl[0..(n+3)/4): n plus the sum
 * of the codes. -1 when the unused code pairs of a partial last control byte
 * are not 0 (encoders write 0 there; anything else is not a block of n). */
static inline int64_t tl_svbyte_data_len(const uint8_t *ctrl, size_t n) {
    size_t full = n / 4, sum = n, i = 0;
    for (; full - i >= 8; i += 8) {
        uint64_t w;
        memcpy(&w, ctrl + i, 8);
        sum += tl_svbyte_code_sum(w);
    }
    for (; i < full; i++) sum += tl_svbyte_code_sum(ctrl[i]);
    if (n % 4) {
        unsigned used = 2 * (unsigned)(n % 4), c = ctrl[full];
        if (c >> used) return -1;
        sum += tl_svbyte_code_sum(c);
    }
    return (int64_t)sum;
}

static inline int64_t tl_svbyte_encode_core(const uint32_t *in, size_t n, uint32_t prev,
                                            uint8_t *out, int delta) {
    if (n > TIERLAB_MAX_BLOCK || (n && (!in || !out))) return TIERLAB_EINVAL;
    size_t nctrl = (n + 3) / 4;
    uint8_t *d = out + nctrl;
    for (size_t q = 0; q < n; q += 4) {
        size_t m = n - q < 4 ? n - q : 4;
        unsigned key = 0;
        for (size_t k = 0; k < m; k++) {
            uint32_t v = delta ? in[q + k] - prev : in[q + k];
            prev = in[q + k];
            unsigned c = tl_svbyte_code(v);
            key |= c << (2 * k);
            /* A whole word, then keep c + 1 bytes: d + 4 stays within
             * max_bytes since every earlier integer took <= 4. */
            memcpy(d, &v, 4);
            d += c + 1;
        }
        out[q / 4] = (uint8_t)key;
    }
    return (int64_t)(d - out);
}

static inline int64_t tl_svbyte_decode_core(const uint8_t *in, size_t in_len, size_t n,
                                            uint32_t prev, uint32_t *out, int delta) {
    if (n > TIERLAB_MAX_BLOCK || (n && !out) || (in_len && !in)) return TIERLAB_EINVAL;
    if (n == 0) return 0;
    size_t nctrl = (n + 3) / 4;
    if (in_len < nctrl) return TIERLAB_ECORRUPT;
    const uint8_t *d = in + nctrl, *end = in + in_len;
    size_t i = 0;
    if (n >= 4 && (tl_cpu_now() & TL_CPU_SSSE3)) {
        /* One pass, bounds checked as it goes; then the partial quad. */
        if (n % 4 && (in[n / 4] >> (2 * (n % 4)))) return TIERLAB_ECORRUPT;
        d = tl_svbyte_decode_quads(in, n / 4, d, end, out, prev, delta);
        if (!d) return TIERLAB_ECORRUPT;
        i = n / 4 * 4;
        uint32_t acc = i ? out[i - 1] : prev;
        for (; i < n; i++) {
            unsigned c = (in[i / 4] >> (2 * (i % 4))) & 3;
            if ((size_t)(end - d) <= c) return TIERLAB_ECORRUPT;
            uint32_t v = 0;
            for (unsigned k = 0; k <= c; k++) v |= (uint32_t)d[k] << (8 * k);
            d += c + 1;
            acc = delta ? acc + v : v;
            out[i] = acc;
        }
        return d - in;
    }
    /* Scalar: the exact block length first: after this check every
     * integer's bytes lie inside in[0..in_len), whatever the control bytes
     * say. */
    int64_t dlen = tl_svbyte_data_len(in, n);
    if (dlen < 0 || (size_t)dlen > in_len - nctrl) return TIERLAB_ECORRUPT;
    /* Whole words masked to each integer's length while 16 bytes are
     * readable (a quad's most), then byte by byte. */
    static const uint32_t keep[4] = {0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF};
    uint32_t acc = prev;
    for (; n - i >= 4 && end - d >= 16; i += 4) {
        unsigned key = in[i / 4];
        for (unsigned k = 0; k < 4; k++) {
            unsigned c = (key >> (2 * k)) & 3;
            uint32_t v;
            memcpy(&v, d, 4);
            d += c + 1;
            acc = delta ? acc + (v & keep[c]) : v & keep[c];
            out[i + k] = acc;
        }
    }
    for (; i < n; i++) {
        unsigned c = (in[i / 4] >> (2 * (i % 4))) & 3;
        uint32_t v = 0;
        for (unsigned k = 0; k <= c; k++) v |= (uint32_t)d[k] << (8 * k);
        d += c + 1;
        acc = delta ? acc + v : v;
        out[i] = acc;
    }
    return (int64_t)nctrl + dlen;
}

static const char *tl_svbyte_impl(void) { return tierlab_cpu_has_ssse3() ? "simd" : "scalar"; }

static int64_t tl_svbyte_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out) {
    return tl_svbyte_encode_core(in, n, prev, out, 0);
}

static int64_t tl_svbyte_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                                uint32_t *out) {
    return tl_svbyte_decode_core(in, in_len, n, prev, out, 0);
}

static int64_t tl_svbyte_delta_encode(const uint32_t *in, size_t n, uint32_t prev,
                                      uint8_t *out) {
    return tl_svbyte_encode_core(in, n, prev, out, 1);
}

static int64_t tl_svbyte_delta_decode(const uint8_t *in, size_t in_len, size_t n,
                                      uint32_t prev, uint32_t *out) {
    return tl_svbyte_decode_core(in, in_len, n, prev, out, 1);
}

const tierlab_codec tl_svbyte_plain = {
    .name = "svbyte",
    .delta = 0,
    .max_encoded_bytes = tl_svbyte_max_bytes,
    .encode = tl_svbyte_encode,
    .decode = tl_svbyte_decode,
    .impl = tl_svbyte_impl,
};

const tierlab_codec tierlab_codec_svbyte_delta = {
    .name = "svbyte-delta",
    .delta = 1,
    .max_encoded_bytes = tl_svbyte_max_bytes,
    .encode = tl_svbyte_delta_encode,
    .decode = tl_svbyte_delta_decode,
    .impl = tl_svbyte_impl,
    .freq = &tl_svbyte_plain,
};
