/* check.c — the integrity checks of an index's regions (kernels/formats/
 * index.md, "Checksums"): the ones every reader makes on what it reads
 * (dictionary entries, skip records, blocks; index.h), their error messages,
 * and tierlab_index_check, which reads everything and reports the first bad
 * byte. Damage found here is TIERLAB_ECORRUPT; refusals at open are open.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "index.h"

void tl_term_label(const struct tierlab_index *ix, const tl_dict_entry *d, char *out,
                   size_t len) {
    uint64_t i = (uint64_t)(d - ix->dict);
    if (d->term_offset > ix->pool_len || d->term_len > ix->pool_len - d->term_offset) {
        snprintf(out, len, "#%llu", (unsigned long long)i);
        return;
    }
    char t[48];
    uint32_t n = d->term_len < 40 ? d->term_len : 40;
    for (uint32_t k = 0; k < n; k++) {
        uint8_t c = ix->pool[d->term_offset + k];
        t[k] = c >= 0x20 && c < 0x7F && c != '\'' ? (char)c : '?';
    }
    t[n] = 0;
    snprintf(out, len, "'%s%s' (#%llu)", t, d->term_len > n ? "..." : "", (unsigned long long)i);
}

static uint64_t tl_entry_offset(const struct tierlab_index *ix, const tl_dict_entry *d) {
    return TL_HDR_BYTES + (uint64_t)(d - ix->dict) * sizeof *d;
}

int tl_dict_entry_check(const struct tierlab_index *ix, const tl_dict_entry *d, char *err,
                        size_t errlen) {
    uint64_t i = (uint64_t)(d - ix->dict);
    uint32_t crc = tl_crc32c(0, d, TL_DICT_CRC_BYTES);
    if (crc != d->entry_crc)
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: dict.bin: entry #%llu at offset %llu: checksum mismatch "
                      "(stored %08x, computed %08x)",
                      (unsigned long long)i, (unsigned long long)tl_entry_offset(ix, d),
                      d->entry_crc, crc);
    uint64_t pool_at = TL_HDR_BYTES + ix->terms * sizeof *d;
    if (d->term_offset > ix->pool_len || d->term_len > ix->pool_len - d->term_offset)
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: dict.bin: entry #%llu at offset %llu: term bytes outside "
                      "the pool",
                      (unsigned long long)i, (unsigned long long)tl_entry_offset(ix, d));
    crc = tl_crc32c(0, ix->pool + d->term_offset, d->term_len);
    if (crc != d->term_crc)
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: dict.bin: term #%llu at offset %llu (%u bytes): checksum "
                      "mismatch (stored %08x, computed %08x)",
                      (unsigned long long)i, (unsigned long long)(pool_at + d->term_offset),
                      d->term_len, d->term_crc, crc);
    return 0;
}

int tl_skip_open(const struct tierlab_index *ix, const tl_dict_entry *d, int checks,
                 const tl_skip_head **head, char *err, size_t errlen) {
    uint32_t B = ix->info.block_size;
    uint64_t off = d->skip_offset;
    char t[96];
    if (off < TL_HDR_BYTES || off % 8 || off > ix->skip_len - sizeof(tl_skip_head)) {
        tl_term_label(ix, d, t, sizeof t);
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: skip.bin: term %s: skip offset %llu out of range", t,
                      (unsigned long long)off);
    }
    const tl_skip_head *h = (const tl_skip_head *)(ix->skip + off);
    uint64_t nb = h->nblocks;
    if (h->postings != d->postings || d->postings == 0 ||
        nb != ((uint64_t)d->postings + B - 1) / B ||
        tl_skip_record_bytes(nb) > ix->skip_len - off) {
        tl_term_label(ix, d, t, sizeof t);
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: skip.bin: term %s: record at offset %llu (%u postings, %u "
                      "blocks) disagrees with the dictionary (%u postings)",
                      t, (unsigned long long)off, h->postings, h->nblocks, d->postings);
    }
    if (checks) {
        int rc = tl_skip_record_check(ix, d, h, err, errlen);
        if (rc) return rc;
    }
    *head = h;
    return 0;
}

int tl_skip_record_check(const struct tierlab_index *ix, const tl_dict_entry *d,
                         const tl_skip_head *h, char *err, size_t errlen) {
    char t[96];
    uint64_t nb = h->nblocks;
    const tl_skip_entry *e = (const tl_skip_entry *)(h + 1);
    uint64_t rec = tl_skip_record_bytes(nb);
    uint32_t crc = tl_crc32c(0, h, (size_t)(rec - 4));
    if (crc != e[nb].freq_crc) {
        tl_term_label(ix, d, t, sizeof t);
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: skip.bin: term %s: record at offset %llu (%llu bytes): "
                      "checksum mismatch (stored %08x, computed %08x)",
                      t, (unsigned long long)d->skip_offset, (unsigned long long)rec,
                      e[nb].freq_crc, crc);
    }
    if (e[nb].prev_did >= ix->info.docs) {
        tl_term_label(ix, d, t, sizeof t);
        return tl_err(err, errlen, TIERLAB_ECORRUPT,
                      "corrupt index: skip.bin: term %s: last DID %u is not below the %llu "
                      "documents",
                      t, e[nb].prev_did, (unsigned long long)ix->info.docs);
    }
    return 0;
}

int tl_block_fail(const struct tierlab_index *ix, const tl_dict_entry *d, int kind, uint32_t b,
                  uint32_t nb, const tl_skip_entry *e, const uint8_t *p, const uint32_t *out,
                  int why, uint32_t at, int checks, char *err, size_t errlen) {
    char t[96], reason[200];
    tl_term_label(ix, d, t, sizeof t);
    uint64_t a = tl_block_off(e, b, kind), z = tl_block_off(e, b + 1, kind);
    uint32_t B = ix->info.block_size, n = b + 1 < nb ? B : d->postings - b * B;
    uint32_t want = tl_run_crc(e, b, kind);
    if (checks && p && why != TL_BAD_CRC && why != TL_BAD_OFFSET && why != TL_BAD_READ) {
        /* damage is the likelier cause */
        uint32_t crc = tl_crc32c(tl_run_before(e, b, kind), p, (size_t)(z - a));
        if (crc != want) {
            why = TL_BAD_CRC;
            at = crc;
        }
    }
    switch (why) {
    case TL_BAD_OFFSET:
        snprintf(reason, sizeof reason, "block offsets [%llu, %llu) outside the file",
                 (unsigned long long)a, (unsigned long long)z);
        break;
    case TL_BAD_READ:
        snprintf(reason, sizeof reason, "its bytes could not be read");
        break;
    case TL_BAD_CRC:
        snprintf(reason, sizeof reason, "checksum mismatch (stored %08x, computed %08x)", want,
                 at);
        break;
    case TL_BAD_DECODE:
        snprintf(reason, sizeof reason, "does not decode as %u postings of %s", n,
                 kind ? ix->fc->name : ix->dc->name);
        break;
    case TL_BAD_FIRST:
        snprintf(reason, sizeof reason, "first DID %u, the skip list says %u", out[0],
                 e[b].first_did);
        break;
    case TL_BAD_LAST:
        snprintf(reason, sizeof reason, "last DID %u, the skip list says %u", out[n - 1],
                 e[b + 1].prev_did);
        break;
    case TL_BAD_ORDER:
        snprintf(reason, sizeof reason, "DID %u at position %u after %u (DIDs must increase)",
                 out[at], at, at ? out[at - 1] : e[b].prev_did);
        break;
    case TL_BAD_FREQ:
        snprintf(reason, sizeof reason, "frequency 0 at position %u", at);
        break;
    default:
        snprintf(reason, sizeof reason, "invalid");
    }
    return tl_err(err, errlen, TIERLAB_ECORRUPT,
                  "corrupt index: %s: term %s, block %u of %u at offset %llu (%llu bytes): %s",
                  kind ? "freqs.bin" : "dids.bin", t, b, nb, (unsigned long long)a,
                  (unsigned long long)(z >= a ? z - a : 0), reason);
}

int tl_span_check(const struct tierlab_index *ix, const tl_dict_entry *d, const tl_skip_entry *e,
                  uint32_t nb, uint32_t b0, uint32_t b1, int kind, char *err, size_t errlen) {
    const uint8_t *base = kind ? ix->freqs : ix->dids;
    uint64_t a = tl_block_off(e, b0, kind), z = tl_block_off(e, b1 + 1, kind);
    if (tl_crc32c(tl_run_before(e, b0, kind), base + a, (size_t)(z - a)) == tl_run_crc(e, b1, kind))
        return 0;
    for (uint32_t b = b0; b <= b1; b++) { /* which block */
        uint64_t ba = tl_block_off(e, b, kind), bz = tl_block_off(e, b + 1, kind);
        uint32_t crc = tl_crc32c(tl_run_before(e, b, kind), base + ba, (size_t)(bz - ba));
        if (crc != tl_run_crc(e, b, kind))
            return tl_block_fail(ix, d, kind, b, nb, e, NULL, NULL, TL_BAD_CRC, crc, 0, err,
                                 errlen);
    }
    /* not reached: blocks that pass one by one pass together */
    char t[96];
    tl_term_label(ix, d, t, sizeof t);
    return tl_err(err, errlen, TIERLAB_ECORRUPT,
                  "corrupt index: %s: term %s, blocks %u..%u: checksum mismatch",
                  kind ? "freqs.bin" : "dids.bin", t, b0, b1);
}

/* ---- tierlab_index_check ---------------------------------------------------- */

/* The report's `what` drops the prefix of the readers' messages. */
#define TL_PREFIX_LEN (sizeof "corrupt index: " - 1)

typedef struct tl_checker {
    const struct tierlab_index *ix;
    tierlab_check_report *r;
    tierlab_progress_fn progress;
    void *ctx;
    uint64_t total, done, next_report;
    uint32_t *dids, *freqs;
} tl_checker;

/* Record the first problem; returns 1 (stop). */
static int tl_bad(tl_checker *k, int file, uint64_t offset, uint64_t length, int64_t term,
                  int64_t block, const char *what) {
    tierlab_check_report *r = k->r;
    r->ok = 0;
    r->file = file;
    r->offset = offset;
    r->length = length;
    r->exact = 0;
    r->bit = -1;
    r->term = term;
    r->block = block;
    snprintf(r->what, sizeof r->what, "%s", what);
    return 1;
}

/* A region [a, a + len) of `file` whose CRC (stored at crc_at; UINT64_MAX: a
 * CRC derived from others) failed: try to locate a single flipped bit, in
 * the region or in the stored CRC. */
static void tl_locate(tl_checker *k, uint64_t a, uint64_t len, uint64_t crc_at, uint32_t stored,
                      uint32_t computed) {
    tierlab_check_report *r = k->r;
    uint32_t syn = stored ^ computed;
    int64_t bit = tl_crc32c_locate_bit(syn, len);
    uint64_t byte;
    if (bit >= 0) {
        byte = a + (uint64_t)bit / 8;
        r->bit = (int)(bit % 8);
    } else if (crc_at != UINT64_MAX && syn && !(syn & (syn - 1))) { /* of the stored CRC */
        int s = __builtin_ctz(syn);
        byte = crc_at + (uint64_t)s / 8;
        r->bit = s % 8;
    } else {
        return;
    }
    r->exact = 1;
    r->offset = byte;
    r->length = 1;
    size_t n = strlen(r->what);
    snprintf(r->what + n, sizeof r->what - n, "; bit %d of byte %llu is flipped", r->bit,
             (unsigned long long)byte);
}

static int tl_tick(tl_checker *k, uint64_t bytes) {
    k->done += bytes;
    k->r->bytes = k->done;
    if (k->progress && k->done >= k->next_report) {
        k->next_report = k->done + (4u << 20);
        if (k->progress(k->ctx, k->done, k->total)) return TIERLAB_ECANCELED;
    }
    return 0;
}

/* One term: its dictionary entry (already CRC-checked), skip record and
 * blocks. *pos: where the term's regions must start in each file. Returns
 * 0, 1 (a problem recorded) or an error. */
static int tl_check_term(tl_checker *k, uint64_t i, uint64_t pos[TIERLAB_FILES]) {
    const struct tierlab_index *ix = k->ix;
    const tl_dict_entry *d = &ix->dict[i];
    char msg[TIERLAB_ERRMSG], t[96];
    tl_term_label(ix, d, t, sizeof t);
    uint32_t B = ix->info.block_size;
    uint64_t off = d->skip_offset;
    if (off != pos[TIERLAB_FILE_SKIP]) {
        snprintf(msg, sizeof msg, "dict.bin: term %s: skip offset %llu, its record is at %llu "
                 "(records follow each other)", t, (unsigned long long)off,
                 (unsigned long long)pos[TIERLAB_FILE_SKIP]);
        return tl_bad(k, TIERLAB_FILE_DICT, tl_entry_offset(ix, d) + 8, 8, (int64_t)i, -1, msg);
    }
    /* the record's checksum first, over the length the (sound) dictionary
     * entry implies, so that damage to its head is located too */
    uint32_t nb = (uint32_t)(((uint64_t)d->postings + B - 1) / B);
    uint64_t rec = tl_skip_record_bytes(nb);
    if (rec > ix->skip_len - off) {
        snprintf(msg, sizeof msg, "skip.bin: term %s: its %llu-byte record at offset %llu runs "
                 "past the end of the file", t, (unsigned long long)rec, (unsigned long long)off);
        return tl_bad(k, TIERLAB_FILE_SKIP, off, ix->skip_len - off, (int64_t)i, -1, msg);
    }
    uint32_t stored;
    memcpy(&stored, ix->skip + off + rec - 4, 4);
    uint32_t crc = tl_crc32c(0, ix->skip + off, (size_t)(rec - 4));
    if (crc != stored) {
        snprintf(msg, sizeof msg, "skip.bin: term %s: record at offset %llu (%llu bytes): "
                 "checksum mismatch (stored %08x, computed %08x)", t, (unsigned long long)off,
                 (unsigned long long)rec, stored, crc);
        tl_bad(k, TIERLAB_FILE_SKIP, off, rec, (int64_t)i, -1, msg);
        tl_locate(k, off, rec - 4, off + rec - 4, stored, crc);
        return 1;
    }
    const tl_skip_head *h;
    if (tl_skip_open(ix, d, TIERLAB_CHECKS_OFF, &h, msg, sizeof msg))
        return tl_bad(k, TIERLAB_FILE_SKIP, off, sizeof *h, (int64_t)i, -1, msg + TL_PREFIX_LEN);
    const tl_skip_entry *e = (const tl_skip_entry *)(h + 1);
    uint64_t sent = off + sizeof *h + (uint64_t)nb * sizeof *e;
    if (e[nb].first_did != TL_SKIP_END_DID || e[nb].did_crc != 0) {
        snprintf(msg, sizeof msg, "skip.bin: term %s: end sentinel at offset %llu is not "
                 "{first DID %u, DID checksum 0}", t, (unsigned long long)sent, TL_SKIP_END_DID);
        return tl_bad(k, TIERLAB_FILE_SKIP, sent, sizeof *e, (int64_t)i, nb, msg);
    }
    uint64_t docs = ix->info.docs;
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t n = b + 1 < nb ? B : d->postings - b * B, at = 0;
        uint64_t ent = off + sizeof *h + (uint64_t)b * sizeof *e;
        uint32_t want_prev = b ? k->dids[(b - 1) % 2 * TIERLAB_MAX_BLOCK + B - 1] : 0;
        if (e[b].prev_did != want_prev) {
            snprintf(msg, sizeof msg, "skip.bin: term %s, block %u: prev DID %u, the previous "
                     "block ends with %u", t, b, e[b].prev_did, want_prev);
            return tl_bad(k, TIERLAB_FILE_SKIP, ent + 4, 4, (int64_t)i, b, msg);
        }
        for (int kind = 0; kind < 2; kind++) {
            int file = kind ? TIERLAB_FILE_FREQS : TIERLAB_FILE_DIDS;
            uint64_t a = kind ? e[b].freq_offset : e[b].did_offset;
            uint64_t z = kind ? e[b + 1].freq_offset : e[b + 1].did_offset;
            uint64_t flen = kind ? ix->freqs_len : ix->dids_len;
            if (a != pos[file] || z <= a || z > flen) {
                snprintf(msg, sizeof msg, "skip.bin: term %s, block %u: %s block at [%llu, %llu), "
                         "expected to start at %llu and end by %llu", t, b,
                         tierlab_index_file_name(file), (unsigned long long)a,
                         (unsigned long long)z, (unsigned long long)pos[file],
                         (unsigned long long)flen);
                return tl_bad(k, TIERLAB_FILE_SKIP, ent + (a != pos[file] ? 8 + 8 * kind : 40 + 8 * kind),
                              8, (int64_t)i, b, msg);
            }
            uint32_t *out = (kind ? k->freqs : k->dids) + (b % 2) * TIERLAB_MAX_BLOCK;
            const uint8_t *p = (kind ? ix->freqs : ix->dids) + a;
            uint32_t got = tl_crc32c(tl_run_before(e, b, kind), p, (size_t)(z - a));
            uint32_t want = tl_run_crc(e, b, kind);
            int why = got != want ? TL_BAD_CRC
                                  : tl_block_decode(ix, e, b, kind, p, z - a, n, out,
                                                    TIERLAB_CHECKS_FULL, &at);
            if (why) {
                tl_block_fail(ix, d, kind, b, nb, e, NULL, out, why, why == TL_BAD_CRC ? got : at,
                              0, msg, sizeof msg);
                tl_bad(k, file, a, z - a, (int64_t)i, b, msg + TL_PREFIX_LEN);
                /* the CRC of blocks 0..b: a flip in block b is within its last z - a bytes */
                if (why == TL_BAD_CRC) tl_locate(k, a, z - a, UINT64_MAX, want, got);
                return 1;
            }
            pos[file] = z;
            int rc = tl_tick(k, z - a);
            if (rc) return rc;
        }
        if (k->dids[(b % 2) * TIERLAB_MAX_BLOCK + n - 1] >= docs) {
            snprintf(msg, sizeof msg, "dids.bin: term %s, block %u: DID %u is not below the %llu "
                     "documents", t, b, k->dids[(b % 2) * TIERLAB_MAX_BLOCK + n - 1],
                     (unsigned long long)docs);
            return tl_bad(k, TIERLAB_FILE_DIDS, e[b].did_offset, e[b + 1].did_offset - e[b].did_offset,
                          (int64_t)i, b, msg);
        }
        k->r->postings += n;
        k->r->blocks++;
    }
    pos[TIERLAB_FILE_SKIP] = off + rec;
    return tl_tick(k, rec);
}

static int tl_check_all(tl_checker *k) {
    const struct tierlab_index *ix = k->ix;
    char msg[TIERLAB_ERRMSG];
    uint64_t pos[TIERLAB_FILES] = {0, TL_HDR_BYTES, TL_HDR_BYTES, TL_HDR_BYTES};
    uint64_t pool_at = TL_HDR_BYTES + ix->terms * sizeof(tl_dict_entry);
    uint64_t pool_pos = 0, docs = ix->info.docs;
    const tl_dict_entry *prev = NULL;
    for (uint64_t i = 0; i < ix->terms; i++) {
        const tl_dict_entry *d = &ix->dict[i];
        uint64_t at = tl_entry_offset(ix, d);
        k->r->terms = i;
        uint32_t crc = tl_crc32c(0, d, TL_DICT_CRC_BYTES);
        if (crc != d->entry_crc) {
            snprintf(msg, sizeof msg, "dict.bin: entry #%llu at offset %llu: checksum mismatch "
                     "(stored %08x, computed %08x)", (unsigned long long)i,
                     (unsigned long long)at, d->entry_crc, crc);
            tl_bad(k, TIERLAB_FILE_DICT, at, sizeof *d, (int64_t)i, -1, msg);
            tl_locate(k, at, TL_DICT_CRC_BYTES, at + TL_DICT_CRC_BYTES, d->entry_crc, crc);
            return 1;
        }
        if (d->term_offset != pool_pos || d->term_len == 0 || d->term_len > ix->pool_len ||
            pool_pos > ix->pool_len - d->term_len) {
            snprintf(msg, sizeof msg, "dict.bin: entry #%llu: term bytes at pool offset %llu (%u "
                     "bytes), expected at %llu within the %llu-byte pool", (unsigned long long)i,
                     (unsigned long long)d->term_offset, d->term_len,
                     (unsigned long long)pool_pos, (unsigned long long)ix->pool_len);
            return tl_bad(k, TIERLAB_FILE_DICT, at + 16, 12, (int64_t)i, -1, msg);
        }
        const uint8_t *term = ix->pool + pool_pos;
        crc = tl_crc32c(0, term, d->term_len);
        if (crc != d->term_crc) {
            snprintf(msg, sizeof msg, "dict.bin: term #%llu at offset %llu (%u bytes): checksum "
                     "mismatch (stored %08x, computed %08x)", (unsigned long long)i,
                     (unsigned long long)(pool_at + pool_pos), d->term_len, d->term_crc, crc);
            tl_bad(k, TIERLAB_FILE_DICT, pool_at + pool_pos, d->term_len, (int64_t)i, -1, msg);
            tl_locate(k, pool_at + pool_pos, d->term_len, at + 32, d->term_crc, crc);
            return 1;
        }
        uint64_t prefix = 0;
        for (uint32_t b = 0; b < 8; b++) prefix = (prefix << 8) | (b < d->term_len ? term[b] : 0u);
        char t[96];
        tl_term_label(ix, d, t, sizeof t);
        const char *wrong = NULL;
        if (memchr(term, 0, d->term_len)) wrong = "holds a zero byte";
        else if (prefix != d->prefix) wrong = "has a prefix that is not its first 8 bytes";
        else if (d->postings == 0 || d->postings > docs) wrong = "has 0 or more postings than documents";
        else if (prev) {
            uint32_t m = prev->term_len < d->term_len ? prev->term_len : d->term_len;
            int c = memcmp(ix->pool + prev->term_offset, term, m);
            if (c > 0 || (c == 0 && prev->term_len >= d->term_len))
                wrong = "is not after the previous term (byte order, no repeats)";
        }
        if (wrong) {
            snprintf(msg, sizeof msg, "dict.bin: term %s %s", t, wrong);
            return tl_bad(k, TIERLAB_FILE_DICT, at, sizeof *d, (int64_t)i, -1, msg);
        }
        int rc = tl_check_term(k, i, pos);
        if (rc) return rc;
        pool_pos += d->term_len;
        rc = tl_tick(k, sizeof *d + d->term_len);
        if (rc) return rc;
        prev = d;
    }
    k->r->terms = ix->terms;
    const char *names[TIERLAB_FILES] = {"dict.bin", "skip.bin", "dids.bin", "freqs.bin"};
    uint64_t ends[TIERLAB_FILES] = {pool_at + pool_pos, pos[1], pos[2], pos[3]};
    for (int f = 0; f < TIERLAB_FILES; f++)
        if (ends[f] != ix->info.file_bytes[f]) {
            snprintf(msg, sizeof msg, "%s: the last term's bytes end at %llu, the file at %llu",
                     names[f], (unsigned long long)ends[f],
                     (unsigned long long)ix->info.file_bytes[f]);
            return tl_bad(k, f, ends[f], ix->info.file_bytes[f] - ends[f], -1, -1, msg);
        }
    if (k->r->postings != ix->info.postings || k->r->blocks != ix->info.blocks) {
        snprintf(msg, sizeof msg, "the terms hold %llu postings in %llu blocks, the headers say "
                 "%llu in %llu", (unsigned long long)k->r->postings,
                 (unsigned long long)k->r->blocks, (unsigned long long)ix->info.postings,
                 (unsigned long long)ix->info.blocks);
        return tl_bad(k, TIERLAB_FILE_DICT, 0, TL_HDR_BYTES, -1, -1, msg);
    }
    for (int f = 0; f < TIERLAB_FILES; f++) {
        const tl_file_header *h = (const tl_file_header *)ix->r[f].data;
        uint32_t crc = tl_crc32c(0, ix->r[f].data + TL_HDR_BYTES, ix->r[f].len - TL_HDR_BYTES);
        if (crc != h->body_crc) {
            snprintf(msg, sizeof msg, "%s: body checksum mismatch (stored %08x, computed %08x)",
                     names[f], h->body_crc, crc);
            return tl_bad(k, f, TL_HDR_BYTES, ix->r[f].len - TL_HDR_BYTES, -1, -1, msg);
        }
    }
    return 0;
}

/* A header of file f failed its checksum: rebuild what it should hold from
 * the other files' sound headers, the file's size and its body, and report
 * the first byte that differs (usually the one flipped). */
static void tl_header_diagnose(const char *dir, int f, tierlab_check_report *r) {
    uint8_t raw[TIERLAB_FILES][TL_HDR_BYTES];
    uint64_t size[TIERLAB_FILES];
    int sound[TIERLAB_FILES] = {0};
    char path[4200];
    uint8_t *body = NULL;
    for (int g = 0; g < TIERLAB_FILES; g++) {
        snprintf(path, sizeof path, "%s/%s", dir, tierlab_index_file_name(g));
        FILE *fp = fopen(path, "rb");
        if (!fp) return;
        size[g] = fread(raw[g], 1, TL_HDR_BYTES, fp) == TL_HDR_BYTES ? 1 : 0;
        if (size[g] && g == f) {
            fseek(fp, 0, SEEK_END);
            long n = ftell(fp);
            size[g] = n > 0 ? (uint64_t)n : 0;
            if (size[g] > TL_HDR_BYTES && (body = malloc(size[g] - TL_HDR_BYTES)) != NULL) {
                fseek(fp, TL_HDR_BYTES, SEEK_SET);
                if (fread(body, 1, size[g] - TL_HDR_BYTES, fp) != size[g] - TL_HDR_BYTES) {
                    free(body);
                    body = NULL;
                }
            }
        }
        fclose(fp);
        const tl_file_header *h = (const tl_file_header *)raw[g];
        sound[g] = g != f && size[g] &&
                   h->header_hash == tl_xxh64(h, offsetof(tl_file_header, header_hash), 0);
    }
    int src = -1;
    for (int g = 0; g < TIERLAB_FILES && src < 0; g++)
        if (sound[g]) src = g;
    if (src < 0 || !body) {
        free(body);
        return;
    }
    tl_file_header want;
    memcpy(&want, raw[src], sizeof want);
    want.file_bytes = size[f];
    want.body_crc = tl_crc32c(0, body, size[f] - TL_HDR_BYTES);
    free(body);
    memset(want.reserved, 0, sizeof want.reserved);
    tl_header_seal(&want, f);
    const uint8_t *w = (const uint8_t *)&want, *have = raw[f];
    for (int i = 0; i < TL_HDR_BYTES; i++)
        if (w[i] != have[i]) {
            uint8_t x = (uint8_t)(w[i] ^ have[i]);
            r->offset = (uint64_t)i;
            r->length = 1;
            r->exact = 1;
            r->bit = (x & (x - 1)) ? -1 : __builtin_ctz(x);
            size_t n = strlen(r->what);
            if (r->bit >= 0)
                snprintf(r->what + n, sizeof r->what - n, "; bit %d of byte %d is flipped",
                         r->bit, i);
            else
                snprintf(r->what + n, sizeof r->what - n, "; byte %d is %02x, %02x expected", i,
                         have[i], w[i]);
            return;
        }
}

int tierlab_index_check(const char *dir, tierlab_check_report *r, tierlab_progress_fn progress,
                        void *ctx) {
    if (!r) return TIERLAB_EINVAL;
    memset(r, 0, sizeof *r);
    r->file = -1;
    r->bit = -1;
    r->term = r->block = -1;
    if (!dir) return tl_err(r->what, sizeof r->what, TIERLAB_EINVAL, "index directory required");
    tierlab_index *ix = NULL;
    tl_open_fail fail;
    int rc = tl_index_open(dir, "storage", 0, &ix, &fail, r->what, sizeof r->what);
    if (rc) {
        if (rc != TIERLAB_EFORMAT || !fail.damage) return rc;
        r->file = fail.file;
        r->offset = fail.offset;
        if (fail.missing) return 0; /* the whole file: no offset, no length */
        r->length = fail.file >= 0 && fail.offset < TL_HDR_BYTES ? TL_HDR_BYTES - fail.offset : 0;
        if (fail.file >= 0 && fail.offset < TL_HDR_BYTES) tl_header_diagnose(dir, fail.file, r);
        return 0;
    }
    tl_checker k = {ix, r, progress, ctx, 0, 0, 0, NULL, NULL};
    for (int f = 0; f < TIERLAB_FILES; f++) k.total += ix->info.file_bytes[f];
    k.dids = malloc(4 * TIERLAB_MAX_BLOCK * sizeof *k.dids);
    k.freqs = k.dids ? k.dids + 2 * TIERLAB_MAX_BLOCK : NULL;
    if (!k.dids) rc = tl_err(r->what, sizeof r->what, TIERLAB_ENOMEM, "out of memory");
    else rc = tl_check_all(&k);
    free(k.dids);
    tierlab_index_close(ix);
    if (rc == 1) return 0; /* damage, in the report */
    if (rc) {
        if (rc == TIERLAB_ECANCELED) snprintf(r->what, sizeof r->what, "cancelled");
        return rc;
    }
    r->ok = 1;
    r->bytes = k.total;
    snprintf(r->what, sizeof r->what, "ok");
    return 0;
}
