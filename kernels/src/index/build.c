/* build.c — tierlab_index_build: checks, the temporary directory
 * "<out>.tmp-<pid>", ingest, transform, manifest.json, fsync, rename.
 * The rename is the commit point: a directory named <out> is complete, and a
 * failed or killed build leaves at most "<out>.tmp-<pid>", which has no
 * manifest and is refused by tierlab_index_open. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "build.h"

void tierlab_build_params_default(tierlab_build_params *p) {
    memset(p, 0, sizeof *p);
    p->codec = "base";
    p->block_size = TIERLAB_INDEX_BLOCK_DEFAULT;
    p->doc_bytes = TIERLAB_INDEX_DOC_BYTES_DEFAULT;
}

static double tl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *const tl_index_members[] = {"manifest.json", "dict.bin", "skip.bin",
                                               "dids.bin", "freqs.bin"};

static int tl_is_member(const char *name) {
    for (size_t i = 0; i < sizeof tl_index_members / sizeof *tl_index_members; i++)
        if (strcmp(name, tl_index_members[i]) == 0) return 1;
    return 0;
}

/* Remove a flat directory we created (or an index we replace). With
 * only_members, anything but index files makes it refuse (returns -1). */
static int tl_rmdir_flat(const char *dir, int only_members) {
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    struct dirent *e;
    char path[PATH_MAX];
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (only_members && !tl_is_member(e->d_name)) {
            rc = -1;
            continue;
        }
        if (!only_members && snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    }
    closedir(d);
    if (rc || only_members) return rc;
    return rmdir(dir);
}

static void tl_remove_index_dir(const char *dir) {
    char path[PATH_MAX];
    for (size_t i = 0; i < sizeof tl_index_members / sizeof *tl_index_members; i++) {
        if (snprintf(path, sizeof path, "%s/%s", dir, tl_index_members[i]) < (int)sizeof path)
            unlink(path);
    }
    rmdir(dir);
}

static void tl_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static int tl_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void tl_parent(const char *path, char *out, size_t len) {
    snprintf(out, len, "%s", path);
    char *slash = strrchr(out, '/');
    if (!slash) snprintf(out, len, ".");
    else if (slash == out) out[1] = 0;
    else *slash = 0;
}

static int tl_write_manifest(const char *dir, const char *corpus, const char *input,
                             const tierlab_build_params *p, const tierlab_codec *c,
                             uint64_t budget, const tierlab_build_stats *s, char *err,
                             size_t errlen) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/manifest.json", dir) >= (int)sizeof path)
        return tl_err(err, errlen, TIERLAB_EINVAL, "path too long: %s", dir);
    FILE *f = fopen(path, "w");
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "cannot create %s: %s", path, strerror(errno));
    char abs[PATH_MAX], when[32];
    const char *cp = realpath(corpus, abs) ? abs : corpus;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\n  \"format\": \"tierlab-index\",\n  \"format_version\": %d,\n",
            TIERLAB_INDEX_FORMAT_VERSION);
    fprintf(f, "  \"tierlab_version\": \"%s\",\n  \"build_id\": \"%016llx\",\n", TIERLAB_VERSION,
            (unsigned long long)s->build_id);
    fprintf(f, "  \"codec\": \"%s\",\n  \"freq_codec\": \"%s\",\n", c->name,
            tierlab_codec_freq(c)->name);
    fprintf(f, "  \"block_size\": %u,\n  \"doc_bytes\": %u,\n", p->block_size, p->doc_bytes);
    fprintf(f, "  \"documents\": %llu,\n  \"truncated_documents\": %llu,\n",
            (unsigned long long)s->docs, (unsigned long long)s->truncated_docs);
    fprintf(f, "  \"tokens\": %llu,\n  \"terms\": %llu,\n  \"postings\": %llu,\n",
            (unsigned long long)s->tokens, (unsigned long long)s->terms,
            (unsigned long long)s->postings);
    fprintf(f, "  \"blocks\": %llu,\n", (unsigned long long)s->blocks);
    fprintf(f, "  \"input\": \"%s\",\n", input);
    fprintf(f, "  \"corpus\": {\"path\": ");
    tl_json_str(f, cp);
    fprintf(f, ", \"bytes\": %llu, \"digest\": \"%s\"},\n", (unsigned long long)s->corpus_bytes,
            s->corpus_digest);
    fprintf(f, "  \"files\": {");
    for (int i = 0; i < TIERLAB_FILES; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", tierlab_index_file_name(i),
                (unsigned long long)s->file_bytes[i]);
    fprintf(f, "},\n  \"did_block_bytes\": %llu,\n  \"freq_block_bytes\": %llu,\n",
            (unsigned long long)s->did_block_bytes, (unsigned long long)s->freq_block_bytes);
    fprintf(f, "  \"memory_budget_bytes\": %llu,\n  \"runs\": %llu,\n  \"peak_table_bytes\": %llu,\n",
            (unsigned long long)budget, (unsigned long long)s->runs,
            (unsigned long long)s->peak_table_bytes);
    fprintf(f, "  \"ingest_seconds\": %.6f,\n  \"transform_seconds\": %.6f,\n",
            s->ingest_seconds, s->transform_seconds);
    fprintf(f, "  \"created_utc\": \"%s\"\n}\n", when);
    int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    if (fclose(f) != 0) bad = 1;
    if (bad) return tl_err(err, errlen, TIERLAB_EIO, "cannot write %s: %s", path, strerror(e));
    return 0;
}

/* Output paths: out (trailing slashes dropped), out.tmp-PID, out.old-PID;
 * an existing out is refused unless overwrite and it is an index. */
typedef struct tl_outdir {
    char out[PATH_MAX], tmp[PATH_MAX], old[PATH_MAX];
    int exists;
} tl_outdir;

static int tl_check_params(const tierlab_build_params *p, const char *out_dir,
                           const tierlab_codec **codec, char *err, size_t errlen) {
    if (!out_dir || !*out_dir) return tl_err(err, errlen, TIERLAB_EINVAL, "output path required");
    *codec = tierlab_codec_find(p->codec);
    if (!*codec)
        return tl_err(err, errlen, TIERLAB_EINVAL, "unknown codec '%s'", p->codec ? p->codec : "(null)");
    if (p->block_size != 128 && p->block_size != 256)
        return tl_err(err, errlen, TIERLAB_EINVAL, "block size must be 128 or 256, not %u",
                      p->block_size);
    if (p->doc_bytes < 1 || p->doc_bytes > TIERLAB_INDEX_DOC_BYTES_MAX)
        return tl_err(err, errlen, TIERLAB_EINVAL, "doc_bytes must be 1..%d, not %u",
                      TIERLAB_INDEX_DOC_BYTES_MAX, p->doc_bytes);
    return 0;
}

static int tl_prepare(const char *out_dir, int overwrite, tl_outdir *o, char *err, size_t errlen) {
    size_t olen = strlen(out_dir);
    if (olen + 64 > PATH_MAX) return tl_err(err, errlen, TIERLAB_EINVAL, "output path too long");
    snprintf(o->out, sizeof o->out, "%s", out_dir);
    while (olen > 1 && o->out[olen - 1] == '/') o->out[--olen] = 0;
    if (snprintf(o->tmp, sizeof o->tmp, "%s.tmp-%ld", o->out, (long)getpid()) >= (int)sizeof o->tmp ||
        snprintf(o->old, sizeof o->old, "%s.old-%ld", o->out, (long)getpid()) >= (int)sizeof o->old)
        return tl_err(err, errlen, TIERLAB_EINVAL, "output path too long");
    struct stat st;
    o->exists = stat(o->out, &st) == 0;
    if (o->exists) {
        if (!overwrite)
            return tl_err(err, errlen, TIERLAB_EEXIST, "%s exists (overwrite to replace it)", o->out);
        if (!S_ISDIR(st.st_mode) || tl_rmdir_flat(o->out, 1) != 0)
            return tl_err(err, errlen, TIERLAB_EEXIST,
                          "%s exists and is not a tierlab index; not replacing it", o->out);
    }
    tl_rmdir_flat(o->tmp, 0); /* a stale one of an earlier process with our pid */
    if (mkdir(o->tmp, 0755) != 0)
        return tl_err(err, errlen, TIERLAB_EIO, "cannot create %s: %s", o->tmp, strerror(errno));
    return 0;
}

/* rc == 0: fsync the directory and rename it into place (the commit point);
 * otherwise, or if that fails, remove the temporary directory. */
static int tl_commit(tl_outdir *o, int rc, char *err, size_t errlen) {
    if (!rc && tl_fsync_dir(o->tmp) != 0)
        rc = tl_err(err, errlen, TIERLAB_EIO, "cannot fsync %s: %s", o->tmp, strerror(errno));
    if (!rc && o->exists && rename(o->out, o->old) != 0)
        rc = tl_err(err, errlen, TIERLAB_EIO, "cannot move %s aside: %s", o->out, strerror(errno));
    if (!rc && rename(o->tmp, o->out) != 0) {
        rc = tl_err(err, errlen, TIERLAB_EIO, "cannot rename %s to %s: %s", o->tmp, o->out,
                    strerror(errno));
        if (o->exists) rename(o->old, o->out);
    }
    if (rc) {
        tl_rmdir_flat(o->tmp, 0);
    } else {
        if (o->exists) tl_remove_index_dir(o->old);
        char parent[PATH_MAX];
        tl_parent(o->out, parent, sizeof parent);
        tl_fsync_dir(parent);
    }
    return rc;
}

static uint64_t tl_build_id(const tierlab_codec *c, const tierlab_build_params *p,
                            const char *digest) {
    char idtext[256];
    int n = snprintf(idtext, sizeof idtext, "tierlab-index|%d|%s|%u|%u|%s",
                     TIERLAB_INDEX_FORMAT_VERSION, c->name, p->block_size, p->doc_bytes, digest);
    return tl_xxh64(idtext, (size_t)n, 0);
}

int tierlab_index_build(const char *corpus_path, const char *out_dir,
                        const tierlab_build_params *params, tierlab_progress_fn progress,
                        void *ctx, tierlab_build_stats *stats, char *err, size_t errlen) {
    tierlab_build_params p;
    if (params) p = *params;
    else tierlab_build_params_default(&p);
    tierlab_build_stats s;
    memset(&s, 0, sizeof s);
    if (stats) *stats = s;
    if (err && errlen) err[0] = 0;
    const tierlab_codec *codec;
    if (!corpus_path) return tl_err(err, errlen, TIERLAB_EINVAL, "corpus path required");
    int rc = tl_check_params(&p, out_dir, &codec, err, errlen);
    if (rc) return rc;
    uint64_t budget = p.memory_budget_bytes;
    if (!budget) {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        budget = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 4 : (1ull << 30);
    }
    if (budget < (64u << 10)) budget = 64u << 10;
    tl_outdir o;
    rc = tl_prepare(out_dir, p.overwrite, &o, err, errlen);
    if (rc) return rc;

    tl_ingest g;
    memset(&g, 0, sizeof g);
    g.dir = o.tmp;
    g.doc_bytes = p.doc_bytes;
    g.budget = budget;
    g.err = err;
    g.errlen = errlen;
    double t0 = tl_now();
    rc = tl_ingest_corpus(&g, corpus_path, progress, ctx);
    double t1 = tl_now();
    s.docs = g.docs;
    s.truncated_docs = g.truncated;
    s.corpus_bytes = g.corpus_bytes;
    s.tokens = g.tokens;
    s.runs = g.nruns;
    s.peak_table_bytes = g.peak;
    s.ingest_seconds = t1 - t0;
    snprintf(s.corpus_digest, sizeof s.corpus_digest, "xxh64:%016llx",
             (unsigned long long)tl_xxh64_digest(&g.digest));
    s.build_id = tl_build_id(codec, &p, s.corpus_digest);
    if (!rc) {
        tl_tx_params tp = {o.tmp, codec, p.block_size, p.doc_bytes, g.docs, budget, s.build_id};
        tl_tx_result r;
        memset(&r, 0, sizeof r);
        rc = tl_transform(&tp, &g, &r, progress, ctx, g.corpus_bytes, err, errlen);
        s.terms = r.terms;
        s.postings = r.postings;
        s.blocks = r.blocks;
        memcpy(s.file_bytes, r.file_bytes, sizeof s.file_bytes);
        s.did_block_bytes = r.did_block_bytes;
        s.freq_block_bytes = r.freq_block_bytes;
    }
    tl_ingest_free(&g);
    for (uint32_t i = 0; i < g.nruns; i++) {
        char rp[PATH_MAX];
        tl_run_path(rp, sizeof rp, o.tmp, i);
        unlink(rp);
    }
    s.transform_seconds = tl_now() - t1;
    if (!rc) rc = tl_write_manifest(o.tmp, corpus_path, "corpus", &p, codec, budget, &s, err, errlen);
    /* A last chance to cancel right before the commit point: a build asked to
     * stop during the fsyncs above commits nothing. */
    if (!rc && progress && progress(ctx, g.corpus_bytes, g.corpus_bytes))
        rc = tl_err(err, errlen, TIERLAB_ECANCELED, "build cancelled");
    rc = tl_commit(&o, rc, err, errlen);
    if (stats) *stats = s;
    return rc;
}

/* ---- the writer: an index from postings (CIFF import) ---- */
struct tierlab_index_writer {
    tl_outdir o;
    tl_tx x;
    tierlab_build_params p;
    const tierlab_codec *codec;
    tierlab_build_stats s;
    char source[PATH_MAX];
    double t0;
    int failed;
    char err[TIERLAB_ERRMSG];
};

int tierlab_index_writer_open(const char *out_dir, const tierlab_build_params *params,
                              uint64_t docs, const char *source, const char *source_digest,
                              tierlab_index_writer **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return tl_err(err, errlen, TIERLAB_EINVAL, "writer pointer required");
    *out = NULL;
    tierlab_index_writer *w = calloc(1, sizeof *w);
    if (!w) return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory");
    if (params) w->p = *params;
    else tierlab_build_params_default(&w->p);
    int rc = tl_check_params(&w->p, out_dir, &w->codec, err, errlen);
    if (!rc && (docs == 0 || docs > TL_MAX_DOCS - 1))
        rc = tl_err(err, errlen, TIERLAB_EINVAL, "documents must be 1..%llu, not %llu",
                    (unsigned long long)(TL_MAX_DOCS - 1), (unsigned long long)docs);
    if (!rc) rc = tl_prepare(out_dir, w->p.overwrite, &w->o, err, errlen);
    if (rc) {
        free(w);
        return rc;
    }
    snprintf(w->source, sizeof w->source, "%s", source ? source : "");
    snprintf(w->s.corpus_digest, sizeof w->s.corpus_digest, "%s", source_digest ? source_digest : "");
    w->s.docs = docs;
    w->s.build_id = tl_build_id(w->codec, &w->p, w->s.corpus_digest);
    w->t0 = tl_now();
    tl_tx_params tp = {w->o.tmp, w->codec, w->p.block_size, w->p.doc_bytes, docs, 0, w->s.build_id};
    rc = tl_tx_open(&w->x, &tp, w->err, sizeof w->err);
    if (rc) {
        tl_tx_abort(&w->x);
        tl_commit(&w->o, rc, NULL, 0);
        tl_err(err, errlen, rc, "%s", w->err);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

const char *tierlab_index_writer_error(const tierlab_index_writer *w) { return w ? w->err : ""; }

int tierlab_index_writer_add(tierlab_index_writer *w, const char *term, size_t len,
                             const uint32_t *dids, const uint32_t *freqs, uint64_t n) {
    if (!w || !term || (n && (!dids || !freqs))) return TIERLAB_EINVAL;
    if (w->failed) return tl_err(w->err, sizeof w->err, TIERLAB_EINVAL, "writer already failed: %s", w->err);
    int rc = len > UINT32_MAX ? tl_err(w->err, sizeof w->err, TIERLAB_EINVAL, "term too long") : 0;
    for (uint64_t i = 0; i < n && !rc; i++)
        if (freqs[i] == 0)
            rc = tl_err(w->err, sizeof w->err, TIERLAB_EINVAL, "term %.*s: frequency 0",
                        (int)(len < 64 ? len : 64), term);
    if (!rc) rc = tl_tx_term(&w->x, term, (uint32_t)len, n);
    if (!rc) rc = tl_tx_add(&w->x, dids, freqs, n);
    if (!rc) rc = tl_tx_end_term(&w->x);
    if (rc) w->failed = 1;
    else for (uint64_t i = 0; i < n; i++) w->s.tokens += freqs[i];
    return rc;
}

int tierlab_index_writer_close(tierlab_index_writer *w, int commit, tierlab_build_stats *stats,
                               char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!w) return 0;
    int rc = 0;
    if (!commit) rc = TIERLAB_ECANCELED;
    else if (w->failed) rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s", w->err);
    tl_tx_result r;
    memset(&r, 0, sizeof r);
    if (!rc) {
        rc = tl_tx_finish(&w->x, &r);
        if (rc) tl_err(err, errlen, rc, "%s", w->err);
    }
    tl_tx_abort(&w->x);
    if (!rc) {
        w->s.terms = r.terms;
        w->s.postings = r.postings;
        w->s.blocks = r.blocks;
        memcpy(w->s.file_bytes, r.file_bytes, sizeof r.file_bytes);
        w->s.did_block_bytes = r.did_block_bytes;
        w->s.freq_block_bytes = r.freq_block_bytes;
        w->s.transform_seconds = tl_now() - w->t0;
        rc = tl_write_manifest(w->o.tmp, w->source, "postings", &w->p, w->codec, 0, &w->s, err,
                               errlen);
    }
    rc = tl_commit(&w->o, rc, err, errlen);
    if (stats) *stats = w->s;
    free(w);
    return rc == TIERLAB_ECANCELED && !commit ? 0 : rc;
}
