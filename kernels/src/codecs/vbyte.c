/* vbyte.c — `vbyte` (VByte of the values, docs/engine.md) and the loops of
 * `vbyte-delta` (VByte of the gaps; descriptor in vbyte_delta.c).
 * Byte format: kernels/formats/vbyte.md; primitives: varint.h. */
#include <string.h>

#include "varint.h"
#include "vbyte.h"

size_t tl_vbyte_max_bytes(size_t n) { return 5 * n; }

/* `delta` is a constant at every call site below, so each instantiation is
 * its own loop with no test of delta inside. */
static inline int64_t tl_vbyte_encode_core(const uint32_t *in, size_t n, uint32_t prev,
                                           uint8_t *out, int delta) {
    if (n > TIERLAB_MAX_BLOCK || (n && (!in || !out))) return TIERLAB_EINVAL;
    size_t p = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = delta ? in[i] - prev : in[i];
        prev = in[i];
        if (v < 0x80) out[p++] = (uint8_t)v; /* most gaps and freqs */
        else p += tl_vbyte_put(out + p, v);
    }
    return (int64_t)p;
}

static inline int64_t tl_vbyte_decode_core(const uint8_t *in, size_t in_len, size_t n,
                                           uint32_t prev, uint32_t *out, int delta) {
    if (n > TIERLAB_MAX_BLOCK || (n && !out) || (in_len && !in)) return TIERLAB_EINVAL;
    size_t p = 0, i = 0;
    uint32_t acc = prev;
    /* While 8 bytes are readable: eight 1-byte values (the common case for
     * gaps and freqs) in one step when a word has no high bit set, any other
     * value without bounds checks. */
    while (i < n && in_len - p >= 8) {
        uint64_t w;
        memcpy(&w, in + p, 8); /* little-endian hosts only (as base.c) */
        if (!(w & TL_VBYTE_HIGH_BITS) && n - i >= 8) {
            for (unsigned k = 0; k < 8; k++) {
                uint32_t v = (uint32_t)(w >> (8 * k)) & 0xFF;
                acc = delta ? acc + v : v;
                out[i + k] = acc;
            }
            i += 8;
            p += 8;
            continue;
        }
        uint32_t v;
        size_t len = tl_vbyte_get_word(w, &v);
        if (!len) return TIERLAB_ECORRUPT;
        acc = delta ? acc + v : v;
        out[i++] = acc;
        p += len;
    }
    /* The last < 8 bytes: bounds-checked per byte. */
    for (; i < n; i++) {
        uint32_t v;
        if (tl_vbyte_get(in, in_len, &p, &v)) return TIERLAB_ECORRUPT;
        acc = delta ? acc + v : v;
        out[i] = acc;
    }
    return (int64_t)p;
}

static int64_t tl_vbyte_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out) {
    return tl_vbyte_encode_core(in, n, prev, out, 0);
}

static int64_t tl_vbyte_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                               uint32_t *out) {
    return tl_vbyte_decode_core(in, in_len, n, prev, out, 0);
}

int64_t tl_vbyte_delta_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out) {
    return tl_vbyte_encode_core(in, n, prev, out, 1);
}

int64_t tl_vbyte_delta_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                              uint32_t *out) {
    return tl_vbyte_decode_core(in, in_len, n, prev, out, 1);
}

const tierlab_codec tierlab_codec_vbyte = {
    .name = "vbyte",
    .delta = 0,
    .max_encoded_bytes = tl_vbyte_max_bytes,
    .encode = tl_vbyte_encode,
    .decode = tl_vbyte_decode,
    .impl = tl_impl_scalar,
};
