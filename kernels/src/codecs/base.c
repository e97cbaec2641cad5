/* base.c — `base`: uncompressed 32-bit little-endian integers (docs/engine.md).
 * The reference layout every compression ratio is measured against. */
#include <string.h>

#include "codecs.h"

static size_t tl_base_bound(size_t n) { return 4 * n; }

static int64_t tl_base_encode(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out) {
    (void)prev;
    if (n > TIERLAB_MAX_BLOCK) return TIERLAB_EINVAL;
    memcpy(out, in, 4 * n); /* x86-64 and aarch64 are little-endian */
    return (int64_t)(4 * n);
}

static int64_t tl_base_decode(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                              uint32_t *out) {
    (void)prev;
    if (n > TIERLAB_MAX_BLOCK) return TIERLAB_EINVAL;
    if (in_len < 4 * n) return TIERLAB_ECORRUPT;
    memcpy(out, in, 4 * n);
    return (int64_t)(4 * n);
}

const tierlab_codec tierlab_codec_base = {
    .name = "base",
    .delta = 0,
    .max_encoded_bytes = tl_base_bound,
    .encode = tl_base_encode,
    .decode = tl_base_decode,
    .impl = tl_impl_scalar,
};
