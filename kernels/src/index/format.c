/* format.c — file headers, the XXH64 hash (corpus digest, build id, header
 * checksum) and the error-message helper shared by index/, query/, tiers/.
 * The CRC-32C of the index's regions is in crc32c.c.
 * XXH64 follows the public xxHash specification (Yann Collet, BSD-2), so a
 * digest can be checked with any xxhash tool (`xxh64sum`, Python `xxhash`). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "format.h"

const char tl_magic[TIERLAB_FILES][8] = {
    {'T', 'L', 'D', 'I', 'C', 'T', 0, 0},
    {'T', 'L', 'S', 'K', 'I', 'P', 0, 0},
    {'T', 'L', 'D', 'I', 'D', 'S', 0, 0},
    {'T', 'L', 'F', 'R', 'E', 'Q', 0, 0},
};

static const char *const tl_file_names[TIERLAB_FILES] = {"dict.bin", "skip.bin", "dids.bin",
                                                         "freqs.bin"};
static const char *const tl_file_keys[TIERLAB_FILES] = {"dict", "skip", "did", "freq"};

const char *tierlab_index_file_name(int file) {
    return file >= 0 && file < TIERLAB_FILES ? tl_file_names[file] : NULL;
}
const char *tierlab_index_file_key(int file) {
    return file >= 0 && file < TIERLAB_FILES ? tl_file_keys[file] : NULL;
}

int tl_err(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- XXH64 ---- */
#define TL_P1 11400714785074694791ULL
#define TL_P2 14029467366897019727ULL
#define TL_P3 1609587929392839161ULL
#define TL_P4 9650029242287828579ULL
#define TL_P5 2870177450012600261ULL

static inline uint64_t tl_rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t tl_rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static inline uint32_t tl_rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline uint64_t tl_round(uint64_t acc, uint64_t in) {
    acc += in * TL_P2;
    acc = tl_rotl(acc, 31);
    return acc * TL_P1;
}
static inline uint64_t tl_merge(uint64_t acc, uint64_t v) {
    acc ^= tl_round(0, v);
    return acc * TL_P1 + TL_P4;
}

void tl_xxh64_init(tl_xxh64_state *s, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->v[0] = seed + TL_P1 + TL_P2;
    s->v[1] = seed + TL_P2;
    s->v[2] = seed;
    s->v[3] = seed - TL_P1;
}

void tl_xxh64_update(tl_xxh64_state *s, const void *data, size_t len) {
    const uint8_t *p = data, *end = p + len;
    s->total += len;
    if (s->buffered + len < 32) {
        memcpy(s->buf + s->buffered, p, len);
        s->buffered += (uint32_t)len;
        return;
    }
    if (s->buffered) {
        size_t take = 32 - s->buffered;
        memcpy(s->buf + s->buffered, p, take);
        for (int i = 0; i < 4; i++) s->v[i] = tl_round(s->v[i], tl_rd64(s->buf + 8 * i));
        p += take;
        s->buffered = 0;
    }
    uint64_t v0 = s->v[0], v1 = s->v[1], v2 = s->v[2], v3 = s->v[3];
    while (end - p >= 32) {
        v0 = tl_round(v0, tl_rd64(p));
        v1 = tl_round(v1, tl_rd64(p + 8));
        v2 = tl_round(v2, tl_rd64(p + 16));
        v3 = tl_round(v3, tl_rd64(p + 24));
        p += 32;
    }
    s->v[0] = v0, s->v[1] = v1, s->v[2] = v2, s->v[3] = v3;
    if (p < end) {
        memcpy(s->buf, p, (size_t)(end - p));
        s->buffered = (uint32_t)(end - p);
    }
}

uint64_t tl_xxh64_digest(const tl_xxh64_state *s) {
    uint64_t h;
    if (s->total >= 32) {
        h = tl_rotl(s->v[0], 1) + tl_rotl(s->v[1], 7) + tl_rotl(s->v[2], 12) +
            tl_rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = tl_merge(h, s->v[i]);
    } else {
        h = s->seed + TL_P5;
    }
    h += s->total;
    const uint8_t *p = s->buf, *end = s->buf + s->buffered;
    while (end - p >= 8) {
        h ^= tl_round(0, tl_rd64(p));
        h = tl_rotl(h, 27) * TL_P1 + TL_P4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= (uint64_t)tl_rd32(p) * TL_P1;
        h = tl_rotl(h, 23) * TL_P2 + TL_P3;
        p += 4;
    }
    while (p < end) {
        h ^= (*p++) * TL_P5;
        h = tl_rotl(h, 11) * TL_P1;
    }
    h ^= h >> 33;
    h *= TL_P2;
    h ^= h >> 29;
    h *= TL_P3;
    h ^= h >> 32;
    return h;
}

uint64_t tl_xxh64(const void *data, size_t len, uint64_t seed) {
    tl_xxh64_state s;
    tl_xxh64_init(&s, seed);
    tl_xxh64_update(&s, data, len);
    return tl_xxh64_digest(&s);
}

/* ---- headers ---- */
void tl_header_seal(tl_file_header *h, int kind) {
    memcpy(h->magic, tl_magic[kind], 8);
    h->file_kind = (uint32_t)kind;
    h->header_hash = tl_xxh64(h, offsetof(tl_file_header, header_hash), 0);
}

/* Refuse the header: the offset of the bad field into *bad, the message into err. */
#define TL_HDR_BAD(off, ...)                                          \
    do {                                                              \
        if (bad) *bad = (off);                                        \
        return tl_err(err, errlen, TIERLAB_EFORMAT, __VA_ARGS__);     \
    } while (0)

int tl_header_check(const tl_file_header *h, int kind, uint64_t size, const char *path,
                    uint64_t *bad, char *err, size_t errlen) {
    if (size < TL_HDR_BYTES)
        TL_HDR_BAD(size, "%s: %llu bytes, too short for a tierlab index file", path,
                   (unsigned long long)size);
    if (memcmp(h->magic, tl_magic[kind], 8) != 0)
        TL_HDR_BAD(0, "%s: not a tierlab %s file (bad magic)", path,
                   tierlab_index_file_name(kind));
    if (h->header_hash != tl_xxh64(h, offsetof(tl_file_header, header_hash), 0))
        TL_HDR_BAD(offsetof(tl_file_header, header_hash),
                   "%s: header checksum mismatch (corrupt header, bytes 0..127)", path);
    if (h->format_version != TIERLAB_INDEX_FORMAT_VERSION)
        TL_HDR_BAD(offsetof(tl_file_header, format_version),
                   "%s: index format version %u; rebuild with tierlab index build (this "
                   "tierlab reads version %d)",
                   path, h->format_version, TIERLAB_INDEX_FORMAT_VERSION);
    if (h->file_kind != (uint32_t)kind)
        TL_HDR_BAD(offsetof(tl_file_header, file_kind), "%s: wrong file kind %u", path,
                   h->file_kind);
    if (h->block_size != 128 && h->block_size != 256)
        TL_HDR_BAD(offsetof(tl_file_header, block_size), "%s: unsupported block size %u", path,
                   h->block_size);
    if (memchr(h->codec, 0, sizeof h->codec) == NULL || !tierlab_codec_find(h->codec))
        TL_HDR_BAD(offsetof(tl_file_header, codec), "%s: codec '%.31s' unknown to this tierlab",
                   path, h->codec);
    if (h->file_bytes != size)
        TL_HDR_BAD(size < h->file_bytes ? size : h->file_bytes,
                   "%s: %llu bytes but the header says %llu (truncated or appended)", path,
                   (unsigned long long)size, (unsigned long long)h->file_bytes);
    for (size_t i = 0; i < sizeof h->reserved; i++)
        if (h->reserved[i])
            TL_HDR_BAD(offsetof(tl_file_header, reserved) + i, "%s: reserved header byte %zu is "
                       "not zero", path, offsetof(tl_file_header, reserved) + i);
    return 0;
}
