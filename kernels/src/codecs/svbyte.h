/* svbyte.h — StreamVByte internals shared by svbyte_delta.c (format, scalar
 * loops, descriptors) and svbyte_ssse3.c (SIMD decode kernel). Not public.
 * Byte format: kernels/formats/vbyte.md. */
#ifndef TL_SVBYTE_H
#define TL_SVBYTE_H

#include "codecs.h"

/* `svbyte`: StreamVByte of the values themselves, never delta-coded — the
 * freq codec of `svbyte-delta` (docs/engine.md). Reached through
 * tierlab_codec_freq(&tierlab_codec_svbyte_delta), not the registry. */
extern const tierlab_codec tl_svbyte_plain;

/* Internal functions are hidden: the call from svbyte_delta.c skips the PLT. */
#define TL_SVB_HIDDEN __attribute__((visibility("hidden")))

/* SIMD decode of the whole quads (4 integers, one control byte each) of a
 * block in one pass: quads 0..nquads of the control bytes at ctrl (the
 * block's start), data from `data`, into out[0..4*nquads). With delta = 1,
 * values are the running sums of the gaps from prev. Reads only [ctrl,
 * limit), checking as it goes: returns the pointer past the quads' data, or
 * NULL when that data runs past limit (out then holds garbage). Needs
 * tierlab_cpu_has_ssse3() (AVX2 is used when present); on builds without x86
 * SIMD it does nothing (and is never called). */
TL_SVB_HIDDEN const uint8_t *tl_svbyte_decode_quads(const uint8_t *ctrl, size_t nquads,
                                                    const uint8_t *data, const uint8_t *limit,
                                                    uint32_t *out, uint32_t prev, int delta);

#endif
