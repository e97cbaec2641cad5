/* apcache.c — C tests of the APCache runtime (kernels/src/apcache/), run
 * plain, under ASan/UBSan (ctest in the sanitizer build) and under
 * ThreadSanitizer (tests/apcache/test_apcache_native.py):
 *  1. the device timing rule, on made-up clocks; the real device's
 *     readahead rule on a temp file;
 *  2. docs/apcache.md's two worked examples of adaptive lookahead, through a
 *     step-driven harness: the same step functions the worker and the query
 *     thread call (steps.c), in a fixed order, without threads;
 *  3. every configuration as real threads on a small generated index with
 *     an emulated device and a cache small enough to evict: every query's
 *     top-k equals tierlab_query's, hits + misses = term occurrences, bytes
 *     were read; plus a fixed-lookahead hybrid-prefetch run and a cancelled
 *     run (partial results, no stray files).
 * A plain main returning an exit status; prints what failed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apcache/apcache.h"

#include "check.h"

/* ---- 1. device timing ---------------------------------------------------------- */

static void test_device_rule(void) {
    tl_device d;
    /* 1 byte/ns, 1000 ns latency + 500 ns seek, 2 slots */
    CHECK(tl_device_init(&d, 1, 1e9, 1000, 500, 2) == 0, "device init");
    uint64_t t = 10000;
    uint64_t a = tl_device_plan(&d, 0, 100, t);     /* random: 1500 + 100 */
    CHECK(a == t + 1600, "first request done at %llu", (unsigned long long)a);
    /* sequential, slot 2: no positioning, but its transfer waits for the
     * first one's (the slots share the read bandwidth) */
    uint64_t b = tl_device_plan(&d, 100, 50, t);
    CHECK(b == t + 1650, "sequential request done at %llu", (unsigned long long)b);
    uint64_t c = tl_device_plan(&d, 5000, 10, t);   /* both slots busy: waits for slot 1 */
    CHECK(c == t + 1600 + 1510, "queued request done at %llu", (unsigned long long)c);
    uint64_t e = tl_device_plan(&d, 9999, 10, t + 100000); /* idle device */
    CHECK(e == t + 100000 + 1510, "idle request done at %llu", (unsigned long long)e);
    /* two random requests at once: both position in parallel, transfers in turn */
    uint64_t t2 = t + 200000;
    uint64_t f = tl_device_plan(&d, 20000, 1000, t2), g = tl_device_plan(&d, 40000, 1000, t2);
    CHECK(f == t2 + 2500 && g == t2 + 3500, "parallel positioning, shared transfer: %llu %llu",
          (unsigned long long)(f - t2), (unsigned long long)(g - t2));
    tl_device_destroy(&d);
}

/* An unlinked temp file of `len` zero bytes under /tmp; -1 (counted as a
 * failure) when it cannot be made. */
static int temp_file(size_t len) {
    char path[] = "/tmp/tierlab-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "temp file");
    if (fd < 0) return -1;
    unlink(path);
    uint8_t *zero = calloc(len, 1);
    int ok = zero && write(fd, zero, len) == (ssize_t)len;
    free(zero);
    CHECK(ok, "write the temp file");
    if (!ok) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A read whose pread outlasts its planned service time is counted late (and
 * as a late pread); one planned long enough is not a late pread. */
static void test_device_late(void) {
    enum { LEN = 4 << 20 };
    int fd = temp_file(LEN);
    if (fd < 0) return;
    uint8_t *buf = calloc(LEN, 1);
    CHECK(buf != NULL, "buffer");
    if (!buf) {
        close(fd);
        return;
    }
    tl_device d;
    CHECK(tl_device_init(&d, 1, 1e18, 0, 0, 1) == 0, "device init"); /* plans ~0 ns */
    struct iovec v = {buf, LEN};
    CHECK(tl_device_read(&d, fd, &v, 1, 0, 0, LEN) == 0, "read 4 MiB");
    CHECK(atomic_load(&d.late_preads) == 1 && atomic_load(&d.late_reads) == 1 &&
              atomic_load(&d.late_ns) >= 2000,
          "a 4 MiB pread outlasts a ~0 ns plan: late");
    tl_device_destroy(&d);
    /* A 4 KiB pread fits in a 50 ms plan, unless this process is not run for
     * 50 ms (a loaded machine, a sanitizer build): that is not the rule
     * failing, so the read may be tried again, on a fresh device each time.
     * A device that counted every read late fails all five. */
    int late = 1;
    for (int attempt = 0; attempt < 5 && late; attempt++) {
        CHECK(tl_device_init(&d, 1, 1e18, 50e6, 0, 1) == 0, "device init"); /* 50 ms */
        v.iov_base = buf;
        v.iov_len = 4096;
        CHECK(tl_device_read(&d, fd, &v, 1, 0, 0, 4096) == 0, "read 4 KiB");
        late = atomic_load(&d.late_preads) != 0;
        tl_device_destroy(&d);
    }
    CHECK(!late, "a 4 KiB pread fits in 50 ms: not a late pread (5 tries)");
    free(buf);
    close(fd);
}

/* The real device's readahead rule (terms.c): a missing page is a miss and
 * reads the run of missing pages from it, at most ra_pages; the pages of the
 * run are hits; nothing else is read (the kernel's read-around is off).
 * Needs a file system whose pages can be dropped (not tmpfs). */
static void test_real_readahead(void) {
    enum { PAGES = 64 };
    int fd = temp_file(PAGES * TL_PAGE);
    if (fd < 0) return;
    fsync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    uint8_t *map = mmap(NULL, PAGES * TL_PAGE, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED, "map the temp file");
    if (map == MAP_FAILED) {
        close(fd);
        return;
    }
    unsigned char vec[PAGES];
    int resident = 0;
    if (mincore(map, PAGES * TL_PAGE, vec) == 0)
        for (int i = 0; i < PAGES; i++) resident += vec[i] & 1;
    if (resident) { /* tmpfs, or the drop failed: the rule cannot be observed here */
        printf("real-device readahead: skipped (%d of %d pages stay resident in /tmp)\n",
               resident, PAGES);
    } else {
        madvise(map, PAGES * TL_PAGE, MADV_RANDOM);
        posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        tl_file_ref f = {.fd = fd, .len = PAGES * TL_PAGE, .map = map, .ra_pages = 8};
        tl_pstats ps = {0, 0};
        uint64_t last = UINT64_MAX;
        tl_real_pages(&f, 100, 20 * TL_PAGE - 200, &last, &ps); /* pages 0 .. 19 */
        CHECK(ps.misses == 3 && ps.hits == 17, "pages 0-19: 3 misses (0, 8, 16), 17 hits; got "
              "%llu, %llu", (unsigned long long)ps.misses, (unsigned long long)ps.hits);
        volatile uint8_t sum = 0;
        for (int i = 0; i < 20; i++) sum += map[i * TL_PAGE]; /* wait for the reads */
        (void)sum;
        CHECK(mincore(map, PAGES * TL_PAGE, vec) == 0, "mincore");
        int in = 0, out = 0;
        for (int i = 0; i < PAGES; i++) {
            if (i < 24) in += vec[i] & 1;
            else out += vec[i] & 1;
        }
        CHECK(in == 24 && out == 0, "runs of 8 read pages 0-23 and nothing more: %d, %d", in,
              out);
        ps.misses = ps.hits = 0;
        tl_real_pages(&f, 19 * TL_PAGE, 8 * TL_PAGE, &last, &ps); /* 19 again (not counted) .. 26 */
        CHECK(ps.misses == 1 && ps.hits == 6, "pages 20-26: 4 resident, a miss at 24 whose run "
              "covers 25, 26; got %llu, %llu", (unsigned long long)ps.misses,
              (unsigned long long)ps.hits);
        f.ra_pages = 0; /* the kernel's: counted only */
        ps.misses = ps.hits = 0;
        last = UINT64_MAX;
        tl_real_pages(&f, 40 * TL_PAGE, 4 * TL_PAGE, &last, &ps);
        CHECK(ps.misses == 4 && ps.hits == 0, "ra_pages 0: 4 misses counted, nothing read");
    }
    munmap(map, PAGES * TL_PAGE);
    close(fd);
}

static void tl_sink_nothing(void *ctx, uint64_t pos, const uint8_t *p, size_t n) {
    (void)ctx, (void)pos, (void)p, (void)n;
}

/* tl_term_held: the hybrid worker copies a term only while the page cache holds
 * every page of it; asking does not touch the pages (their order is kept). */
static void test_term_held(void) {
    enum { PAGES = 16, FRAMES = 4 };
    int fd = temp_file(PAGES * TL_PAGE);
    if (fd < 0) return;
    tl_device dev;
    tl_pcache pc;
    CHECK(tl_device_init(&dev, 1, 1e18, 0, 0, 1) == 0, "a device that takes no time");
    CHECK(tl_pcache_init(&pc, &dev, PAGES, FRAMES * TL_PAGE, TL_PAGE) == 0, "page cache");
    tl_reader rd = {.pc = &pc, .dev = &dev};
    rd.f[0] = (tl_file_ref){.fd = fd, .len = PAGES * TL_PAGE, .key0 = 0};
    rd.f[1] = rd.f[0];
    /* DIDs in pages 0-1, freqs in page 2 */
    tl_extent x = {.did_off = 100, .did_len = TL_PAGE, .freq_off = 2 * TL_PAGE + 8,
                   .freq_len = 16};
    tl_pstats ps = {0, 0};
    CHECK(!tl_term_held(&rd, &x), "nothing read yet: not held");
    for (uint64_t p = 0; p < 3; p++)
        tl_pcache_read(&pc, &rd.f[0], p * TL_PAGE, 1, tl_sink_nothing, NULL, NULL, &ps);
    CHECK(tl_term_held(&rd, &x), "pages 0-2 read: held");
    CHECK(tl_term_held(&rd, &x) && ps.misses == 3, "asking reads nothing, counts nothing");
    /* two more pages: FIFO-like LRU order evicts page 0 (asking did not touch it) */
    for (uint64_t p = 5; p < 7; p++)
        tl_pcache_read(&pc, &rd.f[0], p * TL_PAGE, 1, tl_sink_nothing, NULL, NULL, &ps);
    CHECK(!tl_term_held(&rd, &x), "page 0 evicted: not held");
    x.did_off = TL_PAGE, x.did_len = 10;
    CHECK(tl_term_held(&rd, &x), "pages 1-2 still held");
    tl_pcache_destroy(&pc);
    tl_device_destroy(&dev);
    close(fd);
}

/* Resident pages of this process (statm), in bytes. */
static uint64_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* tl_populate_anon writes every anonymous mapping once: an untouched (and a
 * read-only touched, zero-page) calloc'd array becomes resident. */
static void test_populate(void) {
    enum { LEN = 8 << 20 };
    volatile uint8_t *a = calloc(LEN, 1); /* big: its own mmap, untouched */
    CHECK(a != NULL, "calloc");
    if (!a) return;
    (void)a[LEN / 2]; /* read: the zero page, nothing resident yet */
    uint64_t before = rss_bytes();
    uint64_t done = tl_populate_anon();
    if (done == 0) {
        printf("populate: skipped (a sanitizer build, or a kernel without MADV_POPULATE_WRITE)\n");
    } else {
        uint64_t after = rss_bytes();
        CHECK(done >= LEN && after >= before + LEN - (64 << 10),
              "populate: %llu bytes done, RSS %llu -> %llu", (unsigned long long)done,
              (unsigned long long)before, (unsigned long long)after);
    }
    free((void *)a);
}

/* The hand-off timing the model is calibrated with: positive and finite, as a
 * woken thread runs no sooner than its broadcast (medians of a few rounds).
 * How long it takes is a measurement of the machine, not checked here
 * (tests/bench/test_measured_magnitudes.py). */
static void test_handoff(void) {
    double wake = -1, sig = -1;
    CHECK(tierlab_apcache_handoff_ns(0, &wake, &sig) == TIERLAB_EINVAL, "n = 0");
    CHECK(tierlab_apcache_handoff_ns(5, NULL, &sig) == TIERLAB_EINVAL, "NULL out");
    CHECK(tierlab_apcache_handoff_ns(21, &wake, &sig) == 0, "handoff");
    CHECK(isfinite(wake) && wake > 0 && isfinite(sig) && sig > 0, "wake %.0f ns, signal %.0f ns",
          wake, sig);
}

/* ---- 2. the worked examples ------------------------------------------------------ */

#define SEG 64

static int fill_commit(tl_cache_state *cs, uint64_t term, uint64_t n) {
    int r = tl_prefetch_step(cs, term, n, TIERLAB_NEVER);
    if (r == TL_STEP_FILL) tl_worker_commit(cs, term, n, TIERLAB_NEVER, 1);
    return r;
}

static void test_example_1(void) {
    static uint8_t mem[8 * SEG];
    tl_cache_state cs;
    CHECK(tl_cache_state_init(&cs, tierlab_policy_find("lru"), 3, 8, SEG, mem, 1, 16) == 0, "init");
    enum { T0, T1, T2 };
    CHECK(fill_commit(&cs, T0, 4) == TL_STEP_FILL, "worker caches t0");
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 4 && tierlab_lookahead_pending(cs.la) == 1,
          "sum 4, FIFO [4]");
    CHECK(tl_query_acquire(&cs, T0, 0, TIERLAB_NEVER) == 1, "query thread starts t0");
    CHECK(fill_commit(&cs, T1, 1) == TL_STEP_FILL, "worker caches t1");
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 5 && tierlab_lookahead_pending(cs.la) == 2,
          "sum 5, FIFO [4, 1]");
    CHECK(tl_prefetch_step(&cs, T2, 4, TIERLAB_NEVER) == TL_STEP_WAIT,
          "t2 needs the LRU term t0: 5 + 4 = 9 > 8, so the worker waits");
    CHECK(cs.rule_waits == 1 && cs.pinned_victim_waits == 0, "it was the rule that said wait");
    CHECK(tierlab_cache_contains(cs.pol, T0), "t0 still cached while in use");
    tl_query_release(&cs, T0);
    tl_query_term_done(&cs);
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 1, "query thread finishes t0, pops 4: sum 1");
    CHECK(fill_commit(&cs, T2, 4) == TL_STEP_FILL, "1 + 4 = 5 <= 8: evict t0, complete t2");
    CHECK(!tierlab_cache_contains(cs.pol, T0) && tierlab_cache_contains(cs.pol, T1) &&
              tierlab_cache_contains(cs.pol, T2),
          "t0 evicted, t1 and t2 cached");
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 5 && tierlab_lookahead_pending(cs.la) == 2,
          "sum 5, FIFO [1, 4]");
    CHECK(tierlab_lookahead_query_done(cs.la) == 1 && tierlab_lookahead_query_done(cs.la) == 4,
          "FIFO order [1, 4]");
    CHECK(tl_cache_used_segments(&cs) == 5, "5 segments used");
    tl_cache_state_free(&cs);
}

static void test_example_2(void) {
    static uint8_t mem[8 * SEG];
    tl_cache_state cs;
    CHECK(tl_cache_state_init(&cs, tierlab_policy_find("lru"), 3, 8, SEG, mem, 1, 16) == 0, "init");
    enum { T0, T1, T2 };
    CHECK(fill_commit(&cs, T0, 3) == TL_STEP_FILL, "worker caches t0 (3)");
    CHECK(fill_commit(&cs, T1, 5) == TL_STEP_FILL, "worker caches t1 (5): cache full");
    CHECK(tl_query_acquire(&cs, T0, 0, TIERLAB_NEVER), "query thread on t0");
    tl_query_release(&cs, T0);
    tl_query_term_done(&cs);
    CHECK(tl_query_acquire(&cs, T1, 0, TIERLAB_NEVER), "query thread on t1");
    CHECK(tl_prefetch_step(&cs, T0, 3, TIERLAB_NEVER) == TL_STEP_HIT,
          "t0 repeated: a hit that moves t0 to the front");
    uint64_t v, vs;
    CHECK(tierlab_cache_victim(cs.pol, &v, &vs) == 0 && v == T1 && vs == 5,
          "t1 became the LRU victim while in use");
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 8, "sum 8: `rolling_sum > total` would say "
                                                     "8 > 8 = false and evict t1");
    CHECK(tl_prefetch_step(&cs, T2, 2, TIERLAB_NEVER) == TL_STEP_WAIT,
          "the rule: 8 + 5 > 8, wait");
    CHECK(tierlab_cache_contains(cs.pol, T1) && cs.pinned_victim_waits == 0, "t1 kept");
    tl_query_release(&cs, T1);
    tl_query_term_done(&cs);
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 3, "query thread finishes t1: 3");
    CHECK(fill_commit(&cs, T2, 2) == TL_STEP_FILL, "3 + 5 = 8, not > 8: evict t1");
    CHECK(!tierlab_cache_contains(cs.pol, T1) && tierlab_cache_contains(cs.pol, T0) &&
              tierlab_cache_contains(cs.pol, T2),
          "t1 evicted; t0 and t2 cached");
    CHECK(tierlab_lookahead_rolling_sum(cs.la) == 5, "sum 3 + 2");
    tl_cache_state_free(&cs);
}

/* The same cache without the rule (fixed lookahead): a pinned victim still
 * makes the worker wait, so memory in use is never taken. */
static void test_pin_guard(void) {
    static uint8_t mem[8 * SEG];
    tl_cache_state cs;
    CHECK(tl_cache_state_init(&cs, tierlab_policy_find("lru"), 3, 8, SEG, mem, 0, 16) == 0, "init");
    CHECK(fill_commit(&cs, 0, 6) == TL_STEP_FILL, "t0");
    CHECK(tl_query_acquire(&cs, 0, 0, TIERLAB_NEVER), "t0 in use");
    CHECK(tl_prefetch_step(&cs, 1, 4, TIERLAB_NEVER) == TL_STEP_WAIT && cs.pinned_victim_waits == 1,
          "pinned victim: wait");
    tl_query_release(&cs, 0);
    CHECK(fill_commit(&cs, 1, 4) == TL_STEP_FILL && !tierlab_cache_contains(cs.pol, 0), "then evict");
    CHECK(tl_prefetch_step(&cs, 2, 9, TIERLAB_NEVER) == TL_STEP_BYPASS, "larger than the cache");
    tl_cache_state_free(&cs);
}

/* ---- 3. threaded runs on a generated index -------------------------------------------- */

static char dir[256], idx[300], wl[300];
static uint32_t nq_total;

static void build_index(void) {
    snprintf(dir, sizeof dir, "/tmp/tierlab-apcache-test-%ld", (long)getpid());
    mkdir(dir, 0700);
    char corpus[300], err[TIERLAB_ERRMSG];
    snprintf(corpus, sizeof corpus, "%s/c.txt", dir);
    snprintf(idx, sizeof idx, "%s/idx", dir);
    snprintf(wl, sizeof wl, "%s/w.queries", dir);
    tierlab_corpus_params cp;
    tierlab_corpus_params_default(&cp);
    cp.target_bytes = 1500000;
    cp.doc_bytes = 512;
    cp.seed = 3;
    CHECK(tierlab_corpus_generate(&cp, corpus, NULL, NULL, NULL, NULL) == 0, "corpus");
    tierlab_build_params bp;
    tierlab_build_params_default(&bp);
    bp.codec = tierlab_codec_find("pfor-delta256") ? "pfor-delta256" : "base";
    int rc = tierlab_index_build(corpus, idx, &bp, NULL, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "index build: %s", err);
    /* A workload over frequent and rare terms with repeats, SINGLE and AND. */
    tierlab_index *ix;
    CHECK(tierlab_index_open(idx, NULL, &ix, err, sizeof err) == 0, "open: %s", err);
    tierlab_index_info info;
    tierlab_index_get_info(ix, &info);
    uint64_t *big = malloc(info.terms * sizeof *big), nbig = 0;
    for (uint64_t i = 0; i < info.terms; i++) {
        uint32_t p;
        tierlab_index_term_at(ix, i, NULL, NULL, &p);
        if (p >= 60) big[nbig++] = i;
    }
    FILE *f = fopen(wl, "w");
    uint64_t s = 12345;
    uint64_t recent[8] = {0};
    for (int q = 0; q < 160; q++) {
        int terms = q % 3 == 2 ? 2 : 1;
        for (int t = 0; t < terms; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t term = (s >> 33) % 4 == 0 && q > 8 ? recent[(s >> 20) % 8]
                                                         : big[(s >> 33) % nbig];
            recent[q % 8] = term;
            const char *w;
            uint32_t len;
            tierlab_index_term_at(ix, term, &w, &len, NULL);
            fprintf(f, "%s%.*s", t ? " AND " : "", (int)len, w);
        }
        fputc('\n', f);
    }
    fprintf(f, "nosuchterm\n");
    nq_total = 161;
    fclose(f);
    free(big);
    tierlab_index_close(ix);
}

/* A number from summary.json (our own writer: "key": value). */
static double summary_num(const char *out, const char *key) {
    char path[400], pat[80];
    snprintf(path, sizeof path, "%s/summary.json", out);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(buf, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* Every query's hits in out/hits.tsv equal tierlab_query's on a plain open. */
static void check_hits(const char *out, const char *what) {
    char err[TIERLAB_ERRMSG], path[400], line[512];
    tierlab_index *ix;
    CHECK(tierlab_index_open(idx, NULL, &ix, err, sizeof err) == 0, "open: %s", err);
    tierlab_query_ctx *q = tierlab_query_ctx_new(ix, 50);
    tierlab_hit hits[50];
    snprintf(path, sizeof path, "%s/hits.tsv", out);
    FILE *h = fopen(path, "r");
    FILE *w = fopen(wl, "r");
    CHECK(h && w, "%s: hits.tsv missing", what);
    if (!h || !w) return;
    char *ok = fgets(line, sizeof line, h); /* header */
    (void)ok;
    long pending_q = -1;
    unsigned pq = 0, pr = 0, pd = 0;
    double ps = 0;
    int have = fgets(line, sizeof line, h) && sscanf(line, "%u\t%u\t%u\t%lf", &pq, &pr, &pd, &ps) == 4;
    int mismatches = 0;
    for (uint32_t qi = 0; qi < nq_total && fgets(line, sizeof line, w); qi++) {
        line[strcspn(line, "\n")] = 0;
        const char *terms[4];
        uint32_t lens[4], nt = 0;
        for (char *t = strtok(line, " "); t && nt < 4; t = strtok(NULL, " "))
            if (strcmp(t, "AND")) terms[nt] = t, lens[nt] = (uint32_t)strlen(t), nt++;
        int n = tierlab_query(q, nt == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND, terms, lens,
                              nt, hits, NULL);
        for (int i = 0; i < n; i++) {
            if (!have || pq != qi || pr != (unsigned)i + 1 || pd != hits[i].did ||
                ps != hits[i].score)
                mismatches++;
            have = fgets(line, sizeof line, h) &&
                   sscanf(line, "%u\t%u\t%u\t%lf", &pq, &pr, &pd, &ps) == 4;
        }
        if (have && pq == qi) mismatches++; /* extra hits */
        pending_q = qi;
    }
    (void)pending_q;
    CHECK(mismatches == 0, "%s: %d hits differ from tierlab_query", what, mismatches);
    fclose(h);
    fclose(w);
    tierlab_query_ctx_free(q);
    tierlab_index_close(ix);
}

static int count_strays(void) {
    /* segment-cache files of this process, shard copies */
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "tierlab-segcache-", 17) || !strncmp(e->d_name, ".tierlab-shard-", 15))
            n++;
    if (d) closedir(d);
    return n;
}

static int stop_after;
static int stop_cb(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    (void)total;
    return stop_after && done >= (uint64_t)stop_after;
}

static void run_config(int config, uint32_t lookahead, int cores, uint64_t cache, int emulated) {
    char out[400], err[TIERLAB_ERRMSG], what[160];
    snprintf(what, sizeof what, "%s la=%u cores=%d cache=%llu %s",
             tierlab_apcache_config_name((size_t)config), lookahead, cores,
             (unsigned long long)cache, emulated ? "emulated" : "real");
    snprintf(out, sizeof out, "%s/out-%d-%u-%d-%d", dir, config, lookahead, cores, emulated);
    mkdir(out, 0700);
    tierlab_apcache_params p;
    tierlab_apcache_params_default(&p);
    p.config = config;
    p.cores = (uint32_t)cores;
    p.k = 50;
    p.lookahead = lookahead;
    p.cache_bytes = cache;
    p.segment_bytes = 4096;
    p.dram_budget_bytes = 64 * 4096;
    p.emulated = emulated;
    p.device_read_bandwidth_bytes_per_s = 2e9;
    p.device_read_latency_ns = 3000;
    p.device_queue_depth = 4;
    p.memory_limit = 0;
    p.write_hits = 1;
    p.sample_ns = 2000000;
    snprintf(p.slow_tier_placement, sizeof p.slow_tier_placement, "pm:%s", dir);
    int rc = tierlab_apcache_run(idx, wl, &p, out, NULL, NULL, err, sizeof err);
    CHECK(rc == 0, "%s: run failed: %s", what, err);
    if (rc) return;
    check_hits(out, what);
    double occ = summary_num(out, "term_occurrences");
    double hits = summary_num(out, "segment_cache_hits");
    double misses = summary_num(out, "segment_cache_misses");
    CHECK(summary_num(out, "queries") == (double)nq_total * cores, "%s: queries %g", what,
          summary_num(out, "queries"));
    CHECK(summary_num(out, "partial") == 0, "%s: partial", what);
    CHECK(summary_num(out, "storage_bytes_read") > 0 || !emulated, "%s: nothing read", what);
    CHECK(summary_num(out, "page_cache_misses") > 0, "%s: no page-cache miss on a cold run", what);
    if (config >= TL_APCACHE_HYBRID) {
        CHECK(hits + misses == occ, "%s: hits %g + misses %g != occurrences %g", what, hits,
              misses, occ);
        /* hybrid's copies trail the query thread, so how many land before the
         * run ends is timing; the prefetcher's decisions are not */
        if (config == TL_APCACHE_HYBRID_PREFETCH)
            CHECK(summary_num(out, "evictions") > 0, "%s: the cache never evicted", what);
    } else {
        CHECK(hits == 0 && misses == 0, "%s: segment counts without a segment cache", what);
    }
    if (config == TL_APCACHE_BASE_PREFETCH || config == TL_APCACHE_HYBRID_PREFETCH)
        CHECK(summary_num(out, "lookahead_mean") >= 0, "%s: the prefetcher was behind", what);
    CHECK(count_strays() == 0, "%s: stray files left", what);
}

int main(void) {
    test_device_rule();
    test_device_late();
    test_real_readahead();
    test_term_held();
    test_populate();
    test_handoff();
    test_example_1();
    test_example_2();
    test_pin_guard();
    printf("device rule, worked examples, pin guard: %d failed\n", tl_check_failures);
    build_index();
    int f0 = tl_check_failures;
    uint64_t small = 48 * 4096; /* a fraction of the touched postings: evictions */
    run_config(TL_APCACHE_BASE, 0, 1, small, 1);
    run_config(TL_APCACHE_BASE_PREFETCH, 4, 2, small, 1);
    run_config(TL_APCACHE_HYBRID, 0, 2, small, 1);
    run_config(TL_APCACHE_HYBRID_PREFETCH, TIERLAB_LOOKAHEAD_ADAPTIVE, 2, small, 1);
    run_config(TL_APCACHE_HYBRID_PREFETCH, 64, 1, small, 1); /* fixed LA, too large */
    run_config(TL_APCACHE_BASE, 0, 1, small, 0);              /* real device */
    run_config(TL_APCACHE_HYBRID, 0, 2, small, 0);
    printf("threaded runs: %d failed\n", tl_check_failures - f0);

    /* cancel: stop after a few queries; partial results, nothing left behind */
    char out[400], err[TIERLAB_ERRMSG];
    snprintf(out, sizeof out, "%s/out-cancel", dir);
    mkdir(out, 0700);
    tierlab_apcache_params p;
    tierlab_apcache_params_default(&p);
    p.config = TL_APCACHE_HYBRID_PREFETCH;
    p.cores = 2;
    p.cache_bytes = small;
    p.segment_bytes = 4096;
    p.emulated = 1;
    p.device_read_bandwidth_bytes_per_s = 1e8;
    p.device_read_latency_ns = 2e6; /* slow: the run is still going when stopped */
    p.dram_budget_bytes = 8 * 4096;
    p.readahead_bytes = 4096;
    p.memory_limit = 0;
    snprintf(p.slow_tier_placement, sizeof p.slow_tier_placement, "pm:%s", dir);
    stop_after = 1;
    int rc = tierlab_apcache_run(idx, wl, &p, out, stop_cb, NULL, err, sizeof err);
    CHECK(rc == TIERLAB_ECANCELED, "cancel: rc %d (%s)", rc, err);
    CHECK(summary_num(out, "partial") == 1, "cancel: not marked partial");
    double done = summary_num(out, "queries");
    CHECK(done >= 1 && done < 2.0 * nq_total, "cancel: %g queries", done);
    CHECK(count_strays() == 0, "cancel: stray files left");

    printf("apcache: %d failed\n", tl_check_failures);
    if (!tl_check_failures) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (getenv("TIERLAB_KEEP")) return 0;
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    return tl_check_failures ? 1 : 0;
}
