/* report.c — the raw result files of one APCache run, in out_dir:
 *   summary.json  parameters, where things lived, totals (one object)
 *   queries.tsv   one row per finished query per core
 *   timeline.tsv  one row per sample per core
 *   hits.tsv      core 0's top-k (query_id rank did score), when asked
 * tierlab/runtime/apcache.py turns them into the cache_run / cache_query /
 * cache_timeline tables of traces/schema.yaml; the field meanings are those
 * of the schema's columns; summary.json's parameters are named by their
 * run-spec keys (the fields of tierlab_apcache_params). Written to
 * temporary names and renamed, so a file named like this is complete. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime.h"

static void tl_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void tl_kv_s(FILE *f, const char *k, const char *v) {
    fprintf(f, ",\n  \"%s\": ", k);
    tl_json_str(f, v);
}
static void tl_kv_u(FILE *f, const char *k, uint64_t v) {
    fprintf(f, ",\n  \"%s\": %llu", k, (unsigned long long)v);
}
static void tl_kv_d(FILE *f, const char *k, double v) { fprintf(f, ",\n  \"%s\": %.17g", k, v); }

static FILE *tl_open_tmp(tl_run *r, const char *name, char *tmp, size_t len) {
    snprintf(tmp, len, "%s/.%s.tmp", r->out_dir, name);
    return fopen(tmp, "w");
}

static int tl_close_rename(tl_run *r, FILE *f, const char *tmp, const char *name, char *err,
                           size_t errlen) {
    char dst[PATH_MAX + 64];
    snprintf(dst, sizeof dst, "%s/%s", r->out_dir, name);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, dst) != 0) {
        remove(tmp);
        return tl_err(err, errlen, TIERLAB_EIO, "cannot write %s: %s", dst, strerror(errno));
    }
    return 0;
}

static int tl_write_summary(tl_run *r, char *err, size_t errlen) {
    char tmp[PATH_MAX + 64];
    FILE *f = tl_open_tmp(r, "summary.json", tmp, sizeof tmp);
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    const tierlab_apcache_params *p = &r->p;
    const tl_workload *w = &r->wl;
    uint64_t queries = 0, occ = 0, ph = 0, pm = 0, sh = 0, sm = 0, stall = 0, wait = 0;
    uint64_t evictions = 0, rule = 0, pinned = 0, bypassed = 0, late = 0, skipped = 0;
    double la_sum = 0;
    uint64_t la_n = 0;
    for (uint32_t i = 0; i < r->nshards; i++) {
        tl_shard *s = &r->sh[i];
        for (uint32_t q = 0; q < w->nq; q++) {
            if (!s->rec[q].done) continue;
            queries++;
            occ += s->rec[q].terms;
            wait += s->rec[q].wait_ns;
            if (p->config != TL_APCACHE_BASE) {
                la_sum += (double)s->rec[q].lookahead;
                la_n++;
            }
        }
        ph += s->qps.hits + s->wps.hits;
        pm += s->qps.misses + s->wps.misses;
        sh += s->seg_hits;
        sm += s->seg_misses;
        stall += s->worker_stall_ns;
        late += s->evicted_before_use;
        skipped += s->worker_skipped;
        if (s->has_cache) {
            tierlab_cache_stats cst;
            tierlab_cache_get_stats(s->cs.pol, &cst);
            evictions += cst.evictions;
            rule += s->cs.rule_waits;
            pinned += s->cs.pinned_victim_waits;
            bypassed += s->cs.bypassed;
        }
    }
    uint64_t wall = r->t_end - r->t0;
    uint64_t reads, bytes;
    double util;
    const char *how;
    if (p->emulated) {
        reads = atomic_load(&r->dev.reads);
        bytes = atomic_load(&r->dev.bytes);
        util = wall ? (double)atomic_load(&r->dev.busy_ns) / ((double)wall * p->device_queue_depth) : 0;
        how = "emulated device: requests and bytes issued to it; utilisation = busy time / "
              "(wall x queue depth)";
    } else {
        bytes = r->io_read1 - r->io_read0;
        reads = r->blk_dev[0] ? r->blk_reads1 - r->blk_reads0 : 0;
        util = r->blk_dev[0] && wall ? (double)(r->blk_ticks1 - r->blk_ticks0) * 1e6 / (double)wall : 0;
        how = r->blk_dev[0]
                  ? "real device: bytes = read_bytes of /proc/self/io (this process); reads and "
                    "utilisation from /sys/dev/block/<dev>/stat (whole device)"
                  : "real device: bytes = read_bytes of /proc/self/io; no block-device statistics "
                    "for the index's filesystem (reads 0, utilisation 0)";
    }
    uint64_t index_bytes = 0;
    tierlab_index_info info;
    tierlab_index_get_info(r->sh[0].ix, &info);
    index_bytes = info.file_bytes[TIERLAB_FILE_DIDS] + info.file_bytes[TIERLAB_FILE_FREQS] -
                  2 * TL_HDR_BYTES;
    char la[32];
    if (p->config == TL_APCACHE_BASE || p->config == TL_APCACHE_HYBRID)
        snprintf(la, sizeof la, "none");
    else if (p->lookahead == TIERLAB_LOOKAHEAD_ADAPTIVE) snprintf(la, sizeof la, "adaptive");
    else snprintf(la, sizeof la, "%u", p->lookahead);

    fprintf(f, "{\n  \"format\": \"tierlab-apcache-raw\"");
    tl_kv_u(f, "format_version", 2); /* 2: run-spec key names (slow_tier_placement, ...) */
    tl_kv_s(f, "config", tierlab_apcache_config_name((size_t)p->config));
    tl_kv_s(f, "policy", tierlab_policy_name((size_t)p->policy));
    tl_kv_u(f, "cores", r->nshards);
    tl_kv_u(f, "k", p->k);
    tl_kv_u(f, "planned_bytes", r->planned_bytes);
    tl_kv_s(f, "lookahead", la);
    tl_kv_u(f, "sample_ns", p->sample_ns);
    tl_kv_s(f, "device_mode", p->emulated ? "emulated" : "real");
    if (p->emulated) {
        tl_kv_d(f, "device_read_bandwidth_bytes_per_s", p->device_read_bandwidth_bytes_per_s);
        tl_kv_d(f, "device_read_latency_ns", p->device_read_latency_ns);
        tl_kv_d(f, "device_seek_ns", p->device_seek_ns);
        tl_kv_u(f, "device_queue_depth", p->device_queue_depth);
        tl_kv_u(f, "readahead_bytes", p->readahead_bytes);
        tl_kv_u(f, "device_late_reads", atomic_load(&r->dev.late_reads));
        tl_kv_u(f, "device_late_ns", atomic_load(&r->dev.late_ns));
        tl_kv_u(f, "device_late_preads", atomic_load(&r->dev.late_preads));
        tl_kv_u(f, "device_spin_ns", r->dev.spin_ns);
    } else {
        tl_kv_u(f, "readahead_bytes", p->readahead_bytes);
        tl_kv_s(f, "readahead", r->ra_how);
    }
    tl_kv_s(f, "block_device", r->blk_dev);
    tl_kv_s(f, "slow_tier_placement", p->slow_tier_placement);
    tl_kv_s(f, "slow_tier_detail", r->sh[0].has_cache ? r->sh[0].slow.detail
                                                          : "no segment cache: holds only what "
                                                            "placement_dict/_skip say");
    for (int fl = TIERLAB_FILE_DICT; fl <= TIERLAB_FILE_SKIP; fl++) {
        tierlab_placement_report rep;
        tierlab_index_placement(r->sh[0].ix, fl, &rep);
        char key[32];
        snprintf(key, sizeof key, "placement_%s", tierlab_index_file_key(fl));
        tl_kv_s(f, key, rep.request);
        snprintf(key, sizeof key, "placement_%s_detail", tierlab_index_file_key(fl));
        tl_kv_s(f, key, rep.detail);
    }
    tl_kv_u(f, "cache_bytes", p->cache_bytes);
    tl_kv_u(f, "segment_bytes", tl_is_hybrid_cfg(p->config) ? p->segment_bytes : 0);
    tl_kv_u(f, "segments_per_core", r->nsegments);
    tl_kv_u(f, "page_cap_bytes", r->page_cap_bytes);
    tl_kv_u(f, "memory_limit", p->memory_limit ? 1 : 0);
    tl_kv_s(f, "memory_limit_enforced", r->limit_how);
    tl_kv_u(f, "memory_limit_bytes", r->limit_bytes);
    tl_kv_u(f, "cgroup_peak_bytes", r->cg.active ? tl_cgroup_peak(&r->cg) : 0);
    tl_kv_s(f, "page_cache_drop", r->drop_how);
    tl_kv_s(f, "thread_pinning", r->pin_how);
    tl_kv_u(f, "handoff_spin_ns", r->handoff_spin_ns);
    tl_kv_u(f, "partial", atomic_load(&r->stop) ? 1 : 0);
    tl_kv_u(f, "index_bytes", index_bytes);
    tl_kv_u(f, "queries", queries);
    tl_kv_u(f, "queries_planned", (uint64_t)w->nq * r->nshards);
    tl_kv_u(f, "term_occurrences", occ);
    tl_kv_u(f, "wall_ns", wall);
    tl_kv_u(f, "page_cache_hits", ph);
    tl_kv_u(f, "page_cache_misses", pm);
    tl_kv_u(f, "segment_cache_hits", sh);
    tl_kv_u(f, "segment_cache_misses", sm);
    tl_kv_u(f, "storage_reads", reads);
    tl_kv_u(f, "storage_bytes_read", bytes);
    tl_kv_s(f, "storage_how", how);
    tl_kv_u(f, "worker_stall_ns", stall);
    tl_kv_u(f, "query_wait_ns", wait);
    tl_kv_d(f, "lookahead_mean", la_n ? la_sum / (double)la_n : 0.0);
    tl_kv_u(f, "peak_dram_bytes", r->peak_dram);
    tl_kv_s(f, "peak_dram_how",
            p->emulated ? "max over samples of RssAnon + RssShmem (the emulated page cache "
                          "included) minus the slow tier's DRAM-backed pages"
                        : "max over samples of RssAnon + RssShmem minus the slow tier's "
                          "DRAM-backed pages, plus the index files' page cache (mincore)");
    tl_kv_u(f, "peak_slow_tier_bytes", r->peak_slow);
    tl_kv_d(f, "device_utilisation", util);
    tl_kv_u(f, "evictions", evictions);
    tl_kv_u(f, "lookahead_rule_waits", rule);
    tl_kv_u(f, "pinned_victim_waits", pinned);
    tl_kv_u(f, "bypassed", bypassed);
    tl_kv_u(f, "evicted_before_use", late);
    tl_kv_u(f, "worker_skipped_terms", skipped);
    fprintf(f, "\n}\n");
    return tl_close_rename(r, f, tmp, "summary.json", err, errlen);
}

static int tl_write_queries(tl_run *r, char *err, size_t errlen) {
    char tmp[PATH_MAX + 64];
    FILE *f = tl_open_tmp(r, "queries.tsv", tmp, sizeof tmp);
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    fprintf(f, "core\tquery_id\tstart_ns\tlatency_ns\twait_ns\tterms\tsegment_cache_misses\t"
               "page_cache_misses\tresults\tlookahead\n");
    for (uint32_t i = 0; i < r->nshards; i++)
        for (uint32_t q = 0; q < r->wl.nq; q++) {
            const tl_qrec *x = &r->sh[i].rec[q];
            if (!x->done) continue;
            fprintf(f, "%u\t%u\t%llu\t%llu\t%llu\t%u\t%u\t%u\t%u\t%lld\n", i, q,
                    (unsigned long long)x->start_ns, (unsigned long long)x->latency_ns,
                    (unsigned long long)x->wait_ns, x->terms, x->seg_misses, x->page_misses,
                    x->results, (long long)x->lookahead);
        }
    return tl_close_rename(r, f, tmp, "queries.tsv", err, errlen);
}

static int tl_write_timeline(tl_run *r, char *err, size_t errlen) {
    char tmp[PATH_MAX + 64];
    FILE *f = tl_open_tmp(r, "timeline.tsv", tmp, sizeof tmp);
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    fprintf(f, "core\tt_ns\tqueries_done\tlookahead_queries\trolling_sum_segments\t"
               "cache_used_bytes\tstorage_bytes_read\n");
    for (size_t i = 0; i < r->nsamples; i++) {
        const tl_sample *x = &r->samples[i];
        fprintf(f, "%u\t%llu\t%llu\t%lld\t%llu\t%llu\t%llu\n", x->core,
                (unsigned long long)x->t_ns, (unsigned long long)x->queries_done,
                (long long)x->lookahead, (unsigned long long)x->rolling_sum,
                (unsigned long long)x->cache_used_bytes,
                (unsigned long long)x->storage_bytes_read);
    }
    return tl_close_rename(r, f, tmp, "timeline.tsv", err, errlen);
}

static int tl_write_hits(tl_run *r, char *err, size_t errlen) {
    tl_shard *s = &r->sh[0];
    if (!s->hits) return 0;
    char tmp[PATH_MAX + 64];
    FILE *f = tl_open_tmp(r, "hits.tsv", tmp, sizeof tmp);
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "cannot write in %s: %s", r->out_dir, strerror(errno));
    fprintf(f, "query_id\trank\tdid\tscore\n");
    for (uint32_t q = 0; q < r->wl.nq; q++) {
        if (!s->rec[q].done) continue;
        const tierlab_hit *h = s->hits + (size_t)q * r->k;
        for (uint32_t i = 0; i < s->rec[q].results; i++)
            fprintf(f, "%u\t%u\t%u\t%.17g\n", q, i + 1, h[i].did, h[i].score);
    }
    return tl_close_rename(r, f, tmp, "hits.tsv", err, errlen);
}

int tl_report_write(tl_run *r, char *err, size_t errlen) {
    int rc = tl_write_queries(r, err, errlen);
    if (!rc) rc = tl_write_timeline(r, err, errlen);
    if (!rc) rc = tl_write_hits(r, err, errlen);
    if (!rc) rc = tl_write_summary(r, err, errlen); /* last: its presence means complete */
    return rc;
}
