/* index.h — the open index as the query code sees it (internal). */
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
    char dir[4096];
};

/* Binary search of the dictionary. Returns the entry or NULL; adds the bytes
 * it touched to *bytes. Sets *corrupt when an entry points outside the pool. */
const tl_dict_entry *tl_dict_find(const struct tierlab_index *ix, const char *term, size_t len,
                                  uint64_t *bytes, int *corrupt);

#endif
