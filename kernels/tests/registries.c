/* registries.c — every registry of names users type agrees with itself:
 * codecs, APCache configurations, eviction policies, placement tiers and
 * query types. For each: count >= 1; name(i) is a non-empty kebab-case name
 * (lower-case letters, digits, single inner dashes) and unique; find(name(i))
 * gives i back; name(count) is NULL; find of an unknown name or NULL is -1.
 * Only the public header: what any caller (the Python side) sees. A plain
 * main returning an exit status; prints what failed. */
#include <stdio.h>
#include <string.h>

#include "tierlab.h"

#include "check.h"

static int kebab(const char *s) {
    if (!s || !*s || *s == '-') return 0;
    for (const char *p = s; *p; p++) {
        int ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-';
        if (!ok || (*p == '-' && (p[1] == '-' || p[1] == 0))) return 0;
    }
    return 1;
}

/* One registry given by its three functions (find as int, -1 unknown). */
static void check_registry(const char *what, size_t (*count)(void), const char *(*name)(size_t),
                           int (*find)(const char *)) {
    size_t n = count();
    CHECK(n >= 1, "%s: empty", what);
    for (size_t i = 0; i < n; i++) {
        const char *a = name(i);
        CHECK(kebab(a), "%s %zu: '%s' is not a kebab-case name", what, i, a ? a : "(null)");
        if (!a) continue;
        CHECK(find(a) == (int)i, "%s: find(\"%s\") = %d, not %zu", what, a, find(a), i);
        for (size_t j = 0; j < i; j++)
            CHECK(name(j) && strcmp(name(j), a) != 0, "%s: '%s' twice", what, a);
        printf("%-12s %zu %s\n", what, i, a);
    }
    CHECK(name(n) == NULL && name(n + 1000) == NULL, "%s: a name past the end", what);
    CHECK(find("no-such-name") == -1 && find("") == -1 && find(NULL) == -1,
          "%s: find of an unknown name", what);
}

/* The codec registry hands out descriptors; seen through the same shape. */
static const char *codec_name(size_t i) {
    const tierlab_codec *c = tierlab_codec_at(i);
    return c ? c->name : NULL;
}
static int codec_find(const char *name) {
    const tierlab_codec *c = tierlab_codec_find(name);
    for (size_t i = 0; c && i < tierlab_codec_count(); i++)
        if (tierlab_codec_at(i) == c) return (int)i;
    return -1;
}

int main(void) {
    check_registry("codecs", tierlab_codec_count, codec_name, codec_find);
    check_registry("configs", tierlab_apcache_config_count, tierlab_apcache_config_name,
                   tierlab_apcache_config_find);
    check_registry("policies", tierlab_policy_count, tierlab_policy_name, tierlab_policy_find);
    check_registry("tiers", tierlab_tier_count, tierlab_tier_name, tierlab_tier_find);
    check_registry("query-types", tierlab_query_type_count, tierlab_query_type_name,
                   tierlab_query_type_find);
    /* what the numbers of the public API stand for */
    CHECK(tierlab_query_type_find("single") == TIERLAB_QUERY_SINGLE &&
              tierlab_query_type_find("and") == TIERLAB_QUERY_AND,
          "query types at the index of their TIERLAB_QUERY_* number");
    for (size_t i = 0; i < tierlab_tier_count(); i++) {
        int arg = -1;
        const char *t = tierlab_tier_at(i, &arg);
        CHECK(t && tierlab_tier_name(i) && !strcmp(t, tierlab_tier_name(i)) &&
                  (arg == 0 || arg == 1),
              "tier %zu: at and name agree", i);
    }
    /* every policy makes a cache; one past the table does not */
    for (size_t i = 0; i < tierlab_policy_count(); i++) {
        tierlab_cache *c = NULL;
        CHECK(tierlab_cache_new((int)i, 4, 2, &c) == 0 && c, "policy %s: no cache",
              tierlab_policy_name(i));
        tierlab_cache_free(c);
    }
    tierlab_cache *c = NULL;
    CHECK(tierlab_cache_new((int)tierlab_policy_count(), 4, 2, &c) == TIERLAB_EINVAL && !c,
          "a policy past the table");
    printf("registries: %d checks, %d failed\n", tl_checks, tl_check_failures);
    return tl_check_failures != 0;
}
