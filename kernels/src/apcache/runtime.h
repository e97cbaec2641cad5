/* runtime.h — the run and its shards (internal to kernels/src/apcache/:
 * runtime.c sets them up and drives them, the files declared at the end run
 * them, report.c writes them out). */
#ifndef TL_APCACHE_RUNTIME_H
#define TL_APCACHE_RUNTIME_H

#include "apcache.h"

/* The workload, parsed once and shared read-only by every shard. Only
 * queries whose terms are all in the dictionary have term occurrences
 * (a query with an unknown term has an empty result and touches nothing). */
typedef struct tl_workload {
    tierlab_workload file; /* the query file as tierlab_workload_read gave it */
    uint32_t nq;
    uint64_t nocc;
    uint64_t *qfirst;   /* nq + 1: occurrences of query q are qfirst[q]..qfirst[q+1] */
    uint8_t *type;      /* TIERLAB_QUERY_* (file.type) */
    uint8_t *nterms;    /* terms in the query line (known or not) */
    uint8_t *known;     /* all terms in the dictionary */
    uint64_t *term;     /* per occurrence: term id */
    uint64_t *next_use; /* per occurrence: next occurrence of the same term, or NEVER */
    uint32_t *nseg;     /* per occurrence: segments of the term in the segment cache */
} tl_workload;

/* Term t of the file (query q's terms are t = file.query_first[q] ..): its
 * bytes and their length. */
static inline const char *tl_workload_term(const tl_workload *w, uint64_t t, size_t *len) {
    *len = (size_t)(w->file.term_off[t + 1] - w->file.term_off[t] - 1);
    return w->file.text + w->file.term_off[t];
}

/* One query's measurements. */
typedef struct tl_qrec {
    uint64_t start_ns, latency_ns, wait_ns;
    uint32_t terms, seg_misses, page_misses, results;
    int64_t lookahead;
    uint32_t done;
} tl_qrec;

typedef struct tl_sample {
    uint32_t core;
    uint64_t t_ns, queries_done;
    int64_t lookahead;
    uint64_t rolling_sum, cache_used_bytes, storage_bytes_read;
} tl_sample;

struct tl_run;

typedef struct tl_shard {
    struct tl_run *run;
    uint32_t id;
    char dir[PATH_MAX];
    int is_copy;
    tierlab_index *ix;
    tl_reader rd;
    tl_slow slow;
    tl_cache_state cs;
    int has_cache;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tierlab_query_ctx *qctx;
    tl_src src[TIERLAB_QUERY_MAX_TERMS];
    uint8_t *missed; /* hybrid: per occurrence, the query thread missed it */
    uint8_t *bypass; /* hybrid-prefetch: per occurrence, not cached (served from storage) */
    /* progress, read by the other threads and the sampler */
    _Atomic uint64_t q_taken;  /* queries the query thread has started */
    _Atomic uint64_t q_done;   /* ... and finished */
    _Atomic uint64_t occ_done; /* term occurrences the query thread finished */
    _Atomic uint64_t w_occ;    /* term occurrences the worker finished */
    _Atomic uint64_t w_q;      /* queries the worker finished */
    _Atomic int qt_finished;   /* the query thread has left its loop */
    _Atomic uint64_t qt_waiting; /* query + 1 the query thread blocks for, or 0 (set under mu) */
    _Atomic int worker_asleep; /* the worker is blocked in cond_wait (set under mu) */
    _Atomic int qt_asleep;     /* the query thread is blocked in cond_wait (set under mu) */
    int qt_cpu, wk_cpu;        /* the CPUs its threads are pinned to, when the run pins */
    /* results, written by their own thread, read after the join */
    tl_qrec *rec;
    tierlab_hit *hits;
    tl_pstats qps, wps;
    uint64_t seg_hits, seg_misses, evicted_before_use;
    uint64_t worker_skipped; /* hybrid: terms gone from the page cache before the copy */
    uint64_t worker_stall_ns, query_wait_ns;
    int rc;
    char err[TIERLAB_ERRMSG];
    uint8_t buf4k[4096];
    pthread_t qt, wk;
    int qt_started, wk_started;
} tl_shard;

typedef struct tl_run {
    tierlab_apcache_params p;
    char index_dir[PATH_MAX], out_dir[PATH_MAX], workload_path[PATH_MAX];
    tl_workload wl;
    uint32_t nshards;
    tl_shard *sh;
    tl_device dev;
    int dev_inited;
    tl_pcache pc;
    int pc_inited;
    uint64_t page_cap_bytes;   /* page-cache cap of this configuration, 0 = none */
    uint64_t nsegments;        /* per shard */
    /* results kept per query: p.k, at most the index's documents (no query
     * has more hits; the query buffers and hits are sized by it) */
    uint32_t k;
    uint64_t planned_bytes;    /* memory the run planned (plan.c) */
    size_t bounce_bytes;
    uint64_t max_term_segments;
    _Atomic int stop;          /* user asked to stop (progress callback) */
    _Atomic int failed;        /* a thread failed: stop everything */
    _Atomic int sampler_quit;
    uint64_t t0, t_end;
    /* start gate: every thread is created first and waits at the gate
     * running (spinning, yielding), then all leave it at t0, so no thread
     * starts ahead of another by its creation time or by a wake-up (a
     * worker that starts before its query thread runs ahead and stays
     * there; a thread blocked on a condition variable leaves late by its
     * wake-up, and a late query thread can tip a run into thrashing) */
    _Atomic uint32_t gate_arrived; /* threads at the gate */
    _Atomic int gate_open;
    uint64_t slow_static; /* tl_slow_static_bytes, computed before t0 */
    tierlab_progress_fn progress;
    void *progress_ctx;
    /* memory limit */
    tl_cgroup cg;
    char limit_how[768];
    uint64_t limit_bytes;
    char drop_how[256];
    char ra_how[256];      /* real device: who reads ahead, how */
    uint64_t populated;    /* bytes of anonymous mappings faulted in at the start */
    int pin;                   /* every query thread and worker has a CPU (tl_plan_cpus) */
    uint64_t handoff_spin_ns;  /* a waiting thread spins this long before it blocks (pinned) */
    char pin_how[256];
    /* real device accounting */
    uint64_t io_read0, io_read1;       /* /proc/self/io read_bytes */
    uint64_t blk_reads0, blk_reads1, blk_ticks0, blk_ticks1;
    char blk_dev[64];
    /* sampler */
    pthread_t sampler;
    int sampler_started;
    tl_sample *samples;
    size_t nsamples, cap_samples;
    uint64_t peak_dram, peak_slow;
    char dram_how[256];
} tl_run;

static inline int tl_is_hybrid_cfg(int c) {
    return c == TL_APCACHE_HYBRID || c == TL_APCACHE_HYBRID_PREFETCH;
}
#define tl_is_hybrid tl_is_hybrid_cfg
static inline int tl_is_prefetch(int c) {
    return c == TL_APCACHE_BASE_PREFETCH || c == TL_APCACHE_HYBRID_PREFETCH;
}
static inline int tl_stopping(tl_run *r) {
    return atomic_load_explicit(&r->stop, memory_order_relaxed) ||
           atomic_load_explicit(&r->failed, memory_order_relaxed);
}

/* ---- workload.c ------------------------------------------------------------- */
int tl_workload_parse(tl_run *r, const struct tierlab_index *ix, char *err, size_t errlen);
void tl_workload_free(tl_workload *w);

/* ---- shard.c ---------------------------------------------------------------- */
int tl_shard_copy(tl_run *r, tl_shard *s, char *err, size_t errlen);
int tl_shard_open(tl_run *r, tl_shard *s, uint64_t *dev_addr, uint64_t *key, char *err,
                  size_t errlen);
void tl_shard_close(tl_shard *s);

/* ---- threads.c: what a shard's threads share ---------------------------------- */
/* Wake every waiting thread (stop, failure, end). */
void tl_wake_all(tl_run *r);
/* Record the shard's first failure and stop the run. */
void tl_fail(tl_shard *s, int rc, const char *what);
void tl_gate_wait(tl_run *r);
/* A shard thread's start (query thread, worker): its set-up, then the gate. */
tl_shard *tl_shard_thread_start(void *arg);
/* The stack of every thread of a run (query threads, workers, the sampler):
 * set, so that the memory plan (plan.c) can count it; far above the largest
 * frames of these threads (a few KiB: PATH_MAX buffers, readahead vectors). */
#define TL_THREAD_STACK_BYTES (256u << 10)
/* The timeline's first allocation (samples); it doubles when full (sampler.c). */
#define TL_TIMELINE_FIRST_SAMPLES 1024u
/* pthread_create with a TL_THREAD_STACK_BYTES stack: 0 or an error number. */
int tl_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);
void tl_gate_open(tl_run *r, uint32_t threads);
int tl_spin_until(tl_shard *s, _Atomic uint64_t *counter, uint64_t add, uint64_t v);
void tl_wake_worker(tl_shard *s);
void tl_worker_block(tl_shard *s);
void tl_worker_await(tl_shard *s, _Atomic uint64_t *counter, uint64_t add, uint64_t q);
int64_t tl_worker_ahead(tl_shard *s, uint64_t q);
int tl_wait_lookahead(tl_shard *s, uint64_t q);
void tl_worker_published(tl_shard *s, _Atomic uint64_t *counter, uint64_t v);
int tl_fill(tl_shard *s, uint64_t j, int direct, int count);

/* ---- the threads: query_thread.c and one config_*.c per worker ---------------- */
void *tl_query_thread(void *arg);
void *tl_base_prefetch_worker(void *arg); /* config_base_prefetch.c */
void *tl_hybrid_worker(void *arg);        /* config_hybrid.c */
void *tl_prefetch_worker(void *arg);      /* config_hybrid_prefetch.c */

/* ---- sampler.c -------------------------------------------------------------- */
void *tl_sampler(void *arg);
int tl_blk_stat(const char *dev, uint64_t *reads, uint64_t *ticks);
uint64_t tl_slow_static_bytes(tl_run *r);
uint64_t tl_proc_io_read_bytes(void);

/* ---- plan.c: the resource guard ---------------------------------------------- */
/* The run's memory and files against what the machine has (plan.c's header);
 * 0, or TIERLAB_ENOMEM with the numbers in err. */
int tl_plan_check(tl_run *r, char *err, size_t errlen);

/* ---- report.c --------------------------------------------------------------- */
int tl_report_write(tl_run *r, char *err, size_t errlen);

#endif
