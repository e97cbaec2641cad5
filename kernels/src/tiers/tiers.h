/* tiers.h — placement of one index file on a memory tier (docs/engine.md
 * "Placement"). One file per tier implements `place`; tier.c holds the single
 * table of tiers and parses requests ("dram", "pm:/mnt/pmem0", "numa:1"). */
#ifndef TL_TIERS_H
#define TL_TIERS_H

#include <stddef.h>
#include <stdint.h>

#include "tierlab.h"

typedef struct tl_region {
    const uint8_t *data; /* the file's bytes, read-only */
    size_t len;
    void *map;           /* what to munmap (NULL: nothing) */
    size_t map_len;
    tierlab_placement_report rep;
} tl_region;

/* Place the file at `path` (len bytes) as asked: `arg` is the text after
 * "name:" (NULL when there is none). Fills r (rep.tier/request already set by
 * the caller). Returns 0 or a TIERLAB_E* with a message. */
typedef int (*tl_place_fn)(const char *path, const char *arg, tl_region *r, char *err,
                           size_t errlen);

typedef struct tl_tier {
    const char *name; /* what users type before any ':' */
    int arg;          /* 1: requires ":ARG" (pm:PATH, numa:N), 0: takes none */
    tl_place_fn place;
} tl_tier;

extern const tl_tier tl_tier_storage, tl_tier_dram, tl_tier_pm, tl_tier_numa;

/* Parse `request` and place; 0 or an error (message names the request). */
int tl_place(const char *path, const char *request, tl_region *r, char *err, size_t errlen);
void tl_region_release(tl_region *r);

/* Shared helpers (tier.c). */
int tl_copy_into(const char *path, uint8_t *dst, size_t len, char *err, size_t errlen);
uint64_t tl_resident_bytes(const void *addr, size_t len);
/* mlock; 1 locked, 0 not (reason appended to `why`). */
int tl_try_mlock(const void *addr, size_t len, char *why, size_t whylen);

#endif
