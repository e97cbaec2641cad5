/* format.h — the on-disk layout of an index (internal; kernels/formats/index.md
 * is the prose version and must change with this file). All integers are
 * little-endian; every file is read through a pointer to its first byte, which
 * is page-aligned (mmap) or malloc/mmap-aligned (tiers), so the 8-byte fields
 * below are naturally aligned. */
#ifndef TL_INDEX_FORMAT_H
#define TL_INDEX_FORMAT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "tierlab.h"

#define TL_HDR_BYTES 128

/* The common 128-byte header of the four .bin files. */
typedef struct tl_file_header {
    char magic[8];           /* "TLDICT\0\0", "TLSKIP\0\0", "TLDIDS\0\0", "TLFREQ\0\0" */
    uint32_t format_version; /* TIERLAB_INDEX_FORMAT_VERSION */
    uint32_t block_size;     /* 128 or 256 */
    char codec[32];          /* configuration name, NUL-padded (freq codec derives from it) */
    uint64_t build_id;       /* same in all four files and manifest.json */
    uint64_t file_bytes;     /* size of this file, header included */
    uint64_t docs, terms, postings, blocks;
    uint32_t doc_bytes;
    uint32_t file_kind;      /* TIERLAB_FILE_* */
    uint32_t body_crc;       /* CRC-32C of the body: bytes 128 .. file_bytes */
    uint8_t reserved[12];    /* zero */
    uint64_t header_hash;    /* xxh64 (seed 0) of the 120 bytes above */
} tl_file_header;
_Static_assert(sizeof(tl_file_header) == TL_HDR_BYTES, "header is 128 bytes");

/* dict.bin after the header: `terms` entries sorted by term bytes (memcmp,
 * shorter first on a common prefix), then the term pool. */
typedef struct tl_dict_entry {
    uint64_t prefix;      /* first 8 term bytes, big-endian, zero-padded: compares like memcmp */
    uint64_t skip_offset; /* of the term's record in skip.bin */
    uint64_t term_offset; /* of the term bytes, relative to the pool start */
    uint32_t term_len;
    uint32_t postings;
    uint32_t term_crc;    /* CRC-32C of the term bytes in the pool */
    uint32_t entry_crc;   /* CRC-32C of the 36 bytes above */
} tl_dict_entry;
_Static_assert(sizeof(tl_dict_entry) == 40, "dict entry is 40 bytes");
#define TL_DICT_CRC_BYTES 36 /* offsetof(tl_dict_entry, entry_crc) */

/* skip.bin: one record per term, in dictionary order, each
 *   tl_skip_head, then nblocks + 1 tl_skip_entry (the last one is the end
 *   sentinel: first_did = UINT32_MAX, prev_did = the term's last DID,
 *   did_offset/freq_offset = end of its last block, did_crc = 0 and, in
 *   freq_crc, the record's CRC: CRC-32C of all its bytes before it). */
typedef struct tl_skip_head {
    uint32_t postings;
    uint32_t nblocks; /* ceil(postings / block_size) */
} tl_skip_head;
typedef struct tl_skip_entry {
    uint32_t first_did; /* first DID of the block; its range is [first_did, next first_did) */
    uint32_t prev_did;  /* last DID of the previous block of the term (0 for the first):
                           the `prev` a delta codec decodes this block with */
    uint64_t did_offset;  /* of the encoded DID block in dids.bin */
    uint64_t freq_offset; /* of the encoded freq block in freqs.bin */
    uint32_t did_crc;     /* CRC-32C of the term's encoded DID blocks 0 .. this one */
    uint32_t freq_crc;    /* likewise of its freq blocks (sentinel: CRC of the record) */
} tl_skip_entry;
_Static_assert(sizeof(tl_skip_entry) == 32, "skip entry is 32 bytes");

/* Bytes of the skip record of a term with nb blocks, and how many of them its
 * CRC covers (all but the CRC itself, the record's last 4 bytes). */
static inline uint64_t tl_skip_record_bytes(uint64_t nb) {
    return sizeof(tl_skip_head) + (nb + 1) * sizeof(tl_skip_entry);
}

#define TL_SKIP_END_DID UINT32_MAX /* DIDs are <= UINT32_MAX - 1 */
#define TL_MAX_DOCS ((uint64_t)UINT32_MAX)

extern const char tl_magic[TIERLAB_FILES][8];

/* Fill the magic, kind and header_hash of h (other fields set by the caller). */
void tl_header_seal(tl_file_header *h, int kind);
/* Check a header read from a file of `size` bytes; 0 or TIERLAB_EFORMAT with
 * a message naming `path`, and in *bad (may be NULL) the offset of the first
 * header byte found wrong. */
int tl_header_check(const tl_file_header *h, int kind, uint64_t size, const char *path,
                    uint64_t *bad, char *err, size_t errlen);

/* CRC-32C (crc32c.c): crc of data appended to a message whose CRC is `crc`
 * (0 to start), as zlib's crc32() chains. SSE4.2 when present, else tables;
 * both give the same value. */
typedef uint32_t (*tl_crc_fn)(uint32_t reg, const uint8_t *p, size_t n);
extern _Atomic(tl_crc_fn) tl_crc_impl __attribute__((visibility("hidden")));
static inline uint32_t tl_crc32c(uint32_t crc, const void *data, size_t len) {
    tl_crc_fn f = atomic_load_explicit(&tl_crc_impl, memory_order_acquire);
    return ~f(~crc, (const uint8_t *)data, len);
}
/* Choose the path again (after tierlab_force_scalar). */
void tl_crc32c_choose(void);
/* Given stored ^ computed CRC of a `len`-byte message, the bit (byte * 8 +
 * bit, bit 0 = least significant) whose flip explains it, or -1 when no
 * single flipped message bit does. O(len). */
int64_t tl_crc32c_locate_bit(uint32_t syndrome, uint64_t len);

/* XXH64 (Yann Collet's xxHash, 64-bit variant), one-shot and streaming. */
uint64_t tl_xxh64(const void *data, size_t len, uint64_t seed);
typedef struct tl_xxh64_state {
    uint64_t v[4];
    uint64_t total;
    uint8_t buf[32];
    uint32_t buffered;
    uint64_t seed;
} tl_xxh64_state;
void tl_xxh64_init(tl_xxh64_state *s, uint64_t seed);
void tl_xxh64_update(tl_xxh64_state *s, const void *data, size_t len);
uint64_t tl_xxh64_digest(const tl_xxh64_state *s);

/* printf-style error message into err (NULL-safe); returns code. */
int tl_err(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
