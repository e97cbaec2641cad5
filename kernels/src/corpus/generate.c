/* generate.c — the seeded synthetic corpus (docs/workload.md "Corpora").
 *
 * One pass, one core: draw a rank, append its word, count it; documents are
 * cut from the token stream at doc_bytes. Ranks follow a two-regime Zipf law
 * (see tierlab.h). The head (ranks 1..knee, plus one "tail" column) is drawn
 * with Walker's alias method from a table small enough for L2; the tail is a
 * continuous power law inverted in closed form, floor(x) being the rank. So a
 * token costs one xoshiro256** draw and one table lookup; ~1 in 10 tokens (the
 * tail) one more draw and a division (tail_s = 2) or an exp/log pair. exp/log
 * are our own, so the bytes do not depend on a libm's last-bit rounding: the
 * same wherever IEEE doubles are. Counters of ranks drawn a few tokens ahead
 * are prefetched (tail ranks land anywhere in a large array).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text.h"
#include "tierlab.h"

/* ---- words --------------------------------------------------------------- */

/* Syllables are onset-vowel or onset-vowel-coda with single-letter onsets and
 * codas, and vowels disjoint from both, so a word splits into syllables in
 * exactly one way: different syllable sequences are different words. */
static const char tl_onsets[16] = {'b', 'c', 'd', 'f', 'g', 'h', 'k', 'l',
                                   'm', 'n', 'p', 'r', 's', 't', 'v', 'w'};
static const char tl_vowels[5] = {'a', 'e', 'i', 'o', 'u'};
static const char tl_codas[6] = {'n', 'r', 's', 't', 'l', 'm'};
enum { TL_CV = 80, TL_CVC = 480, TL_SYL = TL_CV + TL_CVC };

/* Syllable i (0..559): the 80 two-letter ones first, so the most frequent
 * ranks get the shortest words; a fixed affine shuffle inside each group so
 * the top words do not read like an alphabet. */
static size_t tl_syllable(uint32_t i, char *out) {
    if (i < TL_CV) {
        uint32_t p = (i * 37u + 11u) % TL_CV;
        out[0] = tl_onsets[p % 16];
        out[1] = tl_vowels[p / 16];
        return 2;
    }
    uint32_t p = ((i - TL_CV) * 97u + 5u) % TL_CVC;
    out[0] = tl_onsets[p % 16];
    out[1] = tl_vowels[(p / 16) % 5];
    out[2] = tl_codas[p / 80];
    return 3;
}

size_t tierlab_corpus_word(uint32_t rank, char *buf) {
    if (rank == 0 || rank > (UINT32_C(1) << 31)) {
        if (buf) buf[0] = '\0';
        return 0;
    }
    uint64_t idx = rank - 1, block = TL_SYL;
    unsigned k = 1;
    while (idx >= block) { /* ranks are grouped by syllable count */
        idx -= block;
        block *= TL_SYL;
        k++;
    }
    size_t len = 0;
    if (k == 1) {
        len = tl_syllable((uint32_t)idx, buf);
    } else {
        /* Mix the index inside its block (1000003 is prime, so coprime with
         * 560^k and the map is a bijection) so consecutive ranks differ in
         * their first syllable. idx < 560^4 < 2^37: no overflow. */
        idx = (idx * UINT64_C(1000003) + 12345u) % block;
        for (unsigned j = 0; j < k; j++) {
            len += tl_syllable((uint32_t)(idx % TL_SYL), buf + len);
            idx /= TL_SYL;
        }
    }
    buf[len] = '\0';
    return len;
}

/* ---- randomness and the little math we need ------------------------------ */

typedef struct { uint64_t s[4]; } tl_rng;

static uint64_t tl_splitmix64(uint64_t *x) {
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t tl_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** (Blackman & Vigna), seeded through splitmix64. */
static uint64_t tl_next(tl_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = tl_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = tl_rotl(s[3], 45);
    return out;
}

static double tl_unit(tl_rng *r) { return (double)(tl_next(r) >> 11) * 0x1.0p-53; }

static const double tl_ln2_hi = 6.93147180369123816490e-01;
static const double tl_ln2_lo = 1.90821492927058770002e-10;

static uint64_t tl_bits(double x) { uint64_t b; memcpy(&b, &x, 8); return b; }
static double tl_double(uint64_t b) { double x; memcpy(&x, &b, 8); return x; }

/* Natural log of a positive, finite, normal x: x = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh((m-1)/(m+1)) by its series. */
static double tl_log(double x) {
    uint64_t b = tl_bits(x);
    int e = (int)((b >> 52) & 0x7ff) - 1023;
    double m = tl_double((b & UINT64_C(0x000fffffffffffff)) | UINT64_C(0x3ff0000000000000));
    if (m > 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    /* 1/21, 1/19, ..., 1/1: |z| <= 0.172, so z^22/23 < 1e-17. */
    static const double c[11] = {1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11,
                                 1.0 / 9,  1.0 / 7,  1.0 / 5,  1.0 / 3,  1.0};
    double z = (m - 1) / (m + 1), z2 = z * z, sum = 0;
    for (int k = 0; k < 11; k++) sum = sum * z2 + c[k];
    return e * tl_ln2_hi + (e * tl_ln2_lo + 2 * z * sum);
}

/* e^x for x in about [-700, 700]: x = k ln2 + r, Taylor series of e^r. */
static double tl_exp(double x) {
    if (x < -700) return 0;
    if (x > 700) x = 700;
    double kd = x / (tl_ln2_hi + tl_ln2_lo);
    long k = (long)(kd < 0 ? kd - 0.5 : kd + 0.5);
    /* Taylor coefficients 1/n!, n = 14..0: |r| <= 0.347, r^15/15! < 1e-19. */
    static const double c[15] = {
        1.0 / 87178291200.0, 1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
        1.0 / 3628800.0,     1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,
        1.0 / 720.0,         1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,
        1.0 / 2.0,           1.0,                1.0};
    double r = (x - k * tl_ln2_hi) - k * tl_ln2_lo, sum = 0;
    for (int n = 0; n < 15; n++) sum = sum * r + c[n];
    return sum * tl_double((uint64_t)(k + 1023) << 52);
}

/* x^y for x > 0. */
static double tl_pow(double x, double y) { return tl_exp(y * tl_log(x)); }

/* ---- the sampler ---------------------------------------------------------- */

typedef struct { uint32_t thr, alias; } tl_col;

enum { TL_TAIL_POW, TL_TAIL_LOG, TL_TAIL_INV };

typedef struct {
    tl_col *cols;     /* knee head ranks + 1 tail column (if any tail)    */
    uint32_t ncols;
    uint32_t knee, vmax;
    int has_tail;
    int tail_kind;            /* TL_TAIL_POW, TL_TAIL_LOG (s = 1), TL_TAIL_INV (s = 2) */
    double ta, tb, tinv;      /* tail inverse-CDF constants                */
} tl_sampler;

/* Walker/Vose alias table over weights w[0..n); w is clobbered. */
static int tl_alias_build(tl_col *cols, double *w, uint32_t n) {
    uint32_t *small = malloc(sizeof(uint32_t) * n), *large = malloc(sizeof(uint32_t) * n);
    if (!small || !large) {
        free(small);
        free(large);
        return TIERLAB_ENOMEM;
    }
    double total = 0;
    for (uint32_t i = 0; i < n; i++) total += w[i];
    uint32_t ns = 0, nl = 0;
    for (uint32_t i = 0; i < n; i++) {
        w[i] = w[i] * n / total;
        if (w[i] < 1) small[ns++] = i;
        else large[nl++] = i;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[nl - 1];
        cols[s].thr = (uint32_t)(w[s] * 4294967296.0);
        cols[s].alias = l;
        w[l] -= 1 - w[s];
        if (w[l] < 1) {
            nl--;
            small[ns++] = l;
        }
    }
    /* What is left has weight 1 up to rounding: always itself. */
    while (nl) {
        uint32_t l = large[--nl];
        cols[l].thr = UINT32_MAX;
        cols[l].alias = l;
    }
    while (ns) {
        uint32_t s = small[--ns];
        cols[s].thr = UINT32_MAX;
        cols[s].alias = s;
    }
    free(small);
    free(large);
    return 0;
}

static int tl_sampler_init(tl_sampler *sp, const tierlab_corpus_params *p) {
    memset(sp, 0, sizeof *sp);
    sp->knee = p->knee;
    sp->vmax = p->vocab_max;
    sp->has_tail = p->vocab_max > p->knee;
    sp->ncols = p->knee + (uint32_t)sp->has_tail;
    sp->cols = malloc(sizeof(tl_col) * sp->ncols);
    double *w = malloc(sizeof(double) * sp->ncols);
    if (!sp->cols || !w) {
        free(w);
        return TIERLAB_ENOMEM;
    }
    for (uint32_t r = 1; r <= p->knee; r++) w[r - 1] = tl_pow((double)r, -p->zipf_s);
    if (sp->has_tail) {
        /* Tail density c x^-t on [knee+1, vmax+1), c = knee^(t-s) so that it
         * meets the head at the knee; rank = floor(x). */
        double s = p->zipf_s, t = p->tail_s, k1 = (double)p->knee + 1, v1 = (double)p->vocab_max + 1;
        double c = tl_pow((double)p->knee, t - s);
        if (t > 1 - 1e-9 && t < 1 + 1e-9) {
            sp->tail_kind = TL_TAIL_LOG;
            sp->ta = tl_log(k1);
            sp->tb = tl_log(v1) - sp->ta;
            w[p->knee] = c * sp->tb;
        } else {
            sp->ta = tl_pow(k1, 1 - t);
            sp->tb = tl_pow(v1, 1 - t) - sp->ta;
            sp->tinv = 1 / (1 - t);
            /* t == 2, the default: x = 1/(a + u b), one division, no exp/log. */
            sp->tail_kind = t == 2 ? TL_TAIL_INV : TL_TAIL_POW;
            w[p->knee] = c * sp->tb / (1 - t);
        }
    }
    int rc = tl_alias_build(sp->cols, w, sp->ncols);
    free(w);
    return rc;
}

static inline uint32_t tl_sample(const tl_sampler *sp, tl_rng *rng) {
    uint64_t x = tl_next(rng);
    uint32_t col = (uint32_t)(((x >> 32) * sp->ncols) >> 32);
    tl_col c = sp->cols[col];
    col = (uint32_t)x < c.thr ? col : c.alias; /* unpredictable: keep it a cmov */
    if (col < sp->knee) return col + 1;
    double u = tl_unit(rng), y;
    if (sp->tail_kind == TL_TAIL_INV) y = 1 / (sp->ta + u * sp->tb);
    else if (sp->tail_kind == TL_TAIL_LOG) y = tl_exp(sp->ta + u * sp->tb);
    else y = tl_exp(sp->tinv * tl_log(sp->ta + u * sp->tb));
    uint32_t r = y >= (double)sp->vmax ? sp->vmax : (uint32_t)y;
    return r <= sp->knee ? sp->knee + 1 : r;
}

/* ---- the generator -------------------------------------------------------- */

typedef struct {
    uint64_t occurrences;
    uint32_t postings;
    uint32_t last_doc; /* 1-based number of the last document counted; 0: none */
} tl_term;

enum { TL_BUF = 1 << 20, TL_SLACK = 64, TL_REPORT = 4 << 20, TL_AHEAD = 16 };

void tierlab_corpus_params_default(tierlab_corpus_params *p) {
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->target_bytes = 100000000;
    p->doc_bytes = 1024;
    p->vocab_max = UINT32_C(1) << 24;
    p->knee = 10000;
    p->zipf_s = 1.0;
    p->tail_s = 2.0;
}

static int tl_params_ok(const tierlab_corpus_params *p) {
    if ((p->target_bytes == 0) == (p->docs == 0)) return 0;
    if (p->docs > UINT32_MAX - 1) return 0;
    if (p->doc_bytes < TIERLAB_CORPUS_MIN_DOC_BYTES) return 0;
    if (p->vocab_max == 0 || p->vocab_max > (UINT32_C(1) << 31)) return 0;
    if (p->knee == 0 || p->knee > p->vocab_max || p->knee > TIERLAB_CORPUS_MAX_KNEE) return 0;
    if (!(p->zipf_s > 0 && p->zipf_s <= 8) || !(p->tail_s > 0 && p->tail_s <= 8)) return 0;
    return 1;
}

static double tl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int tl_flush(FILE *f, const char *buf, size_t n) {
    return n && fwrite(buf, 1, n, f) != n ? TIERLAB_EIO : 0;
}

static int tl_cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int tl_write_terms(const char *path, const tl_term *terms, const uint32_t *ranks,
                          uint64_t n, const char (*head)[16], uint32_t knee, char *buf) {
    FILE *f = fopen(path, "wb");
    if (!f) return TIERLAB_EIO;
    static const char hdr[] = "term\tpostings\toccurrences\n";
    size_t pos = sizeof hdr - 1;
    memcpy(buf, hdr, pos);
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) {
        uint32_t r = ranks[i];
        const tl_term *t = &terms[r];
        if (r <= knee) {
            size_t len = strlen(head[r - 1]);
            memcpy(buf + pos, head[r - 1], len);
            pos += len;
        } else {
            pos += tierlab_corpus_word(r, buf + pos);
        }
        char *q = buf + pos;
        *q++ = '\t';
        q = tl_put_u64(q, t->postings);
        *q++ = '\t';
        q = tl_put_u64(q, t->occurrences);
        *q++ = '\n';
        pos = (size_t)(q - buf);
        if (pos >= TL_BUF) {
            rc = tl_flush(f, buf, pos);
            pos = 0;
        }
    }
    if (!rc) rc = tl_flush(f, buf, pos);
    if (fclose(f) != 0 && !rc) rc = TIERLAB_EIO;
    return rc;
}

int tierlab_corpus_generate(const tierlab_corpus_params *p, const char *corpus_path,
                            const char *terms_path, tierlab_progress_fn progress,
                            void *ctx, tierlab_corpus_stats *stats) {
    double t0 = tl_now();
    tierlab_corpus_stats st;
    memset(&st, 0, sizeof st);
    if (stats) *stats = st;
    if (!p || !corpus_path || !tl_params_ok(p)) return TIERLAB_EINVAL;

    int rc = 0;
    FILE *f = NULL;
    tl_sampler sp;
    memset(&sp, 0, sizeof sp);
    char(*head)[16] = malloc(sizeof(*head) * p->knee);
    uint8_t *head_len = malloc(p->knee);
    char *buf = malloc(TL_BUF + TL_SLACK);
    /* calloc: the pages of ranks that never occur are never touched. */
    tl_term *terms = calloc((size_t)p->vocab_max + 1, sizeof(tl_term));
    uint64_t seen_cap = 1 << 16;
    uint32_t *seen = malloc(sizeof(uint32_t) * seen_cap);
    if (!head || !head_len || !buf || !terms || !seen) {
        rc = TIERLAB_ENOMEM;
        goto out;
    }
    if ((rc = tl_sampler_init(&sp, p)) != 0) goto out;
    for (uint32_t r = 1; r <= p->knee; r++) {
        memset(head[r - 1], 0, 16);
        head_len[r - 1] = (uint8_t)tierlab_corpus_word(r, head[r - 1]);
    }

    tl_rng rng;
    uint64_t sm = p->seed;
    for (int i = 0; i < 4; i++) rng.s[i] = tl_splitmix64(&sm);

    f = fopen(corpus_path, "wb");
    if (!f) {
        rc = TIERLAB_EIO;
        goto out;
    }

    const uint64_t total = p->docs ? p->docs : p->target_bytes;
    const uint32_t cap = p->doc_bytes;
    uint64_t flushed = 0, next_report = TL_REPORT;
    uint32_t doc = 1; /* number of the document being filled (1-based) */
    size_t pos = 0, cur = 0; /* bytes in the buffer; in the current document */
    /* Ranks are drawn TL_AHEAD tokens early and their counters prefetched:
     * tail ranks land anywhere in a large array and would miss the cache. */
    uint32_t ahead[TL_AHEAD];
    for (int i = 0; i < TL_AHEAD; i++) {
        ahead[i] = tl_sample(&sp, &rng);
        __builtin_prefetch(&terms[ahead[i]], 1);
    }
    unsigned slot = 0;
    for (;;) {
        uint32_t r = ahead[slot];
        ahead[slot] = tl_sample(&sp, &rng);
        __builtin_prefetch(&terms[ahead[slot]], 1);
        slot = (slot + 1) & (TL_AHEAD - 1);
        char tmp[16];
        const char *w;
        size_t len;
        if (r <= sp.knee) {
            w = head[r - 1];
            len = head_len[r - 1];
        } else {
            len = tierlab_corpus_word(r, tmp);
            w = tmp;
        }
        if (cur + (cur != 0) + len > cap) {
            /* The word does not fit: end this document; the word opens the next. */
            buf[pos++] = '\n';
            st.docs++;
            st.bytes = flushed + pos;
            if (p->docs ? st.docs == p->docs : st.bytes >= p->target_bytes) break;
            doc++;
            cur = 0;
        }
        if (cur) buf[pos++] = ' ';
        memcpy(buf + pos, w, 16); /* fixed-size copy; the slack absorbs it */
        pos += len;
        cur += len + (cur != 0);
        st.tokens++;
        tl_term *t = &terms[r];
        t->occurrences++;
        if (t->last_doc != doc) {
            t->last_doc = doc;
            if (t->postings++ == 0) {
                if (st.terms == seen_cap) {
                    uint32_t *grown = realloc(seen, sizeof(uint32_t) * (seen_cap *= 2));
                    if (!grown) {
                        rc = TIERLAB_ENOMEM;
                        goto out;
                    }
                    seen = grown;
                }
                seen[st.terms++] = r;
            }
        }
        if (pos >= TL_BUF) {
            if ((rc = tl_flush(f, buf, pos)) != 0) goto out;
            flushed += pos;
            pos = 0;
            if (progress && flushed >= next_report) {
                next_report = flushed + TL_REPORT;
                if (progress(ctx, p->docs ? st.docs : flushed, total)) {
                    rc = TIERLAB_ECANCELED;
                    goto out;
                }
            }
        }
    }
    if ((rc = tl_flush(f, buf, pos)) != 0) goto out;
    flushed += pos;
    st.bytes = flushed;
    rc = fclose(f) == 0 ? 0 : TIERLAB_EIO;
    f = NULL;
    if (rc) goto out;
    /* The ranks that occur (listed on first occurrence) into rank order: only
     * their pages of `terms` are read; a scan would fault in all of them. */
    qsort(seen, st.terms, sizeof(uint32_t), tl_cmp_u32);
    for (uint64_t i = 0; i < st.terms; i++)
        if (terms[seen[i]].postings > st.max_postings) st.max_postings = terms[seen[i]].postings;
    if (terms_path) {
        rc = tl_write_terms(terms_path, terms, seen, st.terms, (const char(*)[16])head, p->knee,
                            buf);
        if (rc) goto out;
    }
    if (progress && progress(ctx, p->docs ? st.docs : st.bytes, total)) rc = TIERLAB_ECANCELED;

out:
    if (f) {
        int e = errno;
        fclose(f);
        errno = e;
    }
    free(sp.cols);
    free(head);
    free(head_len);
    free(buf);
    free(terms);
    free(seen);
    st.seconds = tl_now() - t0;
    if (stats) *stats = st;
    return rc;
}
