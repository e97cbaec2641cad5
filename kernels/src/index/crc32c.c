/* crc32c.c — CRC-32C (Castagnoli), the checksum of every region of an index
 * (kernels/formats/index.md, "Checksums").
 *
 * The CRC is the standard one: reflected polynomial 0x82F63B78, register
 * preset to 0xFFFFFFFF, result complemented, so CRC-32C("123456789") =
 * 0xE3069283 and any CRC-32C tool or library gives the same value. The
 * SSE4.2 CRC32 instruction computes exactly this register update, so the
 * hardware path and the table path below agree bit for bit (the tests run
 * both, tierlab_force_scalar switches). The hardware path runs three streams
 * and joins them with a carry-less multiply (PCLMULQDQ), and with AVX2 and
 * VPCLMULQDQ folds long runs beside them (tl_crc_wide); the table path is
 * "slicing by 8": eight 256-entry tables, built once, fold 8 input bytes per
 * step.
 *
 * Syndrome location (tl_crc32c_locate_bit): a CRC is linear, so flipping
 * bit i of a message changes its CRC by a value that depends only on i and
 * the message length; for messages shorter than 2^31 bits those values are
 * distinct and non-zero (the polynomial's period), so a single flipped bit is
 * found from stored ^ computed by walking the positions from the end. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "format.h"
#include "memtrace/memtrace.h"

#define TL_CRC32C_POLY 0x82F63B78u
/* Bytes per stream per round of the hardware loop's long-buffer rounds. */
#define TL_CRC_LANE 128
/* Lengths up to which the hardware paths keep a shift constant (below). */
#define TL_CRC_SHIFTS 2048

static uint32_t tl_crc_tab[8][256];
/* tl_crc_k[m] = x^(8m - 33) mod P, reflected (m >= 5): carry-less multiplying a
 * register by it and folding the 64-bit product with one CRC32 instruction
 * multiplies the register by x^(8m), the effect of m more bytes (below). */
static uint32_t tl_crc_k[TL_CRC_SHIFTS + 1];
static pthread_once_t tl_crc_once = PTHREAD_ONCE_INIT;

/* One step of the reflected register: multiply by x modulo P. */
static inline uint32_t tl_crc_mulx(uint32_t c) {
    return (c >> 1) ^ (TL_CRC32C_POLY & (0u - (c & 1u)));
}

static void tl_crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = tl_crc_mulx(c);
        tl_crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            tl_crc_tab[t][i] = (tl_crc_tab[t - 1][i] >> 8) ^ tl_crc_tab[0][tl_crc_tab[t - 1][i] & 0xFF];
    uint32_t c = 0x80000000u; /* x^0: the reflected register's top bit */
    for (uint32_t e = 0; e + 33 <= 8u * TL_CRC_SHIFTS; e++) {
        if ((e + 33) % 8 == 0) tl_crc_k[(e + 33) / 8] = c;
        c = tl_crc_mulx(c);
    }
}

/* The register update without pre/post complement. */
static uint32_t tl_crc_scalar(uint32_t c, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ tl_crc_tab[0][(c ^ *p++) & 0xFF];
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= c; /* little-endian: the register meets the first four bytes */
        c = tl_crc_tab[7][v & 0xFF] ^ tl_crc_tab[6][(v >> 8) & 0xFF] ^
            tl_crc_tab[5][(v >> 16) & 0xFF] ^ tl_crc_tab[4][(v >> 24) & 0xFF] ^
            tl_crc_tab[3][(v >> 32) & 0xFF] ^ tl_crc_tab[2][(v >> 40) & 0xFF] ^
            tl_crc_tab[1][(v >> 48) & 0xFF] ^ tl_crc_tab[0][v >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ tl_crc_tab[0][(c ^ *p++) & 0xFF];
    return c;
}

#if defined(__x86_64__)
#include <immintrin.h>
#define TL_CRC_HW __attribute__((target("sse4.2,pclmul")))

static inline uint64_t tl_rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The register r as it would be after m more bytes (8 <= m <= TL_CRC_SHIFTS)
 * whose own contribution is accounted for elsewhere: r * x^(8m) mod P. The
 * carry-less product of two reflected 32-bit values is the reflected 64-bit
 * value of their product times x, and CRC32 of a 64-bit value from a zero
 * register multiplies it by x^32: r * x^(8m - 33) * x * x^32. */
TL_CRC_HW static inline uint32_t tl_crc_shift(uint64_t r, size_t m) {
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)(uint32_t)r),
                                        _mm_cvtsi32_si128((int)tl_crc_k[m]), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

/* The CRC32 instruction has a latency of several cycles and a throughput of
 * one a cycle, so a buffer of more than a few words runs as three independent
 * streams over three adjacent lanes, combined by linearity: reg(A B C) =
 * reg(A) x^(8|BC|) + reg0(B) x^(8|C|) + reg0(C), reg0 from a zero register. */
TL_CRC_HW static uint32_t tl_crc_hw(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t a = c;
    while (n >= 3 * TL_CRC_LANE) {
        uint64_t b = 0, d = 0;
        for (size_t i = 0; i < TL_CRC_LANE; i += 8) {
            a = _mm_crc32_u64(a, tl_rd64(p + i));
            b = _mm_crc32_u64(b, tl_rd64(p + TL_CRC_LANE + i));
            d = _mm_crc32_u64(d, tl_rd64(p + 2 * TL_CRC_LANE + i));
        }
        a = tl_crc_shift(a, 2 * TL_CRC_LANE) ^ tl_crc_shift(b, TL_CRC_LANE) ^ (uint32_t)d;
        p += 3 * TL_CRC_LANE;
        n -= 3 * TL_CRC_LANE;
    }
    if (n >= 48) { /* the bytes beyond whole words first, then three lanes of words */
        if (n & 4) {
            uint32_t v;
            memcpy(&v, p, 4);
            a = _mm_crc32_u32((uint32_t)a, v);
            p += 4;
        }
        if (n & 2) {
            uint16_t v;
            memcpy(&v, p, 2);
            a = _mm_crc32_u16((uint32_t)a, v);
            p += 2;
        }
        if (n & 1) a = _mm_crc32_u8((uint32_t)a, *p++);
        size_t q = n / 8, qa = q / 3, qc = q - 2 * qa;
        const uint8_t *pb = p + 8 * qa, *pc = pb + 8 * qa;
        uint64_t b = 0, d = 0;
        for (size_t i = 0; i < qa; i++) {
            a = _mm_crc32_u64(a, tl_rd64(p + 8 * i));
            b = _mm_crc32_u64(b, tl_rd64(pb + 8 * i));
            d = _mm_crc32_u64(d, tl_rd64(pc + 8 * i));
        }
        for (size_t i = qa; i < qc; i++) d = _mm_crc32_u64(d, tl_rd64(pc + 8 * i));
        return tl_crc_shift(a, 8 * (qa + qc)) ^ tl_crc_shift(b, 8 * qc) ^ (uint32_t)d;
    }
    while (n >= 8) {
        a = _mm_crc32_u64(a, tl_rd64(p));
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)a;
    if (n >= 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        c32 = _mm_crc32_u32(c32, v);
        p += 4;
        n -= 4;
    }
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}

/* Long runs with AVX2 and VPCLMULQDQ keep two units busy in one loop: the
 * 256-bit carry-less multiply folds the first part, CRC32 instructions run
 * three lanes over the rest. Folding: four 32-byte accumulators, each two
 * 16-byte ones, move forward 128 bytes a round. A 16-byte accumulator x (its
 * first 8 bytes lo, the next hi) stands for lo * x^64 + hi; moved d bytes on
 * it becomes lo * x^(8d + 64) + hi * x^(8d) mod P, that is clmul(lo, k[d + 8])
 * ^ clmul(hi, k[d]) (a 64 x 32-bit carry-less product read in the 128-bit
 * frame carries an extra x^33: k[m] = x^(8m - 33)). The register enters as
 * the first 4 bytes xor c; at the end the 16-byte accumulators are folded
 * one into the next, and the last is 16 message bytes for two CRC32
 * instructions from a zero register. The lanes start from a zero register;
 * the parts are joined by linearity. A round: 128 bytes folded, 24 bytes of
 * each lane. Consumes whole rounds; returns the register. */
#define TL_CRC_WIDE __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))
#define TL_CRC_WIDE_MIN 1024
/* 32 bytes: reported to the memory-trace recorder by hand in the tracing
 * build (memtrace.h; its instrumentation covers 1..16 bytes). */
#define TL_CRC_LOAD32(p) (TL_MT_LOAD(p, 32), _mm256_loadu_si256((const __m256i *)(const void *)(p)))

TL_CRC_WIDE static inline __m256i tl_crc_fold32(__m256i x, __m256i k, const uint8_t *q) {
    return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00),
                                             _mm256_clmulepi64_epi128(x, k, 0x11)),
                            TL_CRC_LOAD32(q));
}

/* One part of at most TL_CRC_WIDE_ROUNDS rounds, so that each shift is one
 * multiply by a constant of tl_crc_k. */
#define TL_CRC_WIDE_ROUNDS (TL_CRC_SHIFTS / (3 * 24))

TL_CRC_WIDE static uint32_t tl_crc_wide_part(uint32_t c, const uint8_t **pp, size_t *np) {
    const uint8_t *p = *pp;
    size_t rounds = *np / (128 + 3 * 24);
    if (rounds > TL_CRC_WIDE_ROUNDS) rounds = TL_CRC_WIDE_ROUNDS;
    size_t lane = 24 * rounds;
    const uint8_t *pb = p + 128 * rounds, *pc = pb + lane, *pd = pc + lane;
    __m256i x0 = TL_CRC_LOAD32(p);
    __m256i x1 = TL_CRC_LOAD32(p + 32);
    __m256i x2 = TL_CRC_LOAD32(p + 64);
    __m256i x3 = TL_CRC_LOAD32(p + 96);
    x0 = _mm256_xor_si256(x0, _mm256_set_epi64x(0, 0, 0, (long long)c));
    const __m256i k128 = _mm256_set_epi64x(tl_crc_k[128], tl_crc_k[136], tl_crc_k[128],
                                           tl_crc_k[136]);
    uint64_t b = 0, d = 0, e = 0;
    for (size_t r = 0; r < rounds; r++) {
        if (r) {
            const uint8_t *q = p + 128 * r;
            x0 = tl_crc_fold32(x0, k128, q);
            x1 = tl_crc_fold32(x1, k128, q + 32);
            x2 = tl_crc_fold32(x2, k128, q + 64);
            x3 = tl_crc_fold32(x3, k128, q + 96);
        }
        for (size_t i = 24 * r; i < 24 * r + 24; i += 8) {
            b = _mm_crc32_u64(b, tl_rd64(pb + i));
            d = _mm_crc32_u64(d, tl_rd64(pc + i));
            e = _mm_crc32_u64(e, tl_rd64(pd + i));
        }
    }
    /* the accumulators into the last: 32 bytes on, then its first half 16 on */
    const __m256i k32 = _mm256_set_epi64x(tl_crc_k[32], tl_crc_k[40], tl_crc_k[32], tl_crc_k[40]);
    x1 = _mm256_xor_si256(x1, _mm256_xor_si256(_mm256_clmulepi64_epi128(x0, k32, 0x00),
                                               _mm256_clmulepi64_epi128(x0, k32, 0x11)));
    x2 = _mm256_xor_si256(x2, _mm256_xor_si256(_mm256_clmulepi64_epi128(x1, k32, 0x00),
                                               _mm256_clmulepi64_epi128(x1, k32, 0x11)));
    x3 = _mm256_xor_si256(x3, _mm256_xor_si256(_mm256_clmulepi64_epi128(x2, k32, 0x00),
                                               _mm256_clmulepi64_epi128(x2, k32, 0x11)));
    const __m128i k16 = _mm_set_epi64x(tl_crc_k[16], tl_crc_k[24]);
    __m128i lo = _mm256_castsi256_si128(x3), a = _mm256_extracti128_si256(x3, 1);
    a = _mm_xor_si128(a, _mm_xor_si128(_mm_clmulepi64_si128(lo, k16, 0x00),
                                       _mm_clmulepi64_si128(lo, k16, 0x11)));
    uint32_t r = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a));
    r = (uint32_t)_mm_crc32_u64(r, (uint64_t)_mm_extract_epi64(a, 1));
    r = tl_crc_shift(r, 3 * lane) ^ tl_crc_shift((uint32_t)b, 2 * lane) ^
        tl_crc_shift((uint32_t)d, lane) ^ (uint32_t)e;
    *pp = pd + lane;
    *np -= 128 * rounds + 3 * lane;
    /* the SSE code that goes on (tl_crc_hw) must not find the upper halves
     * dirty: a transition penalty of hundreds of cycles otherwise */
    _mm256_zeroupper();
    return r;
}

TL_CRC_WIDE static uint32_t tl_crc_wide(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= TL_CRC_WIDE_MIN) c = tl_crc_wide_part(c, &p, &n);
    return tl_crc_hw(c, p, n);
}
#endif

/* The path every CRC takes, chosen at the first call and again whenever
 * tierlab_force_scalar flips (cpu.c calls tl_crc32c_choose). A query checks
 * every block it decodes and many blocks are a few bytes long, so a CRC costs
 * one load and one indirect call besides its bytes. */
static uint32_t tl_crc_first(uint32_t c, const uint8_t *p, size_t n);
_Atomic(tl_crc_fn) tl_crc_impl = tl_crc_first;

void tl_crc32c_choose(void) {
    pthread_once(&tl_crc_once, tl_crc_init);
    tl_crc_fn f = tl_crc_scalar;
#if defined(__x86_64__)
    if (tierlab_cpu_has_sse42()) f = tl_crc_hw;
    if (tierlab_cpu_has_sse42() && tierlab_cpu_has_avx2() && __builtin_cpu_supports("vpclmulqdq"))
        f = tl_crc_wide;
#endif
    atomic_store_explicit(&tl_crc_impl, f, memory_order_release);
}

static uint32_t tl_crc_first(uint32_t c, const uint8_t *p, size_t n) {
    tl_crc32c_choose();
    return atomic_load_explicit(&tl_crc_impl, memory_order_acquire)(c, p, n);
}

uint32_t tierlab_crc32c(uint32_t crc, const void *data, size_t len) {
    if (!data && len) return crc;
    return tl_crc32c(crc, data, len);
}

int64_t tl_crc32c_locate_bit(uint32_t syndrome, uint64_t len) {
    if (!syndrome || len > (UINT64_C(1) << 28)) return -1;
    /* The change of the register after the last byte caused by flipping bit
     * k of byte i: start from bit 7 of the last byte (the first bit shifted
     * in is bit 0, the reflected order) and step back one bit at a time,
     * which multiplies the change by x (one reflected shift of the register
     * state run backwards is a forward step of the LFSR). */
    pthread_once(&tl_crc_once, tl_crc_init);
    /* effect of flipping bit k of the last byte: the register update of one
     * byte whose only set bit is k, from a zero register */
    uint32_t d = tl_crc_tab[0][0x80];
    for (uint64_t pos = 0; pos < 8 * len; pos++) { /* pos 0: bit 7 of the last byte */
        if (d == syndrome) {
            uint64_t byte = len - 1 - pos / 8;
            return (int64_t)(byte * 8 + (7 - pos % 8));
        }
        /* one bit earlier: one more register step (shift right, reduce) */
        d = (d >> 1) ^ (TL_CRC32C_POLY & (0u - (d & 1u)));
    }
    return -1;
}
