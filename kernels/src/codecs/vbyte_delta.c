/* vbyte_delta.c — `vbyte-delta`: VByte of the DID gaps; freq blocks use
 * plain `vbyte` (docs/engine.md). The loops are vbyte.c's, with delta = 1. */
#include "vbyte.h"

const tierlab_codec tierlab_codec_vbyte_delta = {
    .name = "vbyte-delta",
    .delta = 1,
    .max_encoded_bytes = tl_vbyte_max_bytes,
    .encode = tl_vbyte_delta_encode,
    .decode = tl_vbyte_delta_decode,
    .impl = tl_impl_scalar,
    .freq = &tierlab_codec_vbyte,
};
