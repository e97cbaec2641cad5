/* main.c — tierlab-kernels: a small CLI over the C library, for use without
 * Python (e.g. under gem5 or on a bare test machine).
 *   tierlab-kernels codecs              list codecs and the path each uses
 *   tierlab-kernels roundtrip CODEC     read integers from stdin, encode them
 *                                       in blocks, decode, verify, print size
 *   tierlab-kernels apcache INDEX WORKLOAD OUTDIR [options]
 *                                       run the APCache runtime (tierlab.h);
 *                                       `tierlab apcache run` drives it
 *   tierlab-kernels read-probe FILE RUN_BYTES CAP_BYTES READS SEED
 *                                       time reads as the runtime reads a real-
 *                                       device miss (`tierlab validate`'s probe)
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "tierlab.h"

/* "a | b | c" of one registry, for the usage text. */
static void tl_names(FILE *to, size_t (*count)(void), const char *(*name)(size_t)) {
    for (size_t i = 0; i < count(); i++) fprintf(to, "%s%s", i ? " | " : "", name(i));
}

static int tl_usage(FILE *to) {
    fprintf(to,
            "usage: tierlab-kernels codecs\n"
            "       tierlab-kernels roundtrip CODEC < integers.txt\n"
            "       tierlab-kernels apcache INDEX WORKLOAD OUTDIR [--config NAME] [--policy NAME]\n"
            "           [--cores N] [--k N] [--lookahead N|adaptive] [--sample-ns N]\n"
            "           [--cache-bytes N] [--segment-bytes N] [--dram-budget-bytes N]\n"
            "           [--readahead-bytes N] [--slow-tier-placement dram|pm:PATH|numa:N]\n"
            "           [--place-dict TIER] [--place-skip TIER] [--memory-limit 0|1] [--hits]\n"
            "           [--device-read-bandwidth-bytes-per-s B --device-read-latency-ns NS\n"
            "            [--device-seek-ns NS] [--device-queue-depth N]]\n"
            "       tierlab-kernels read-probe FILE RUN_BYTES CAP_BYTES READS SEED\n"
            "  codecs     list the codec registry and the implementation each runs (simd/scalar)\n"
            "  roundtrip  encode whitespace-separated unsigned 32-bit integers from stdin in\n"
            "             blocks of %d, decode them back, verify, print bits/int\n"
            "  apcache    run the APCache runtime. The flags are the run-spec keys with dashes\n"
            "             (summary.json uses the keys); the device_* ones are a storage spec's\n"
            "             numbers, and --device-read-bandwidth-bytes-per-s makes the device\n"
            "             emulated. Prints `progress DONE TOTAL` lines; SIGINT/SIGTERM/SIGHUP\n"
            "             stop it with the results so far (exit 130), and so does the death\n"
            "             of the process named by TIERLAB_PARENT_PID (its parent, when set).\n"
            "             Exit 2 on bad arguments.\n"
            "  read-probe time READS reads of RUN_BYTES at random offsets of FILE as the\n"
            "             runtime reads a real-device miss, page cache capped at CAP_BYTES\n"
            "             (0: none); prints ns per read, then `how ...`\n",
            TIERLAB_MAX_BLOCK);
    fprintf(to, "  --config   ");
    tl_names(to, tierlab_apcache_config_count, tierlab_apcache_config_name);
    fprintf(to, " (default hybrid-prefetch)\n  --policy   ");
    tl_names(to, tierlab_policy_count, tierlab_policy_name);
    fprintf(to, " (default lru)\n");
    return to == stderr ? 2 : 0;
}

static int tl_cmd_codecs(void) {
    printf("%-16s %-6s %s\n", "codec", "delta", "impl");
    for (size_t i = 0; i < tierlab_codec_count(); i++) {
        const tierlab_codec *c = tierlab_codec_at(i);
        printf("%-16s %-6s %s\n", c->name, c->delta ? "yes" : "no", c->impl());
    }
    printf("cpu simd features: %s\n", *tierlab_cpu_features() ? tierlab_cpu_features() : "none");
    return 0;
}

static int tl_cmd_roundtrip(const char *name) {
    const tierlab_codec *c = tierlab_codec_find(name);
    if (!c) {
        fprintf(stderr, "tierlab-kernels: unknown codec '%s' (see: tierlab-kernels codecs)\n", name);
        return 2;
    }
    size_t cap = 1024, n = 0;
    uint32_t *vals = malloc(cap * sizeof *vals);
    char word[64];
    while (vals && scanf("%63s", word) == 1) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(word, &end, 10);
        if (*end || errno || v > UINT32_MAX || word[0] == '-') {
            fprintf(stderr, "tierlab-kernels: not an unsigned 32-bit integer: '%s'\n", word);
            free(vals);
            return 2;
        }
        if (n == cap) {
            uint32_t *grown = realloc(vals, 2 * cap * sizeof *vals);
            if (!grown) break;
            vals = grown;
            cap *= 2;
        }
        vals[n++] = (uint32_t)v;
    }
    if (!vals) return 1;
    uint8_t *enc = malloc(c->max_encoded_bytes(TIERLAB_MAX_BLOCK));
    uint32_t out[TIERLAB_MAX_BLOCK];
    size_t bytes = 0;
    uint32_t prev = 0;
    int rc = 0;
    for (size_t i = 0; enc && i < n && rc == 0; i += TIERLAB_MAX_BLOCK) {
        size_t len = n - i < TIERLAB_MAX_BLOCK ? n - i : TIERLAB_MAX_BLOCK;
        int64_t w = c->encode(vals + i, len, prev, enc);
        int64_t r = w < 0 ? w : c->decode(enc, (size_t)w, len, prev, out);
        if (w < 0 || r != w || memcmp(out, vals + i, len * 4) != 0) {
            fprintf(stderr, "tierlab-kernels: round trip failed in block at %zu\n", i);
            rc = 1;
        }
        bytes += w > 0 ? (size_t)w : 0;
        prev = vals[i + len - 1];
    }
    if (rc == 0)
        printf("%s (%s): %zu integers, %zu bytes, %.3f bits/int\n", c->name, c->impl(), n, bytes,
               n ? 8.0 * (double)bytes / (double)n : 0.0);
    free(enc);
    free(vals);
    return rc;
}

/* ---- apcache ------------------------------------------------------------------ */

static volatile sig_atomic_t tl_interrupted;
static void tl_on_signal(int sig) {
    (void)sig;
    tl_interrupted = 1;
}

/* The runtime must not outlive the process that drives it (`tierlab apcache
 * run`, which may be SIGKILLed): with TIERLAB_PARENT_PID set, the kernel
 * sends SIGTERM when the parent dies (the handler stops the run as Ctrl-C
 * does, so the cgroup and the shard copies are removed), and a parent that
 * died before the request is caught by comparing the pid. */
static void tl_stop_with_parent(void) {
    const char *want = getenv("TIERLAB_PARENT_PID");
    if (!want || !*want) return;
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
    if ((long)getppid() != strtol(want, NULL, 10)) tl_interrupted = 1;
}

static int tl_progress_line(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    printf("progress %llu %llu\n", (unsigned long long)done, (unsigned long long)total);
    fflush(stdout);
    return tl_interrupted != 0;
}

static int tl_parse_u64(const char *cmd, const char *opt, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || end == v || v[0] == '-') {
        fprintf(stderr, "tierlab-kernels %s: %s: not a whole number: '%s'\n", cmd, opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int tl_parse_double(const char *opt, const char *v, double *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || x < 0) {
        fprintf(stderr, "tierlab-kernels apcache: %s: not a number >= 0: '%s'\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int tl_copy_opt(const char *opt, const char *v, char *dst, size_t len) {
    if (strlen(v) >= len) {
        fprintf(stderr, "tierlab-kernels apcache: %s: too long\n", opt);
        return -1;
    }
    snprintf(dst, len, "%s", v);
    return 0;
}

/* read-probe FILE RUN_BYTES CAP_BYTES READS SEED: one line per timed read (ns),
 * then `how <text>`. */
static int tl_cmd_read_probe(int argc, char **argv) {
    if (argc != 7) return tl_usage(stderr);
    static const char *const names[4] = {"RUN_BYTES", "CAP_BYTES", "READS", "SEED"};
    uint64_t v[4];
    for (int i = 0; i < 4; i++)
        if (tl_parse_u64("read-probe", names[i], argv[3 + i], &v[i])) return 2;
    if (v[2] == 0 || v[2] > 1000000) {
        fprintf(stderr, "tierlab-kernels read-probe: READS must be 1 .. 1000000\n");
        return 2;
    }
    double *ns = malloc(v[2] * sizeof *ns);
    char how[1200], err[TIERLAB_ERRMSG];
    if (!ns) return 1;
    int rc = tierlab_apcache_read_probe(argv[2], v[0], v[1], (uint32_t)v[2], v[3], ns, how,
                                        sizeof how, err, sizeof err);
    if (rc) {
        fprintf(stderr, "tierlab-kernels read-probe: %s\n", err);
        free(ns);
        return rc == TIERLAB_EINVAL ? 2 : 1;
    }
    for (uint64_t i = 0; i < v[2]; i++) printf("%.0f\n", ns[i]);
    printf("how %s\n", how);
    free(ns);
    return 0;
}

static int tl_cmd_apcache(int argc, char **argv) {
    if (argc < 5) return tl_usage(stderr);
    tierlab_apcache_params p;
    tierlab_apcache_params_default(&p);
    for (int i = 5; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--hits")) { p.write_hits = 1; continue; }
        if (i + 1 >= argc) {
            fprintf(stderr, "tierlab-kernels apcache: %s needs a value\n", o);
            return 2;
        }
        const char *v = argv[++i];
        uint64_t u = 0;
        int bad = 0;
        if (!strcmp(o, "--config")) {
            p.config = tierlab_apcache_config_find(v);
            if (p.config < 0) {
                fprintf(stderr, "tierlab-kernels apcache: unknown config '%s'; known: ", v);
                tl_names(stderr, tierlab_apcache_config_count, tierlab_apcache_config_name);
                fputc('\n', stderr);
                return 2;
            }
        } else if (!strcmp(o, "--policy")) {
            p.policy = tierlab_policy_find(v);
            if (p.policy < 0) {
                fprintf(stderr, "tierlab-kernels apcache: unknown policy '%s'; known: ", v);
                tl_names(stderr, tierlab_policy_count, tierlab_policy_name);
                fputc('\n', stderr);
                return 2;
            }
        } else if (!strcmp(o, "--lookahead")) {
            if (!strcmp(v, "adaptive")) p.lookahead = TIERLAB_LOOKAHEAD_ADAPTIVE;
            else if (!(bad = tl_parse_u64("apcache", o, v, &u)) && (u < 1 || u > UINT32_MAX)) {
                fprintf(stderr, "tierlab-kernels apcache: --lookahead: 1.. or adaptive\n");
                return 2;
            } else p.lookahead = (uint32_t)u;
        } else if (!strcmp(o, "--cores") || !strcmp(o, "--k") ||
                   !strcmp(o, "--device-queue-depth")) {
            if (!(bad = tl_parse_u64("apcache", o, v, &u)) && u > UINT32_MAX) {
                fprintf(stderr, "tierlab-kernels apcache: %s: at most %u, not '%s'\n", o,
                        UINT32_MAX, v);
                return 2;
            }
            uint32_t x = (uint32_t)u;
            if (!strcmp(o, "--cores")) p.cores = x;
            else if (!strcmp(o, "--k")) p.k = x;
            else p.device_queue_depth = x;
        } else if (!strcmp(o, "--memory-limit")) {
            if (strcmp(v, "0") && strcmp(v, "1")) {
                fprintf(stderr, "tierlab-kernels apcache: --memory-limit: 0 or 1, not '%s'\n", v);
                return 2;
            }
            p.memory_limit = v[0] == '1';
        } else if (!strcmp(o, "--sample-ns")) bad = tl_parse_u64("apcache", o, v, &p.sample_ns);
        else if (!strcmp(o, "--cache-bytes")) bad = tl_parse_u64("apcache", o, v, &p.cache_bytes);
        else if (!strcmp(o, "--segment-bytes")) bad = tl_parse_u64("apcache", o, v, &p.segment_bytes);
        else if (!strcmp(o, "--dram-budget-bytes")) bad = tl_parse_u64("apcache", o, v, &p.dram_budget_bytes);
        else if (!strcmp(o, "--readahead-bytes")) bad = tl_parse_u64("apcache", o, v, &p.readahead_bytes);
        else if (!strcmp(o, "--device-read-bandwidth-bytes-per-s")) {
            bad = tl_parse_double(o, v, &p.device_read_bandwidth_bytes_per_s);
            p.emulated = 1;
        } else if (!strcmp(o, "--device-read-latency-ns"))
            bad = tl_parse_double(o, v, &p.device_read_latency_ns);
        else if (!strcmp(o, "--device-seek-ns")) bad = tl_parse_double(o, v, &p.device_seek_ns);
        else if (!strcmp(o, "--slow-tier-placement"))
            bad = tl_copy_opt(o, v, p.slow_tier_placement, sizeof p.slow_tier_placement);
        else if (!strcmp(o, "--place-dict")) bad = tl_copy_opt(o, v, p.place_dict, sizeof p.place_dict);
        else if (!strcmp(o, "--place-skip")) bad = tl_copy_opt(o, v, p.place_skip, sizeof p.place_skip);
        else {
            fprintf(stderr, "tierlab-kernels apcache: unknown option '%s'\n", o);
            return 2;
        }
        if (bad) return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tl_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* A parent that is gone closed the pipes: progress lines then fail with
     * EPIPE instead of killing the runtime before it removed its cgroup and
     * shard copies. */
    signal(SIGPIPE, SIG_IGN);
    tl_stop_with_parent();
    char err[4 * TIERLAB_ERRMSG]; /* a refused plan lists its numbers */
    int rc = tierlab_apcache_run(argv[2], argv[3], &p, argv[4], tl_progress_line, NULL, err,
                                 sizeof err);
    if (rc == TIERLAB_ECANCELED) {
        fprintf(stderr, "tierlab-kernels apcache: interrupted; results so far written\n");
        return 130;
    }
    if (rc) {
        fprintf(stderr, "tierlab-kernels apcache: %s\n", err);
        return rc == TIERLAB_EINVAL ? 2 : 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return tl_usage(stderr);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) return tl_usage(stdout);
    if (!strcmp(argv[1], "codecs") && argc == 2) return tl_cmd_codecs();
    if (!strcmp(argv[1], "roundtrip") && argc == 3) return tl_cmd_roundtrip(argv[2]);
    if (!strcmp(argv[1], "apcache")) return tl_cmd_apcache(argc, argv);
    if (!strcmp(argv[1], "read-probe")) return tl_cmd_read_probe(argc, argv);
    return tl_usage(stderr);
}
