/* varint.h — VByte (LEB128-style) primitives shared by the codecs.
 * Format: 7 payload bits per byte, least significant group first; the high
 * bit is 1 when another byte follows. A 32-bit value takes 1-5 bytes; a
 * fifth byte above 0x0F, or a sixth byte, is corrupt (overlong). */
#ifndef TL_VARINT_H
#define TL_VARINT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes VByte needs for v (1..5). */
static inline size_t tl_vbyte_len(uint32_t v) {
    return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}

/* Writes v at out, returns the bytes written (1..5). */
static inline size_t tl_vbyte_put(uint8_t *out, uint32_t v) {
    size_t i = 0;
    while (v >= 0x80) {
        out[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[i++] = (uint8_t)v;
    return i;
}

/* Reads one value from in[*pos..end); advances *pos. Returns 0 on success,
 * -1 when the bytes run out or the value is overlong. */
static inline int tl_vbyte_get(const uint8_t *in, size_t end, size_t *pos, uint32_t *v) {
    size_t p = *pos;
    uint32_t x = 0;
    for (unsigned shift = 0; shift < 35; shift += 7) {
        if (p >= end) return -1;
        uint8_t b = in[p++];
        if (shift == 28 && b > 0x0F) return -1;
        x |= (uint32_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *pos = p;
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* The continuation (high) bits of 8 bytes read as a little-endian word:
 * `(w & TL_VBYTE_HIGH_BITS) == 0` means 8 one-byte values. */
#define TL_VBYTE_HIGH_BITS 0x8080808080808080ull

/* Decodes the value at the start of w, 8 bytes read little-endian, for
 * loops that know 8 bytes are readable. Returns the bytes used (1..5), or 0
 * when the value is overlong (same rule as tl_vbyte_get). One branch per
 * length, on purpose: when lengths repeat, the predictor runs ahead to the
 * next value instead of waiting for this one's length (a branch-free
 * length, e.g. from a bit scan, chains every value to the previous). */
static inline size_t tl_vbyte_get_word(uint64_t w, uint32_t *v) {
    uint64_t stop = ~w & TL_VBYTE_HIGH_BITS; /* high bit 0: last byte */
    uint32_t x = (uint32_t)(w & 0x7F);
    if (stop & 0x80) {
        *v = x;
        return 1;
    }
    x |= (uint32_t)(w >> 1) & (0x7Fu << 7);
    if (stop & 0x8000) {
        *v = x;
        return 2;
    }
    x |= (uint32_t)(w >> 2) & (0x7Fu << 14);
    if (stop & 0x800000) {
        *v = x;
        return 3;
    }
    x |= (uint32_t)(w >> 3) & (0x7Fu << 21);
    if (stop & 0x80000000u) {
        *v = x;
        return 4;
    }
    if (((w >> 32) & 0xFF) > 0x0F) return 0;
    *v = x | ((uint32_t)(w >> 4) & 0xF0000000u); /* fifth byte, <= 0x0F */
    return 5;
}

#endif
