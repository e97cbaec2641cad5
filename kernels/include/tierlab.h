/*
 * tierlab.h — the one public header of the tierlab kernels (C11).
 *
 * This header is the manual. Every function states who owns what, how big
 * buffers must be, what it returns on error and whether it is thread-safe.
 * Public names start with `tierlab_`; everything else lives in kernels/src/.
 *
 * Codecs (ENGINE.md, "Codec configurations")
 * ------------------------------------------
 * A codec encodes one block of up to TIERLAB_MAX_BLOCK 32-bit integers.
 * The block length n is NOT stored in the encoded bytes: the caller keeps it
 * (the index keeps it in the skip list), exactly like StreamVByte.
 *
 * Delta codecs (`delta == 1`) store wrapping differences:
 *     gap[0] = in[0] - prev,  gap[i] = in[i] - in[i-1]   (mod 2^32)
 * where `prev` is the last value of the previous block (0 for a first block).
 * Decoding takes the same `prev` and rebuilds the values inside the decode
 * loop (no separate prefix-sum pass). Because the arithmetic wraps, unsorted
 * input round-trips too; sorted input is what compresses.
 * Non-delta codecs ignore `prev`.
 *
 * Encoded byte formats are documented in kernels/FORMATS.md.
 */
#ifndef TIERLAB_H
#define TIERLAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIERLAB_VERSION "0.1.0"

/* Largest block a codec accepts. The index uses 256 (default) or 128. */
#define TIERLAB_MAX_BLOCK 256

/* Error codes (negative returns). */
#define TIERLAB_ECORRUPT (-1) /* encoded bytes are malformed or truncated   */
#define TIERLAB_EINVAL (-2)   /* bad argument (n > TIERLAB_MAX_BLOCK, NULL)  */

typedef struct tierlab_codec {
    /* The name users type (`--codec pfor-delta256`), the registry key. */
    const char *name;
    /* 1 if values are stored as differences and decode takes `prev`. */
    int delta;
    /* Upper bound on the encoded size of any block of n <= TIERLAB_MAX_BLOCK
     * integers, in bytes. Size encode buffers with it. */
    size_t (*max_encoded_bytes)(size_t n);
    /* Encode in[0..n) into out. `out` must hold max_encoded_bytes(n) bytes.
     * Returns the number of bytes written (0 only when n == 0), or
     * TIERLAB_EINVAL when n > TIERLAB_MAX_BLOCK. Thread-safe. */
    int64_t (*encode)(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out);
    /* Decode exactly n integers from in[0..in_len) into out[0..n).
     * `out` must hold n integers; nothing past out[n-1] is written and nothing
     * past in[in_len-1] is read, whatever the bytes say. Returns the number of
     * bytes consumed, TIERLAB_ECORRUPT if the bytes are not a valid block of
     * n integers (truncated, bad header, overlong varint), or TIERLAB_EINVAL.
     * Thread-safe. */
    int64_t (*decode)(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                      uint32_t *out);
    /* Which implementation decode uses on this CPU right now: "simd" or
     * "scalar" (see tierlab_force_scalar). */
    const char *(*impl)(void);
    /* The codec this configuration uses for frequency blocks: the same family,
     * never delta-coded (ENGINE.md). NULL means this codec itself. Use
     * tierlab_codec_freq() rather than reading the field. */
    const struct tierlab_codec *freq;
} tierlab_codec;

/* The codec registry (kernels/src/codecs/registry.c is the single table). */
size_t tierlab_codec_count(void);
const tierlab_codec *tierlab_codec_at(size_t i); /* NULL when out of range */
const tierlab_codec *tierlab_codec_find(const char *name); /* NULL if unknown */
/* The codec for the frequency blocks of configuration c (never NULL for a
 * non-NULL c; a non-delta codec, e.g. "pfor" for "pfor-delta"). */
const tierlab_codec *tierlab_codec_freq(const tierlab_codec *c);

/* CPU features, probed once and cached (thread-safe). */
int tierlab_cpu_has_avx2(void);
int tierlab_cpu_has_ssse3(void); /* SSSE3 and SSE4.1 both present */
/* Comma-separated list of the SIMD features tierlab looked for and found,
 * e.g. "sse4.1,ssse3,avx2". Static storage. */
const char *tierlab_cpu_features(void);
/* Force every codec onto its scalar path (1) or back to the best path (0).
 * The scalar path produces byte-identical encodings and identical decodes;
 * tests use this to cover both paths on one machine. Not meant to be
 * flipped while other threads decode. */
void tierlab_force_scalar(int on);
int tierlab_scalar_forced(void);

/* Benchmark helpers: the timing loop lives in C so Python adds no overhead.
 *
 * tierlab_bench_decode_blocks decodes `nblocks` encoded blocks one after
 * another, each into the same small output buffer (per-block regime, as a
 * query decodes) or into consecutive slots of `out` (whole-list regime,
 * `whole_list` = 1; then `out` holds the sum of all block lengths).
 * Block b starts at enc + offsets[b], has offsets[b+1]-offsets[b] bytes and
 * lens[b] integers; for delta codecs block b takes prev = last value of
 * block b-1 (`first_prev` for block 0), read from `prevs[b]`.
 * It repeats the whole pass `reps` times and stores each pass's wall time
 * in ns into pass_ns[0..reps). Returns 0, or a negative error from decode. */
int tierlab_bench_decode_blocks(const tierlab_codec *codec, const uint8_t *enc,
                                const uint64_t *offsets, const uint32_t *lens,
                                const uint32_t *prevs, size_t nblocks,
                                uint32_t *out, int whole_list, int reps,
                                uint64_t *pass_ns);

/* Same loop for the encoder: encodes `nblocks` blocks of in (lens[b] values
 * each, consecutive) into enc, repeated `reps` times. Returns 0 or < 0. */
int tierlab_bench_encode_blocks(const tierlab_codec *codec, const uint32_t *in,
                                const uint32_t *lens, size_t nblocks,
                                uint8_t *enc, int reps, uint64_t *pass_ns);

/* A foreign decoder with StreamVByte's signature,
 * size_t decode(const uint8_t *in, uint32_t *out, uint32_t count), timed with
 * the same loop as above (used for Debian's libstreamvbyte as a peer). */
typedef size_t (*tierlab_foreign_decode_fn)(const uint8_t *in, uint32_t *out,
                                            uint32_t count);
/* ... and with streamvbyte_delta_decode's signature (takes prev). Give exactly
 * one of fn / delta_fn; prevs is read only with delta_fn. */
typedef size_t (*tierlab_foreign_delta_decode_fn)(const uint8_t *in, uint32_t *out,
                                                  uint32_t count, uint32_t prev);
int tierlab_bench_foreign_decode(tierlab_foreign_decode_fn fn,
                                 tierlab_foreign_delta_decode_fn delta_fn,
                                 const uint8_t *enc, const uint64_t *offsets,
                                 const uint32_t *lens, const uint32_t *prevs,
                                 size_t nblocks, uint32_t *out, int whole_list,
                                 int reps, uint64_t *pass_ns);

/* memcpy of the decoded bytes, the physical limit, with the same loop. */
int tierlab_bench_memcpy(const uint32_t *src, const uint32_t *lens, size_t nblocks,
                         uint32_t *out, int whole_list, int reps, uint64_t *pass_ns);

#ifdef __cplusplus
}
#endif
#endif /* TIERLAB_H */
