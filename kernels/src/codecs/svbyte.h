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

/* Sum of the 2-bit codes of the control bytes ctrl[0..16*nvec), with SSSE3
 * (only when tierlab_cpu_has_ssse3(); 0 on builds without x86 SIMD). */
size_t tl_svbyte_code_sum_ssse3(const uint8_t *ctrl, size_t nvec);

/* SIMD decode of the whole quads (4 integers, one control byte each) of a
 * block: quads 0..nquads of the control bytes at ctrl (the block's start),
 * data from *data, into out[0..4*nquads). With delta = 1, values are the
 * running sums of the gaps from prev. Advances *data past the quads. Reads
 * only [ctrl, limit). The caller has checked that the data of the nquads
 * quads lies in [*data, limit), and that tierlab_cpu_has_ssse3() holds; on
 * builds without x86 SIMD it does nothing (and is never called). */
void tl_svbyte_decode_quads_ssse3(const uint8_t *ctrl, size_t nquads, const uint8_t **data,
                                  const uint8_t *limit, uint32_t *out, uint32_t prev, int delta);

#endif
