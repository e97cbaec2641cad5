/* configs.c — the one table of APCache configurations (docs/apcache.md "The four
 * configurations"): the names users type, at the index of their TL_APCACHE_*
 * number (apcache.h), which the threads switch on. Nothing else keeps a list
 * of configuration names: the C CLI, the Python side and the tests read it
 * through tierlab_apcache_config_count/name/find. */
#include <string.h>

#include "apcache.h"

static const char *const tl_config_names[] = {
    [TL_APCACHE_BASE] = "base",
    [TL_APCACHE_BASE_PREFETCH] = "base-prefetch",
    [TL_APCACHE_HYBRID] = "hybrid",
    [TL_APCACHE_HYBRID_PREFETCH] = "hybrid-prefetch",
};
#define TL_NCONFIGS (sizeof tl_config_names / sizeof tl_config_names[0])
_Static_assert(TL_NCONFIGS == TL_APCACHE_CONFIGS, "one name per configuration");

size_t tierlab_apcache_config_count(void) { return TL_NCONFIGS; }

const char *tierlab_apcache_config_name(size_t i) {
    return i < TL_NCONFIGS ? tl_config_names[i] : NULL;
}

int tierlab_apcache_config_find(const char *name) {
    if (name == NULL) return -1;
    for (size_t i = 0; i < TL_NCONFIGS; i++)
        if (strcmp(tl_config_names[i], name) == 0) return (int)i;
    return -1;
}
