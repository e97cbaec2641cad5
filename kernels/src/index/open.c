/* open.c — opening an index: manifest and header checks (the manifest
 * against the headers too), placement of the four files on their tiers, the
 * body checksums when asked, and the checked dictionary lookup. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "index.h"
#include "memtrace/memtrace.h"
#include "manifest.h"

static int tl_read_header(const char *path, tl_file_header *h, uint64_t *size, char *err,
                          size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return tl_err(err, errlen, e == ENOENT ? TIERLAB_EFORMAT : TIERLAB_EIO,
                      "cannot open %s: %s", path, strerror(e));
    }
    memset(h, 0, sizeof *h);
    ssize_t got = pread(fd, h, sizeof *h, 0);
    close(fd);
    if (got < 0) return tl_err(err, errlen, TIERLAB_EIO, "cannot read %s: %s", path, strerror(errno));
    *size = (uint64_t)st.st_size;
    return 0;
}

/* "dict=dram,skip=dram,did=storage" or one bare tier -> a request per file. */
static int tl_parse_placement(const char *spec, char req[TIERLAB_FILES][256], char *err,
                              size_t errlen) {
    for (int f = 0; f < TIERLAB_FILES; f++) snprintf(req[f], 256, "storage");
    if (!spec || !*spec) return 0;
    char buf[2048];
    if (strlen(spec) >= sizeof buf) return tl_err(err, errlen, TIERLAB_EINVAL, "placement too long");
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        while (*item == ' ') item++;
        char *eq = strchr(item, '=');
        if (!eq) {
            for (int f = 0; f < TIERLAB_FILES; f++) snprintf(req[f], 256, "%s", item);
            continue;
        }
        *eq = 0;
        int hit = -1;
        for (int f = 0; f < TIERLAB_FILES; f++)
            if (strcmp(item, tierlab_index_file_key(f)) == 0) hit = f;
        if (hit < 0)
            return tl_err(err, errlen, TIERLAB_EINVAL,
                          "placement: unknown structure '%s' (dict, skip, did, freq)", item);
        if (strlen(eq + 1) >= 256) return tl_err(err, errlen, TIERLAB_EINVAL, "placement too long");
        snprintf(req[hit], 256, "%s", eq + 1);
    }
    return 0;
}

/* A header field of file f that differs from dict.bin's: its name, or NULL. */
static const char *tl_header_differs(const tl_file_header *a, const tl_file_header *d,
                                     char *va, char *vd, size_t vlen) {
#define TL_CMP(field, name)                                                         \
    if (a->field != d->field) {                                                     \
        snprintf(va, vlen, "%llu", (unsigned long long)a->field);                  \
        snprintf(vd, vlen, "%llu", (unsigned long long)d->field);                  \
        return name;                                                                \
    }
    TL_CMP(docs, "documents")
    TL_CMP(terms, "terms")
    TL_CMP(postings, "postings")
    TL_CMP(blocks, "blocks")
    TL_CMP(block_size, "block size")
    TL_CMP(doc_bytes, "doc_bytes")
#undef TL_CMP
    if (strcmp(a->codec, d->codec) != 0) {
        snprintf(va, vlen, "'%.31s'", a->codec);
        snprintf(vd, vlen, "'%.31s'", d->codec);
        return "codec";
    }
    return NULL;
}

/* The manifest against the headers (all equal to dict.bin's by now). */
static int tl_manifest_vs_headers(const tl_manifest *m, const tl_file_header *hs,
                                  tl_open_fail *fail, char *err, size_t errlen) {
    const tl_file_header *h = &hs[0];
    const tierlab_codec *c = tierlab_codec_find(h->codec);
    const char *freq = tierlab_codec_freq(c)->name;
    int field = -1;
    char mv[80] = "", hv[80] = "";
    if (strcmp(m->f[TL_MF_CODEC].str, h->codec) != 0) {
        field = TL_MF_CODEC;
        snprintf(mv, sizeof mv, "\"%.40s\"", m->f[TL_MF_CODEC].str);
        snprintf(hv, sizeof hv, "\"%.31s\"", h->codec);
    } else if (strcmp(m->f[TL_MF_FREQ_CODEC].str, freq) != 0) {
        field = TL_MF_FREQ_CODEC;
        snprintf(mv, sizeof mv, "\"%.40s\"", m->f[TL_MF_FREQ_CODEC].str);
        snprintf(hv, sizeof hv, "\"%s\" (the freq codec of %.31s)", freq, h->codec);
    } else {
        const struct {
            int field;
            uint64_t want;
        } nums[] = {
            {TL_MF_BLOCK_SIZE, h->block_size},
            {TL_MF_DOC_BYTES, h->doc_bytes},
            {TL_MF_DOCUMENTS, h->docs},
            {TL_MF_TERMS, h->terms},
            {TL_MF_POSTINGS, h->postings},
            {TL_MF_BLOCKS, h->blocks},
            {TL_MF_FILE_DICT, hs[TIERLAB_FILE_DICT].file_bytes},
            {TL_MF_FILE_SKIP, hs[TIERLAB_FILE_SKIP].file_bytes},
            {TL_MF_FILE_DIDS, hs[TIERLAB_FILE_DIDS].file_bytes},
            {TL_MF_FILE_FREQS, hs[TIERLAB_FILE_FREQS].file_bytes},
            {TL_MF_DID_BLOCK_BYTES, hs[TIERLAB_FILE_DIDS].file_bytes - TL_HDR_BYTES},
            {TL_MF_FREQ_BLOCK_BYTES, hs[TIERLAB_FILE_FREQS].file_bytes - TL_HDR_BYTES},
        };
        for (size_t i = 0; i < sizeof nums / sizeof *nums && field < 0; i++)
            if (m->f[nums[i].field].num != nums[i].want) {
                field = nums[i].field;
                snprintf(mv, sizeof mv, "%llu", (unsigned long long)m->f[field].num);
                snprintf(hv, sizeof hv, "%llu", (unsigned long long)nums[i].want);
            }
    }
    if (field < 0) return 0;
    if (fail) *fail = (tl_open_fail){-1, m->f[field].offset, 1};
    return tl_err(err, errlen, TIERLAB_EFORMAT,
                  "%s: %s%s is %s but the index files' headers say %s (manifest edited, or "
                  "of another index)",
                  m->path, field >= TL_MF_FILE_DICT ? "files." : "", tl_manifest_key(field), mv,
                  hv);
}

int tl_index_open(const char *dir, const char *placement, unsigned flags, tierlab_index **out,
                  tl_open_fail *fail, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (fail) *fail = (tl_open_fail){-1, 0, 0};
    if (!dir || !out) return tl_err(err, errlen, TIERLAB_EINVAL, "index directory required");
    *out = NULL;
    char req[TIERLAB_FILES][256];
    int rc = tl_parse_placement(placement, req, err, errlen);
    if (rc) return rc;
    tl_manifest *m = malloc(sizeof *m);
    if (!m) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    rc = tl_manifest_read(dir, m, err, errlen);
    if (rc) {
        /* a manifest that is JSON of this format and version but whose fields
         * are missing or malformed is damage; no manifest, a foreign one or
         * another version is not */
        if (fail && rc == TIERLAB_EFORMAT)
            *fail = (tl_open_fail){-1, m->bad_offset,
                                   m->f[TL_MF_VERSION].kind == TL_MF_NUM && !m->other_version};
        free(m);
        return rc;
    }
    uint64_t id = m->build_id;
    tierlab_index *ix = calloc(1, sizeof *ix);
    if (!ix) {
        free(m);
        return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    }
    snprintf(ix->dir, sizeof ix->dir, "%s", dir);
    tl_file_header hs[TIERLAB_FILES];
    char path[TIERLAB_FILES][PATH_MAX + 16];
    for (int f = 0; f < TIERLAB_FILES && !rc; f++) {
        uint64_t size = 0, bad = 0;
        snprintf(path[f], sizeof path[f], "%s/%s", dir, tierlab_index_file_name(f));
        rc = tl_read_header(path[f], &hs[f], &size, err, errlen);
        if (rc) break;
        rc = tl_header_check(&hs[f], f, size, path[f], &bad, err, errlen);
        if (rc) {
            /* another format version is not damage */
            int other = bad == offsetof(tl_file_header, format_version);
            if (fail) *fail = (tl_open_fail){f, bad, !other};
            break;
        }
        char va[64], vd[64];
        const char *what = f ? tl_header_differs(&hs[f], &hs[0], va, vd, sizeof va) : NULL;
        if (hs[f].build_id != id) {
            rc = tl_err(err, errlen, TIERLAB_EFORMAT,
                        "%s belongs to another build (build id %016llx, manifest %016llx)",
                        path[f], (unsigned long long)hs[f].build_id, (unsigned long long)id);
            if (fail) *fail = (tl_open_fail){f, offsetof(tl_file_header, build_id), 1};
        } else if (what) {
            rc = tl_err(err, errlen, TIERLAB_EFORMAT,
                        "%s: %s is %s but dict.bin's header says %s", path[f], what, va, vd);
            if (fail) *fail = (tl_open_fail){f, 0, 1};
        }
    }
    if (!rc) rc = tl_manifest_vs_headers(m, hs, fail, err, errlen);
    free(m);
    /* terms * entry size would overflow for a header claiming ~2^59 terms:
     * divide instead (a fuzzer's reproducer read far past dict.bin) */
    if (!rc && (hs[0].file_bytes < TL_HDR_BYTES ||
                hs[0].terms > (hs[0].file_bytes - TL_HDR_BYTES) / sizeof(tl_dict_entry))) {
        rc = tl_err(err, errlen, TIERLAB_EFORMAT, "%s: too short for %llu terms", path[0],
                    (unsigned long long)hs[0].terms);
        if (fail) *fail = (tl_open_fail){TIERLAB_FILE_DICT, hs[0].file_bytes, 1};
    }
    for (int f = 0; f < TIERLAB_FILES && !rc; f++) {
        rc = tl_place(path[f], req[f], &ix->r[f], err, errlen);
        if (rc) break;
        /* the placed bytes must be the ones checked (the file may have changed) */
        if (ix->r[f].len != hs[f].file_bytes || memcmp(ix->r[f].data, &hs[f], TL_HDR_BYTES) != 0)
            rc = tl_err(err, errlen, TIERLAB_EFORMAT, "%s changed while opening", path[f]);
    }
    for (int f = 0; f < TIERLAB_FILES && !rc && (flags & TIERLAB_OPEN_VERIFY); f++) {
        uint32_t crc = tl_crc32c(0, ix->r[f].data + TL_HDR_BYTES, ix->r[f].len - TL_HDR_BYTES);
        if (crc != hs[f].body_crc) {
            rc = tl_err(err, errlen, TIERLAB_ECORRUPT,
                        "corrupt index: %s: body checksum mismatch (stored %08x, computed %08x); "
                        "`tierlab index check` locates the damage",
                        path[f], hs[f].body_crc, crc);
            if (fail) *fail = (tl_open_fail){f, TL_HDR_BYTES, 1};
        }
    }
    if (rc) {
        tierlab_index_close(ix);
        return rc;
    }
    tierlab_index_info *in = &ix->info;
    in->format_version = hs[0].format_version;
    in->block_size = hs[0].block_size;
    in->doc_bytes = hs[0].doc_bytes;
    snprintf(in->codec, sizeof in->codec, "%s", hs[0].codec);
    in->docs = hs[0].docs;
    in->terms = hs[0].terms;
    in->postings = hs[0].postings;
    in->blocks = hs[0].blocks;
    in->build_id = id;
    for (int f = 0; f < TIERLAB_FILES; f++) in->file_bytes[f] = hs[f].file_bytes;
    ix->dc = tierlab_codec_find(in->codec);
    ix->fc = tierlab_codec_freq(ix->dc);
    ix->dict = (const tl_dict_entry *)(ix->r[TIERLAB_FILE_DICT].data + TL_HDR_BYTES);
    ix->terms = in->terms;
    ix->pool = (const uint8_t *)(ix->dict + ix->terms);
    ix->pool_len = in->file_bytes[TIERLAB_FILE_DICT] - TL_HDR_BYTES - ix->terms * sizeof(tl_dict_entry);
    ix->skip = ix->r[TIERLAB_FILE_SKIP].data;
    ix->skip_len = in->file_bytes[TIERLAB_FILE_SKIP];
    ix->dids = ix->r[TIERLAB_FILE_DIDS].data;
    ix->dids_len = in->file_bytes[TIERLAB_FILE_DIDS];
    ix->freqs = ix->r[TIERLAB_FILE_FREQS].data;
    ix->freqs_len = in->file_bytes[TIERLAB_FILE_FREQS];
    TL_MT_REGION(TIERLAB_REGION_DICTIONARY, ix->r[TIERLAB_FILE_DICT].data, ix->r[TIERLAB_FILE_DICT].len);
    TL_MT_REGION(TIERLAB_REGION_SKIP, ix->skip, ix->skip_len);
    TL_MT_REGION(TIERLAB_REGION_DID, ix->dids, ix->dids_len);
    TL_MT_REGION(TIERLAB_REGION_FREQ, ix->freqs, ix->freqs_len);
    ix->checks = (flags & TIERLAB_OPEN_VERIFY) ? TIERLAB_CHECKS_FULL : TIERLAB_CHECKS_DEFAULT;
    *out = ix;
    return 0;
}

int tierlab_index_open_flags(const char *dir, const char *placement, unsigned flags,
                             tierlab_index **out, char *err, size_t errlen) {
    if (flags & ~(unsigned)TIERLAB_OPEN_VERIFY) {
        if (out) *out = NULL;
        return tl_err(err, errlen, TIERLAB_EINVAL, "unknown open flags %#x", flags);
    }
    return tl_index_open(dir, placement, flags, out, NULL, err, errlen);
}

int tierlab_index_open(const char *dir, const char *placement, tierlab_index **out,
                       char *err, size_t errlen) {
    return tl_index_open(dir, placement, 0, out, NULL, err, errlen);
}

void tierlab_index_close(tierlab_index *ix) {
    if (!ix) return;
    for (int f = 0; f < TIERLAB_FILES; f++) {
        TL_MT_UNREGION(ix->r[f].data);
        tl_region_release(&ix->r[f]);
    }
    free(ix);
}

void tierlab_index_get_info(const tierlab_index *ix, tierlab_index_info *info) {
    if (ix && info) *info = ix->info;
}

int tierlab_index_placement(const tierlab_index *ix, int file, tierlab_placement_report *r) {
    if (!ix || !r || file < 0 || file >= TIERLAB_FILES) return TIERLAB_EINVAL;
    *r = ix->r[file].rep;
    return 0;
}

/* The binary search; with checks, every probed entry is checked first. */
static int tl_dict_search(const struct tierlab_index *ix, const char *term, size_t len,
                          int checks, const tl_dict_entry **hit, uint64_t *bytes, char *err,
                          size_t errlen) {
    uint64_t key = 0;
    for (size_t i = 0; i < 8; i++) key = (key << 8) | (i < len ? (uint8_t)term[i] : 0u);
    size_t lo = 0, hi = ix->terms;
    uint64_t touched = 0;
    int rc = 0;
    *hit = NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tl_dict_entry *e = &ix->dict[mid];
        touched += sizeof *e;
        if (checks && tl_crc32c(0, e, TL_DICT_CRC_BYTES) != e->entry_crc) {
            rc = tl_dict_entry_check(ix, e, err, errlen);
            break;
        }
        int c;
        if (e->prefix != key) {
            c = e->prefix < key ? -1 : 1;
        } else {
            size_t el = e->term_len, m = el < len ? el : len;
            c = 0;
            if (m > 8) {
                if (e->term_offset > ix->pool_len || el > ix->pool_len - e->term_offset ||
                    (checks && tl_crc32c(0, ix->pool + e->term_offset, el) != e->term_crc)) {
                    rc = tl_dict_entry_check(ix, e, err, errlen);
                    if (!rc) rc = TIERLAB_ECORRUPT; /* out of the pool with checks off */
                    break;
                }
                c = memcmp(ix->pool + e->term_offset + 8, term + 8, m - 8);
                touched += m - 8;
            }
            if (!c) c = (el > len) - (el < len);
        }
        if (c == 0) {
            *hit = e;
            break;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *bytes += touched;
    return rc ? rc : *hit != NULL;
}

int tl_dict_find(const struct tierlab_index *ix, const char *term, size_t len, int checks,
                 const tl_dict_entry **hit, uint64_t *bytes, char *err, size_t errlen) {
    /* A hit is right when its own entry and term bytes are sound, whatever
     * the entries that led there: terms are unique, and it holds exactly the
     * term. A miss is only as good as every entry probed on the way, so a
     * miss (rare in a workload) searches again, checking each probe. */
    int rc = tl_dict_search(ix, term, len, 0, hit, bytes, err, errlen);
    if (!checks) return rc;
    if (rc == 1) {
        /* a term of at most 8 bytes is its entry's prefix and length: its
         * pool bytes, which the lookup did not read, are not read for it */
        const tl_dict_entry *e = *hit;
        if (tl_crc32c(0, e, TL_DICT_CRC_BYTES) != e->entry_crc ||
            (e->term_len > 8 && tl_crc32c(0, ix->pool + e->term_offset, e->term_len) != e->term_crc)) {
            *hit = NULL;
            return tl_dict_entry_check(ix, e, err, errlen);
        }
        return 1;
    }
    uint64_t again = 0;
    return tl_dict_search(ix, term, len, checks, hit, &again, err, errlen);
}

int tierlab_index_lookup(const tierlab_index *ix, const char *term, size_t len,
                         uint64_t *postings) {
    if (!ix || !term) return 0;
    uint64_t bytes = 0;
    const tl_dict_entry *e;
    int rc = tl_dict_find(ix, term, len, ix->checks, &e, &bytes, NULL, 0);
    if (rc == 1 && postings) *postings = e->postings;
    return rc;
}

int tierlab_index_term_at(const tierlab_index *ix, uint64_t i, const char **term,
                          uint32_t *len, uint32_t *postings) {
    if (!ix || i >= ix->terms) return TIERLAB_EINVAL;
    const tl_dict_entry *e = &ix->dict[i];
    if (e->term_offset > ix->pool_len || e->term_len > ix->pool_len - e->term_offset)
        return TIERLAB_ECORRUPT;
    if (ix->checks && tl_dict_entry_check(ix, e, NULL, 0)) return TIERLAB_ECORRUPT;
    if (term) *term = (const char *)ix->pool + e->term_offset;
    if (len) *len = e->term_len;
    if (postings) *postings = e->postings;
    return 0;
}

int64_t tierlab_index_postings(const tierlab_index *ix, uint64_t i, uint32_t *dids,
                               uint32_t *freqs, char *err, size_t errlen) {
    if (!ix || !dids || !freqs || i >= ix->terms) return TIERLAB_EINVAL;
    const tl_dict_entry *d = &ix->dict[i];
    int checks = ix->checks;
    if (checks && tl_dict_entry_check(ix, d, err, errlen)) return TIERLAB_ECORRUPT;
    const tl_skip_head *h;
    int rc = tl_skip_open(ix, d, checks, &h, err, errlen);
    if (rc) return rc;
    uint32_t B = ix->info.block_size, nb = h->nblocks, p = h->postings;
    const tl_skip_entry *e = (const tl_skip_entry *)(h + 1);
    for (int kind = 0; kind < 2; kind++) {
        const uint8_t *base = kind ? ix->freqs : ix->dids;
        uint64_t flen = kind ? ix->freqs_len : ix->dids_len;
        for (uint32_t b = 0; b < nb; b++) {
            uint32_t n = b + 1 < nb ? B : p - b * B, at = 0;
            uint64_t a = tl_block_off(e, b, kind), z = tl_block_off(e, b + 1, kind);
            uint32_t *out = (kind ? freqs : dids) + (size_t)b * B;
            int why = a < TL_HDR_BYTES || z < a || z > flen
                          ? TL_BAD_OFFSET
                          : tl_block_decode(ix, e, b, kind, base + a, z - a, n, out, checks, &at);
            if (why)
                return tl_block_fail(ix, d, kind, b, nb, e, why == TL_BAD_OFFSET ? NULL : base + a,
                                     out, why, at, checks, err, errlen);
        }
        /* the term's blocks, in one pass */
        if (checks && (rc = tl_span_check(ix, d, e, nb, 0, nb - 1, kind, err, errlen))) return rc;
    }
    return p;
}
