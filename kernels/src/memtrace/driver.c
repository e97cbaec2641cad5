/* driver.c — tierlab-memtrace, the tracing build's driver (traces/memtrace.md):
 *
 *   tierlab-memtrace INDEX WORKLOAD OUT [--placement P] [--k K] [--every N]
 *                    [--max-bytes B] [--layout]
 *
 * Opens INDEX (placement P, as tierlab_index_open takes it), reads WORKLOAD
 * (tierlab_workload_read) and runs the queries whose 0-based ordinal is a
 * multiple of N, one at a time, each between tierlab_memtrace_query_begin and
 * _end, writing the trace to OUT; it stops early when the byte budget B is
 * spent. stdout: with --layout first `layout marker=0x.. text=0x..-0x..` (the
 * address of the marker word stored right before and right after each traced
 * query, and the recorder's code) and `range REGION 0xLO 0xLEN` per
 * registered range (what a cross-check with valgrind's lackey needs), then
 * `progress DONE TOTAL` lines, then `done records=R queries=T
 * wall_ns=W` (W: the traced queries' time). Exit status 0; 2 with one line
 * on stderr for a bad argument, index or workload; 1 when a query or the
 * trace fails. With TIERLAB_PARENT_PID set it dies with that parent
 * (SIGTERM; the caller removes OUT). Linked with the tracing library only. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "tierlab.h"

/* Stored before and after each traced query: lackey shows these two stores. */
volatile uint32_t tl_memtrace_marker;

static uint64_t tl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int tl_usage(void) {
    fprintf(stderr, "usage: tierlab-memtrace INDEX WORKLOAD OUT [--placement P] [--k K] "
                    "[--every N] [--max-bytes B] [--layout]\n");
    return 2;
}

static int tl_number(const char *flag, const char *s, uint64_t lo, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < lo) {
        fprintf(stderr, "tierlab-memtrace: %s wants an integer >= %" PRIu64 ", got '%s'\n", flag,
                lo, s);
        return 2;
    }
    *out = v;
    return 0;
}

/* FNV-1a 64 of the file's bytes: the workload's identity in the header. */
static uint64_t tl_digest(const char *path) {
    uint64_t h = 0xcbf29ce484222325ull;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    int c;
    while ((c = getc(f)) != EOF) h = (h ^ (uint64_t)(unsigned char)c) * 0x100000001b3ull;
    fclose(f);
    return h;
}

int main(int argc, char **argv) {
    if (argc < 4) return tl_usage();
    const char *placement = "", *dir = argv[1], *wpath = argv[2], *out = argv[3];
    uint64_t k = TIERLAB_K_DEFAULT, every = 1, max_bytes = 0;
    int layout = 0;
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (!strcmp(a, "--layout")) layout = 1;
        else if (i + 1 >= argc) return tl_usage();
        else if (!strcmp(a, "--placement")) placement = argv[++i];
        else if (!strcmp(a, "--k")) rc = tl_number(a, argv[++i], 1, &k);
        else if (!strcmp(a, "--every")) rc = tl_number(a, argv[++i], 1, &every);
        else if (!strcmp(a, "--max-bytes")) rc = tl_number(a, argv[++i], 0, &max_bytes);
        else return tl_usage();
        if (rc) return rc;
    }
    if (k > UINT32_MAX || every > UINT32_MAX) {
        fprintf(stderr, "tierlab-memtrace: --k and --every must fit 32 bits\n");
        return 2;
    }
    const char *parent = getenv("TIERLAB_PARENT_PID");
    if (parent && *parent) {
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
        if ((long)getppid() != strtol(parent, NULL, 10)) return 1; /* parent gone already */
    }
    char err[TIERLAB_ERRMSG * 4];
    tierlab_index *ix = NULL;
    int rc = tierlab_index_open(dir, placement, &ix, err, sizeof err);
    if (rc) {
        fprintf(stderr, "tierlab-memtrace: %s\n", err);
        return 2;
    }
    tierlab_workload w = {0};
    rc = tierlab_workload_read(wpath, &w, err, sizeof err);
    if (rc) {
        fprintf(stderr, "tierlab-memtrace: %s\n", err);
        tierlab_index_close(ix);
        return 2;
    }
    tierlab_query_ctx *q = tierlab_query_ctx_new(ix, (uint32_t)k);
    if (!q) {
        fprintf(stderr, "tierlab-memtrace: out of memory for k = %" PRIu64 "\n", k);
        return 1;
    }
    tierlab_index_info info;
    tierlab_index_get_info(ix, &info);
    tierlab_memtrace_header h;
    memset(&h, 0, sizeof h);
    h.every = (uint32_t)every;
    h.max_bytes = max_bytes;
    h.queries = w.nqueries;
    h.queries_sampled = (w.nqueries + every - 1) / every;
    h.index_build_id = info.build_id;
    h.workload_digest = tl_digest(wpath);
    h.k = (uint32_t)k;
    h.line_bytes = 64;
    h.checks = (uint32_t)tierlab_query_ctx_checks(q);
    snprintf(h.codec, sizeof h.codec, "%s", info.codec);
    snprintf(h.placement, sizeof h.placement, "%s", placement);
    rc = tierlab_memtrace_open(out, &h, err, sizeof err);
    if (rc) {
        fprintf(stderr, "tierlab-memtrace: %s\n", err);
        return rc == TIERLAB_EINVAL ? 2 : 1;
    }
    if (layout) {
        uint64_t lo, hi;
        tierlab_memtrace_text(&lo, &hi);
        printf("layout marker=0x%" PRIx64 " text=0x%" PRIx64 "-0x%" PRIx64 "\n",
               (uint64_t)(uintptr_t)&tl_memtrace_marker, lo, hi);
        uint64_t rlo[64], rlen[64];
        uint8_t reg[64];
        size_t n = tierlab_memtrace_ranges(rlo, rlen, reg, 64);
        for (size_t i = 0; i < n && i < 64; i++)
            printf("range %s 0x%" PRIx64 " 0x%" PRIx64 "\n", tierlab_memtrace_region_name(reg[i]),
                   rlo[i], rlen[i]);
    }
    const char *tp[TIERLAB_QUERY_MAX_TERMS];
    uint32_t tl[TIERLAB_QUERY_MAX_TERMS];
    tierlab_query_stats st;
    uint64_t wall = 0, done = 0, last = tl_now();
    int failed = 0;
    for (uint64_t i = 0; i < w.nqueries && !failed; i += every) {
        uint64_t a = w.query_first[i], z = w.query_first[i + 1];
        for (uint64_t j = a; j < z; j++) {
            tp[j - a] = w.text + w.term_off[j];
            tl[j - a] = (uint32_t)(w.term_off[j + 1] - w.term_off[j] - 1);
        }
        if (!tierlab_memtrace_query_begin((uint32_t)i)) break;
        uint64_t t0 = tl_now();
        tl_memtrace_marker = 1;
        int got = tierlab_query(q, w.type[i], tp, tl, (uint32_t)(z - a), NULL, &st);
        tl_memtrace_marker = 2;
        wall += tl_now() - t0;
        if (got < 0) {
            fprintf(stderr, "tierlab-memtrace: query %" PRIu64 " (line %" PRIu64 "): %s\n", i,
                    w.line[i], tierlab_query_error(q));
            failed = 1;
        }
        if (!tierlab_memtrace_query_end()) break;
        done++;
        uint64_t now = tl_now();
        if (now - last > 200000000u) {
            printf("progress %" PRIu64 " %" PRIu64 "\n", done, h.queries_sampled);
            fflush(stdout);
            last = now;
        }
    }
    tierlab_memtrace_header fin;
    rc = tierlab_memtrace_close(&fin, err, sizeof err);
    if (rc) fprintf(stderr, "tierlab-memtrace: %s\n", err);
    else
        printf("progress %" PRIu64 " %" PRIu64 "\ndone records=%" PRIu64 " queries=%" PRIu64
               " wall_ns=%" PRIu64 "\n",
               done, h.queries_sampled, fin.records, fin.queries_traced, wall);
    tierlab_query_ctx_free(q);
    tierlab_workload_free(&w);
    tierlab_index_close(ix);
    return rc || failed ? 1 : 0;
}
