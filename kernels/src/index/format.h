/* format.h — the on-disk layout of an index (internal; kernels/formats/index.md
 * is the prose version and must change with this file). All integers are
 * little-endian; every file is read through a pointer to its first byte, which
 * is page-aligned (mmap) or malloc/mmap-aligned (tiers), so the 8-byte fields
 * below are naturally aligned. */
#ifndef TL_INDEX_FORMAT_H
#define TL_INDEX_FORMAT_H

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
    uint8_t reserved[16];    /* zero */
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
} tl_dict_entry;
_Static_assert(sizeof(tl_dict_entry) == 32, "dict entry is 32 bytes");

/* skip.bin: one record per term, in dictionary order, each
 *   tl_skip_head, then nblocks + 1 tl_skip_entry (the last one is the end
 *   sentinel: first_did = UINT32_MAX, prev_did = the term's last DID,
 *   did_offset/freq_offset = end of its last block). */
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
} tl_skip_entry;
_Static_assert(sizeof(tl_skip_entry) == 24, "skip entry is 24 bytes");

#define TL_SKIP_END_DID UINT32_MAX /* DIDs are <= UINT32_MAX - 1 */
#define TL_MAX_DOCS ((uint64_t)UINT32_MAX)

extern const char tl_magic[TIERLAB_FILES][8];

/* Fill the magic, kind and header_hash of h (other fields set by the caller). */
void tl_header_seal(tl_file_header *h, int kind);
/* Check a header read from a file of `size` bytes; 0 or TIERLAB_EFORMAT with
 * a message naming `path`. */
int tl_header_check(const tl_file_header *h, int kind, uint64_t size, const char *path,
                    char *err, size_t errlen);

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
