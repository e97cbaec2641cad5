/* pfor_delta.c — the PFor block scheme (TurboPFor-style, docs/engine.md) and the
 * `pfor-delta` configuration: DID gaps in PFor with scalar (horizontal) bit
 * packing; its freq blocks use `pfor`, the same scheme without delta.
 *
 * Per block the encoder computes the exact size of every candidate and keeps
 * the cheapest: plain packing at the widest value's width; packing at a
 * smaller width b with the exceptions' high bits packed behind a bitmap of
 * their positions; the same with positions as bytes and high bits in VByte;
 * a constant block. The decoder is shared with pfor-delta256, which only
 * swaps the layout of the packed low bits (pfor_delta256.c).
 * Byte format: kernels/formats/pfor.md. */
#include <string.h>

#include "pfor.h"
#include "varint.h"

/* ---- horizontal bit packing: value i at bits [i*b, (i+1)*b), LSB first ---- */

static size_t tl_hbytes(size_t n, unsigned b) { return (n * b + 7) / 8; }

/* Eight values of width b fill exactly b bytes: a group packs into up to
 * four 64-bit words with compile-time shifts. */
TL_PFOR_INLINE void tl_hgroup_pack(const uint32_t *v, uint8_t *out, const unsigned b) {
    uint64_t w[4] = {0, 0, 0, 0};
    for (unsigned j = 0; j < 8; j++) {
        const unsigned bit = j * b, q = bit / 64, s = bit % 64;
        w[q] |= (uint64_t)v[j] << s;
        if (s + b > 64) w[q + 1] |= (uint64_t)v[j] >> (64 - s);
    }
    memcpy(out, w, b); /* little-endian host, as base.c */
}

typedef void (*tl_hpack_fn)(const uint32_t *, size_t, uint8_t *);
#define TL_HPACK(B)                                                                        \
    static void tl_hpack_##B(const uint32_t *in, size_t groups, uint8_t *out) {            \
        for (size_t g = 0; g < groups; g++) tl_hgroup_pack(in + 8 * g, out + g * B, B);    \
    }
TL_PFOR_WIDTHS(TL_HPACK)
#define TL_HPACK_ROW(B) tl_hpack_##B,
static const tl_hpack_fn tl_hpack_table[33] = {TL_PFOR_WIDTHS(TL_HPACK_ROW)};

/* Writes exactly tl_hbytes(n, b) bytes; values must fit in b bits. */
static void tl_hpack(const uint32_t *in, size_t n, unsigned b, uint8_t *out) {
    tl_hpack_table[b](in, n / 8, out);
    if (n % 8 == 0) return;
    uint32_t v[8] = {0};
    uint8_t tail[32];
    memcpy(v, in + n / 8 * 8, (n % 8) * sizeof *v);
    tl_hpack_table[b](v, 1, tail);
    memcpy(out + n / 8 * b, tail, tl_hbytes(n % 8, b));
}

/* Eight values of width b fill exactly b bytes, so a group decodes with
 * compile-time offsets: value j is an 8-byte load at byte j*b/8, shifted by
 * (j*b) % 8 and masked. Reads bytes [0, 7b/8 + 8) of the group. */
TL_PFOR_INLINE void tl_hgroup(const uint8_t *in, uint32_t *v, const unsigned b) {
    const uint64_t mask = b == 32 ? 0xFFFFFFFFu : (1ull << b) - 1;
    for (unsigned j = 0; j < 8; j++) {
        uint64_t w = 0;
        if (b) memcpy(&w, in + j * b / 8, 8);
        v[j] = (uint32_t)((w >> (j * b % 8)) & mask);
    }
}

/* `groups` groups of 8 values; with delta the running sum starts at *prev
 * and is left there. */
TL_PFOR_INLINE void tl_hrun(const uint8_t *in, size_t groups, uint32_t *out, uint32_t *prev,
                            const unsigned b, const int delta) {
    uint32_t acc = *prev;
    for (size_t g = 0; g < groups; g++, in += b, out += 8) {
        uint32_t v[8];
        tl_hgroup(in, v, b);
        for (unsigned j = 0; j < 8; j++) out[j] = delta ? (acc += v[j]) : v[j];
    }
    *prev = acc;
}

typedef void (*tl_hrun_fn)(const uint8_t *, size_t, uint32_t *, uint32_t *);
#define TL_HRUN(B)                                                                         \
    static void tl_hrun_##B##_0(const uint8_t *in, size_t g, uint32_t *out, uint32_t *p) { \
        tl_hrun(in, g, out, p, B, 0);                                                      \
    }                                                                                      \
    static void tl_hrun_##B##_1(const uint8_t *in, size_t g, uint32_t *out, uint32_t *p) { \
        tl_hrun(in, g, out, p, B, 1);                                                      \
    }
TL_PFOR_WIDTHS(TL_HRUN)
#define TL_HRUN_ROW(B) {tl_hrun_##B##_0, tl_hrun_##B##_1},
static const tl_hrun_fn tl_hrun_table[33][2] = {TL_PFOR_WIDTHS(TL_HRUN_ROW)};

/* Decodes n values of width b from a horizontal section at `in`, where
 * `avail` >= tl_hbytes(n, b) bytes may be read (the rest of the block): the
 * groups whose 8-byte loads stay inside `avail` straight from `in`, the last
 * few from a zero-padded copy. With delta the values are summed from prev. */
static void tl_hunpack(const uint8_t *in, size_t avail, size_t n, unsigned b, uint32_t *out,
                       int delta, uint32_t prev) {
    size_t groups = n / 8, safe = groups;
    if (b) {
        size_t reach = 7 * b / 8 + 8; /* bytes one group's loads touch */
        safe = avail < reach ? 0 : (avail - reach) / b + 1;
        if (safe > groups) safe = groups;
    }
    tl_hrun_table[b][delta != 0](in, safe, out, &prev);
    size_t done = 8 * safe;
    if (done == n) return;
    /* Here (n/8 - safe) * b < reach: at most 9 groups remain, the copy is at
     * most reach bytes and the loads from it stay below 2 * reach <= 72. */
    uint8_t tail[96] = {0};
    uint32_t v[96];
    memcpy(tail, in + safe * b, tl_hbytes(n, b) - safe * b);
    tl_hrun_table[b][delta != 0](tail, (n - done + 7) / 8, v, &prev);
    memcpy(out + done, v, (n - done) * sizeof *out);
}

/* ---- the encoder's choice ---- */

typedef struct {
    unsigned type, b, bx; /* bx: width of the high parts (BITMAP) */
} tl_choice;

/* The smallest block for values with hist[w] of bit width w, by exact size
 * in bytes; ties keep the earlier candidate (PACK, then larger b, then
 * BITMAP before VBYTE), so the choice is deterministic. O(33 * 33) at most. */
static tl_choice tl_choose(const size_t *hist, size_t n, int constant, uint32_t first) {
    unsigned bmax = 32, bmin = 0;
    while (bmax > 0 && hist[bmax] == 0) bmax--;
    while (hist[bmin] == 0) bmin++;
    tl_choice best = {TL_PFOR_PACK, bmax, 0};
    size_t best_size = 1 + tl_hbytes(n, bmax);
    if (constant) {
        if (1 + tl_vbyte_len(first) < best_size) best = (tl_choice){TL_PFOR_CONST, 0, 0};
        return best;
    }
    /* Values wider than b are exceptions; b below bmin would make every
     * value one, never smaller than PACK. */
    size_t nexc = 0;
    for (unsigned b = bmax; b-- > bmin;) {
        nexc += hist[b + 1];
        const size_t low = tl_hbytes(n, b);
        size_t size = 2 + (n + 7) / 8 + tl_hbytes(nexc, bmax - b) + low;
        if (size < best_size) best = (tl_choice){TL_PFOR_BITMAP, b, bmax - b}, best_size = size;
        if (nexc > 255) continue; /* the count is one byte */
        size = 2 + nexc + low;    /* + the VByte high parts: */
        for (unsigned w = b + 1; w <= bmax; w++) size += hist[w] * ((w - b + 6) / 7);
        if (size < best_size) best = (tl_choice){TL_PFOR_VBYTE, b, 0}, best_size = size;
    }
    return best;
}

/* PACK at width 32 is the largest candidate; CONST takes up to 6 bytes. */
size_t tl_pfor_max_bytes(size_t n) { return 4 * n + 6; }

static void tl_pack(const uint32_t *v, size_t n, unsigned b, int vertical, uint8_t *out) {
    if (vertical && (tl_cpu_now() & TL_CPU_AVX2)) tl_vpack_avx2(v, n, b, out);
    else if (vertical) tl_vpack(v, n, b, out);
    else tl_hpack(v, n, b, out);
}

int64_t tl_pfor_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out, int delta,
                       int vertical) {
    if (n > TIERLAB_MAX_BLOCK || (n && (!in || !out))) return TIERLAB_EINVAL;
    if (n == 0) return 0;
    /* The 256 flavours store values minus one (pfor.md "Values"): gaps after
     * the first of a block, and every freq. */
    const uint32_t bias = vertical ? 1u : 0u;
    vertical = vertical && tl_pfor_vertical_len(n);
    uint32_t v[TIERLAB_MAX_BLOCK];
    const uint32_t first = delta ? in[0] - prev : in[0] - bias;
    v[0] = first;
    for (size_t i = 1; i < n; i++) v[i] = (delta ? in[i] - in[i - 1] : in[i]) - bias;
    /* Histogram of bit widths in four interleaved copies: equal widths in a
     * row would otherwise chain every increment through memory. */
    uint32_t hist4[4][33] = {{0}};
    uint32_t differ = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        hist4[0][tl_pfor_bits(v[i])]++;
        hist4[1][tl_pfor_bits(v[i + 1])]++;
        hist4[2][tl_pfor_bits(v[i + 2])]++;
        hist4[3][tl_pfor_bits(v[i + 3])]++;
        differ |= (v[i] ^ first) | (v[i + 1] ^ first) | (v[i + 2] ^ first) | (v[i + 3] ^ first);
    }
    for (; i < n; i++) {
        hist4[0][tl_pfor_bits(v[i])]++;
        differ |= v[i] ^ first;
    }
    size_t hist[33];
    for (unsigned w = 0; w <= 32; w++)
        hist[w] = (size_t)hist4[0][w] + hist4[1][w] + hist4[2][w] + hist4[3][w];
    const tl_choice c = tl_choose(hist, n, differ == 0, first);
    uint8_t *p = out;
    *p++ = (uint8_t)(c.type << 6 | c.b);
    if (c.type == TL_PFOR_CONST) return 1 + (int64_t)tl_vbyte_put(p, first);
    if (c.type == TL_PFOR_PACK) {
        tl_pack(v, n, c.b, vertical, p);
        return 1 + (int64_t)tl_hbytes(n, c.b);
    }
    /* Exception blocks (b < 32): a bitmap of the values wider than b, their
     * high parts in position order, then v keeps the low b bits. */
    uint64_t words[TIERLAB_MAX_BLOCK / 64] = {0};
    const uint32_t mask = (1u << c.b) - 1;
    for (size_t k = 0; k < n; k += 64) {
        /* In a register, shifted in from the top: constant shifts only. */
        const size_t end = n - k < 64 ? n : k + 64;
        uint64_t w = 0;
        size_t j = k;
        for (; j + 4 <= end; j += 4)
            w = w >> 4 | (uint64_t)((v[j] > mask) | (v[j + 1] > mask) << 1 |
                                    (v[j + 2] > mask) << 2 | (v[j + 3] > mask) << 3) << 60;
        for (; j < end; j++) w = w >> 1 | (uint64_t)(v[j] > mask) << 63;
        words[k / 64] = w >> (64 - (end - k));
    }
    uint32_t high[TIERLAB_MAX_BLOCK];
    uint8_t pos[TIERLAB_MAX_BLOCK];
    size_t nexc = 0;
    for (size_t k = 0; k < (n + 63) / 64; k++)
        for (uint64_t w = words[k]; w; w &= w - 1) {
            const size_t at = 64 * k + (size_t)__builtin_ctzll(w);
            pos[nexc] = (uint8_t)at;
            high[nexc++] = v[at] >> c.b;
        }
    for (size_t j = 0; j < n; j++) v[j] &= mask;
    /* The high parts come before the low bits: their readers may then
     * load a little past them and stay inside the block. */
    if (c.type == TL_PFOR_BITMAP) {
        *p++ = (uint8_t)c.bx;
        memcpy(p, words, (n + 7) / 8); /* little-endian host */
        p += (n + 7) / 8;
        tl_hpack(high, nexc, c.bx, p);
        p += tl_hbytes(nexc, c.bx);
    } else {
        *p++ = (uint8_t)nexc;
        memcpy(p, pos, nexc);
        p += nexc;
        for (size_t e = 0; e < nexc; e++) p += tl_vbyte_put(p, high[e]);
    }
    tl_pack(v, n, c.b, vertical, p);
    p += tl_hbytes(n, c.b);
    return p - out;
}

/* ---- decode ---- */

/* off[k] = set bits of map bytes 0..k-1, for k < bytes; returns all set bits.
 * Eight bytes at a time: per-byte counts (SWAR), summed by one multiply. */
static size_t tl_bitmap_offsets(const uint8_t *map, size_t bytes, uint8_t *off) {
    size_t total = 0;
    for (size_t k = 0; k < bytes; k += 8) {
        uint64_t x = 0;
        if (bytes - k >= 8) memcpy(&x, map + k, 8);
        else memcpy(&x, map + k, bytes - k);
        x -= (x >> 1) & 0x5555555555555555ull;
        x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
        x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
        const uint64_t incl = x * 0x0101010101010101ull; /* byte j: bytes 0..j */
        /* Exclusive counts plus the total so far: every byte stays <= 248.
         * off has room for whole words (TIERLAB_MAX_BLOCK / 8 bytes). */
        const uint64_t excl = (incl << 8) + total * 0x0101010101010101ull;
        memcpy(off + k, &excl, 8);
        total += incl >> 56;
    }
    return total;
}

/* Scalar path: the low bits of n values into out (no delta). */
static void tl_unpack_low(const uint8_t *in, size_t avail, size_t n, unsigned b, int vertical,
                          uint32_t *out) {
    if (vertical) tl_vunpack_scalar(in, n, b, out);
    else tl_hunpack(in, avail, n, b, out, 0, 0);
}

/* Scalar path: turn the patched stored values into values: with delta the
 * running sum from prev, with bias (the 256 flavours) one added to every
 * stored value but a delta block's first gap (pfor.md "Values"). */
static void tl_finish(uint32_t *out, size_t n, uint32_t prev, int delta, uint32_t bias) {
    if (delta) {
        out[0] = prev += out[0];
        for (size_t i = 1; i < n; i++) out[i] = prev += out[i] + bias;
    } else if (bias) {
        for (size_t i = 0; i < n; i++) out[i] += bias;
    }
}

int64_t tl_pfor_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                       uint32_t *out, int delta, int vertical) {
    if (n > TIERLAB_MAX_BLOCK || (n && !out) || (in_len && !in)) return TIERLAB_EINVAL;
    if (n == 0) return 0;
    if (in_len < 1) return TIERLAB_ECORRUPT;
    const uint32_t bias = vertical ? 1u : 0u; /* the 256 flavours; AVX2 kernels always add it */
    vertical = vertical && tl_pfor_vertical_len(n);
    const int simd = vertical && (tl_cpu_now() & TL_CPU_AVX2);
    const unsigned type = in[0] >> 6, b = in[0] & 63;
    size_t p = 1;
    if (b > 32) return TIERLAB_ECORRUPT;
    if (type == TL_PFOR_CONST) {
        uint32_t c;
        if (b != 0 || tl_vbyte_get(in, in_len, &p, &c)) return TIERLAB_ECORRUPT;
        if (simd) {
            tl_const_avx2(out, n, prev, c, delta);
        } else {
            for (size_t i = 0; i < n; i++) out[i] = c;
            tl_finish(out, n, prev, delta, bias);
        }
        return (int64_t)p;
    }
    const size_t packed = tl_hbytes(n, b); /* n*b/8 in the vertical layout too */
    if (type == TL_PFOR_PACK) {
        if (in_len - p < packed) return TIERLAB_ECORRUPT;
        if (simd) {
            tl_vdecode_avx2(in + p, n, b, delta, prev, NULL, out);
        } else if (vertical || bias) {
            tl_unpack_low(in + p, in_len - p, n, b, vertical, out);
            tl_finish(out, n, prev, delta, bias);
        } else {
            tl_hunpack(in + p, in_len - p, n, b, out, delta, prev);
        }
        return (int64_t)(p + packed);
    }
    /* Exception blocks: b < 32, the argument byte, the positions (bitmap or
     * bytes), the high parts, the low bits. */
    if (b == 32 || in_len - p < 1) return TIERLAB_ECORRUPT;
    const unsigned arg = in[p++];
    /* + 16: the AVX2 unpack writes whole groups of 8, the expand reads 8 on */
    uint32_t high[TIERLAB_MAX_BLOCK + 16];
    if (type == TL_PFOR_BITMAP) {
        const unsigned bx = arg;
        const size_t mapb = (n + 7) / 8;
        if (bx == 0 || bx > 32 - b || in_len - p < mapb) return TIERLAB_ECORRUPT;
        const uint8_t *map = in + p;
        if ((n & 7) && (map[mapb - 1] >> (n & 7))) return TIERLAB_ECORRUPT; /* bits past n */
        uint8_t off[TIERLAB_MAX_BLOCK / 8];
        const size_t nexc = tl_bitmap_offsets(map, mapb, off);
        p += mapb;
        const size_t hb = tl_hbytes(nexc, bx);
        if (nexc == 0 || in_len - p < hb || in_len - p - hb < packed) return TIERLAB_ECORRUPT;
        const uint8_t *low = in + p + hb;
        if (simd) {
            /* High parts pre-shifted to bit b, so the kernel only ORs them in. */
            if (bx <= 25) {
                tl_hunpack_avx2(in + p, in_len - p, nexc, bx, b, high);
            } else {
                tl_hunpack(in + p, in_len - p, nexc, bx, high, 0, 0);
                for (size_t e = 0; e < nexc; e++) high[e] <<= b;
            }
            memset(high + nexc, 0, 8 * sizeof *high); /* read past the last, never used */
            const tl_pfor_exc x = {.map = map, .off = off, .high = high};
            tl_vdecode_avx2(low, n, b, delta, prev, &x, out);
            return (int64_t)(p + hb + packed);
        }
        tl_hunpack(in + p, in_len - p, nexc, bx, high, 0, 0);
        tl_unpack_low(low, in_len - p - hb, n, b, vertical, out);
        p += hb + packed;
        size_t e = 0;
        for (size_t k = 0; k < mapb; k += 8) {
            uint64_t w = 0;
            memcpy(&w, map + k, mapb - k < 8 ? mapb - k : 8);
            for (; w; w &= w - 1) out[8 * k + (unsigned)__builtin_ctzll(w)] |= high[e++] << b;
        }
    } else if (type == TL_PFOR_VBYTE) {
        const size_t nexc = arg;
        if (nexc == 0 || nexc > n || in_len - p < nexc) return TIERLAB_ECORRUPT;
        const uint8_t *pos = in + p;
        p += nexc;
        for (size_t e = 0; e < nexc; e++) {
            /* Positions strictly ascending below n; high parts fit above b bits. */
            if (pos[e] >= n || (e && pos[e] <= pos[e - 1])) return TIERLAB_ECORRUPT;
            if (in_len - p >= 8) { /* one load, no per-byte loop */
                uint64_t w;
                memcpy(&w, in + p, 8);
                const size_t used = tl_vbyte_get_word(w, &high[e]);
                if (!used) return TIERLAB_ECORRUPT;
                p += used;
            } else if (tl_vbyte_get(in, in_len, &p, &high[e])) {
                return TIERLAB_ECORRUPT;
            }
            if ((uint64_t)high[e] >> (32 - b)) return TIERLAB_ECORRUPT;
        }
        if (in_len - p < packed) return TIERLAB_ECORRUPT;
        const uint8_t *low = in + p;
        p += packed;
        if (simd && delta) {
            /* Few exceptions: a dense patch the kernel ORs in before the scan. */
            _Alignas(32) uint32_t patch[TIERLAB_MAX_BLOCK];
            tl_zero_avx2(patch, n);
            for (size_t e = 0; e < nexc; e++) patch[pos[e]] = high[e] << b;
            const tl_pfor_exc x = {.patch = patch};
            tl_vdecode_avx2(low, n, b, delta, prev, &x, out);
            return (int64_t)p;
        }
        if (simd) { /* delta is 0 here; the kernel has added the bias: add, not OR */
            tl_vdecode_avx2(low, n, b, 0, 0, NULL, out);
            for (size_t e = 0; e < nexc; e++) out[pos[e]] += high[e] << b;
            return (int64_t)p;
        }
        tl_unpack_low(low, packed, n, b, vertical, out);
        for (size_t e = 0; e < nexc; e++) out[pos[e]] |= high[e] << b;
    } else {
        return TIERLAB_ECORRUPT; /* not reached: four types in two bits */
    }
    tl_finish(out, n, prev, delta, bias);
    return (int64_t)p;
}

/* ---- the configurations ---- */

/* `pfor`: the freq codec of `pfor-delta` (not in the registry by itself). */
TL_PFOR_CODEC(tl_pfor_plain, "pfor", 0, 0, tl_impl_scalar, NULL);
TL_PFOR_CODEC(tierlab_codec_pfor_delta, "pfor-delta", 1, 0, tl_impl_scalar, &tl_pfor_plain);
