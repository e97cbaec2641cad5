/* main.c — tierlab-kernels: a small CLI over the C library, for use without
 * Python (e.g. under gem5 or on a bare test machine).
 *   tierlab-kernels codecs              list codecs and the path each uses
 *   tierlab-kernels roundtrip CODEC     read integers from stdin, encode them
 *                                       in blocks, decode, verify, print size
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tierlab.h"

static int tl_usage(FILE *to) {
    fprintf(to,
            "usage: tierlab-kernels codecs\n"
            "       tierlab-kernels roundtrip CODEC < integers.txt\n"
            "  codecs     list the codec registry and the implementation each runs (simd/scalar)\n"
            "  roundtrip  encode whitespace-separated unsigned 32-bit integers from stdin in\n"
            "             blocks of %d, decode them back, verify, print bits/int\n",
            TIERLAB_MAX_BLOCK);
    return to == stderr ? 2 : 0;
}

static int tl_cmd_codecs(void) {
    printf("%-16s %-6s %s\n", "codec", "delta", "impl");
    for (size_t i = 0; i < tierlab_codec_count(); i++) {
        const tierlab_codec *c = tierlab_codec_at(i);
        printf("%-16s %-6s %s\n", c->name, c->delta ? "yes" : "no", c->impl());
    }
    printf("cpu simd features: %s\n", *tierlab_cpu_features() ? tierlab_cpu_features() : "none");
    return 0;
}

static int tl_cmd_roundtrip(const char *name) {
    const tierlab_codec *c = tierlab_codec_find(name);
    if (!c) {
        fprintf(stderr, "tierlab-kernels: unknown codec '%s' (see: tierlab-kernels codecs)\n", name);
        return 2;
    }
    size_t cap = 1024, n = 0;
    uint32_t *vals = malloc(cap * sizeof *vals);
    char word[64];
    while (vals && scanf("%63s", word) == 1) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(word, &end, 10);
        if (*end || errno || v > UINT32_MAX || word[0] == '-') {
            fprintf(stderr, "tierlab-kernels: not an unsigned 32-bit integer: '%s'\n", word);
            free(vals);
            return 2;
        }
        if (n == cap) {
            uint32_t *grown = realloc(vals, 2 * cap * sizeof *vals);
            if (!grown) break;
            vals = grown;
            cap *= 2;
        }
        vals[n++] = (uint32_t)v;
    }
    if (!vals) return 1;
    uint8_t *enc = malloc(c->max_encoded_bytes(TIERLAB_MAX_BLOCK));
    uint32_t out[TIERLAB_MAX_BLOCK];
    size_t bytes = 0;
    uint32_t prev = 0;
    int rc = 0;
    for (size_t i = 0; enc && i < n && rc == 0; i += TIERLAB_MAX_BLOCK) {
        size_t len = n - i < TIERLAB_MAX_BLOCK ? n - i : TIERLAB_MAX_BLOCK;
        int64_t w = c->encode(vals + i, len, prev, enc);
        int64_t r = w < 0 ? w : c->decode(enc, (size_t)w, len, prev, out);
        if (w < 0 || r != w || memcmp(out, vals + i, len * 4) != 0) {
            fprintf(stderr, "tierlab-kernels: round trip failed in block at %zu\n", i);
            rc = 1;
        }
        bytes += w > 0 ? (size_t)w : 0;
        prev = vals[i + len - 1];
    }
    if (rc == 0)
        printf("%s (%s): %zu integers, %zu bytes, %.3f bits/int\n", c->name, c->impl(), n, bytes,
               n ? 8.0 * (double)bytes / (double)n : 0.0);
    free(enc);
    free(vals);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return tl_usage(stderr);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) return tl_usage(stdout);
    if (!strcmp(argv[1], "codecs") && argc == 2) return tl_cmd_codecs();
    if (!strcmp(argv[1], "roundtrip") && argc == 3) return tl_cmd_roundtrip(argv[2]);
    return tl_usage(stderr);
}
