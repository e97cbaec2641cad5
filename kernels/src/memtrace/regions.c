/* regions.c — the region registry of the memory traces: the names users
 * type (`tierlab list memory-regions`) and traces/memtrace.md uses, at the
 * index of their TIERLAB_REGION_* number (tierlab.h). In every build. */
#include <string.h>

#include "tierlab.h"

static const char *const tl_regions[TIERLAB_REGIONS] = {
    [TIERLAB_REGION_OTHER] = "other",
    [TIERLAB_REGION_DICTIONARY] = "dictionary",
    [TIERLAB_REGION_SKIP] = "skip",
    [TIERLAB_REGION_DID] = "did",
    [TIERLAB_REGION_FREQ] = "freq",
    [TIERLAB_REGION_SEGMENT_CACHE] = "segment_cache",
    [TIERLAB_REGION_DECODE_BUFFER] = "decode_buffer",
    [TIERLAB_REGION_TOPK_HEAP] = "topk_heap",
};

size_t tierlab_memtrace_region_count(void) { return TIERLAB_REGIONS; }

const char *tierlab_memtrace_region_name(size_t i) {
    return i < TIERLAB_REGIONS ? tl_regions[i] : NULL;
}

int tierlab_memtrace_region_find(const char *name) {
    if (name == NULL) return -1;
    for (size_t i = 0; i < TIERLAB_REGIONS; i++)
        if (strcmp(tl_regions[i], name) == 0) return (int)i;
    return -1;
}
