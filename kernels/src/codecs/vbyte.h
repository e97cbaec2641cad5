/* vbyte.h — the VByte codec loops shared by `vbyte` and `vbyte-delta`
 * (internal). One implementation, instantiated for delta = 0 and 1 in
 * vbyte.c; vbyte_delta.c only holds the descriptor of the delta variant. */
#ifndef TL_VBYTE_H
#define TL_VBYTE_H

#include "codecs.h"

/* 5 bytes per value at most (varint.h). */
size_t tl_vbyte_max_bytes(size_t n);
/* VByte of the wrapping gaps in[i] - in[i-1] (in[-1] = prev), decoded back
 * with the prefix sum inside the decode loop. Contract of tierlab_codec. */
int64_t tl_vbyte_delta_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out);
int64_t tl_vbyte_delta_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                              uint32_t *out);

#endif
