/* PLACEHOLDER while the codec is being written this session; replaced before commit. */
#include "codecs.h"
static size_t tl_ph_bound(size_t n) { return 4 * n + 16; }
static int64_t tl_ph_enc(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out) { (void)in; (void)n; (void)prev; (void)out; return TIERLAB_EINVAL; }
static int64_t tl_ph_dec(const uint8_t *in, size_t l, size_t n, uint32_t prev, uint32_t *out) { (void)in; (void)l; (void)n; (void)prev; (void)out; return TIERLAB_EINVAL; }
const tierlab_codec tierlab_codec_vbyte = { .name = "vbyte", .delta = 1, .max_encoded_bytes = tl_ph_bound, .encode = tl_ph_enc, .decode = tl_ph_dec, .impl = tl_impl_scalar };
