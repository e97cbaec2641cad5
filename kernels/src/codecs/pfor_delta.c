/* pfor_delta.c — the PFor block scheme (TurboPFor-style, ENGINE.md) and the
 * `pfor-delta` configuration: DID gaps in PFor with scalar (horizontal) bit
 * packing; its freq blocks use `pfor`, the same scheme without delta.
 *
 * Per block the encoder computes the exact size of every candidate and keeps
 * the smallest: plain packing at the widest value's width; packing at a
 * smaller width b with the exceptions' high bits packed behind a bitmap of
 * their positions; the same with positions and high bits as bytes/VByte; a
 * constant block. Byte format: kernels/formats/pfor.md. */
#include <string.h>

#include "pfor.h"
#include "varint.h"

/* ---- horizontal bit packing: value i at bits [i*b, (i+1)*b), LSB first ---- */

static size_t tl_hbytes(size_t n, unsigned b) { return (n * b + 7) / 8; }

static size_t tl_hpack(const uint32_t *in, size_t n, unsigned b, uint8_t *out) {
    size_t len = tl_hbytes(n, b), p = 0;
    uint64_t acc = 0;
    unsigned fill = 0;
    for (size_t i = 0; i < n; i++) {
        acc |= (uint64_t)in[i] << fill;
        fill += b;
        while (fill >= 8) {
            out[p++] = (uint8_t)acc;
            acc >>= 8;
            fill -= 8;
        }
    }
    if (fill) out[p++] = (uint8_t)acc;
    return len;
}

/* Reads values i..n-1 of width b from a section of exactly tl_hbytes(n, b)
 * bytes: 8-byte loads while they stay inside the section, byte-wise at the end. */
static void tl_hunpack_from(const uint8_t *in, size_t n, unsigned b, uint32_t *out, size_t i) {
    if (b == 0) {
        memset(out, 0, n * sizeof *out);
        return;
    }
    size_t len = tl_hbytes(n, b);
    uint64_t mask = (b == 32) ? 0xFFFFFFFFu : ((1u << b) - 1);
    size_t safe = len >= 8 ? ((len - 8) * 8 + 7) / b + 1 : 0; /* (i*b)/8 + 8 <= len */
    for (size_t end = safe < n ? safe : n; i < end; i++) {
        size_t bit = i * b;
        uint64_t w;
        memcpy(&w, in + (bit >> 3), 8);
        out[i] = (uint32_t)((w >> (bit & 7)) & mask);
    }
    for (; i < n; i++) {
        size_t bit = i * b, byte = bit >> 3;
        uint64_t w = 0;
        for (size_t k = 0; byte + k < len; k++) w |= (uint64_t)in[byte + k] << (8 * k);
        out[i] = (uint32_t)((w >> (bit & 7)) & mask);
    }
}

static void tl_hunpack(const uint8_t *in, size_t n, unsigned b, uint32_t *out) {
    tl_hunpack_from(in, n, b, out, 0);
}

/* ---- the encoder's choice ---- */

static unsigned tl_bits(uint32_t v) { return v ? 32u - (unsigned)__builtin_clz(v) : 0; }

/* Bytes of a packed section of n values at width b in the chosen layout. */
static size_t tl_packed_bytes(size_t n, unsigned b, int vertical) {
    return vertical ? 32u * b : tl_hbytes(n, b);
}

typedef struct {
    int type;
    unsigned b, bx; /* low width; exception high-part width (bitmap type) */
    size_t bytes;
    size_t cost; /* what the choice minimises: bits, plus TL_PFOR_EXC_BITS per exception */
} tl_choice;

/* Each exception costs decode time (unpacking its high part, patching it in),
 * so the encoder charges it this many bits on top of its size. Measured on the
 * clustered benchmark list: 0 gives 3.05 bits/int, 8 gives 3.34 bits/int and
 * about 25 % faster decoding; beyond, size grows faster than speed. */
#define TL_PFOR_EXC_BITS 8

static tl_choice tl_choose(const uint32_t *v, size_t n, int vertical) {
    size_t hist[33] = {0};
    uint32_t first = v[0];
    int constant = 1;
    for (size_t i = 0; i < n; i++) {
        hist[tl_bits(v[i])]++;
        constant &= v[i] == first;
    }
    unsigned bmax = 32;
    while (bmax > 0 && hist[bmax] == 0) bmax--;
    const size_t xb = TL_PFOR_EXC_BITS;
    size_t plain = 1 + tl_packed_bytes(n, bmax, vertical);
    tl_choice best = {TL_PFOR_PACK, bmax, 0, plain, 8 * plain};
    if (constant) {
        size_t c = 1 + tl_vbyte_len(first);
        if (c < best.bytes) best = (tl_choice){TL_PFOR_CONST, 0, 0, c, 8 * c};
        return best;
    }
    /* Walk b down from bmax-1: values wider than b are exceptions. */
    size_t nexc = 0, vb_bytes = 0;
    for (unsigned b = bmax; b-- > 0;) {
        nexc += hist[b + 1];
        /* VByte length of (v >> b) for every exception, from the histogram. */
        vb_bytes = 0;
        for (unsigned w = b + 1; w <= bmax; w++) vb_bytes += hist[w] * ((w - b + 6) / 7);
        size_t packed = tl_packed_bytes(n, b, vertical);
        size_t bitmap = 2 + (n + 7) / 8 + packed + tl_hbytes(nexc, bmax - b);
        size_t cost = 8 * bitmap + xb * nexc;
        if (cost < best.cost) best = (tl_choice){TL_PFOR_BITMAP, b, bmax - b, bitmap, cost};
        if (nexc <= 255) {
            size_t vbyte = 2 + nexc + vb_bytes + packed;
            cost = 8 * vbyte + xb * nexc;
            if (cost < best.cost) best = (tl_choice){TL_PFOR_VBYTE, b, 0, vbyte, cost};
        }
    }
    return best;
}

size_t tl_pfor_max_bytes(size_t n) { return 4 * n + 6; }

static void tl_pack(const uint32_t *v, size_t n, unsigned b, uint8_t *out, int vertical) {
    if (vertical) tl_vpack256(v, b, out);
    else tl_hpack(v, n, b, out);
}

int64_t tl_pfor_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out, int delta,
                       int vertical) {
    if (n > TIERLAB_MAX_BLOCK || (n && (!in || !out))) return TIERLAB_EINVAL;
    if (n == 0) return 0;
    vertical = vertical && n == TL_PFOR_VBLOCK;
    uint32_t v[TIERLAB_MAX_BLOCK] = {0}; /* zeroed: the compiler cannot see n >= 1 */
    for (size_t i = 0; i < n; i++) {
        v[i] = delta ? in[i] - prev : in[i];
        prev = in[i];
    }
    tl_choice c = tl_choose(v, n, vertical);
    uint8_t *p = out;
    *p++ = (uint8_t)(c.type << 6 | c.b);
    if (c.type == TL_PFOR_CONST) {
        p += tl_vbyte_put(p, v[0]);
        return p - out;
    }
    if (c.type == TL_PFOR_PACK) {
        tl_pack(v, n, c.b, p, vertical);
        return (int64_t)(1 + tl_packed_bytes(n, c.b, vertical));
    }
    /* Exception blocks: split each value into low b bits and a high part. */
    uint32_t low[TIERLAB_MAX_BLOCK], high[TIERLAB_MAX_BLOCK];
    uint8_t pos[TIERLAB_MAX_BLOCK];
    size_t nexc = 0;
    for (size_t i = 0; i < n; i++) {
        low[i] = c.b == 32 ? v[i] : v[i] & ((1u << c.b) - 1);
        if (c.b < 32 && (v[i] >> c.b)) {
            pos[nexc] = (uint8_t)i;
            high[nexc++] = v[i] >> c.b;
        }
    }
    if (c.type == TL_PFOR_BITMAP) {
        *p++ = (uint8_t)c.bx;
        memset(p, 0, (n + 7) / 8);
        for (size_t e = 0; e < nexc; e++) p[pos[e] >> 3] |= (uint8_t)(1u << (pos[e] & 7));
        p += (n + 7) / 8;
        tl_pack(low, n, c.b, p, vertical);
        p += tl_packed_bytes(n, c.b, vertical);
        p += tl_hpack(high, nexc, c.bx, p);
    } else {
        *p++ = (uint8_t)nexc;
        memcpy(p, pos, nexc);
        p += nexc;
        for (size_t e = 0; e < nexc; e++) p += tl_vbyte_put(p, high[e]);
        tl_pack(low, n, c.b, p, vertical);
        p += tl_packed_bytes(n, c.b, vertical);
    }
    return p - out;
}

/* ---- decode ---- */

/* Scalar path of an exception block: unpack, patch the high parts in, then
 * the prefix sum. `map` has a bit per value; high[] in position order. */
static void tl_patch_scalar(const uint8_t *packed, size_t n, unsigned b, int vertical,
                            const uint8_t *map, const uint32_t *high, uint32_t *out) {
    if (vertical) tl_vunpack256_scalar(packed, b, out);
    else tl_hunpack(packed, n, b, out);
    size_t e = 0;
    for (size_t k = 0; k < (n + 7) / 8; k++)
        for (unsigned m = map[k]; m; m &= m - 1) out[8 * k + (unsigned)__builtin_ctz(m)] |= high[e++] << b;
}

int64_t tl_pfor_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                       uint32_t *out, int delta, int vertical) {
    if (n > TIERLAB_MAX_BLOCK || (n && !out) || (in_len && !in)) return TIERLAB_EINVAL;
    if (n == 0) return 0;
    vertical = vertical && n == TL_PFOR_VBLOCK;
    const int simd = vertical && tierlab_cpu_has_avx2();
    if (in_len < 1) return TIERLAB_ECORRUPT;
    const int type = in[0] >> 6;
    const unsigned b = in[0] & 63;
    size_t p = 1;
    if (type == TL_PFOR_CONST) {
        uint32_t c;
        if (b != 0 || tl_vbyte_get(in, in_len, &p, &c)) return TIERLAB_ECORRUPT;
        if (delta && simd)
            tl_const_delta256_avx2(out, prev, c);
        else if (delta)
            for (size_t i = 0; i < n; i++) out[i] = prev + (uint32_t)(i + 1) * c;
        else
            for (size_t i = 0; i < n; i++) out[i] = c;
        return (int64_t)p;
    }
    if (b > 32) return TIERLAB_ECORRUPT;
    const size_t packed = tl_packed_bytes(n, b, vertical);
    if (type == TL_PFOR_PACK) {
        if (in_len - p < packed) return TIERLAB_ECORRUPT;
        if (simd) {
            tl_vunpack256_avx2(in + p, b, out, delta, prev, NULL, NULL);
            return (int64_t)(p + packed);
        }
        if (vertical) tl_vunpack256_scalar(in + p, b, out);
        else tl_hunpack(in + p, n, b, out);
        if (delta)
            for (size_t i = 0; i < n; i++) out[i] = prev += out[i];
        return (int64_t)(p + packed);
    }
    /* Exception blocks (b < 32): gather a bitmap of positions and the high
     * parts in position order, whatever the block type stored. */
    if (b >= 32 || in_len - p < 1) return TIERLAB_ECORRUPT;
    const unsigned arg = in[p++];
    const size_t mapb = (n + 7) / 8;
    uint8_t vmap[TIERLAB_MAX_BLOCK / 8];
    uint32_t high[TIERLAB_MAX_BLOCK + 8]; /* + 8: the SIMD patch loads 8 at a time */
    const uint8_t *map, *low;
    if (type == TL_PFOR_BITMAP) {
        const unsigned bx = arg;
        if (bx == 0 || b + bx > 32 || in_len - p < mapb + packed) return TIERLAB_ECORRUPT;
        map = in + p;
        size_t nexc = tl_popcount_bytes(map, mapb);
        if ((n & 7) && (map[mapb - 1] >> (n & 7))) return TIERLAB_ECORRUPT; /* bits past n */
        size_t hb = tl_hbytes(nexc, bx);
        if (nexc == 0 || in_len - p - mapb - packed < hb) return TIERLAB_ECORRUPT;
        low = in + p + mapb;
        size_t done = simd ? tl_hunpack_avx2(low + packed, hb, nexc, bx, high) : 0;
        tl_hunpack_from(low + packed, nexc, bx, high, done);
        p += mapb + packed + hb;
    } else if (type == TL_PFOR_VBYTE) {
        const size_t nexc = arg;
        if (nexc == 0 || in_len - p < nexc) return TIERLAB_ECORRUPT;
        const uint8_t *pos = in + p;
        p += nexc;
        memset(vmap, 0, mapb);
        for (size_t e = 0; e < nexc; e++) {
            /* Positions strictly ascending inside n; high parts fit above b bits. */
            if (pos[e] >= n || (e && pos[e] <= pos[e - 1])) return TIERLAB_ECORRUPT;
            if (in_len - p >= 8) { /* one load, no per-byte loop */
                uint64_t w;
                memcpy(&w, in + p, 8);
                size_t used = tl_vbyte_get_word(w, &high[e]);
                if (!used) return TIERLAB_ECORRUPT;
                p += used;
            } else if (tl_vbyte_get(in, in_len, &p, &high[e])) {
                return TIERLAB_ECORRUPT;
            }
            if ((uint64_t)high[e] >> (32 - b)) return TIERLAB_ECORRUPT;
            vmap[pos[e] >> 3] |= (uint8_t)(1u << (pos[e] & 7));
        }
        if (in_len - p < packed) return TIERLAB_ECORRUPT;
        map = vmap;
        low = in + p;
        p += packed;
    } else {
        return TIERLAB_ECORRUPT;
    }
    if (simd) {
        tl_vunpack256_avx2(low, b, out, delta, prev, map, high);
    } else {
        tl_patch_scalar(low, n, b, vertical, map, high, out);
        if (delta)
            for (size_t i = 0; i < n; i++) out[i] = prev += out[i];
    }
    return (int64_t)p;
}

/* ---- the configurations ---- */

/* `pfor`: the freq codec of `pfor-delta` (not in the registry by itself). */
TL_PFOR_CODEC(tl_pfor_plain, "pfor", 0, 0, tl_impl_scalar, NULL);
TL_PFOR_CODEC(tierlab_codec_pfor_delta, "pfor-delta", 1, 0, tl_impl_scalar, &tl_pfor_plain);
