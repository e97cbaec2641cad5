/* codecs.h — internal declarations shared by the codec files (not public).
 * Each codec is one file exporting one `const tierlab_codec` descriptor;
 * registry.c lists them once. */
#ifndef TL_CODECS_H
#define TL_CODECS_H

#include "cpu.h"
#include "tierlab.h"

extern const tierlab_codec tierlab_codec_base;
extern const tierlab_codec tierlab_codec_vbyte;
extern const tierlab_codec tierlab_codec_vbyte_delta;
extern const tierlab_codec tierlab_codec_svbyte_delta;
extern const tierlab_codec tierlab_codec_pfor_delta;
extern const tierlab_codec tierlab_codec_pfor_delta256;

/* Implementation labels returned by tierlab_codec.impl(). */
const char *tl_impl_scalar(void);

#endif
