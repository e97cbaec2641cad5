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

#endif
