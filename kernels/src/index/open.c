/* open.c — opening an index: manifest and header checks, placement of the
 * four files on their tiers, and the dictionary lookup. */
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

/* The manifest's build id, without a JSON parser: the writer is ours. */
static int tl_manifest_build_id(const char *dir, uint64_t *id, char *err, size_t errlen) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        struct stat st;
        if (stat(dir, &st) != 0)
            return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", dir, strerror(errno));
        return tl_err(err, errlen, TIERLAB_EFORMAT,
                      "%s has no manifest.json: not a tierlab index, or an unfinished build",
                      dir);
    }
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *fmt = strstr(buf, "\"format\": \"tierlab-index\"");
    const char *ver = strstr(buf, "\"format_version\": ");
    const char *bid = strstr(buf, "\"build_id\": \"");
    if (!fmt || !ver || !bid)
        return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: not a tierlab index manifest", path);
    long v = strtol(ver + 18, NULL, 10);
    if (v != TIERLAB_INDEX_FORMAT_VERSION)
        return tl_err(err, errlen, TIERLAB_EFORMAT,
                      "%s: index format version %ld, this tierlab reads version %d (rebuild "
                      "the index)",
                      path, v, TIERLAB_INDEX_FORMAT_VERSION);
    char *end;
    *id = strtoull(bid + 13, &end, 16);
    if (end != bid + 13 + 16 || *end != '"')
        return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: bad build_id", path);
    return 0;
}

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

int tierlab_index_open(const char *dir, const char *placement, tierlab_index **out,
                       char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!dir || !out) return tl_err(err, errlen, TIERLAB_EINVAL, "index directory required");
    *out = NULL;
    char req[TIERLAB_FILES][256];
    int rc = tl_parse_placement(placement, req, err, errlen);
    if (rc) return rc;
    uint64_t id = 0;
    rc = tl_manifest_build_id(dir, &id, err, errlen);
    if (rc) return rc;
    tierlab_index *ix = calloc(1, sizeof *ix);
    if (!ix) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    snprintf(ix->dir, sizeof ix->dir, "%s", dir);
    tl_file_header hs[TIERLAB_FILES];
    char path[TIERLAB_FILES][PATH_MAX + 16];
    for (int f = 0; f < TIERLAB_FILES && !rc; f++) {
        uint64_t size = 0;
        snprintf(path[f], sizeof path[f], "%s/%s", dir, tierlab_index_file_name(f));
        rc = tl_read_header(path[f], &hs[f], &size, err, errlen);
        if (!rc) rc = tl_header_check(&hs[f], f, size, path[f], err, errlen);
        if (rc) break;
        if (hs[f].build_id != id)
            rc = tl_err(err, errlen, TIERLAB_EFORMAT,
                        "%s belongs to another build (build id %016llx, manifest %016llx)",
                        path[f], (unsigned long long)hs[f].build_id, (unsigned long long)id);
        else if (f && (hs[f].docs != hs[0].docs || hs[f].terms != hs[0].terms ||
                       hs[f].postings != hs[0].postings || hs[f].blocks != hs[0].blocks ||
                       hs[f].block_size != hs[0].block_size ||
                       strcmp(hs[f].codec, hs[0].codec) != 0))
            rc = tl_err(err, errlen, TIERLAB_EFORMAT, "%s disagrees with dict.bin's header",
                        path[f]);
    }
    if (!rc && hs[0].file_bytes < TL_HDR_BYTES + hs[0].terms * sizeof(tl_dict_entry))
        rc = tl_err(err, errlen, TIERLAB_EFORMAT, "%s: too short for %llu terms", path[0],
                    (unsigned long long)hs[0].terms);
    for (int f = 0; f < TIERLAB_FILES && !rc; f++) {
        rc = tl_place(path[f], req[f], &ix->r[f], err, errlen);
        if (rc) break;
        /* the placed bytes must be the ones checked (the file may have changed) */
        if (ix->r[f].len != hs[f].file_bytes || memcmp(ix->r[f].data, &hs[f], TL_HDR_BYTES) != 0)
            rc = tl_err(err, errlen, TIERLAB_EFORMAT, "%s changed while opening", path[f]);
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
    *out = ix;
    return 0;
}

void tierlab_index_close(tierlab_index *ix) {
    if (!ix) return;
    for (int f = 0; f < TIERLAB_FILES; f++) tl_region_release(&ix->r[f]);
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

const tl_dict_entry *tl_dict_find(const struct tierlab_index *ix, const char *term, size_t len,
                                  uint64_t *bytes, int *corrupt) {
    uint64_t key = 0;
    for (size_t i = 0; i < 8; i++) key = (key << 8) | (i < len ? (uint8_t)term[i] : 0u);
    size_t lo = 0, hi = ix->terms;
    uint64_t touched = 0;
    const tl_dict_entry *hit = NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const tl_dict_entry *e = &ix->dict[mid];
        touched += sizeof *e;
        int c;
        if (e->prefix != key) {
            c = e->prefix < key ? -1 : 1;
        } else {
            size_t el = e->term_len, m = el < len ? el : len;
            c = 0;
            if (m > 8) {
                if (e->term_offset > ix->pool_len || el > ix->pool_len - e->term_offset) {
                    *corrupt = 1;
                    break;
                }
                c = memcmp(ix->pool + e->term_offset + 8, term + 8, m - 8);
                touched += m - 8;
            }
            if (!c) c = (el > len) - (el < len);
        }
        if (c == 0) {
            hit = e;
            break;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    *bytes += touched;
    return hit;
}

int tierlab_index_lookup(const tierlab_index *ix, const char *term, size_t len,
                         uint64_t *postings) {
    if (!ix || !term) return 0;
    uint64_t bytes = 0;
    int corrupt = 0;
    const tl_dict_entry *e = tl_dict_find(ix, term, len, &bytes, &corrupt);
    if (e && postings) *postings = e->postings;
    return e != NULL;
}

int tierlab_index_term_at(const tierlab_index *ix, uint64_t i, const char **term,
                          uint32_t *len, uint32_t *postings) {
    if (!ix || i >= ix->terms) return TIERLAB_EINVAL;
    const tl_dict_entry *e = &ix->dict[i];
    if (e->term_offset > ix->pool_len || e->term_len > ix->pool_len - e->term_offset)
        return TIERLAB_EFORMAT;
    if (term) *term = (const char *)ix->pool + e->term_offset;
    if (len) *len = e->term_len;
    if (postings) *postings = e->postings;
    return 0;
}

int64_t tierlab_index_postings(const tierlab_index *ix, uint64_t i, uint32_t *dids,
                               uint32_t *freqs, char *err, size_t errlen) {
    if (!ix || !dids || !freqs || i >= ix->terms) return TIERLAB_EINVAL;
    const tl_dict_entry *d = &ix->dict[i];
    uint32_t B = ix->info.block_size;
    uint64_t off = d->skip_offset;
    if (off < TL_HDR_BYTES || off % 8 || off > ix->skip_len - sizeof(tl_skip_head))
        return tl_err(err, errlen, TIERLAB_EFORMAT, "corrupt index: skip offset out of range");
    const tl_skip_head *h = (const tl_skip_head *)(ix->skip + off);
    uint32_t nb = h->nblocks, p = h->postings;
    if (p != d->postings || nb != (uint32_t)(((uint64_t)p + B - 1) / B) ||
        (uint64_t)(nb + 1) * sizeof(tl_skip_entry) > ix->skip_len - off - sizeof *h)
        return tl_err(err, errlen, TIERLAB_EFORMAT, "corrupt index: bad skip record");
    const tl_skip_entry *e = (const tl_skip_entry *)(h + 1);
    for (uint32_t b = 0; b < nb; b++) {
        uint32_t n = b + 1 < nb ? B : p - b * B;
        uint64_t a = e[b].did_offset, z = e[b + 1].did_offset;
        uint64_t fa = e[b].freq_offset, fz = e[b + 1].freq_offset;
        if (a < TL_HDR_BYTES || z < a || z > ix->dids_len || fa < TL_HDR_BYTES || fz < fa ||
            fz > ix->freqs_len ||
            ix->dc->decode(ix->dids + a, (size_t)(z - a), n, e[b].prev_did, dids + (size_t)b * B) !=
                (int64_t)(z - a) ||
            ix->fc->decode(ix->freqs + fa, (size_t)(fz - fa), n, 0, freqs + (size_t)b * B) !=
                (int64_t)(fz - fa) ||
            dids[(size_t)b * B] != e[b].first_did)
            return tl_err(err, errlen, TIERLAB_EFORMAT, "corrupt index: block %u of term %llu",
                          b, (unsigned long long)i);
    }
    return p;
}
