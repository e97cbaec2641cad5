/* registry.c — the single table of codec configurations (docs/engine.md).
 * Adding a codec: one file in this folder, one line here, one line in
 * kernels/CMakeLists.txt. Nothing else keeps a list of codec names. */
#include <string.h>

#include "codecs.h"

static const tierlab_codec *const tl_codecs[] = {
    &tierlab_codec_base,         &tierlab_codec_vbyte,      &tierlab_codec_vbyte_delta,
    &tierlab_codec_svbyte_delta, &tierlab_codec_pfor_delta, &tierlab_codec_pfor_delta256,
};

size_t tierlab_codec_count(void) { return sizeof tl_codecs / sizeof tl_codecs[0]; }

const tierlab_codec *tierlab_codec_at(size_t i) {
    return i < tierlab_codec_count() ? tl_codecs[i] : NULL;
}

const tierlab_codec *tierlab_codec_find(const char *name) {
    if (name == NULL) return NULL;
    for (size_t i = 0; i < tierlab_codec_count(); i++)
        if (strcmp(tl_codecs[i]->name, name) == 0) return tl_codecs[i];
    return NULL;
}

const tierlab_codec *tierlab_codec_freq(const tierlab_codec *c) {
    return c && c->freq ? c->freq : c;
}

const char *tl_impl_scalar(void) { return "scalar"; }
