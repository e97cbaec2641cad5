/* memsim.c: the cache filter and the tier-timing model on streams whose
 * answers are known by hand (tierlab.h "Cache filter", "Tier-timing model"). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tierlab.h"

static tierlab_filter_config tl_cfg(uint32_t levels)
{
    tierlab_filter_config c;
    memset(&c, 0, sizeof c);
    c.line_bytes = 64;
    c.levels = levels;
    c.level_bytes[0] = 4096; /* 8 sets x 8 ways */
    c.level_ways[0] = 8;
    c.level_bytes[1] = 32768; /* 32 sets x 16 ways */
    c.level_ways[1] = 16;
    c.level_bytes[2] = 3 * 65536; /* 256 sets x 12 ways: not a power of two */
    c.level_ways[2] = 12;
    return c;
}

/* in[0..n): accesses of 8 bytes from base, `step` bytes apart. */
static void tl_run_of(tierlab_memtrace_record *in, size_t n, uint64_t base, uint64_t step,
                      uint8_t kind, uint8_t region, uint32_t query)
{
    for (size_t i = 0; i < n; i++) {
        in[i].addr = base + step * i;
        in[i].size = 8;
        in[i].kind = kind;
        in[i].region = region;
        in[i].query = query;
    }
}

static size_t tl_feed(tierlab_filter *f, const tierlab_memtrace_record *in, size_t n,
                      tierlab_mem_request *out, size_t cap)
{
    size_t total = 0, done = 0;
    while (done < n) {
        size_t used;
        int64_t got = tierlab_filter_run(f, in + done, n - done, &used, out + total, cap - total);
        if (got < 0)
            return (size_t)-1;
        total += (size_t)got;
        done += used;
        if (!got && !used)
            return (size_t)-1; /* no progress: out is full */
    }
    return total;
}

int main(void)
{
    enum { N = 20000 };
    tierlab_memtrace_record *in = calloc(N, sizeof *in);
    tierlab_mem_request *out = calloc(8 * N, sizeof *out);
    tierlab_filter *f = NULL;
    tierlab_filter_config c = tl_cfg(3);
    tierlab_filter_counts k;

    /* bad geometry is refused */
    c.level_bytes[0] = 4000;
    CHECK(tierlab_filter_new(&c, &f) == TIERLAB_EINVAL, "size not whole sets");
    c = tl_cfg(3);
    c.levels = 4;
    CHECK(tierlab_filter_new(&c, &f) == TIERLAB_EINVAL, "4 levels");
    c = tl_cfg(3);
    CHECK(tierlab_filter_new(&c, &f) == 0, "new");

    /* a sequential read of 64 KiB in 8-byte loads, no prefetcher: one read per
     * line, in address order, and gap = the other 7 accesses of the line */
    tl_run_of(in, 8192, 0x100000, 8, TIERLAB_ACCESS_LOAD, TIERLAB_REGION_DID, 3);
    size_t n = tl_feed(f, in, 8192, out, 8 * N);
    CHECK(n == 1024, "sequential: %zu requests, want 1024", n);
    int ordered = 1;
    for (size_t i = 0; i < n && i < 1024; i++)
        ordered &= out[i].addr == 0x100000 + 64 * i && out[i].kind == TIERLAB_REQ_READ &&
                    out[i].query == 3 && out[i].region == TIERLAB_REGION_DID &&
                    out[i].gap == (i ? 7u : 0u);
    CHECK(ordered, "sequential: order, gap, region, query");
    tierlab_filter_get_counts(f, &k);
    CHECK(k.accesses[TIERLAB_REGION_DID] == 8192 && k.misses[0][TIERLAB_REGION_DID] == 1024 &&
              k.misses[2][TIERLAB_REGION_DID] == 1024, "sequential counts");
    /* the same again: 64 KiB do not fit L1 (4 KiB) or L2 (32 KiB) but fit the
     * LLC (192 KiB): all L1 and L2 misses, no request */
    n = tl_feed(f, in, 8192, out, 8 * N);
    tierlab_filter_get_counts(f, &k);
    CHECK(n == 0 && k.misses[0][TIERLAB_REGION_DID] == 2048 &&
              k.misses[1][TIERLAB_REGION_DID] == 2048 && k.misses[2][TIERLAB_REGION_DID] == 1024,
          "second pass hits the LLC: %zu requests", n);

    /* stores: write-back; streaming 256 KiB of stores through the hierarchy
     * writes every dirty line back once it leaves the LLC */
    tierlab_filter_reset(f);
    tl_run_of(in, 4096, 0x800000, 64, TIERLAB_ACCESS_STORE, TIERLAB_REGION_DECODE_BUFFER, 0);
    n = tl_feed(f, in, 4096, out, 8 * N);
    tierlab_filter_get_counts(f, &k);
    uint64_t wb = k.writebacks[TIERLAB_REGION_DECODE_BUFFER];
    CHECK(k.reads[TIERLAB_REGION_DECODE_BUFFER] == 4096, "write-allocate: a read per line");
    CHECK(wb == 4096 - 3072, "writebacks %llu, want 1024 (256 KiB through a 192 KiB LLC)",
          (unsigned long long)wb);
    CHECK(n == 4096 + wb, "requests = reads + writebacks");

    /* an access spanning two lines counts one miss per level */
    tierlab_filter_reset(f);
    in[0].addr = 0x2000 + 60;
    in[0].size = 8;
    in[0].kind = TIERLAB_ACCESS_LOAD;
    in[0].region = TIERLAB_REGION_SKIP;
    n = tl_feed(f, in, 1, out, 8 * N);
    tierlab_filter_get_counts(f, &k);
    CHECK(n == 2 && k.misses[0][TIERLAB_REGION_SKIP] == 1, "straddling access");

    /* output too small is refused; a small output takes the stream in parts */
    size_t used = 99;
    CHECK(tierlab_filter_run(f, in, 1, &used, out, tierlab_filter_min_cap(f) - 1) ==
              TIERLAB_EINVAL && used == 0, "cap below min_cap");
    tierlab_filter_free(f);

    /* prefetchers: a sequential stream; the streamer turns demand reads into
     * prefetches, and the total lines fetched stay 1024 */
    c = tl_cfg(2);
    c.prefetch_next_line = 1;
    c.prefetch_stream = 1;
    c.stream_distance = 20;
    c.stream_degree = 2;
    c.streams = 32;
    CHECK(tierlab_filter_new(&c, &f) == 0, "new with prefetchers");
    tl_run_of(in, 8192, 0x100000, 8, TIERLAB_ACCESS_LOAD, TIERLAB_REGION_DID, 0);
    n = tl_feed(f, in, 8192, out, 8 * N);
    tierlab_filter_get_counts(f, &k);
    uint64_t rd = k.reads[TIERLAB_REGION_DID], pf = k.prefetches[TIERLAB_REGION_DID];
    CHECK(rd + pf == 1024 && n == 1024, "prefetch: reads %llu + prefetches %llu",
          (unsigned long long)rd, (unsigned long long)pf);
    CHECK(pf > 900, "the streamer covers most lines: %llu", (unsigned long long)pf);
    CHECK(k.useful_prefetches[TIERLAB_REGION_DID] >= pf - 32, "prefetched lines get used");
    tierlab_filter_free(f);

    /* timing: random reads on a one-tier DRAM-like spec, no gap: epochs of
     * fill_buffers reads each cost the random latency */
    tierlab_timing_config tc;
    memset(&tc, 0, sizeof tc);
    tc.tiers = 2;
    tc.line_bytes = 64;
    tc.fill_buffers = 10;
    tc.window_ns = 100.0;
    tc.cpu_ns_per_access = 1.0;
    tc.tier[0] = (tierlab_tier_params){80, 100, 10e9, 10e9, 64, 0, 100, 0};
    tc.tier[1] = (tierlab_tier_params){170, 300, 2e9, 1e9, 256, 64, 8, 0};
    tc.region_tier[TIERLAB_REGION_DID] = 1;
    tierlab_timing *t = NULL;
    CHECK(tierlab_timing_new(&tc, &t) == 0, "timing new");
    for (size_t i = 0; i < 100; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].addr = (uint64_t)(i * 7919 % 100) * 65536;
        out[i].kind = TIERLAB_REQ_READ;
        out[i].region = TIERLAB_REGION_OTHER;
    }
    double perq[2 * TIERLAB_REGIONS] = {0};
    tierlab_timing_run(t, out, 100, 1, perq, 2);
    tierlab_timing_result res;
    tierlab_timing_get(t, &res);
    CHECK(res.epochs == 10, "epochs %llu", (unsigned long long)res.epochs);
    CHECK(res.latency_ns[TIERLAB_REGION_OTHER] > 999.0 &&
              res.latency_ns[TIERLAB_REGION_OTHER] < 1001.0,
          "10 epochs x 100 ns: %g", res.latency_ns[TIERLAB_REGION_OTHER]);
    CHECK(perq[TIERLAB_REGION_OTHER] > 999.0, "per query");
    /* the same on the slow tier: its max_outstanding (8) caps the epochs, and
     * the 256 B granule x 100 reads at 2 GB/s (12.8 us) exceeds 13 epochs x
     * 300 ns, so bandwidth stalls appear */
    tierlab_timing_reset(t);
    for (size_t i = 0; i < 100; i++)
        out[i].region = TIERLAB_REGION_DID;
    tierlab_timing_run(t, out, 100, 1, NULL, 0);
    tierlab_timing_get(t, &res);
    CHECK(res.epochs == 13, "slow tier epochs %llu", (unsigned long long)res.epochs);
    CHECK(res.bandwidth_ns[TIERLAB_REGION_DID] > 8000, "bandwidth stall %g",
          res.bandwidth_ns[TIERLAB_REGION_DID]);
    CHECK(res.media_bytes[TIERLAB_REGION_DID] == 100 * 256, "media bytes");
    /* sequential lines in one granule: one media access per 4 lines, and a
     * gap larger than the window puts every read in its own epoch */
    tierlab_timing_reset(t);
    for (size_t i = 0; i < 100; i++) {
        out[i].addr = 0x40000 + 64 * i;
        out[i].gap = 200;
    }
    tierlab_timing_run(t, out, 100, 1, NULL, 0);
    tierlab_timing_get(t, &res);
    CHECK(res.media_bytes[TIERLAB_REGION_DID] == 25 * 256 && res.epochs == 100 &&
              res.buffer_hits[TIERLAB_REGION_DID] == 75,
          "granules: %llu bytes, %llu epochs", (unsigned long long)res.media_bytes[TIERLAB_REGION_DID],
          (unsigned long long)res.epochs);
    CHECK(res.latency_ns[TIERLAB_REGION_DID] > 100 * 170 - 1 &&
              res.latency_ns[TIERLAB_REGION_DID] < 300 + 99 * 170 + 1,
          "sequential latency %g", res.latency_ns[TIERLAB_REGION_DID]);
    tc.region_tier[TIERLAB_REGION_DID] = 2;
    tierlab_timing *bad = NULL;
    CHECK(tierlab_timing_new(&tc, &bad) == TIERLAB_EINVAL && !bad, "region on a missing tier");
    tierlab_timing_free(t);

    free(in);
    free(out);
    printf("memsim: %d checks, %d failed\n", tl_checks, tl_check_failures);
    return tl_check_failures != 0;
}
