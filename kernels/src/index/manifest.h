/* manifest.h — the fields of manifest.json that open.c checks against the
 * file headers (kernels/formats/index.md, "manifest.json"). */
#ifndef TL_INDEX_MANIFEST_H
#define TL_INDEX_MANIFEST_H

#include "format.h"

enum {
    TL_MF_FORMAT,
    TL_MF_VERSION,
    TL_MF_BUILD_ID,
    TL_MF_CODEC,
    TL_MF_FREQ_CODEC,
    TL_MF_BLOCK_SIZE,
    TL_MF_DOC_BYTES,
    TL_MF_DOCUMENTS,
    TL_MF_TERMS,
    TL_MF_POSTINGS,
    TL_MF_BLOCKS,
    TL_MF_DID_BLOCK_BYTES,
    TL_MF_FREQ_BLOCK_BYTES,
    TL_MF_FILE_DICT, /* members of "files", in TIERLAB_FILE_* order */
    TL_MF_FILE_SKIP,
    TL_MF_FILE_DIDS,
    TL_MF_FILE_FREQS,
    TL_MF_COUNT
};
enum { TL_MF_MISSING = 0, TL_MF_STR, TL_MF_NUM, TL_MF_BAD };

typedef struct tl_mfield {
    int kind;        /* TL_MF_MISSING, _STR, _NUM or _BAD (another JSON type) */
    uint64_t offset; /* of the value in the file */
    uint64_t num;
    char str[64];
} tl_mfield;

typedef struct tl_manifest {
    char path[4200]; /* the directory (PATH_MAX) + "/manifest.json" */
    tl_mfield f[TL_MF_COUNT];
    uint64_t build_id;
    uint64_t bytes;
    uint64_t bad_offset; /* after a refusal: where in the file */
    int other_version;   /* after a refusal: another format version (not damage) */
} tl_manifest;

/* Read dir/manifest.json: 0, or TIERLAB_EFORMAT (missing, not JSON, not a
 * tierlab manifest, another format version, a field missing or of the wrong
 * type), TIERLAB_EIO, TIERLAB_ENOMEM with a message. */
int tl_manifest_read(const char *dir, tl_manifest *m, char *err, size_t errlen);
/* The field of key (files: a member of "files"), NULL if not one we keep. */
tl_mfield *tl_manifest_field(tl_manifest *m, const char *key, int files);
const char *tl_manifest_key(int field);

#endif
