/* index.h — the open index as the query code sees it (internal), and the
 * checks every reader of its regions shares (check.c; the layout and which
 * checksum covers what are in kernels/formats/index.md, "Checksums"). */
#ifndef TL_INDEX_INDEX_H
#define TL_INDEX_INDEX_H


#include "format.h"
#include "tiers/tiers.h"

struct tierlab_index {
    tl_region r[TIERLAB_FILES];
    tierlab_index_info info;
    const tierlab_codec *dc, *fc; /* DID and freq codecs */
    const tl_dict_entry *dict;
    uint64_t terms;
    const uint8_t *pool;
    uint64_t pool_len;
    const uint8_t *skip, *dids, *freqs;
    uint64_t skip_len, dids_len, freqs_len;
    int checks; /* TIERLAB_CHECKS_*: of new query contexts and of the other readers */
    char dir[4096];
};

/* Why an open failed, for tierlab_index_check: the file (TIERLAB_FILE_*, -1
 * manifest.json, -1 and damage 0 when not known), the offset of the bad
 * field, and whether it is damage (1) or not an index / another version (0);
 * missing: the file is not there (damage: the manifest lists it). */
typedef struct tl_open_fail {
    int file;
    uint64_t offset;
    int damage;
    int missing;
} tl_open_fail;
/* tierlab_index_open_flags, telling why it refused (fail may be NULL). */
int tl_index_open(const char *dir, const char *placement, unsigned flags, tierlab_index **out,
                  tl_open_fail *fail, char *err, size_t errlen);

/* Binary search of the dictionary. Returns 1 and *hit, 0 when the term is
 * not there, or TIERLAB_ECORRUPT with a message in err (a probed entry fails
 * its checksum, or a compared term its checksum or the pool's bounds).
 * `checks` (TIERLAB_CHECKS_*): OFF skips the checksums, not the bounds.
 * Adds the bytes it touched to *bytes. */
int tl_dict_find(const struct tierlab_index *ix, const char *term, size_t len, int checks,
                 const tl_dict_entry **hit, uint64_t *bytes, char *err, size_t errlen);

/* Dictionary entry d (of ix) passes its checksum and its term bytes theirs
 * and lie in the pool: 0, or TIERLAB_ECORRUPT with a message. */
int tl_dict_entry_check(const struct tierlab_index *ix, const tl_dict_entry *d, char *err,
                        size_t errlen);

/* The skip record of dictionary entry d: in skip.bin's bounds, its head
 * agreeing with the dictionary, and with checks: its checksum and a last DID
 * below the document count. 0 and *head, or TIERLAB_ECORRUPT with a message. */
int tl_skip_open(const struct tierlab_index *ix, const tl_dict_entry *d, int checks,
                 const tl_skip_head **head, char *err, size_t errlen);

/* The checks tl_skip_open makes with checks on, of a record it opened (h):
 * its checksum and its last DID. 0, or TIERLAB_ECORRUPT with a message. */
int tl_skip_record_check(const struct tierlab_index *ix, const tl_dict_entry *d,
                         const tl_skip_head *h, char *err, size_t errlen);

/* What a decoded block failed (the reasons of tl_block_fail). */
enum {
    TL_BAD_OFFSET = 1, /* its offsets lie outside the file or run backwards */
    TL_BAD_READ,       /* its source could not serve the bytes (APCache)        */
    TL_BAD_CRC,        /* checksum mismatch                                    */
    TL_BAD_DECODE,     /* the codec refused the bytes or used another length   */
    TL_BAD_FIRST,      /* first DID is not the skip entry's                    */
    TL_BAD_LAST,       /* last DID is not the next entry's prev                */
    TL_BAD_ORDER,      /* DIDs not strictly increasing                         */
    TL_BAD_FREQ,       /* a frequency of 0                                     */
};

/* Offset in its file of block b of kind 0 (DIDs) or 1 (freqs). */
static inline uint64_t tl_block_off(const tl_skip_entry *e, uint32_t b, int kind) {
    return kind ? e[b].freq_offset : e[b].did_offset;
}

/* The skip entries hold running CRCs: entry b's did_crc is the CRC-32C of the
 * term's DID bytes of blocks 0 .. b (likewise freq_crc). So blocks b0 .. b1,
 * back to back in their file, are sound when the CRC continued from the
 * running CRC before b0 over their bytes gives the running CRC of b1
 * (kernels/formats/index.md, "Checksums"). */
static inline uint32_t tl_run_crc(const tl_skip_entry *e, uint32_t b, int kind) {
    return kind ? e[b].freq_crc : e[b].did_crc;
}
static inline uint32_t tl_run_before(const tl_skip_entry *e, uint32_t b0, int kind) {
    return b0 ? tl_run_crc(e, b0 - 1, kind) : 0;
}

/* Decode block b (of nb) of a term into out and check its invariants at
 * level `checks` (its checksum is the caller's: tl_run_crc): kind 0 DIDs, 1
 * freqs; e: the term's skip entries; p: the block's len bytes (offsets
 * [e[b].offset, e[b + 1].offset) of the file, bounds already checked); n: its
 * postings. Returns 0 or a TL_BAD_* reason, and in *at the position of the
 * bad posting (ORDER, FREQ). Inline: the query cursors call it once per block. */
static inline int tl_block_decode(const struct tierlab_index *ix, const tl_skip_entry *e,
                                  uint32_t b, int kind, const uint8_t *p, uint64_t len,
                                  uint32_t n, uint32_t *out, int checks, uint32_t *at) {
    int64_t got = kind == 0 ? ix->dc->decode(p, (size_t)len, n, e[b].prev_did, out)
                            : ix->fc->decode(p, (size_t)len, n, 0, out);
    if (got != (int64_t)len) return TL_BAD_DECODE;
    if (kind == 0) {
        if (out[0] != e[b].first_did) return TL_BAD_FIRST;
        if (checks && out[n - 1] != e[b + 1].prev_did) return TL_BAD_LAST;
    }
    if (checks >= TIERLAB_CHECKS_FULL) {
        if (kind == 0) {
            if (b > 0 && out[0] <= e[b].prev_did) {
                *at = 0;
                return TL_BAD_ORDER;
            }
            for (uint32_t i = 1; i < n; i++)
                if (out[i] <= out[i - 1]) {
                    *at = i;
                    return TL_BAD_ORDER;
                }
        } else {
            for (uint32_t i = 0; i < n; i++)
                if (out[i] == 0) {
                    *at = i;
                    return TL_BAD_FREQ;
                }
        }
    }
    return 0;
}

/* The message of a failed block: "corrupt index: dids.bin: term 'x' (#i),
 * block b of nb at offset a (len bytes): <reason>"; returns TIERLAB_ECORRUPT.
 * p (may be NULL): the block's bytes; with checks on, a block whose bytes fail
 * their checksum is reported as that, whatever else failed. `at`: the bad
 * posting (ORDER, FREQ) or the CRC continued over the block (CRC). */
int tl_block_fail(const struct tierlab_index *ix, const tl_dict_entry *d, int kind, uint32_t b,
                  uint32_t nb, const tl_skip_entry *e, const uint8_t *p, const uint32_t *out,
                  int why, uint32_t at, int checks, char *err, size_t errlen)
    __attribute__((cold));

/* Check blocks b0 .. b1 of kind `kind` of the term of d, whose bytes lie
 * in place in the index (ix->dids / ix->freqs), in one pass against the
 * running CRCs; on a mismatch find the bad block and fail as tl_block_fail.
 * 0 or TIERLAB_ECORRUPT. */
int tl_span_check(const struct tierlab_index *ix, const tl_dict_entry *d, const tl_skip_entry *e,
                  uint32_t nb, uint32_t b0, uint32_t b1, int kind, char *err, size_t errlen);

/* "'term' (#i)" for messages: at most 40 bytes of the term, bytes outside
 * printable ASCII as '?'. */
void tl_term_label(const struct tierlab_index *ix, const tl_dict_entry *d, char *out,
                   size_t len);

#endif
