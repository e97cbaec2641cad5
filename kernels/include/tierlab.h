/*
 * tierlab.h — the one public header of the tierlab kernels (C11).
 *
 * This header is the manual. Every function states who owns what, how big
 * buffers must be, what it returns on error and whether it is thread-safe.
 * Public names start with `tierlab_`; everything else lives in kernels/src/.
 *
 * Codecs (docs/engine.md, "Codec configurations")
 * ------------------------------------------
 * A codec encodes one block of up to TIERLAB_MAX_BLOCK 32-bit integers.
 * The block length n is NOT stored in the encoded bytes: the caller keeps it
 * (the index keeps it in the skip list), exactly like StreamVByte.
 *
 * Delta codecs (`delta == 1`) store wrapping differences:
 *     gap[0] = in[0] - prev,  gap[i] = in[i] - in[i-1]   (mod 2^32)
 * where `prev` is the last value of the previous block (0 for a first block).
 * Decoding takes the same `prev` and rebuilds the values inside the decode
 * loop (no separate prefix-sum pass). Because the arithmetic wraps, unsorted
 * input round-trips too; sorted input is what compresses.
 * Non-delta codecs ignore `prev`.
 *
 * Encoded byte formats are documented in kernels/formats/ (one file per family).
 */
#ifndef TIERLAB_H
#define TIERLAB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIERLAB_VERSION "0.1.0"

/* Largest block a codec accepts. The index uses 256 (default) or 128. */
#define TIERLAB_MAX_BLOCK 256

/* Error codes (negative returns). */
/* TIERLAB_ECORRUPT: encoded bytes are malformed or truncated, or index data
 * fails its checksum or an invariant. */
#define TIERLAB_ECORRUPT (-1)
#define TIERLAB_EINVAL (-2)   /* bad argument (n > TIERLAB_MAX_BLOCK, NULL)  */

typedef struct tierlab_codec {
    /* The name users type (`--codec pfor-delta256`), the registry key. */
    const char *name;
    /* 1 if values are stored as differences and decode takes `prev`. */
    int delta;
    /* Upper bound on the encoded size of any block of n <= TIERLAB_MAX_BLOCK
     * integers, in bytes. Size encode buffers with it. */
    size_t (*max_encoded_bytes)(size_t n);
    /* Encode in[0..n) into out. `out` must hold max_encoded_bytes(n) bytes.
     * Returns the number of bytes written (0 only when n == 0), or
     * TIERLAB_EINVAL when n > TIERLAB_MAX_BLOCK. Thread-safe. */
    int64_t (*encode)(const uint32_t *in, size_t n, uint32_t prev, uint8_t *out);
    /* Decode exactly n integers from in[0..in_len) into out[0..n).
     * `out` must hold n integers; nothing past out[n-1] is written and nothing
     * past in[in_len-1] is read, whatever the bytes say. Returns the number of
     * bytes consumed, TIERLAB_ECORRUPT if the bytes are not a valid block of
     * n integers (truncated, bad header, overlong varint), or TIERLAB_EINVAL.
     * Thread-safe. */
    int64_t (*decode)(const uint8_t *in, size_t in_len, size_t n, uint32_t prev,
                      uint32_t *out);
    /* Which implementation decode uses on this CPU right now: "simd" or
     * "scalar" (see tierlab_force_scalar). */
    const char *(*impl)(void);
    /* The codec this configuration uses for frequency blocks: the same family,
     * never delta-coded (docs/engine.md). NULL means this codec itself. Use
     * tierlab_codec_freq() rather than reading the field. */
    const struct tierlab_codec *freq;
} tierlab_codec;

/* The codec registry (kernels/src/codecs/registry.c is the single table). */
size_t tierlab_codec_count(void);
const tierlab_codec *tierlab_codec_at(size_t i); /* NULL when out of range */
const tierlab_codec *tierlab_codec_find(const char *name); /* NULL if unknown */
/* The codec for the frequency blocks of configuration c (never NULL for a
 * non-NULL c; a non-delta codec, e.g. "pfor" for "pfor-delta"). */
const tierlab_codec *tierlab_codec_freq(const tierlab_codec *c);

/* CPU features, probed once and cached (thread-safe). */
int tierlab_cpu_has_avx2(void);
int tierlab_cpu_has_ssse3(void); /* SSSE3 and SSE4.1 both present */
/* SSE4.2 and PCLMULQDQ both present: the CRC-32C of the index checksums */
int tierlab_cpu_has_sse42(void);
/* Comma-separated list of the SIMD features tierlab looked for and found,
 * e.g. "sse4.1,ssse3,avx2". Static storage. */
const char *tierlab_cpu_features(void);
/* Force every codec, and the CRC-32C of the index checksums, onto its scalar
 * path (1) or back to the best path (0).
 * The scalar path produces byte-identical encodings and identical decodes;
 * tests use this to cover both paths on one machine. Not meant to be
 * flipped while other threads decode. */
void tierlab_force_scalar(int on);
int tierlab_scalar_forced(void);

/* Benchmark helpers: the timing loop lives in C so Python adds no overhead.
 *
 * tierlab_bench_decode_blocks decodes `nblocks` encoded blocks one after
 * another, each into the same small output buffer (per-block regime, as a
 * query decodes) or into consecutive slots of `out` (whole-list regime,
 * `whole_list` = 1; then `out` holds the sum of all block lengths).
 * Block b starts at enc + offsets[b], has offsets[b+1]-offsets[b] bytes and
 * lens[b] integers; for delta codecs block b takes prev = last value of
 * block b-1 (`first_prev` for block 0), read from `prevs[b]`.
 * It repeats the whole pass `reps` times and stores each pass's wall time
 * in ns into pass_ns[0..reps). Returns 0, or a negative error from decode. */
int tierlab_bench_decode_blocks(const tierlab_codec *codec, const uint8_t *enc,
                                const uint64_t *offsets, const uint32_t *lens,
                                const uint32_t *prevs, size_t nblocks,
                                uint32_t *out, int whole_list, int reps,
                                uint64_t *pass_ns);

/* Same loop for the encoder: encodes `nblocks` blocks of in (lens[b] values
 * each, consecutive) into enc, repeated `reps` times. Returns 0 or < 0. */
int tierlab_bench_encode_blocks(const tierlab_codec *codec, const uint32_t *in,
                                const uint32_t *lens, size_t nblocks,
                                uint8_t *enc, int reps, uint64_t *pass_ns);

/* A foreign decoder with StreamVByte's signature,
 * size_t decode(const uint8_t *in, uint32_t *out, uint32_t count), timed with
 * the same loop as above (used for Debian's libstreamvbyte as a peer). */
typedef size_t (*tierlab_foreign_decode_fn)(const uint8_t *in, uint32_t *out,
                                            uint32_t count);
/* ... and with streamvbyte_delta_decode's signature (takes prev). Give exactly
 * one of fn / delta_fn; prevs is read only with delta_fn. */
typedef size_t (*tierlab_foreign_delta_decode_fn)(const uint8_t *in, uint32_t *out,
                                                  uint32_t count, uint32_t prev);
int tierlab_bench_foreign_decode(tierlab_foreign_decode_fn fn,
                                 tierlab_foreign_delta_decode_fn delta_fn,
                                 const uint8_t *enc, const uint64_t *offsets,
                                 const uint32_t *lens, const uint32_t *prevs,
                                 size_t nblocks, uint32_t *out, int whole_list,
                                 int reps, uint64_t *pass_ns);

/* memcpy of the decoded bytes, the physical limit, with the same loop. */
int tierlab_bench_memcpy(const uint32_t *src, const uint32_t *lens, size_t nblocks,
                         uint32_t *out, int whole_list, int reps, uint64_t *pass_ns);

/* ==========================================================================
 * Corpora (docs/workload.md "Corpora"): the generator and the term counter
 * (kernels/src/corpus/generate.c, terms.c)
 * ==========================================================================
 *
 * Writes a synthetic corpus in tierlab's corpus format: UTF-8 (here plain
 * ASCII) text, one document per line ending in '\n', every line at most
 * doc_bytes bytes without its '\n', never empty. Words are lower-case ASCII
 * letters separated by one space, so docs/engine.md's tokeniser (runs of [a-z0-9],
 * lower-cased) gives back exactly the generated words.
 *
 * The token stream is i.i.d. over ranks 1..vocab_max with a two-regime Zipf
 * law: P(r) ~ r^-zipf_s for r <= knee (the head, the "kernel lexicon") and a
 * power law with exponent tail_s beyond it, continuous at the knee. Setting
 * tail_s == zipf_s gives a single Zipf law. Documents are cut from the stream:
 * words are appended until the next one does not fit in doc_bytes; that word
 * opens the next document. Vocabulary growth (Heaps' law) follows from the
 * sampling: about 1/tail_s as the exponent once the tail dominates new terms.
 *
 * The word of a rank is fixed (independent of the seed) and injective: rank r
 * is written with syllables consonant-vowel[-consonant], one syllable for the
 * 560 most frequent ranks (two-letter words first), then two, three, four
 * (at most TIERLAB_CORPUS_MAX_WORD letters). Same params + seed => the same
 * bytes on every platform (IEEE doubles; exp/log are tierlab's own).
 */

/* Error codes of the corpus functions (negative returns, next to the above). */
#define TIERLAB_EIO (-3)       /* cannot open, read or write a file; errno kept */
#define TIERLAB_ENOMEM (-4)    /* out of memory                               */
#define TIERLAB_ECANCELED (-5) /* the progress callback asked to stop          */

/* Longest generated word, in bytes. */
#define TIERLAB_CORPUS_MAX_WORD 12
/* Smallest accepted doc_bytes (a document must hold any word). */
#define TIERLAB_CORPUS_MIN_DOC_BYTES 16
/* Largest accepted knee (the head is sampled from a table of knee entries). */
#define TIERLAB_CORPUS_MAX_KNEE 4194304

/* Progress callback: `done` of `total` units so far (bytes or documents, as
 * the function says). Return 0 to go on, non-zero to stop (the function then
 * returns TIERLAB_ECANCELED). Called from the caller's thread. */
typedef int (*tierlab_progress_fn)(void *ctx, uint64_t done, uint64_t total);

typedef struct tierlab_corpus_params {
    uint64_t seed;
    /* Scale: exactly one of the two is non-zero. With target_bytes the
     * generator stops after the first document that brings the file (newlines
     * included) to at least target_bytes; with docs it writes exactly docs
     * documents (at most 2^32 - 2). */
    uint64_t target_bytes;
    uint64_t docs;
    /* Bytes per document line without its '\n' (at most; documents are filled
     * to within one word of it). >= TIERLAB_CORPUS_MIN_DOC_BYTES. */
    uint32_t doc_bytes;
    /* Ranks are 1..vocab_max (<= 2^31). The counts take 16 bytes of address
     * space per rank; only the pages of ranks that occur are touched. */
    uint32_t vocab_max;
    /* Last rank of the head regime, 1..min(vocab_max, TIERLAB_CORPUS_MAX_KNEE). */
    uint32_t knee;
    /* Exponents of the head and the tail, each in (0, 8]. */
    double zipf_s;
    double tail_s;
} tierlab_corpus_params;

typedef struct tierlab_corpus_stats {
    uint64_t docs;          /* documents written                            */
    uint64_t bytes;         /* corpus file size, newlines included          */
    uint64_t tokens;        /* words written                                */
    uint64_t terms;         /* vocabulary: distinct words written           */
    uint64_t max_postings;  /* largest document frequency of any word       */
    double seconds;         /* wall time of the whole call                  */
} tierlab_corpus_stats;

/* Fill *p with tierlab's defaults: seed 0, target_bytes 100 MB (10^8), docs 0,
 * doc_bytes 1024, vocab_max 2^24, knee 10000, zipf_s 1.0, tail_s 2.0. */
void tierlab_corpus_params_default(tierlab_corpus_params *p);

/* Generate a corpus into corpus_path (created or truncated) and, unless
 * terms_path is NULL, its term table into terms_path: a TSV with the header
 * line "term\tpostings\toccurrences" and one row per word that occurs
 * (postings = documents containing it, occurrences = times it occurs), in
 * rank order (most probable first). Memory: the counts (see vocab_max), 4
 * bytes per distinct word, 25 bytes per head rank; the text is streamed
 * through a 1 MiB buffer.
 * `progress` (may be NULL) is called about every 4 MiB of text and at the
 * end, in bytes when target_bytes is set, in documents when docs is set.
 * `stats` (may be NULL) receives the totals, also on error (partial counts).
 * Returns 0, TIERLAB_EINVAL (bad params, NULL corpus_path), TIERLAB_EIO,
 * TIERLAB_ENOMEM or TIERLAB_ECANCELED. On error the outputs are incomplete:
 * the caller removes them (tierlab writes to temporary names and renames).
 * Thread-safe (no global state); one call uses one core. */
int tierlab_corpus_generate(const tierlab_corpus_params *p, const char *corpus_path,
                            const char *terms_path, tierlab_progress_fn progress,
                            void *ctx, tierlab_corpus_stats *stats);

/* Count the terms of corpus_path and write its term table to terms_path: the
 * TSV above, rows sorted by occurrences descending, then term in byte order.
 * Every '\n' ends a document (so does the end of a non-empty last line);
 * terms are docs/engine.md's tokens: maximal runs of ASCII letters and digits,
 * lower-cased; any other byte (UTF-8 multi-byte characters included)
 * separates them. Terms of any length (< 4 GiB) are kept whole. `stats` gets
 * docs, bytes (of input), tokens, terms, max_postings and seconds (partial
 * on error). `progress` (may be NULL) gets bytes read of the file size, about
 * every 4 MiB. Memory: about 100 bytes per distinct term, plus the bytes of
 * terms longer than 8. Returns 0, TIERLAB_EINVAL (NULL path, term >= 4 GiB),
 * TIERLAB_EIO, TIERLAB_ENOMEM or TIERLAB_ECANCELED (terms_path then
 * incomplete). Thread-safe. */
int tierlab_corpus_count_terms(const char *corpus_path, const char *terms_path,
                               tierlab_progress_fn progress, void *ctx,
                               tierlab_corpus_stats *stats);

/* The word of rank (1..2^31) into buf, which must hold
 * TIERLAB_CORPUS_MAX_WORD + 1 bytes; NUL-terminated. Returns its length, or 0
 * for rank 0 or rank > 2^31. Thread-safe. */
size_t tierlab_corpus_word(uint32_t rank, char *buf);

/* ==========================================================================
 * Inverted index: build, open, place, query (docs/engine.md "Indexing", "Queries",
 * "Placement"; kernels/src/index/, kernels/src/query/, kernels/src/tiers/).
 * Byte formats: kernels/formats/index.md.
 * ==========================================================================
 *
 * Corpus: one document per line ('\n'), DIDs are line numbers from 0. A line
 * longer than doc_bytes is cut to its first doc_bytes bytes (counted in
 * truncated_docs). Tokens are maximal runs of ASCII [A-Za-z0-9], lower-cased;
 * every other byte (including bytes >= 0x80) separates. A term's repeats in a
 * document add up to its frequency.
 *
 * An index is a directory of five files: dict.bin, skip.bin, dids.bin,
 * freqs.bin (each starting with a 128-byte header: magic, format version,
 * codec, block size, build id, totals) and manifest.json. It is built in
 * "<out>.tmp-<pid>" and renamed to <out> only after every file, the manifest
 * last, is written and fsync'd: a directory named <out> is always complete.
 * Build ids are a hash of the corpus digest and the configuration, so the
 * same corpus and configuration give byte-identical .bin files.
 *
 * Scoring: BM25 with k1 = 1.2 and a constant length term (fixed-size
 * documents): score(d) = sum over query terms t of
 *     idf(t) * f * (k1 + 1) / (f + k1),   idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))
 * (the non-negative variant of the Robertson-Sparck Jones IDF, so a term in
 * every document still adds a positive score). Sums run in query-term order,
 * in double precision, so scores are bit-identical across codecs and tiers.
 * Results are sorted by score descending, ties by DID ascending.
 */

/* More error codes (negative returns; see also TIERLAB_EIO, _ENOMEM, _ECANCELED).
 * An index whose headers or manifest are wrong is refused at open with
 * TIERLAB_EFORMAT; damage found later, in the regions a reader uses, is
 * TIERLAB_ECORRUPT (see "Integrity" below). */
#define TIERLAB_EFORMAT (-6) /* not a tierlab index, other version, or corrupt  */
#define TIERLAB_EEXIST (-7)  /* the output directory exists (and no overwrite)  */

/* Version of the index byte formats; a reader refuses any other. 4: the
 * pfor-delta256/pfor256 blocks store values minus one (kernels/formats/pfor.md). */
#define TIERLAB_INDEX_FORMAT_VERSION 4
/* Block sizes an index may use (postings per skip-list entry). */
#define TIERLAB_INDEX_BLOCK_DEFAULT 256
#define TIERLAB_INDEX_DOC_BYTES_DEFAULT 1024
/* Largest accepted doc_bytes. */
#define TIERLAB_INDEX_DOC_BYTES_MAX 1048576
/* Error messages are at most this long, NUL included. */
#define TIERLAB_ERRMSG 512

/* The four files of an index, in this order wherever arrays are indexed by file. */
#define TIERLAB_FILE_DICT 0
#define TIERLAB_FILE_SKIP 1
#define TIERLAB_FILE_DIDS 2
#define TIERLAB_FILE_FREQS 3
#define TIERLAB_FILES 4
/* "dict.bin", "skip.bin", "dids.bin", "freqs.bin"; NULL out of range. The
 * short names used in placements are "dict", "skip", "did", "freq". */
const char *tierlab_index_file_name(int file);
const char *tierlab_index_file_key(int file);

typedef struct tierlab_build_params {
    /* Codec configuration (registry name); freq blocks use tierlab_codec_freq. */
    const char *codec;
    /* Postings per block: 128 or 256. */
    uint32_t block_size;
    /* Longest document in bytes; longer lines are cut. 1..TIERLAB_INDEX_DOC_BYTES_MAX. */
    uint32_t doc_bytes;
    /* Bound on the ingest table (terms, posting chunks, hash slots). When a
     * document leaves the table above it, the table is written as a sorted run
     * to a temporary file in the build directory and emptied; transform merges
     * the runs. 0 = a quarter of physical RAM. At least 64 KiB is used. */
    uint64_t memory_budget_bytes;
    /* 1: replace an existing <out> (renamed aside, then removed); 0: refuse
     * with TIERLAB_EEXIST. */
    int overwrite;
} tierlab_build_params;

/* Defaults: codec "base", block 256, doc_bytes 1024, budget 0, overwrite 0. */
void tierlab_build_params_default(tierlab_build_params *p);

typedef struct tierlab_build_stats {
    uint64_t docs;           /* documents (lines), including empty ones        */
    uint64_t truncated_docs; /* lines longer than doc_bytes                    */
    uint64_t corpus_bytes;   /* bytes read from the corpus                     */
    uint64_t tokens;         /* term occurrences                               */
    uint64_t terms;          /* distinct terms                                 */
    uint64_t postings;       /* (term, document) pairs                         */
    uint64_t blocks;         /* DID blocks (= freq blocks)                     */
    uint64_t runs;           /* sorted runs written (0: built in memory)       */
    uint64_t peak_table_bytes;          /* largest ingest table seen           */
    uint64_t file_bytes[TIERLAB_FILES]; /* size of each file, header included  */
    uint64_t did_block_bytes;  /* encoded DID blocks (dids.bin without header) */
    uint64_t freq_block_bytes; /* encoded freq blocks                          */
    uint64_t build_id;
    double ingest_seconds;    /* reading, tokenising, table, runs              */
    double transform_seconds; /* merge, encode, write, fsync, rename           */
    char corpus_digest[32];   /* "xxh64:" + 16 hex digits of the corpus bytes  */
} tierlab_build_stats;

/* Build an index of corpus_path into the directory out_dir (see above).
 * `progress` (may be NULL) is called about every 4 MiB of corpus in bytes
 * (total = corpus size) during ingest, then with done = total every few
 * thousand terms of the transform and once right before the commit (the
 * rename); returning non-zero cancels, whatever the phase. `stats`
 * (may be NULL) gets the totals. `err` (may be NULL) receives a one-line
 * message on failure. Returns 0, TIERLAB_EINVAL (bad params, unknown codec),
 * TIERLAB_EIO (errno-bearing message), TIERLAB_ENOMEM, TIERLAB_ECANCELED,
 * TIERLAB_EEXIST, or a codec's error. On any failure nothing named out_dir is
 * created and the temporary directory is removed. Memory: the budget plus
 * about 1 MiB per run at merge. Thread-safe (no global state). */
int tierlab_index_build(const char *corpus_path, const char *out_dir,
                        const tierlab_build_params *p, tierlab_progress_fn progress,
                        void *ctx, tierlab_build_stats *stats, char *err, size_t errlen);

/* An index from postings that exist already (CIFF import): the same files,
 * checks and atomic rename as tierlab_index_build, without a corpus.
 * open: p gives codec, block_size, overwrite (doc_bytes and the budget are
 * only recorded); docs is the collection size N (DIDs < docs); source and
 * source_digest (may be NULL) go to the manifest's corpus.path / digest, and
 * the digest into the build id. Returns 0 and *w, or an error with err.
 * add: one term with all its postings; terms in strictly increasing byte
 * order (memcmp, a prefix first), non-empty, without NUL bytes; DIDs strictly
 * increasing and < docs; freqs >= 1. Returns 0 or TIERLAB_EINVAL/_EIO/...
 * with tierlab_index_writer_error(w); after an error, close with commit 0.
 * close: commit = 1 finishes the files, writes the manifest and renames the
 * directory into place; commit = 0 discards everything. Frees w (NULL is
 * fine); stats (may be NULL) as for a build. One writer per thread. */
typedef struct tierlab_index_writer tierlab_index_writer;
int tierlab_index_writer_open(const char *out_dir, const tierlab_build_params *p, uint64_t docs,
                              const char *source, const char *source_digest,
                              tierlab_index_writer **w, char *err, size_t errlen);
int tierlab_index_writer_add(tierlab_index_writer *w, const char *term, size_t len,
                             const uint32_t *dids, const uint32_t *freqs, uint64_t n);
const char *tierlab_index_writer_error(const tierlab_index_writer *w);
int tierlab_index_writer_close(tierlab_index_writer *w, int commit, tierlab_build_stats *stats,
                               char *err, size_t errlen);

/* An open index: the four files placed on their tiers. Read-only, so one
 * index may be queried from many threads, each with its own query context. */
typedef struct tierlab_index tierlab_index;

/* Open the index in dir. `placement` (may be NULL or "" = all storage) is a
 * comma-separated list of key=tier with keys dict, skip, did, freq (or one
 * bare tier for all four) and tiers:
 *   storage   mmap of the file (page cache of its device)
 *   dram      copied into anonymous memory, populated; mlock'd when allowed
 *   pm:PATH   copied into directory PATH, then mmap'd from there (the copy is
 *             unlinked once mapped); real PM only on an fsdax mount
 *   numa:N    anonymous memory bound to node N with mbind(MPOL_BIND), then
 *             filled; verified page by page with move_pages
 * Checks: manifest.json present and of this format version, each header's
 * magic, checksum, format version, codec (known to this library), block
 * size, build id, totals and file size, the headers against each other, and
 * the manifest's codec, freq_codec, block_size, doc_bytes, build_id,
 * documents, terms, postings, blocks, file sizes and block bytes against the
 * headers (a mismatch names both values). Returns 0 and *out, or
 * TIERLAB_EINVAL (bad placement, missing NUMA node), TIERLAB_EIO,
 * TIERLAB_EFORMAT (foreign, incomplete, other-version or corrupt index) with
 * a message in err. An index of another format version is refused with
 * "index format version N; rebuild with tierlab index build".
 * tierlab_index_open_flags takes TIERLAB_OPEN_* flags (0 = tierlab_index_open):
 *   TIERLAB_OPEN_VERIFY  also check every file's body checksum after
 *                        placement (reads the whole index; TIERLAB_ECORRUPT),
 *                        and give new query contexts TIERLAB_CHECKS_FULL. */
#define TIERLAB_OPEN_VERIFY 1
int tierlab_index_open(const char *dir, const char *placement, tierlab_index **out,
                       char *err, size_t errlen);
int tierlab_index_open_flags(const char *dir, const char *placement, unsigned flags,
                             tierlab_index **out, char *err, size_t errlen);
/* Unmap / free everything. NULL is fine. No context may use ix afterwards. */
void tierlab_index_close(tierlab_index *ix);

typedef struct tierlab_index_info {
    uint32_t format_version;
    uint32_t block_size;
    uint32_t doc_bytes;
    uint32_t reserved;
    char codec[32];
    uint64_t docs, terms, postings, blocks;
    uint64_t build_id;
    uint64_t file_bytes[TIERLAB_FILES];
} tierlab_index_info;
void tierlab_index_get_info(const tierlab_index *ix, tierlab_index_info *info);

/* Where one file of an open index lives, as requested and as verified. */
typedef struct tierlab_placement_report {
    char tier[16];      /* "storage", "dram", "pm" or "numa"                  */
    char request[256];  /* what was asked, e.g. "pm:/mnt/pmem0", "numa:1"    */
    int honoured;       /* 1: placed as asked and verified; 0: see detail     */
    int locked;         /* 1 mlock'd, 0 not (see detail), -1 not attempted    */
    int numa_node;      /* node the pages were verified on; -1 unknown/mixed  */
    uint64_t bytes;          /* file size                                     */
    uint64_t resident_bytes; /* resident right after placement (mincore)      */
    char detail[512];   /* one sentence: how it was honoured and verified     */
} tierlab_placement_report;
/* Fill *r for file (TIERLAB_FILE_*). Returns 0 or TIERLAB_EINVAL. */
int tierlab_index_placement(const tierlab_index *ix, int file, tierlab_placement_report *r);

/* The tier registry (kernels/src/tiers/tier.c is the single table): names as
 * users type them before any ':' ("storage", "dram", "pm", "numa"), and
 * whether the tier takes an argument ("pm:PATH", "numa:N"). name and at:
 * NULL out of range; find: the index of a name (without its ":..."), or -1. */
size_t tierlab_tier_count(void);
const char *tierlab_tier_name(size_t i);
const char *tierlab_tier_at(size_t i, int *takes_arg);
int tierlab_tier_find(const char *name);

/* Dictionary order access (export): the i-th term (0 <= i < terms) as a
 * pointer into the index (not NUL-terminated, valid until close), its length
 * and posting count. Returns 0, TIERLAB_EINVAL when i is out of range, or
 * TIERLAB_ECORRUPT when its entry or term bytes fail their checksums. */
int tierlab_index_term_at(const tierlab_index *ix, uint64_t i, const char **term,
                          uint32_t *len, uint32_t *postings);
/* Decode all postings of the i-th term into dids[0..p) and freqs[0..p)
 * (p = its posting count; both caller-allocated), checked as the index's
 * queries are (TIERLAB_CHECKS_FULL when opened with TIERLAB_OPEN_VERIFY).
 * Returns p, TIERLAB_EINVAL or TIERLAB_ECORRUPT (message in err). Thread-safe. */
int64_t tierlab_index_postings(const tierlab_index *ix, uint64_t i, uint32_t *dids,
                               uint32_t *freqs, char *err, size_t errlen);

/* Look a term up (raw bytes, already lower-case). Returns 1 and its posting
 * count in *postings (may be NULL) when found, 0 when not, TIERLAB_ECORRUPT
 * when a dictionary entry it reads fails its checksum. Thread-safe. */
int tierlab_index_lookup(const tierlab_index *ix, const char *term, size_t len,
                         uint64_t *postings);

/* The dictionary position of a term (raw bytes, already lower-case), for the
 * calls above that take i. Returns 1 and *i when found, 0 when not (*i
 * untouched), TIERLAB_EINVAL (NULL argument) or TIERLAB_ECORRUPT (a dictionary
 * entry fails its checksum or points outside the term pool). Thread-safe. */
int tierlab_index_find(const tierlab_index *ix, const char *term, size_t len, uint64_t *i);

/* Where a term's bytes lie in the index files, so a reader (the APCache
 * runtime, a prefetcher, the model) can pread or copy them without the skip
 * list. Offsets are byte offsets from the start of each file, its 128-byte
 * header included (so every offset is >= 128).
 *   postings, blocks       as in the term's skip record (blocks = ceil(p / B))
 *   did_offset, did_bytes  all of the term's DID blocks: they are contiguous,
 *                          block after block in block order, no padding
 *   freq_offset, freq_bytes  likewise for its freq blocks in freqs.bin
 *   skip_offset, skip_bytes  its skip record: 8-byte head plus (blocks + 1)
 *                          32-byte entries (the end sentinel included), so
 *                          skip_bytes = 8 + 32 * (blocks + 1)
 * The terms tile each file exactly: in dictionary order, term i + 1 starts
 * where term i ends (offset + bytes), term 0 starts at 128 and the last term
 * ends at the file size, in each of dids.bin, freqs.bin and skip.bin. So the
 * did_bytes of all terms add up to the manifest's did_block_bytes, the
 * freq_bytes to freq_block_bytes and the blocks to blocks.
 * Block b's own bytes are given by the skip entries (kernels/formats/index.md).
 * term_extent: term i (0 <= i < terms). term_extents: terms first ..
 * first + n - 1 into out[0..n) (caller-allocated; n = terms gives all in one
 * call). Return 0 / n, TIERLAB_EINVAL (NULL, i or the range out of bounds) or
 * TIERLAB_ECORRUPT (a dictionary entry or skip record failing its checksum,
 * inconsistent with the dictionary or pointing outside the files; out is then
 * filled up to the bad term). Thread-safe. */
typedef struct tierlab_term_extent {
    uint64_t postings, blocks;
    uint64_t did_offset, did_bytes;
    uint64_t freq_offset, freq_bytes;
    uint64_t skip_offset, skip_bytes;
} tierlab_term_extent;
int tierlab_index_term_extent(const tierlab_index *ix, uint64_t i, tierlab_term_extent *e);
int64_t tierlab_index_term_extents(const tierlab_index *ix, uint64_t first, uint64_t n,
                                   tierlab_term_extent *out);

/* Integrity (kernels/formats/index.md, "Checksums"). Every region of an index
 * carries a CRC-32C: each dictionary entry, each term's bytes, each skip
 * record, each DID and freq block, and each file's body (its header has an
 * XXH64 of its own). Readers check what they read (tierlab_query_ctx_set_checks).
 *
 * tierlab_crc32c: the CRC-32C (Castagnoli; CRC-32C("123456789") = 0xE3069283)
 * of data appended to a message whose CRC is crc (0 to start), as zlib's
 * crc32() chains. SSE4.2 when present, else tables (same values). */
uint32_t tierlab_crc32c(uint32_t crc, const void *data, size_t len);

/* tierlab_index_check reads the whole index in dir: opens it (manifest,
 * headers), then every dictionary entry and term (checksums, order, the pool
 * tiled), every skip record (checksum, counts, offsets tiling dids.bin and
 * freqs.bin), every block (checksum, decode, DIDs strictly increasing across
 * the term and below the documents, first and last DIDs against the skip
 * list, frequencies >= 1), the totals against the headers, and each file's
 * body checksum. It stops at the first problem and fills *r: ok = 0, the
 * file (TIERLAB_FILE_*, or -1 for manifest.json), the offset of the first bad
 * byte when it is known exactly (a single flipped bit is located from the
 * CRC), else of the region that failed, the term and block (-1 when none)
 * and what (one line). Returns 0 when the check ran (r->ok: 1 sound, 0
 * damaged), or an error that is not damage: TIERLAB_EINVAL, TIERLAB_EIO,
 * TIERLAB_ENOMEM, TIERLAB_EFORMAT (not a tierlab index, or another format
 * version), with r->what set. `progress` (may be NULL) is called with
 * bytes checked of the total; non-zero cancels (TIERLAB_ECANCELED). */
typedef struct tierlab_check_report {
    int ok;              /* 1: no problem found                                  */
    int file;            /* TIERLAB_FILE_* of the problem, -1: manifest.json     */
    uint64_t offset;     /* of the first bad byte (exact == 1) or its region     */
    uint64_t length;     /* bytes of that region (1 when exact)                  */
    int exact;           /* 1: offset is the bad byte itself                     */
    int bit;             /* exact: the flipped bit (0 = least significant), else -1 */
    int64_t term;        /* dictionary position, -1: none                        */
    int64_t block;       /* block of that term, -1: none                         */
    uint64_t terms, blocks, postings, bytes; /* what was checked                */
    char what[TIERLAB_ERRMSG];
} tierlab_check_report;
int tierlab_index_check(const char *dir, tierlab_check_report *r, tierlab_progress_fn progress,
                        void *ctx);

/* Page cache helpers (docs/workload.md "Measurement protocol"); no root needed.
 * tierlab_file_dontneed: posix_fadvise(POSIX_FADV_DONTNEED) on the whole
 * file after fdatasync. tierlab_file_resident: bytes of the file in the page
 * cache (mincore). Both return 0 or TIERLAB_EIO. */
int tierlab_file_dontneed(const char *path);
int tierlab_file_resident(const char *path, uint64_t *resident, uint64_t *total);

/* Queries. A context holds one thread's buffers (decode buffers, the top-k
 * heap); contexts are not shared between threads. */
#define TIERLAB_QUERY_SINGLE 0
#define TIERLAB_QUERY_AND 1
#define TIERLAB_QUERY_MAX_TERMS 16
#define TIERLAB_K_DEFAULT 1024

/* The query-type registry (kernels/src/query/query.c is the single table):
 * the names users type, "single" and "and", at the index of their
 * TIERLAB_QUERY_* number. name: NULL out of range; find: the number, or -1. */
size_t tierlab_query_type_count(void);
const char *tierlab_query_type_name(size_t i);
int tierlab_query_type_find(const char *name);

/* Query files (kernels/src/query/workload.c; docs/workload.md): the
 * one reader of the workload format, used by the APCache runtime and, through
 * cffi, by Python's tierlab.workload.read_queries.
 *
 * Format: UTF-8 text, one query per line (lines end at '\n'; line 1 is the
 * first). A line is stripped of whitespace at both ends and split into words
 * at runs of whitespace — whitespace as Python's str.isspace() has it: ASCII
 * \t \n \v \f \r, U+001C..U+001F, space, and U+0085, U+00A0, U+1680,
 * U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 (so CRLF files
 * read as LF files). A blank line, or one whose first word starts with '#',
 * is skipped. Otherwise every word is a term — [a-z0-9]+, lower-case ASCII
 * letters and digits, as the index tokenises text — or `AND` standing
 * between two terms, where it means what the space means (the engine's only
 * multi-term query is the conjunction). A query of one term is
 * TIERLAB_QUERY_SINGLE, of 2..TIERLAB_QUERY_MAX_TERMS terms TIERLAB_QUERY_AND.
 * Lines and terms have no length limit (the file is read whole).
 *
 * tierlab_workload_read parses the file at `path` into *out (all fields
 * allocated by the call; release them with tierlab_workload_free, which also
 * zeroes *out and takes a zeroed or freed *out again). Returns 0, or on the
 * first bad line (nothing is returned then: *out is zeroed):
 *   TIERLAB_EIO     "PATH: cannot read (REASON)"
 *   TIERLAB_EINVAL  "PATH:LINE: invalid UTF-8 at byte N" (N: from 1, in the
 *                   line), "PATH:LINE: 'AND' must stand between two terms:
 *                   'LINE TEXT'", "PATH:LINE: 'WORD' is not a term: ...",
 *                   "PATH:LINE: N terms: a query has at most 16
 *                   (TIERLAB_QUERY_MAX_TERMS)" (an over-long query is refused
 *                   here, at its file line, never later by position), or
 *                   "PATH: no queries" (no query line at all)
 *   TIERLAB_ENOMEM
 * with the message in err (cut to errlen; LINE TEXT and WORD are quoted
 * whole, so a caller that wants every message whole gives errlen >= the
 * file's size + the path's length + 200). Memory: about twice the file.
 * Thread-safe (no global state). */
typedef struct tierlab_workload {
    uint64_t nqueries;     /* >= 1                                              */
    uint64_t nterms;       /* terms of all queries (AND not counted)            */
    /* Every term as a NUL-terminated string, back to back in query order:
     * term j starts at text + term_off[j] and has term_off[j+1] -
     * term_off[j] - 1 bytes (its NUL excluded); term_off has nterms + 1
     * entries, term_off[0] = 0. */
    char *text;
    uint64_t *term_off;
    uint64_t *query_first; /* nqueries + 1: query q's terms are query_first[q] ..
                            * query_first[q+1] - 1                              */
    uint64_t *line;        /* nqueries: query q's line in the file (from 1)     */
    uint8_t *type;         /* nqueries: TIERLAB_QUERY_SINGLE or TIERLAB_QUERY_AND */
} tierlab_workload;
int tierlab_workload_read(const char *path, tierlab_workload *out, char *err, size_t errlen);
void tierlab_workload_free(tierlab_workload *w); /* NULL is fine */

typedef struct tierlab_query_ctx tierlab_query_ctx;
/* k >= 1: results kept per query. NULL on bad arguments or no memory. */
tierlab_query_ctx *tierlab_query_ctx_new(const tierlab_index *ix, uint32_t k);
void tierlab_query_ctx_free(tierlab_query_ctx *q);
/* Message of the last failed query of this context ("" if none). */
const char *tierlab_query_error(const tierlab_query_ctx *q);

/* What a query checks (kernels/formats/index.md, "Checksums"):
 *   TIERLAB_CHECKS_DEFAULT  every dictionary entry it probes, the term bytes
 *       it compares, the skip record of each term and every block it decodes
 *       against their CRC-32C; per block, the decoded length, first and last
 *       DID against the skip list; the term's last DID below the documents.
 *   TIERLAB_CHECKS_FULL     also every posting: DIDs strictly increasing
 *       (so all below the documents), frequencies >= 1.
 *   TIERLAB_CHECKS_OFF      none of it (bounds only): for measuring the
 *       cost of the checks, never for serving queries.
 * A new context takes the index's (DEFAULT, or FULL after TIERLAB_OPEN_VERIFY).
 * set: 0 or TIERLAB_EINVAL (unknown level); get: the level. */
#define TIERLAB_CHECKS_OFF 0
#define TIERLAB_CHECKS_DEFAULT 1
#define TIERLAB_CHECKS_FULL 2
int tierlab_query_ctx_set_checks(tierlab_query_ctx *q, int level);
int tierlab_query_ctx_checks(const tierlab_query_ctx *q);

typedef struct tierlab_hit {
    uint32_t did;
    uint32_t reserved;
    double score;
} tierlab_hit;

/* Per-query measurements. Bytes are what the algorithm touched in each file
 * (dictionary entries and term bytes compared, skip-list records and entries
 * visited, encoded blocks decoded), not device traffic; the checks read no
 * more than that but the whole skip record of each term (its checksum). */
typedef struct tierlab_query_stats {
    uint64_t latency_ns;      /* lookup to sorted results, CLOCK_MONOTONIC   */
    uint64_t postings_scored; /* postings whose score was computed           */
    uint64_t blocks_total;    /* sum over the terms found                    */
    uint64_t blocks_decoded;  /* DID blocks decoded                          */
    uint64_t freq_blocks_decoded;
    uint64_t bytes_read[TIERLAB_FILES];
    uint32_t nterms;          /* terms in the query                          */
    uint32_t unknown_terms;   /* terms not in the dictionary (result empty)  */
    uint32_t results;         /* hits returned (<= k)                        */
    uint32_t reserved;
    uint64_t term_postings[TIERLAB_QUERY_MAX_TERMS];
    uint32_t term_blocks_total[TIERLAB_QUERY_MAX_TERMS];
    uint32_t term_blocks_decoded[TIERLAB_QUERY_MAX_TERMS];
} tierlab_query_stats;

/* Run one query: `type` TIERLAB_QUERY_SINGLE (nterms == 1) or _AND
 * (2..TIERLAB_QUERY_MAX_TERMS terms; a repeated term counts twice in the
 * score). terms[i] has lens[i] bytes (lower-case, no NUL needed). Writes up
 * to k hits into `hits` (k entries, may be NULL to only measure) and fills
 * *st (may be NULL). Returns the number of hits, TIERLAB_EINVAL, or
 * TIERLAB_ECORRUPT when a dictionary entry, skip record or block it reads
 * fails its checksum or an invariant (message in tierlab_query_error, naming
 * the file, the term and the block): never a wrong hit list. */
int tierlab_query(tierlab_query_ctx *q, int type, const char *const *terms,
                  const uint32_t *lens, uint32_t nterms, tierlab_hit *hits,
                  tierlab_query_stats *st);

/* Run nqueries queries back to back (no per-query call overhead from the
 * host). Query i has terms tq_first[i]..tq_first[i+1]-1 and type types[i];
 * term j is text[term_off[j] .. term_off[j+1]). stats[i] is filled for every
 * query; hits (may be NULL) gets k entries per query (hits + i*k) and
 * nhits[i] (may be NULL) its count. *wall_ns (may be NULL) gets the wall
 * time of the whole loop. Returns 0 or the first error (then the queries
 * after the failing one are not run). */
int tierlab_query_batch(tierlab_query_ctx *q, const char *text, const uint64_t *term_off,
                        const uint32_t *tq_first, const uint8_t *types, size_t nqueries,
                        tierlab_query_stats *stats, tierlab_hit *hits, uint32_t *nhits,
                        uint64_t *wall_ns);

/* ==========================================================================
 * Caches (kernels/src/cache/): the bookkeeping of docs/apcache.md, shared by the
 * native APCache runtime and the SimPy model (model/), so both count hits,
 * misses and evictions with the same code. Keys are dense integers
 * 0..nkeys-1 (term ids for the segment cache, page numbers for the page
 * cache); every key has a size in the cache's unit (segments, pages, bytes).
 * Not thread-safe: the runtime guards a cache with its own lock.
 * ========================================================================== */
/* next_use value of an access whose key is never accessed again. */
#define TIERLAB_NEVER 0xFFFFFFFFFFFFFFFF

/* The eviction-policy registry (kernels/src/cache/cache.c is the single
 * table; one file per policy in kernels/src/cache/). A policy is named by
 * what users type ("lru", "fifo", "clock", "s3-fifo", "belady", ... — the
 * list is the table) and, in the calls below, by its index in the table:
 * tierlab_cache_new(tierlab_policy_find("lru"), ...). name: NULL out of
 * range; find: the index, or -1 for an unknown name (or NULL). The indices
 * are positions in the table, not a stable numbering: keep names. */
size_t tierlab_policy_count(void);
const char *tierlab_policy_name(size_t i);
int tierlab_policy_find(const char *name);

typedef struct tierlab_cache tierlab_cache;

typedef struct tierlab_cache_stats {
    uint64_t hits, misses;           /* accesses                              */
    uint64_t hit_units, miss_units;  /* the same weighted by key size         */
    uint64_t evictions, evicted_units;
    uint64_t used, peak_used;        /* units held now / at most              */
    uint64_t capacity;
    uint64_t keys;                   /* keys held now                         */
} tierlab_cache_stats;

/* A cache of `capacity` units over keys 0..nkeys-1 under policy (an index
 * of the registry above). Returns 0,
 * TIERLAB_EINVAL (unknown policy, capacity 0, nkeys > 0xFFFFFFF0) or
 * TIERLAB_ENOMEM. Memory: 16 bytes per key (BELADY: 32). Policy details
 * (S3-FIFO's queues, CLOCK's hand) are in kernels/src/cache/<policy>.c.
 * Statistics: hits/misses (and their units) count tierlab_cache_access and
 * _access_many only; the step-wise calls below never count a hit or miss
 * (the runtime keeps its own); evictions, used, peak_used and keys count
 * every call (remove is not an eviction). */
int tierlab_cache_new(int policy, uint64_t nkeys, uint64_t capacity, tierlab_cache **out);
void tierlab_cache_free(tierlab_cache *c); /* NULL is fine */
/* The bytes tierlab_cache_new allocates for nkeys keys under policy (what a
 * resource guard plans with: tierlab_memory_room below). */
uint64_t tierlab_cache_bytes(int policy, uint64_t nkeys);

/* One access: a hit updates the policy's state and returns 1; a miss evicts
 * victims until `size` units are free, inserts the key and returns 0. A key
 * larger than the capacity is not admitted (a miss, counted, not inserted).
 * next_use: position of the key's next access in the request stream
 * (TIERLAB_NEVER if none); only BELADY reads it. Negative: TIERLAB_EINVAL
 * (key >= nkeys, size 0 or >= 2^32). A key keeps the size it was inserted
 * with; a hit's `size` only weighs hit_units. */
int tierlab_cache_access(tierlab_cache *c, uint64_t key, uint64_t size, uint64_t next_use);
/* n accesses in one call (the model's hot path): hit[i] gets 1/0; sizes may
 * be NULL (all size 1), next_use may be NULL (all NEVER). Returns the number
 * of hits or TIERLAB_EINVAL at the first bad access (none after it is run). */
int64_t tierlab_cache_access_many(tierlab_cache *c, const uint64_t *keys, const uint64_t *sizes,
                                  const uint64_t *next_use, size_t n, uint8_t *hit);

/* The step-wise interface the adaptive-lookahead worker needs (it must look at
 * the victim before it may evict it). contains: 1/0, no state change.
 * touch: a hit without the miss path (1 if present, 0 if not). insert: add a
 * key that is not present into free space (TIERLAB_ENOMEM if fewer than size
 * units are free: evict first; TIERLAB_EINVAL if present or bad key/size).
 * victim: the key the policy would evict next and its size (returns 0, or -1
 * when empty); it may advance the policy's scan (CLOCK's hand, S3-FIFO's
 * moves from small to main), which is why it takes a non-const cache, but it
 * never changes which keys are held, and victim again or evict right after
 * names the same key. evict: evict that victim (returns its key, or -1 when
 * empty). remove: drop a key (1 if it was present; not counted as an
 * eviction; S3-FIFO also forgets a ghost entry). A segment cache's policy
 * returns the chain of every term that leaves by evict, remove or the miss
 * path of access to the free list. touch, insert and remove return
 * TIERLAB_EINVAL for key >= nkeys; contains returns 0. */
int tierlab_cache_contains(const tierlab_cache *c, uint64_t key);
/* 1 if keys key0 .. key0 + n - 1 are all present (n = 0: 1), no state change;
 * 0 if one is not or the range leaves 0 .. nkeys - 1. */
int tierlab_cache_contains_range(const tierlab_cache *c, uint64_t key0, uint64_t n);
int tierlab_cache_touch(tierlab_cache *c, uint64_t key, uint64_t next_use);
int tierlab_cache_insert(tierlab_cache *c, uint64_t key, uint64_t size, uint64_t next_use);
int tierlab_cache_victim(tierlab_cache *c, uint64_t *key, uint64_t *size);
int64_t tierlab_cache_evict(tierlab_cache *c);
int tierlab_cache_remove(tierlab_cache *c, uint64_t key);
uint64_t tierlab_cache_free_units(const tierlab_cache *c);
void tierlab_cache_get_stats(const tierlab_cache *c, tierlab_cache_stats *st);

/* The segment cache of docs/apcache.md as memory layout: `nsegments` segments of
 * `segment_bytes` in caller-provided memory (a slow-tier mapping); chains and
 * the free list in one next[] array (-1 ends a chain), each chain's head
 * knowing its tail so a whole chain is freed in O(1); a 4-byte slot per term
 * (bit 31 "cached", bits 0..30 first segment). The policy decides victims
 * over terms; a term occupies tierlab_segcache_segments() segments: its bytes
 * plus 8 bytes of in-cache offset per block, rounded up to whole segments. */
typedef struct tierlab_segcache tierlab_segcache;
/* ceil((term_bytes + 8 * term_blocks) / segment_bytes); 0 if segment_bytes is 0. */
uint64_t tierlab_segcache_segments(uint64_t term_bytes, uint64_t term_blocks,
                                   uint64_t segment_bytes);
/* nsegments 1 .. 2^31 - 1, segment_bytes >= 1, else TIERLAB_EINVAL (also
 * what tierlab_cache_new refuses); TIERLAB_ENOMEM. `memory` (nsegments x
 * segment_bytes, caller-owned) may be NULL for bookkeeping only: then
 * segment_ptr returns NULL. */
int tierlab_segcache_new(int policy, uint64_t nterms, uint64_t nsegments,
                         uint64_t segment_bytes, void *memory, tierlab_segcache **out);
void tierlab_segcache_free(tierlab_segcache *s); /* does not free `memory` */
/* The policy state of the segment cache (its stats and the step-wise calls). */
tierlab_cache *tierlab_segcache_policy(tierlab_segcache *s);
/* Allocate a chain of n segments for term (evicting nothing: the caller
 * evicts through the policy first) and mark the slot cached; the term enters
 * the policy separately (tierlab_cache_insert). Returns the first segment or
 * -1 (n is 0 or more than the free segments, term out of range or already
 * has a chain). */
int64_t tierlab_segcache_alloc(tierlab_segcache *s, uint64_t term, uint64_t n);
/* Segments on the free list. */
uint64_t tierlab_segcache_free_segments(const tierlab_segcache *s);
/* Segment i of term's chain (walks next[]); -1 if not cached or past the end. */
int64_t tierlab_segcache_segment(const tierlab_segcache *s, uint64_t term, uint64_t i);
/* The segment after `segment` in its chain (next[segment], O(1)): -1 at a
 * chain's end or for a segment out of range. Walk a chain from its head
 * (tierlab_segcache_slot) with it; only meaningful for a cached term's
 * chain (free segments chain to each other too). */
/* The bytes tierlab_segcache_new allocates (its policy's cache included; not
 * the segments' memory, which is the caller's). */
uint64_t tierlab_segcache_bytes(int policy, uint64_t nterms, uint64_t nsegments);
int64_t tierlab_segcache_next(const tierlab_segcache *s, int64_t segment);
void *tierlab_segcache_segment_ptr(tierlab_segcache *s, int64_t segment);
/* The 4-byte slot of a term: bit 31 cached, bits 0..30 first segment. */
uint32_t tierlab_segcache_slot(const tierlab_segcache *s, uint64_t term);

/* Adaptive lookahead (docs/apcache.md): rolling_sum and the FIFO of per-term
 * segment counts. new: max_pending (>= 1, else TIERLAB_EINVAL) bounds the
 * FIFO. worker_done(n): the worker finished prefetching a term occurrence of
 * n segments (also a repeat that was already cached); 0, or TIERLAB_ENOMEM
 * when max_pending entries are pending (nothing changes). query_done(): the
 * query thread finished the term at the FIFO's front; returns the count
 * popped (or -1 if the FIFO is empty). may_evict(v): 1 when
 * rolling_sum + v <= total_segments, i.e. evicting a victim of v segments
 * cannot take a term the query thread still needs. */
typedef struct tierlab_lookahead tierlab_lookahead;
int tierlab_lookahead_new(uint64_t total_segments, uint64_t max_pending,
                          tierlab_lookahead **out);
void tierlab_lookahead_free(tierlab_lookahead *la);
uint64_t tierlab_lookahead_bytes(uint64_t max_pending); /* what new allocates */
int tierlab_lookahead_worker_done(tierlab_lookahead *la, uint64_t segments);
int64_t tierlab_lookahead_query_done(tierlab_lookahead *la);
int tierlab_lookahead_may_evict(const tierlab_lookahead *la, uint64_t victim_segments);
uint64_t tierlab_lookahead_rolling_sum(const tierlab_lookahead *la);
uint64_t tierlab_lookahead_pending(const tierlab_lookahead *la); /* FIFO entries */

/* ==========================================================================
 * Resource guards (kernels/src/apcache/cgroup.c): a run that plans more
 * memory than the machine has for it is refused before it allocates, with
 * the numbers, by the APCache runtime and the model alike.
 * ========================================================================== */
/* The memory this process may still take, in bytes: MemAvailable of
 * /proc/meminfo, or less when its memory cgroup (v2: memory.max of its
 * cgroup and of every ancestor; v1: memory.limit_in_bytes and the
 * hierarchical limit of memory.stat) leaves less room: limit - (usage -
 * inactive file pages, which the kernel reclaims first). `how` (may be
 * NULL) says which number that is. UINT64_MAX when none is known. Returns 0,
 * or TIERLAB_EINVAL when bytes is NULL. */
int tierlab_memory_room(uint64_t *bytes, char *how, size_t howlen);
/* The rule: 0 when `planned` bytes fit in tierlab_memory_room, else
 * TIERLAB_ENOMEM with "<what> needs <planned> of memory (<detail>), more
 * than the <room> this machine has for it (<how>); <hint>" in err (detail
 * and hint may be NULL). */
int tierlab_memory_guard(uint64_t planned, const char *what, const char *detail,
                         const char *hint, char *err, size_t errlen);

/* ==========================================================================
 * The APCache runtime (docs/apcache.md "The four configurations";
 * kernels/src/apcache/): the four configurations as real threads over a real
 * index, on the index's own device or on a device emulated from a storage
 * spec of sim-configs/. Python runs it as a child process through
 * `tierlab-kernels apcache` (tierlab/runtime/apcache.py) and turns its files into
 * the cache_run / cache_query / cache_timeline tables.
 * ========================================================================== */
/* When every query thread and worker has a CPU of its own (the runtime pins
 * them: emulated devices with enough CPUs), a thread waiting for the other
 * thread of its shard spins up to this many ns before it blocks; the run's
 * report says which (handoff_spin_ns, 0: blocks at once). The model charges a
 * wake-up only to a wait longer than this. */
#define TIERLAB_APCACHE_HANDOFF_SPIN_NS 1000000
/* `lookahead` value: adaptive lookahead (hybrid-prefetch only). */
#define TIERLAB_LOOKAHEAD_ADAPTIVE 0

/* The configuration registry (kernels/src/apcache/configs.c is the single
 * table): "base", "base-prefetch", "hybrid", "hybrid-prefetch", named in
 * tierlab_apcache_params by their index. name: NULL out of range; find:
 * the index, or -1 for an unknown name (or NULL). */
size_t tierlab_apcache_config_count(void);
const char *tierlab_apcache_config_name(size_t i);
int tierlab_apcache_config_find(const char *name);

/* A run's parameters. Each field is named after its key of the run
 * specification (docs/architecture.md "One run specification"), which is
 * also the key in summary.json and, with dashes, the flag of
 * `tierlab-kernels apcache` (--cache-bytes, --slow-tier-placement, ...). */
typedef struct tierlab_apcache_params {
    int config;          /* tierlab_apcache_config_find(name)                       */
    int policy;          /* tierlab_policy_find(name): the segment cache's (hybrid) */
    uint32_t cores;      /* shards, each with a query thread and a worker; 1..1024,
                          * at most the CPUs this process may run on              */
    uint32_t k;          /* results kept per query, >= 1                             */
    uint32_t lookahead;  /* prefetch configs: queries ahead (>= 1), or ADAPTIVE      */
    uint64_t sample_ns;  /* timeline sampling period in ns, >= 1,000,000 (1 ms)      */
    /* base, base-prefetch: the page-cache cap; hybrid, hybrid-prefetch: the
     * segment cache, split evenly over the cores. */
    uint64_t cache_bytes;
    uint64_t segment_bytes;     /* multiple of 8, 64 .. 1 GiB (hybrid configs)       */
    uint64_t dram_budget_bytes; /* hybrid configs: the page-cache cap; 0 = none       */
    uint64_t readahead_bytes;   /* 4 KiB .. 1 MiB; real device: 0 = the kernel's   */
    /* 0: the device under the index files (page faults, pread, mincore);
     * 1: every storage read is a pread plus an injected delay from the
     * device_* numbers, a storage spec's read_bandwidth_bytes_per_s,
     * read_latency_ns, seek_ns and queue_depth (the model's device timing
     * rule, sim-configs/README.md). */
    int emulated;
    double device_read_bandwidth_bytes_per_s, device_read_latency_ns, device_seek_ns;
    uint32_t device_queue_depth;
    int memory_limit;    /* 1: cap DRAM with a child cgroup when one is writable     */
    int write_hits;      /* 1: out_dir/hits.tsv gets core 0's top-k of every query   */
    /* segment cache memory: "dram", "pm:PATH", "numa:N" */
    char slow_tier_placement[256];
    /* Tiers of dict.bin and skip.bin as tierlab_index_open takes them;
     * "" = the slow tier (docs/apcache.md: they live there by default). */
    char place_dict[256];
    char place_skip[256];
} tierlab_apcache_params;

/* Defaults: hybrid-prefetch, lru, 1 core, k 1024, adaptive lookahead, 10 ms
 * samples, 64 MiB cache, 32 KiB segments, 50 MB DRAM budget, 128 KiB
 * readahead, real device, memory limit on, slow tier "dram". */
void tierlab_apcache_params_default(tierlab_apcache_params *p);

/* Run the workload file (read by tierlab_workload_read, "Query files"
 * above: a bad line fails the run with its path:line) on the index in
 * index_dir and write the result files into the
 * existing directory out_dir (summary.json, queries.tsv, timeline.tsv and,
 * with write_hits, hits.tsv; formats in kernels/src/apcache/report.c).
 * Drops the index files from the page cache first. A real-device run with
 * memory_limit creates a child cgroup of this process's memory cgroup,
 * moves the whole process into it for the run, and removes it afterwards
 * (limit = the process's usage after setup + the page-cache cap, at least
 * 4 MiB, + 2 MiB of slack); when no cgroup is writable the run goes on
 * without a DRAM cap and summary.json's memory_limit_enforced says
 * "no: <reason>". An emulated run needs none: its own page cache holds at
 * most the cap. A real-device run with cores > 1 copies the index
 * directory next to itself once per extra shard (removed afterwards).
 * `progress` (may be NULL) is called from
 * the runtime's sampler thread about every 100 ms with queries done of all
 * cores; returning non-zero stops the run: the threads finish their current
 * step, what was measured is written (partial = 1) and the call returns
 * TIERLAB_ECANCELED. Returns 0, TIERLAB_EINVAL (bad params or workload),
 * TIERLAB_EIO, TIERLAB_ENOMEM, TIERLAB_EFORMAT, with a message in err.
 * Before it allocates more than one shard, the run is refused (TIERLAB_ENOMEM,
 * the numbers in err) when its planned memory (kernels/src/apcache/plan.c:
 * per core and once) exceeds tierlab_memory_room, or the index copies or
 * pm:PATH files exceed their filesystem's free space; summary.json's
 * planned_bytes is the plan of a run that went ahead.
 * Uses 2 x cores + 1 threads; not reentrant with respect to the cgroup. */
int tierlab_apcache_run(const char *index_dir, const char *workload_path,
                        const tierlab_apcache_params *p, const char *out_dir,
                        tierlab_progress_fn progress, void *ctx, char *err, size_t errlen);

/* Hand-off between the runtime's threads, timed as the runtime signals: a
 * thread blocked in pthread_cond_wait is woken by a broadcast under the
 * mutex. n rounds (>= 1): *wake_ns the median time from the broadcast to
 * the woken thread running, *signal_ns the median time the signalling
 * thread spends in lock + broadcast + unlock with a waiter. The model's
 * threads resume wake_ns after they are signalled (model/costs.py).
 * 0, TIERLAB_EINVAL or TIERLAB_ENOMEM. */
int tierlab_apcache_handoff_ns(uint32_t n, double *wake_ns, double *signal_ns);

/* The same n rounds, every one: wake_ns[n] and signal_ns[n] (sorted). A
 * wake-up's tail matters, not only its median: a rare wake-up takes far
 * longer (its vCPU was not running), and one such wait can tip a
 * prefetching run into another state (the model draws each wake-up from
 * these). The two threads are pinned to two allowed CPUs when there are
 * two, as the runtime pins its query thread and worker. */
int tierlab_apcache_handoff_samples(uint32_t n, double *wake_ns, double *signal_ns);

/* The real device as the runtime's reads see it (kernels/src/apcache/probe.c):
 * `reads` reads of run_bytes (4 KiB .. 1 MiB) at random page-aligned offsets
 * of the file at `path` (seeded), each read the way the runtime reads a miss
 * on the real device — readahead(2) of the run with the kernel's read-around
 * off, then every page touched through a mapping — in a child memory cgroup
 * capped at cap_bytes of page cache when one is writable (0: no cap). The
 * reads that first fill the cap are not timed. ns[i]: wall time of read i.
 * how: whether the cap was enforced. 0, TIERLAB_EINVAL or TIERLAB_EIO. */
int tierlab_apcache_read_probe(const char *path, uint64_t run_bytes, uint64_t cap_bytes,
                               uint32_t reads, uint64_t seed, double *ns, char *how,
                               size_t howlen, char *err, size_t errlen);

/* The runtime's copy into the segment cache, timed as its workers do it: per
 * 4 KiB page of the emulated page cache, lock, LRU touch, copy into 32 KiB
 * segments, unlock; `bytes` (>= 1 MiB) copied from a 1 MiB set of frames into
 * cold segments, median of `reps` (>= 1) passes. *bytes_per_s the rate. The
 * model charges a copy at min(this, the tier's write bandwidth).
 * 0, TIERLAB_EINVAL or TIERLAB_ENOMEM. */
int tierlab_apcache_copy_rate(uint64_t bytes, uint32_t reps, double *bytes_per_s);

/* A hit in the runtime's emulated page cache, timed as a query's block read
 * does it (kernels/src/apcache/pagecache.c tl_pcache_read: lock, page lookup,
 * LRU touch, copy of the block into the reader's buffer, unlock): blocks of
 * access_bytes (<= 4096) read one after another through 16 MiB of resident
 * pages, median over `passes` passes (after one warming pass). *ns per
 * access. The DRAM query run the model is calibrated with reads blocks
 * straight from memory; the model adds this per block the emulated page cache
 * serves. 0, TIERLAB_EINVAL or TIERLAB_ENOMEM. */
int tierlab_apcache_page_hit_ns(uint64_t access_bytes, uint32_t passes, double *ns);

/* A miss in the runtime's emulated page cache, the part outside the device's
 * service time (kernels/src/apcache/pagecache.c tl_pcache_read: the frames of
 * a run of run_pages (1..256) reserved, evicting LRU pages, before the device
 * starts, and released after the read), on a device that takes no time: each
 * read of a run timed next to its preadv alone, which is taken off (in a run
 * the copy is inside the device's service time). 8192 pages of a memfd read
 * in runs through 4096 frames per pass; *ns per read, the median of `passes`
 * (1..1000) passes. 0, TIERLAB_EINVAL, _EIO or _ENOMEM. */
int tierlab_apcache_page_miss_ns(uint32_t run_pages, uint32_t passes, double *ns);


/* Memory traces and the memory-side stream (traces/memtrace.md)
 * ------------------------------------------
 * The interface between the tracing build of the query kernels (which
 * records every load and store of a query run), the cache filter (which turns
 * those accesses into the requests that reach memory) and the timing model /
 * external simulators (which time the requests on a memory tier).
 *
 * Regions name the structure an address belongs to. The numbers are part of
 * the trace format: append new regions, never renumber. Names (as `tierlab
 * list memory-regions` prints them) come from tierlab_memtrace_region_name. */
#define TIERLAB_REGION_OTHER 0
#define TIERLAB_REGION_DICTIONARY 1
#define TIERLAB_REGION_SKIP 2
#define TIERLAB_REGION_DID 3
#define TIERLAB_REGION_FREQ 4
#define TIERLAB_REGION_SEGMENT_CACHE 5
#define TIERLAB_REGION_DECODE_BUFFER 6
#define TIERLAB_REGION_TOPK_HEAP 7
#define TIERLAB_REGIONS 8

/* One recorded access: 16 bytes, little-endian on disk, in program order. */
typedef struct tierlab_memtrace_record {
    uint64_t addr;   /* virtual byte address of the access                 */
    uint32_t query;  /* ordinal of the query in its workload (0-based)     */
    uint16_t size;   /* bytes accessed (1..65535; larger copies are split) */
    uint8_t kind;    /* TIERLAB_ACCESS_LOAD or TIERLAB_ACCESS_STORE        */
    uint8_t region;  /* TIERLAB_REGION_*                                   */
} tierlab_memtrace_record;

#define TIERLAB_ACCESS_LOAD 0
#define TIERLAB_ACCESS_STORE 1

/* One request of the memory-side stream, what leaves the last cache level:
 * 24 bytes, in the order the cache filter emits them. */
typedef struct tierlab_mem_request {
    uint64_t addr;   /* byte address of the cache line (line-aligned)      */
    uint32_t query;  /* query of the access that caused it                 */
    uint32_t gap;    /* accesses served by the caches since the previous
                        request: the work a core does between requests     */
    uint8_t kind;    /* TIERLAB_REQ_READ, _WRITEBACK or _PREFETCH          */
    uint8_t region;  /* TIERLAB_REGION_* of the line                       */
    uint16_t pad;    /* zero                                               */
    uint32_t pad2;   /* zero                                               */
} tierlab_mem_request;

#define TIERLAB_REQ_READ 0      /* demand miss of the last level           */
#define TIERLAB_REQ_WRITEBACK 1 /* dirty line evicted from the last level  */
#define TIERLAB_REQ_PREFETCH 2  /* line fetched by a hardware prefetcher   */

/* Cache filter (kernels/src/memsim/filter.c; docs/tiers.md "The memory-tier
 * model"): a cache hierarchy of 1-3 levels that turns recorded accesses
 * (tierlab_memtrace_record) into the memory-side stream (tierlab_mem_request)
 * in program order. Per level: set-associative, LRU, write-back and
 * write-allocate; the last level inclusive (its evictions invalidate the
 * upper levels' copies) or not (fills go to every level that missed, no
 * back-invalidation). Prefetchers (Intel 64 and IA-32 Architectures
 * Optimization Reference Manual, "Data Prefetching"): a next-line prefetcher
 * into the first level, triggered by an ascending miss or the first hit on a
 * prefetched line, and a stream prefetcher trained on the second level's
 * lookups (the first level's misses) that, per 4 KiB page, confirms a
 * direction on the second step and then keeps up to `stream_distance` lines
 * ahead, `stream_degree` per lookup, `streams` pages tracked (LRU). */
#define TIERLAB_FILTER_MAX_LEVELS 3

typedef struct tierlab_filter_config {
    uint32_t line_bytes;          /* power of two, 16..4096                      */
    uint32_t levels;              /* 1..TIERLAB_FILTER_MAX_LEVELS                */
    uint64_t level_bytes[TIERLAB_FILTER_MAX_LEVELS]; /* a whole number of sets   */
    uint32_t level_ways[TIERLAB_FILTER_MAX_LEVELS];  /* 1..64                    */
    uint32_t inclusive;           /* 1: the last level is inclusive               */
    uint32_t prefetch_next_line;  /* 1: next-line prefetcher into the first level */
    uint32_t prefetch_stream;     /* 1: stream prefetcher into the second level
                                     (the only level when levels == 1)           */
    uint32_t stream_distance;     /* lines ahead, 1..64                           */
    uint32_t stream_degree;       /* prefetches per lookup, 1..8                  */
    uint32_t streams;             /* pages tracked, 1..256                        */
} tierlab_filter_config;

/* Counts per region since the filter was made or reset. An access whose
 * bytes span two lines is looked up line by line and counts one miss at a
 * level if either line missed there (cachegrind's rule). */
typedef struct tierlab_filter_counts {
    uint64_t accesses[TIERLAB_REGIONS];
    uint64_t loads[TIERLAB_REGIONS];
    uint64_t misses[TIERLAB_FILTER_MAX_LEVELS][TIERLAB_REGIONS]; /* demand, per access */
    uint64_t reads[TIERLAB_REGIONS];        /* TIERLAB_REQ_READ requests emitted     */
    uint64_t prefetches[TIERLAB_REGIONS];   /* TIERLAB_REQ_PREFETCH requests emitted */
    uint64_t writebacks[TIERLAB_REGIONS];   /* TIERLAB_REQ_WRITEBACK requests emitted */
    uint64_t useful_prefetches[TIERLAB_REGIONS]; /* demand hits on prefetched lines */
} tierlab_filter_counts;

typedef struct tierlab_filter tierlab_filter;

/* A filter with empty caches; *out is freed with tierlab_filter_free.
 * 0, TIERLAB_EINVAL (a field out of range) or TIERLAB_ENOMEM. */
int tierlab_filter_new(const tierlab_filter_config *cfg, tierlab_filter **out);
void tierlab_filter_free(tierlab_filter *f);
/* Empties the caches, the prefetchers' state and the counts. */
void tierlab_filter_reset(tierlab_filter *f);
/* Feeds in[0..n) through the hierarchy and writes the requests that leave the
 * last level to out[0..cap), in order; returns how many (>= 0) or
 * TIERLAB_EINVAL (cap < tierlab_filter_min_cap). Stops early when out may
 * not hold the next line's requests: *consumed (always set) is the number of
 * records done; an access cut in the middle is finished by the next call,
 * which must pass in + *consumed. Not thread-safe per filter. */
int64_t tierlab_filter_run(tierlab_filter *f, const tierlab_memtrace_record *in, size_t n,
                           size_t *consumed, tierlab_mem_request *out, size_t cap);
/* The least cap tierlab_filter_run accepts for this filter. */
size_t tierlab_filter_min_cap(const tierlab_filter *f);
void tierlab_filter_get_counts(const tierlab_filter *f, tierlab_filter_counts *out);

/* Tier-timing model (kernels/src/memsim/timing.c; docs/tiers.md "The
 * memory-tier model"): times the memory-side stream of one core on the
 * tiers its regions live on and returns the core's memory stall. Mechanisms:
 * per tier a media granule (Optane's 256 B XPLine) with an LRU device buffer
 * of granules (8-way set-associative); sequential latency for a line that
 * follows the tier's previous line or falls in its granule, random latency
 * otherwise, buffer hits at the sequential latency; demand reads overlap in
 * epochs (memory-level parallelism) of at most fill_buffers misses, of which
 * at most the tier's max_outstanding open a granule (media accesses; the
 * other lines of an open granule come from its buffer), within `window_ns` of core time after the epoch's
 * first miss (the reorder buffer's reach), an epoch costing its longest latency; a miss of a `serial`
 * region (dependent loads: a search) is an epoch of its own; prefetches and
 * writebacks stall nothing but take device time; between epochs the device
 * time of all requests (media bytes / the core's share of bandwidth) that
 * exceeds the core's own time (cpu_ns_per_access x accesses between
 * requests) plus the epoch's latency is added as a bandwidth stall:
 *     stall = latency + max(0, device - cpu - latency). */
#define TIERLAB_TIMING_MAX_TIERS 8

typedef struct tierlab_tier_params {
    double lat_seq_ns;            /* idle sequential read latency            */
    double lat_random_ns;         /* idle random read latency                */
    double read_bytes_per_s;      /* this core's share of the read bandwidth  */
    double write_bytes_per_s;     /* this core's share of the write bandwidth */
    uint32_t granule_bytes;       /* media access unit, >= line, power of two */
    uint32_t buffer_granules;     /* device buffer (0: none)                  */
    uint32_t max_outstanding;     /* media accesses (granules) in flight, >= 1 */
    uint32_t pad;
} tierlab_tier_params;

typedef struct tierlab_timing_config {
    uint32_t tiers;                               /* 1..TIERLAB_TIMING_MAX_TIERS */
    uint32_t line_bytes;                          /* as the filter's            */
    uint8_t region_tier[TIERLAB_REGIONS];         /* tier index of each region  */
    uint8_t region_serial[TIERLAB_REGIONS];       /* 1: dependent misses        */
    uint32_t fill_buffers;                        /* the core's outstanding misses */
    uint32_t pad;
    double window_ns;                             /* core time an epoch spans   */
    double cpu_ns_per_access;                     /* core time per access       */
    tierlab_tier_params tier[TIERLAB_TIMING_MAX_TIERS];
} tierlab_timing_config;

typedef struct tierlab_timing_result {
    double stall_ns[TIERLAB_REGIONS];       /* latency_ns + bandwidth_ns            */
    double latency_ns[TIERLAB_REGIONS];
    double bandwidth_ns[TIERLAB_REGIONS];
    double cpu_ns;                          /* the core's own time (accesses)      */
    uint64_t reads[TIERLAB_REGIONS];
    uint64_t prefetches[TIERLAB_REGIONS];
    uint64_t writebacks[TIERLAB_REGIONS];
    uint64_t buffer_hits[TIERLAB_REGIONS];
    uint64_t media_bytes[TIERLAB_REGIONS];
    uint64_t epochs;
} tierlab_timing_result;

typedef struct tierlab_timing tierlab_timing;

/* 0, TIERLAB_EINVAL or TIERLAB_ENOMEM. */
int tierlab_timing_new(const tierlab_timing_config *cfg, tierlab_timing **out);
void tierlab_timing_free(tierlab_timing *t);
void tierlab_timing_reset(tierlab_timing *t);
/* Times req[0..n) after what earlier calls gave. per_query (may be NULL) is
 * an array of nq x TIERLAB_REGIONS doubles to which each query's stall is
 * added, by region (queries >= nq are not broken down); pass the same array
 * to every call. final != 0 closes the open epoch (end of the stream). */
void tierlab_timing_run(tierlab_timing *t, const tierlab_mem_request *req, size_t n, int final,
                        double *per_query, uint32_t nq);
void tierlab_timing_get(const tierlab_timing *t, tierlab_timing_result *out);

/* The region registry (kernels/src/memtrace/regions.c is the single table):
 * names at the index of their TIERLAB_REGION_* number. name: NULL out of
 * range; find: the number, or -1. In every build. */
size_t tierlab_memtrace_region_count(void);
const char *tierlab_memtrace_region_name(size_t i);
int tierlab_memtrace_region_find(const char *name);

/* A trace file (traces/memtrace.md): this 256-byte header, then `records`
 * tierlab_memtrace_record, all little-endian. The sampling is stated here:
 * queries whose 0-based ordinal is a multiple of `every` were run, and kept
 * while the file stayed within `max_bytes` (whole queries only). */
#define TIERLAB_MEMTRACE_VERSION 1
#define TIERLAB_MEMTRACE_HEADER_BYTES 256
#define TIERLAB_MEMTRACE_BUDGET_HIT 1 /* flags: the byte budget stopped it */
typedef struct tierlab_memtrace_header {
    char magic[8];             /* "TLMTRACE"                                   */
    uint32_t version;          /* TIERLAB_MEMTRACE_VERSION                     */
    uint32_t header_bytes;     /* TIERLAB_MEMTRACE_HEADER_BYTES                */
    uint32_t record_bytes;     /* sizeof(tierlab_memtrace_record) = 16         */
    uint32_t every;            /* every Nth query of the workload was run (>= 1) */
    uint64_t max_bytes;        /* byte budget of the whole file; 0: none       */
    uint64_t records;          /* records after the header                     */
    uint64_t queries;          /* queries in the workload                      */
    uint64_t queries_sampled;  /* ordinals that are multiples of `every`       */
    uint64_t queries_traced;   /* of those, whose records are in the file      */
    uint64_t index_build_id;   /* tierlab_index_info.build_id                  */
    uint64_t workload_digest;  /* FNV-1a 64 of the workload file's bytes       */
    uint64_t stack_lo;         /* the traced thread's stack [stack_lo,         */
    uint64_t stack_hi;         /*   stack_hi): its records are region other    */
    uint32_t k;                /* results kept per query                       */
    uint32_t flags;            /* TIERLAB_MEMTRACE_BUDGET_HIT                  */
    uint32_t line_bytes;       /* cache line the summary counts (64)           */
    uint32_t checks;           /* TIERLAB_CHECKS_* of the queries              */
    char codec[32];            /* the index's codec configuration              */
    char placement[64];        /* placement as requested ("" = storage)        */
    uint8_t reserved[48];      /* zero                                         */
} tierlab_memtrace_header;

/* The recorder: only in the tracing build of the library
 * (libtierlab-memtrace.so, kernels/src/memtrace/runtime.c; `nm -D` of the
 * release libtierlab.so shows none of it). One thread records; a query run
 * between query_begin and query_end has its loads and stores appended.
 * open: writes the header `h` gives (identity and sampling fields; counts
 * zero) to `path`; 0 or TIERLAB_EIO / TIERLAB_EINVAL with a message.
 * query_begin: 1 when recording query `query`, 0 when the budget is spent.
 * query_end: 1 when the query's records were kept, 0 when they would have
 * overrun the budget (they are removed; recording stops). close: writes the
 * final header (also into *out when not NULL); 0 or TIERLAB_EIO. text: the
 * recorder's own code [lo, hi), which a cross-check leaves out. ranges: the
 * registered address ranges (up to max of them into lo/len/region; returns
 * how many there are), which tell a cross-check's addresses their region. */
int tierlab_memtrace_open(const char *path, const tierlab_memtrace_header *h, char *err,
                          size_t errlen);
int tierlab_memtrace_query_begin(uint32_t query);
int tierlab_memtrace_query_end(void);
int tierlab_memtrace_close(tierlab_memtrace_header *out, char *err, size_t errlen);
void tierlab_memtrace_text(uint64_t *lo, uint64_t *hi);
size_t tierlab_memtrace_ranges(uint64_t *lo, uint64_t *len, uint8_t *region, size_t max);

#ifdef __cplusplus
}
#endif
#endif /* TIERLAB_H */
