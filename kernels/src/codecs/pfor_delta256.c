/* pfor_delta256.c — `pfor-delta256` and its freq codec `pfor256`: the PFor
 * scheme of pfor_delta.c with the 8-lane vertical bit packing for full
 * blocks (n == 128 or 256), unpacked eight values per AVX2 instruction with
 * the gap prefix sum fused in, or by the scalar twin of the layout on CPUs
 * without AVX2 and under tierlab_force_scalar (both in
 * pfor_delta256_avx2.c); other block lengths are exactly pfor-delta's
 * blocks. The dispatch is in tl_pfor_decode. Format: kernels/formats/pfor.md. */
#include "pfor.h"

static const char *tl_pfor256_impl(void) { return tierlab_cpu_has_avx2() ? "simd" : "scalar"; }

/* `pfor256`: the freq codec of `pfor-delta256` (not in the registry by itself). */
TL_PFOR_CODEC(tl_pfor256_plain, "pfor256", 0, 1, tl_pfor256_impl, NULL);
TL_PFOR_CODEC(tierlab_codec_pfor_delta256, "pfor-delta256", 1, 1, tl_pfor256_impl,
              &tl_pfor256_plain);
