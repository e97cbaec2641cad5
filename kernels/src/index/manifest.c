/* manifest.c — reading manifest.json for the checks at open (open.c): the
 * fields that describe the files, each with the byte offset of its value so a
 * mismatch can be located (tierlab_index_check). A small JSON reader of our
 * own: objects, arrays, strings, numbers, true/false/null; only top-level
 * keys and the members of "files" are kept. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "manifest.h"

typedef struct tl_json {
    const char *s, *end, *p;
} tl_json;

static void tl_ws(tl_json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* A string at j->p (after its opening quote is checked); copies at most
 * cap - 1 bytes of its value into out (escapes decoded, \u as '?'). */
static int tl_str(tl_json *j, char *out, size_t cap) {
    if (j->p >= j->end || *j->p != '"') return -1;
    j->p++;
    size_t n = 0;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if ((unsigned char)c < 0x20) return -1;
        if (c == '\\') {
            if (j->p >= j->end) return -1;
            char e = *j->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case '"': case '\\': case '/': c = e; break;
            case 'u':
                if (j->end - j->p < 4) return -1;
                j->p += 4;
                c = '?';
                break;
            default: return -1;
            }
        }
        if (out && n + 1 < cap) out[n++] = c;
    }
    if (j->p >= j->end) return -1;
    j->p++;
    if (out && cap) out[n] = 0;
    return 0;
}

static int tl_value(tl_json *j, int depth);

static int tl_object(tl_json *j, int depth, tl_manifest *m, int files) {
    j->p++; /* '{' */
    tl_ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        char key[64];
        tl_ws(j);
        if (tl_str(j, key, sizeof key)) return -1;
        tl_ws(j);
        if (j->p >= j->end || *j->p != ':') return -1;
        j->p++;
        tl_ws(j);
        tl_mfield *f = m ? tl_manifest_field(m, key, files) : NULL;
        const char *v = j->p;
        if (f) f->offset = (uint64_t)(v - j->s);
        if (m && !files && depth == 1 && strcmp(key, "files") == 0 && j->p < j->end && *j->p == '{') {
            if (tl_object(j, depth + 1, m, 1)) return -1;
        } else if (f && j->p < j->end && *j->p == '"') {
            if (tl_str(j, f->str, sizeof f->str)) return -1;
            f->kind = TL_MF_STR;
        } else if (f && j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || *j->p == '-')) {
            char *e;
            errno = 0;
            f->num = strtoull(v, &e, 10);
            /* whole non-negative integers only */
            f->kind = (*v != '-' && errno == 0 && e > v && e <= j->end && *e != '.' && *e != 'e' &&
                       *e != 'E') ? TL_MF_NUM : TL_MF_BAD;
            if (tl_value(j, depth + 1)) return -1;
        } else {
            if (f) f->kind = TL_MF_BAD;
            if (tl_value(j, depth + 1)) return -1;
        }
        tl_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == '}') {
            j->p++;
            return 0;
        }
        return -1;
    }
}

static int tl_value(tl_json *j, int depth) {
    if (depth > 64) return -1;
    tl_ws(j);
    if (j->p >= j->end) return -1;
    char c = *j->p;
    if (c == '{') return tl_object(j, depth, NULL, 0);
    if (c == '"') return tl_str(j, NULL, 0);
    if (c == '[') {
        j->p++;
        tl_ws(j);
        if (j->p < j->end && *j->p == ']') {
            j->p++;
            return 0;
        }
        for (;;) {
            if (tl_value(j, depth + 1)) return -1;
            tl_ws(j);
            if (j->p < j->end && *j->p == ',') {
                j->p++;
                continue;
            }
            if (j->p < j->end && *j->p == ']') {
                j->p++;
                return 0;
            }
            return -1;
        }
    }
    const char *words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(j->end - j->p) >= n && memcmp(j->p, words[i], n) == 0) {
            j->p += n;
            return 0;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        j->p++;
        while (j->p < j->end && strchr("0123456789+-.eE", *j->p)) j->p++;
        return 0;
    }
    return -1;
}

static const char *const tl_mf_names[TL_MF_COUNT] = {
    [TL_MF_FORMAT] = "format",
    [TL_MF_VERSION] = "format_version",
    [TL_MF_BUILD_ID] = "build_id",
    [TL_MF_CODEC] = "codec",
    [TL_MF_FREQ_CODEC] = "freq_codec",
    [TL_MF_BLOCK_SIZE] = "block_size",
    [TL_MF_DOC_BYTES] = "doc_bytes",
    [TL_MF_DOCUMENTS] = "documents",
    [TL_MF_TERMS] = "terms",
    [TL_MF_POSTINGS] = "postings",
    [TL_MF_BLOCKS] = "blocks",
    [TL_MF_DID_BLOCK_BYTES] = "did_block_bytes",
    [TL_MF_FREQ_BLOCK_BYTES] = "freq_block_bytes",
    [TL_MF_FILE_DICT] = "dict.bin",
    [TL_MF_FILE_SKIP] = "skip.bin",
    [TL_MF_FILE_DIDS] = "dids.bin",
    [TL_MF_FILE_FREQS] = "freqs.bin",
};

const char *tl_manifest_key(int field) {
    return field >= 0 && field < TL_MF_COUNT ? tl_mf_names[field] : "?";
}

tl_mfield *tl_manifest_field(tl_manifest *m, const char *key, int files) {
    int a = files ? TL_MF_FILE_DICT : 0, z = files ? TL_MF_COUNT : TL_MF_FILE_DICT;
    for (int i = a; i < z; i++)
        if (strcmp(key, tl_mf_names[i]) == 0) return &m->f[i];
    return NULL;
}

int tl_manifest_read(const char *dir, tl_manifest *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s/manifest.json", dir);
    FILE *f = fopen(m->path, "rb");
    if (!f) {
        struct stat st;
        if (stat(dir, &st) != 0)
            return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", dir, strerror(errno));
        return tl_err(err, errlen, TIERLAB_EFORMAT,
                      "%s has no manifest.json: not a tierlab index, or an unfinished build",
                      dir);
    }
    enum { MAX = 1 << 20 };
    char *buf = malloc(MAX + 1);
    if (!buf) {
        fclose(f);
        return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    }
    size_t n = fread(buf, 1, MAX, f);
    buf[n] = 0; /* strtoull stops here */
    int bad_read = ferror(f);
    fclose(f);
    if (bad_read) {
        free(buf);
        return tl_err(err, errlen, TIERLAB_EIO, "cannot read %s", m->path);
    }
    tl_json j = {buf, buf + n, buf};
    tl_ws(&j);
    int rc = j.p < j.end && *j.p == '{' ? tl_object(&j, 1, m, 0) : -1;
    if (!rc) {
        tl_ws(&j);
        if (j.p != j.end) rc = -1;
    }
    uint64_t stop = (uint64_t)(j.p - buf);
    free(buf);
    m->bytes = n;
    if (rc || m->f[TL_MF_FORMAT].kind != TL_MF_STR ||
        strcmp(m->f[TL_MF_FORMAT].str, "tierlab-index") != 0) {
        m->bad_offset = rc ? stop : m->f[TL_MF_FORMAT].offset;
        return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: not a tierlab index manifest%s", m->path,
                      rc ? " (not JSON)" : "");
    }
    const tl_mfield *v = &m->f[TL_MF_VERSION];
    if (v->kind != TL_MF_NUM) {
        m->bad_offset = v->offset;
        return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: no format_version", m->path);
    }
    if (v->num != TIERLAB_INDEX_FORMAT_VERSION) {
        m->bad_offset = v->offset;
        m->other_version = 1;
        return tl_err(err, errlen, TIERLAB_EFORMAT,
                      "%s: index format version %llu; rebuild with tierlab index build (this "
                      "tierlab reads version %d)",
                      dir, (unsigned long long)v->num, TIERLAB_INDEX_FORMAT_VERSION);
    }
    for (int i = 0; i < TL_MF_COUNT; i++) {
        const tl_mfield *x = &m->f[i];
        int want_str = i == TL_MF_FORMAT || i == TL_MF_BUILD_ID || i == TL_MF_CODEC ||
                       i == TL_MF_FREQ_CODEC;
        if (x->kind != (want_str ? TL_MF_STR : TL_MF_NUM)) {
            m->bad_offset = x->kind ? x->offset : stop;
            return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: %s \"%s\"%s", m->path,
                          x->kind ? "malformed" : "no", tl_mf_names[i],
                          x->kind ? (want_str ? " (not a string)" : " (not a whole number)") : "");
        }
    }
    const char *id = m->f[TL_MF_BUILD_ID].str;
    char *e;
    m->build_id = strtoull(id, &e, 16);
    if (strlen(id) != 16 || *e) {
        m->bad_offset = m->f[TL_MF_BUILD_ID].offset;
        return tl_err(err, errlen, TIERLAB_EFORMAT, "%s: bad build_id \"%.20s\"", m->path, id);
    }
    return 0;
}
