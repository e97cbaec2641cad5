/* apcache.h — internals of the native APCache runtime (docs/apcache.md). The
 * public face is tierlab_apcache_run in tierlab.h; this header is shared by
 * the files of kernels/src/apcache/ and by the step-driven C tests.
 *
 * Files, in dependency order: each uses only the files above it (and the
 * library outside this folder: index, query, cache, tiers).
 *   device.c     clocks, sleeping, pinning; the storage device layer (real,
 *                or emulated from a spec)
 *   cgroup.c     the DRAM limit of real-device runs
 *   slowtier.c   segment-cache memory on dram, pm:PATH or numa:N
 *   pagecache.c  the emulated page cache (DRAM) of emulated-device runs
 *                (device.c)
 *   steps.c      the cache decisions of the query thread and the workers, as
 *                non-blocking steps (the threads and the tests call them)
 *   terms.c      reading a term: block sources for queries, term copies into
 *                segment chains, page counting (device.c, pagecache.c, steps.c)
 *   probe.c      the calibration probes (device.c, cgroup.c, pagecache.c,
 *                terms.c); nothing in this folder calls them
 * The run (runtime.h), above all of these:
 *   configs.c    the configuration registry (names, count, find)
 *   workload.c   the parsed workload resolved through the dictionary
 *   shard.c      a shard's index copy and files
 *   threads.c    what a shard's threads share: gate, stop, wake, wait
 *   query_thread.c            the query thread (every configuration)
 *   config_base_prefetch.c    the worker of base-prefetch
 *   config_hybrid.c           the copy worker of hybrid
 *   config_hybrid_prefetch.c  the prefetch worker of hybrid-prefetch
 *   sampler.c    the sampler thread and the /proc and /sys statistics
 *   report.c     the result files
 *   runtime.c    setting the run up (params check, CPUs, memory limit),
 *                starting and joining the threads, tierlab_apcache_run
 */
#ifndef TL_APCACHE_H
#define TL_APCACHE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/uio.h>

#include "index/index.h"
#include "query/query.h"
#include "tierlab.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
#define TL_PAGE 4096u
#define TL_MAX_RA_PAGES 256 /* readahead window <= 1 MiB */
#define TL_NO_TERM UINT64_MAX
/* Emulated delays: sleep until this long before the deadline, then spin
 * (a sleeping thread wakes microseconds late alone, tens of microseconds
 * late when the runtime's other threads keep the CPUs busy). TL_SPIN_FULL_NS is used when
 * every runtime thread has a CPU of its own: then a wait shorter than it
 * (an NVMe read) is spun whole, and never wakes late. */
#define TL_SPIN_NS 15000u
#define TL_SPIN_FULL_NS 200000u
/* A query thread or worker with a CPU of its own waits for the other thread
 * of its shard by spinning up to this long before it blocks: a blocked
 * thread's wake-up costs tens of microseconds (`tierlab query costs`
 * measures it), with a long tail when the woken thread's vCPU was halted, and
 * waits in the runtime are mostly one query or one NVMe read long. Longer
 * waits (HDD reads) still block. */
#define TL_HANDOFF_SPIN_NS ((uint64_t)TIERLAB_APCACHE_HANDOFF_SPIN_NS)

/* The configurations, as the numbers the threads switch on (the index of
 * each in configs.c's table of names, which is the public registry). */
enum {
    TL_APCACHE_BASE = 0,
    TL_APCACHE_BASE_PREFETCH = 1,
    TL_APCACHE_HYBRID = 2,
    TL_APCACHE_HYBRID_PREFETCH = 3,
    TL_APCACHE_CONFIGS = 4
};

uint64_t tl_now_ns(void);
/* Sleep until t_ns (CLOCK_MONOTONIC), to within about a microsecond. */
void tl_sleep_until(uint64_t t_ns);
/* Per runtime thread: a 1 ns timer slack, so emulated delays are precise. */
void tl_thread_setup(void);

/* ---- device.c ------------------------------------------------------------ */
typedef struct tl_device {
    int emulated;
    double ns_per_byte;
    uint64_t position_ns; /* read latency + seek */
    uint32_t queue_depth;
    uint64_t spin_ns;     /* emulated delays: spun for their last spin_ns */
    uint64_t *slot_free;  /* per queue slot: when it is free (CLOCK_MONOTONIC ns) */
    uint64_t last_end;    /* device address where the previous request ended */
    uint64_t xfer_free;   /* when the shared transfer (read bandwidth) is free */
    pthread_mutex_t mu;
    _Atomic uint64_t reads, bytes, busy_ns;
    /* emulated: reads that returned after their planned completion (the
     * pread itself took longer), and by how much in all: the emulation's error */
    _Atomic uint64_t late_reads, late_ns, late_preads; /* late_preads: the pread alone overran */
} tl_device;

int tl_device_init(tl_device *d, int emulated, double bytes_per_s, double latency_ns,
                   double seek_ns, uint32_t queue_depth);
void tl_device_destroy(tl_device *d);
/* Book one request of len bytes at device address addr issued at `now`:
 * returns its completion time and updates the slots (mutex held; emulated
 * devices only). Pure arithmetic, so tests drive it with made-up clocks. */
uint64_t tl_device_plan(tl_device *d, uint64_t addr, uint64_t len, uint64_t now);
/* Read len bytes at offset off of fd into iov[0..iovcnt) (consumed: the
 * entries are modified), zero-filling past the end of the file; emulated:
 * returns at the completion time. 0 or TIERLAB_EIO. Thread-safe. */
int tl_device_read(tl_device *d, int fd, struct iovec *iov, int iovcnt, uint64_t off,
                   uint64_t addr, uint64_t len);

/* Pin thread t to `cpu` (best effort; cpu < 0: leave it free). */
void tl_pin_thread(pthread_t t, int cpu);

/* Pages of one readahead run: readahead_bytes, at most a quarter of a page
 * cache of cap_pages (0: no cap), at least 1 — the emulated cache's rule,
 * applied on the real device too. */
uint32_t tl_readahead_run_pages(uint64_t readahead_bytes, uint64_t cap_pages);

/* A mutex that spins a little before it sleeps (PTHREAD_MUTEX_ADAPTIVE_NP),
 * for the page cache, device and shard locks: they are held for well under a
 * microsecond, while a thread that sleeps on a contended lock waits for a
 * futex wake-up, tens of microseconds. An emulated base-prefetch query
 * thread contends with its worker for the page cache's lock; with plain
 * mutexes those wake-ups added to its queries' time outside their waits. A
 * kernel's page-cache hits take no sleeping lock. */
int tl_mutex_init_adaptive(pthread_mutex_t *m);

/* ---- pagecache.c ----------------------------------------------------------- */
/* A file of a shard as the device and the page cache see it. */
typedef struct tl_file_ref {
    int fd;
    uint64_t len;
    uint64_t dev_addr; /* device address of offset 0 */
    uint64_t key0;     /* page-cache key of page 0 */
    const uint8_t *map; /* the index's mmap of the file (page-aligned) */
    uint32_t ra_pages;  /* real device: readahead run in pages; 0 = the kernel's */
} tl_file_ref;

typedef struct tl_pstats {
    uint64_t hits, misses; /* page accesses */
} tl_pstats;

/* Receives the bytes of a read: n bytes that belong at `pos` of the range. */
typedef void (*tl_sink_fn)(void *ctx, uint64_t pos, const uint8_t *p, size_t n);

typedef struct tl_pcache {
    tl_device *dev;
    tierlab_cache *pol;
    uint8_t *frames;
    uint64_t nkeys, nframes, nfree;
    uint32_t *frame_of; /* per page key, or UINT32_MAX */
    uint8_t *loading;   /* per page key: a read is in flight */
    uint32_t *free_frames;
    uint32_t max_run;
    uint64_t reads;
    pthread_mutex_t mu;
    pthread_cond_t loaded;
    int inited;
} tl_pcache;

int tl_pcache_init(tl_pcache *pc, tl_device *dev, uint64_t nkeys, uint64_t cap_bytes,
                   uint64_t readahead_bytes);
void tl_pcache_destroy(tl_pcache *pc);
/* The bytes tl_pcache_init allocates for nkeys page keys and `frames` frames. */
uint64_t tl_pcache_bytes(uint64_t nkeys, uint64_t frames);
/* Read [off, off + len) of f through the cache, handing the bytes to sink
 * (called with the cache's mutex held; it must only copy). Page accesses go
 * to *ps; a page equal to *last_page (may be NULL) is not counted again, and
 * *last_page becomes the range's last page. 0, TIERLAB_EINVAL or _EIO. */
int tl_pcache_read(tl_pcache *pc, const tl_file_ref *f, uint64_t off, uint64_t len,
                   tl_sink_fn sink, void *ctx, uint64_t *last_page, tl_pstats *ps);
uint64_t tl_pcache_used_bytes(tl_pcache *pc);
/* 1 if every page of [off, off+len) of f has a frame (read or being read),
 * without touching them: their recency is unchanged. */
int tl_pcache_holds(tl_pcache *pc, const tl_file_ref *f, uint64_t off, uint64_t len);

/* ---- slowtier.c ------------------------------------------------------------ */
typedef struct tl_slow {
    void *mem;
    size_t len;
    int anon;   /* its pages count in RSS (anonymous or tmpfs) */
    int locked;
    char spec[256];
    char detail[512];
} tl_slow;
int tl_slow_alloc(const char *spec, size_t len, tl_slow *s, char *err, size_t errlen);
void tl_slow_free(tl_slow *s);

/* ---- cgroup.c -------------------------------------------------------------- */
typedef struct tl_cgroup {
    int version, active;
    char parent[PATH_MAX], path[PATH_MAX + 32];
} tl_cgroup;
int tl_cgroup_enter(tl_cgroup *cg, char *why, size_t whylen);
int tl_cgroup_limit(tl_cgroup *cg, uint64_t bytes, char *why, size_t whylen);
uint64_t tl_cgroup_usage(const tl_cgroup *cg);
uint64_t tl_cgroup_peak(const tl_cgroup *cg);
void tl_cgroup_reset_peak(tl_cgroup *cg);
void tl_cgroup_leave(tl_cgroup *cg);
/* b as text with a binary unit ("21.9 GiB", "512 bytes") in buf; returns buf. */
const char *tl_bytes_text(uint64_t b, char *buf, size_t len);
uint64_t tl_populate_anon(void);

/* ---- steps.c: the cache decisions ------------------------------------------
 * One shard's segment cache with what the threads share: the policy (inside
 * tierlab_segcache), the adaptive-lookahead state and a pin count per term
 * (terms the query thread is serving from the cache right now). All calls
 * are made with the shard's mutex held, and none blocks: a step that would
 * have to wait says so, and the caller (a thread, or a test) waits and calls
 * it again. */
typedef struct tl_cache_state {
    tierlab_segcache *sc;
    tierlab_cache *pol;
    tierlab_lookahead *la; /* hybrid-prefetch */
    uint64_t nsegments, segment_bytes, nterms;
    uint32_t *pins;   /* per term: query-thread readers right now */
    uint8_t *ready;   /* per term: chain filled and committed */
    uint64_t filling; /* term whose chain the worker is filling, or TL_NO_TERM */
    int adaptive;
    /* counters */
    uint64_t pinned_victim_waits; /* victim in use: waited (never with adaptive) */
    uint64_t rule_waits;          /* adaptive rule said wait */
    uint64_t bypassed;            /* occurrences served from storage (too big) */
} tl_cache_state;

enum {
    TL_STEP_HIT = 0,   /* cached already (touched, counted for the lookahead) */
    TL_STEP_FILL = 1,  /* a chain is allocated: fill it, then commit */
    TL_STEP_WAIT = 2,  /* must wait (victim in use or the lookahead rule) */
    TL_STEP_BYPASS = 3 /* cannot be cached (larger than the cache) */
};

/* max_pending: bound on the lookahead FIFO (term occurrences of the workload). */
int tl_cache_state_init(tl_cache_state *cs, int policy, uint64_t nterms, uint64_t nsegments,
                        uint64_t segment_bytes, void *memory, int adaptive,
                        uint64_t max_pending);
void tl_cache_state_free(tl_cache_state *cs);
/* The bytes tl_cache_state_init allocates (not the segments' memory). */
uint64_t tl_cache_state_bytes(int policy, uint64_t nterms, uint64_t nsegments, int adaptive,
                              uint64_t max_pending);
/* Segments of a term of `bytes` (DID + freq) and `blocks` blocks. */
uint64_t tl_term_segments(const tl_cache_state *cs, uint64_t bytes, uint64_t blocks);

/* Prefetch worker (hybrid-prefetch), one term occurrence of nseg segments:
 * HIT (a repeat: touched, its count pushed on the lookahead FIFO), FILL
 * (room made by evicting LRU terms, chain allocated: fill it outside the
 * mutex, then tl_worker_commit), WAIT (the LRU victim may not be evicted
 * yet: the adaptive rule, or it is pinned) or BYPASS (too large: 0 pushed).
 * next_use feeds Belady. */
int tl_prefetch_step(tl_cache_state *cs, uint64_t term, uint64_t nseg, uint64_t next_use);
/* The filled chain of `term` becomes visible; pushes nseg when `count`. */
void tl_worker_commit(tl_cache_state *cs, uint64_t term, uint64_t nseg, uint64_t next_use,
                      int count);
/* Deadlock breaker: the worker waits for a victim while the query thread
 * waits for this very query, whose terms do not fit together: give up on
 * this occurrence (0 pushed; it is served from storage). */
void tl_prefetch_bypass(tl_cache_state *cs);
/* Copy worker (hybrid), a term the query thread used and missed: HIT (it
 * was inserted meanwhile), FILL, WAIT (victim pinned) or BYPASS. */
int tl_copy_step(tl_cache_state *cs, uint64_t term, uint64_t nseg, uint64_t next_use);
/* Query thread: is term cached? If so pin it (and, when `touch`, count the
 * access for the policy: hybrid). 1 cached and pinned, 0 not. */
int tl_query_acquire(tl_cache_state *cs, uint64_t term, int touch, uint64_t next_use);
void tl_query_release(tl_cache_state *cs, uint64_t term);
/* Query thread finished a prefetched term occurrence: pop its count. */
void tl_query_term_done(tl_cache_state *cs);
uint64_t tl_cache_used_segments(const tl_cache_state *cs);

/* ---- terms.c ----------------------------------------------------------------- */
/* A term's extent in the index: its blocks' byte ranges in dids.bin and
 * freqs.bin (contiguous, in block order). */
typedef struct tl_extent {
    const tl_skip_entry *e; /* nb + 1 entries */
    uint32_t nb;
    uint64_t did_off, did_len, freq_off, freq_len;
} tl_extent;
int tl_term_extent(const struct tierlab_index *ix, uint64_t term, tl_extent *x);

/* In a chain, a term is: nb x {u32 DID-block offset, u32 freq-block offset}
 * (offsets in the chain), then its DID blocks, then its freq blocks. */
uint64_t tl_chain_bytes(const tl_extent *x);

/* Segment pointers of term's chain into segs[0..n) (n = its segments, which
 * must be its chain's length); O(n), under the shard's mutex. */
int tl_chain_map(tl_cache_state *cs, uint64_t term, uint64_t n, uint8_t **segs);
/* Write n bytes at chain position pos. */
void tl_chain_write(uint8_t **segs, uint64_t segment_bytes, uint64_t pos, const void *p,
                    size_t n);
/* The offset table of a term into its chain. */
void tl_chain_write_table(uint8_t **segs, uint64_t segment_bytes, const tl_extent *x);

/* Where reads go: real device (mmap + mincore, pread) or emulated (pcache). */
typedef struct tl_reader {
    tl_pcache *pc;       /* emulated: non-NULL */
    tl_device *dev;      /* counts real preads */
    tl_file_ref f[2];    /* DIDs, freqs of this shard */
} tl_reader;

/* A query cursor's block source (one per term of a query). */
typedef struct tl_src {
    tl_block_src base;
    int kind;             /* TL_SRC_MAP, TL_SRC_PCACHE, TL_SRC_CHAIN */
    const tl_reader *rd;
    tl_pstats *ps;
    uint64_t last_page[2];
    /* chain */
    uint8_t **segs;
    uint64_t nsegs_cap, segment_bytes;
    uint32_t nb;
    uint64_t did_base, freq_base; /* file offsets of the term's first blocks */
    uint64_t did_len;
    /* copies */
    uint8_t *bounce;
    size_t bounce_len;
    int fail;             /* 1: an I/O error or a chain that disagrees */
} tl_src;
enum { TL_SRC_MAP = 0, TL_SRC_PCACHE = 1, TL_SRC_CHAIN = 2 };

int tl_src_init(tl_src *s, size_t bounce_len, uint64_t max_segments);
void tl_src_free(tl_src *s);
/* Serve the next query's term from storage (mmap + mincore in real mode,
 * the emulated page cache otherwise) or from its cached chain. */
void tl_src_storage(tl_src *s, const tl_reader *rd, tl_pstats *ps);
int tl_src_chain(tl_src *s, tl_cache_state *cs, uint64_t term, uint64_t nseg,
                 const tl_extent *x);

/* Read a whole term range-by-range from storage: into a 4096-byte buffer
 * (base-prefetch: only to fill the page cache) ... */
int tl_read_term_touch(const tl_reader *rd, const tl_extent *x, uint8_t *buf4k,
                       tl_pstats *ps);
/* ... or into its chain: from the page cache / mmap (hybrid: the copy
 * worker), or straight from the device with pread (hybrid-prefetch). */
int tl_read_term_chain(const tl_reader *rd, const tl_extent *x, uint8_t **segs,
                       uint64_t segment_bytes, int direct, tl_pstats *ps);
/* 1 if the page cache still holds every page of the term (the emulated one,
 * or the kernel's by mincore), without touching them: the hybrid worker
 * copies a term only then (config_hybrid.c, tl_hybrid_worker). */
int tl_term_held(const tl_reader *rd, const tl_extent *x);
/* Real device, before [off, off+len) of a mapped file is touched: counts its
 * pages but *last_page (mincore: resident = hit) and reads the missing ones
 * ahead by f->ra_pages (terms.c: "Readahead on the real device"). */
void tl_real_pages(const tl_file_ref *f, uint64_t off, uint64_t len, uint64_t *last_page,
                   tl_pstats *ps);

#endif
