/* extent.c — where a term's bytes lie in skip.bin, dids.bin and freqs.bin
 * (tierlab_index_term_extent, _extents) and a term's position in the
 * dictionary (tierlab_index_find). The contract is in tierlab.h; the layout
 * that makes a term's blocks one contiguous span per file is the writer's
 * (transform.c writes every term's blocks back to back, in dictionary order;
 * kernels/formats/index.md). */
#include "index.h"

/* The extent of term i from its skip record, checked against the files (and,
 * unless the index's checks are off, the entry's and the record's checksums)
 * so a reader can pread exactly these bytes. */
static int tl_extent(const tierlab_index *ix, uint64_t i, tierlab_term_extent *x) {
    const tl_dict_entry *d = &ix->dict[i];
    if (ix->checks && tl_dict_entry_check(ix, d, NULL, 0)) return TIERLAB_ECORRUPT;
    const tl_skip_head *h;
    int rc = tl_skip_open(ix, d, ix->checks, &h, NULL, 0);
    if (rc) return rc;
    uint64_t nb = h->nblocks;
    const tl_skip_entry *e = (const tl_skip_entry *)(h + 1);
    uint64_t da = e[0].did_offset, dz = e[nb].did_offset;
    uint64_t fa = e[0].freq_offset, fz = e[nb].freq_offset;
    if (da < TL_HDR_BYTES || dz < da || dz > ix->dids_len || fa < TL_HDR_BYTES || fz < fa ||
        fz > ix->freqs_len)
        return TIERLAB_ECORRUPT;
    x->postings = h->postings;
    x->blocks = nb;
    x->did_offset = da;
    x->did_bytes = dz - da;
    x->freq_offset = fa;
    x->freq_bytes = fz - fa;
    x->skip_offset = d->skip_offset;
    x->skip_bytes = tl_skip_record_bytes(nb);
    return 0;
}

int tierlab_index_term_extent(const tierlab_index *ix, uint64_t i, tierlab_term_extent *e) {
    if (!ix || !e || i >= ix->terms) return TIERLAB_EINVAL;
    return tl_extent(ix, i, e);
}

int64_t tierlab_index_term_extents(const tierlab_index *ix, uint64_t first, uint64_t n,
                                   tierlab_term_extent *out) {
    if (!ix || (!out && n) || first > ix->terms || n > ix->terms - first) return TIERLAB_EINVAL;
    for (uint64_t j = 0; j < n; j++) {
        int rc = tl_extent(ix, first + j, &out[j]);
        if (rc) return rc;
    }
    return (int64_t)n;
}

int tierlab_index_find(const tierlab_index *ix, const char *term, size_t len, uint64_t *i) {
    if (!ix || !term || !i) return TIERLAB_EINVAL;
    uint64_t bytes = 0;
    const tl_dict_entry *e;
    int rc = tl_dict_find(ix, term, len, ix->checks, &e, &bytes, NULL, 0);
    if (rc <= 0) return rc;
    *i = (uint64_t)(e - ix->dict);
    return 1;
}
