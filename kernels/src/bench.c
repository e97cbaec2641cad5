/* bench.c — timing loops for codec benchmarks, kept in C so that the
 * benchmark driver (Python) adds no per-block overhead to any contestant:
 * ours, Debian's libstreamvbyte and memcpy all run through the same loop. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under strict C11 */
#include <string.h>
#include <time.h>

#include "tierlab.h"

static uint64_t tl_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Keeps the decoded values observable so no pass can be optimised away. */
static volatile uint32_t tl_sink;

int tierlab_bench_decode_blocks(const tierlab_codec *codec, const uint8_t *enc,
                                const uint64_t *offsets, const uint32_t *lens,
                                const uint32_t *prevs, size_t nblocks, uint32_t *out,
                                int whole_list, int reps, uint64_t *pass_ns) {
    if (!codec || !enc || !offsets || !lens || !prevs || !out || !pass_ns || reps < 1)
        return TIERLAB_EINVAL;
    for (int r = 0; r < reps; r++) {
        uint32_t acc = 0;
        uint32_t *dst = out;
        uint64_t t0 = tl_now_ns();
        for (size_t b = 0; b < nblocks; b++) {
            int64_t got = codec->decode(enc + offsets[b], (size_t)(offsets[b + 1] - offsets[b]),
                                        lens[b], prevs[b], dst);
            if (got < 0) return (int)got;
            if (whole_list) dst += lens[b];
            else acc += dst[0];
        }
        pass_ns[r] = tl_now_ns() - t0;
        tl_sink = acc + out[0];
    }
    return 0;
}

int tierlab_bench_encode_blocks(const tierlab_codec *codec, const uint32_t *in,
                                const uint32_t *lens, size_t nblocks, uint8_t *enc, int reps,
                                uint64_t *pass_ns) {
    if (!codec || !in || !lens || !enc || !pass_ns || reps < 1) return TIERLAB_EINVAL;
    for (int r = 0; r < reps; r++) {
        const uint32_t *src = in;
        uint8_t *dst = enc;
        uint32_t prev = 0;
        uint64_t t0 = tl_now_ns();
        for (size_t b = 0; b < nblocks; b++) {
            int64_t got = codec->encode(src, lens[b], prev, dst);
            if (got < 0) return (int)got;
            prev = lens[b] ? src[lens[b] - 1] : prev;
            src += lens[b];
            dst += got;
        }
        pass_ns[r] = tl_now_ns() - t0;
        tl_sink = enc[0];
    }
    return 0;
}

int tierlab_bench_foreign_decode(tierlab_foreign_decode_fn fn,
                                 tierlab_foreign_delta_decode_fn delta_fn, const uint8_t *enc,
                                 const uint64_t *offsets, const uint32_t *lens,
                                 const uint32_t *prevs, size_t nblocks, uint32_t *out,
                                 int whole_list, int reps, uint64_t *pass_ns) {
    if (!fn == !delta_fn || (delta_fn && !prevs) || !enc || !offsets || !lens || !out ||
        !pass_ns || reps < 1)
        return TIERLAB_EINVAL;
    for (int r = 0; r < reps; r++) {
        uint32_t acc = 0;
        uint32_t *dst = out;
        uint64_t t0 = tl_now_ns();
        for (size_t b = 0; b < nblocks; b++) {
            if (fn) fn(enc + offsets[b], dst, lens[b]);
            else delta_fn(enc + offsets[b], dst, lens[b], prevs[b]);
            if (whole_list) dst += lens[b];
            else acc += dst[0];
        }
        pass_ns[r] = tl_now_ns() - t0;
        tl_sink = acc + out[0];
    }
    return 0;
}

int tierlab_bench_memcpy(const uint32_t *src, const uint32_t *lens, size_t nblocks,
                         uint32_t *out, int whole_list, int reps, uint64_t *pass_ns) {
    if (!src || !lens || !out || !pass_ns || reps < 1) return TIERLAB_EINVAL;
    for (int r = 0; r < reps; r++) {
        uint32_t acc = 0;
        const uint32_t *s = src;
        uint32_t *dst = out;
        uint64_t t0 = tl_now_ns();
        for (size_t b = 0; b < nblocks; b++) {
            memcpy(dst, s, (size_t)lens[b] * 4);
            s += lens[b];
            if (whole_list) dst += lens[b];
            else acc += dst[0];
        }
        pass_ns[r] = tl_now_ns() - t0;
        tl_sink = acc + out[0];
    }
    return 0;
}
