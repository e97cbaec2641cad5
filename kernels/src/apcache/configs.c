/* configs.c — the one table of APCache configurations: the names users
 * type, indexed by the configuration numbers of tierlab.h. */
#include "runtime.h"

static const char *const tl_config_names[TIERLAB_APCACHE_CONFIGS] = {
    "base", "base-prefetch", "hybrid", "hybrid-prefetch"};

const char *tierlab_apcache_config_name(int config) {
    return config >= 0 && config < TIERLAB_APCACHE_CONFIGS ? tl_config_names[config] : NULL;
}
