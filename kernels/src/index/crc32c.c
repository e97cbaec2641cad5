/* crc32c.c — CRC-32C (Castagnoli), the checksum of every region of an index
 * (kernels/formats/index.md, "Checksums").
 *
 * The CRC is the standard one: reflected polynomial 0x82F63B78, register
 * preset to 0xFFFFFFFF, result complemented, so CRC-32C("123456789") =
 * 0xE3069283 and any CRC-32C tool or library gives the same value. The
 * SSE4.2 CRC32 instruction computes exactly this register update, so the
 * hardware path and the table path below agree bit for bit (the tests run
 * both, tierlab_force_scalar switches). The hardware path runs three streams
 * and joins them with a carry-less multiply (PCLMULQDQ); the table path is
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

#define TL_CRC32C_POLY 0x82F63B78u
/* Bytes per stream per round of the hardware loop's long-buffer rounds. */
#define TL_CRC_LANE 128
/* Lengths up to which the hardware path keeps a shift constant (below). */
#define TL_CRC_SHIFTS (3 * TL_CRC_LANE)

static uint32_t tl_crc_tab[8][256];
/* tl_crc_pow[i] = x^(8 * 2^i) mod P, reflected: the effect of 2^i bytes. */
static uint32_t tl_crc_pow[64];
/* tl_crc_k[m] = x^(8m - 33) mod P, reflected (m >= 5): carry-less multiplying a
 * register by it and folding the 64-bit product with one CRC32 instruction
 * multiplies the register by x^(8m), the effect of m more bytes (below). */
static uint32_t tl_crc_k[TL_CRC_SHIFTS + 1];
/* tl_crc_powk[i] = x^(8 * 2^i - 33) mod P (i >= 3): tl_crc_pow for the multiply. */
static uint32_t tl_crc_powk[64];
static pthread_once_t tl_crc_once = PTHREAD_ONCE_INIT;

/* One step of the reflected register: multiply by x modulo P. */
static inline uint32_t tl_crc_mulx(uint32_t c) {
    return (c >> 1) ^ (TL_CRC32C_POLY & (0u - (c & 1u)));
}

/* a * b mod P, both reflected (bit 31 is x^0): shift and add. */
static uint32_t tl_crc_mulmod(uint32_t a, uint32_t b) {
    uint32_t prod = 0;
    for (uint32_t bit = 0x80000000u; bit; bit >>= 1) { /* a's x^0, x^1, ... */
        if (a & bit) prod ^= b;
        b = tl_crc_mulx(b);
    }
    return prod;
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
    tl_crc_pow[0] = 0x80000000u >> 8; /* x^8 */
    for (int i = 1; i < 64; i++) tl_crc_pow[i] = tl_crc_mulmod(tl_crc_pow[i - 1], tl_crc_pow[i - 1]);
    uint32_t c = 0x80000000u; /* x^0: the reflected register's top bit */
    for (uint32_t e = 0; e + 33 <= 8u * TL_CRC_SHIFTS; e++) {
        if ((e + 33) % 8 == 0) tl_crc_k[(e + 33) / 8] = c;
        c = tl_crc_mulx(c);
    }
    /* x^(-33) does not exist as a table entry: x^(64 - 33) = x^31 times
     * x^(8 * 2^i - 64) = tl_crc_pow[i] / x^64, built up from x^31 */
    uint32_t x31 = 0x80000000u >> 31;
    tl_crc_powk[3] = x31; /* 8 * 8 - 33 = 31 */
    for (int i = 4; i < 64; i++) /* x^(8 * 2^i - 33) = x^(8 * 2^(i-1) - 33) * x^(8 * 2^(i-1)) */
        tl_crc_powk[i] = tl_crc_mulmod(tl_crc_powk[i - 1], tl_crc_pow[i - 1]);
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

/* r * x^(8 len) mod P: r followed by len zero bytes, without reading them. */
static uint32_t tl_crc_shift_scalar(uint32_t r, uint64_t len) {
    for (int i = 0; len; i++, len >>= 1)
        if (len & 1) r = tl_crc_mulmod(r, tl_crc_pow[i]);
    return r;
}

#if defined(__x86_64__)
#include <nmmintrin.h>
#include <wmmintrin.h>
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

/* tl_crc_shift for any length: the low three bits of len as zero bytes through
 * CRC32, the rest by the powers x^(8 * 2^i) (i >= 3, so 8 * 2^i > 33) with the
 * carry-less multiply. */
TL_CRC_HW static uint32_t tl_crc_shift_hw(uint32_t r, uint64_t len) {
    if (len >= 8 && len <= TL_CRC_SHIFTS) return tl_crc_shift(r, (size_t)len);
    for (uint64_t i = 0; i < (len & 7); i++) r = _mm_crc32_u8(r, 0);
    len >>= 3;
    for (int i = 3; len; i++, len >>= 1)
        if (len & 1) {
            __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)r),
                                                _mm_cvtsi32_si128((int)tl_crc_powk[i]), 0);
            r = (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
        }
    return r;
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
#endif

/* The path every CRC takes, chosen at the first call and again whenever
 * tierlab_force_scalar flips (cpu.c calls tl_crc32c_choose). A query checks
 * every block it decodes and many blocks are a few bytes long, so a CRC costs
 * one load and one indirect call besides its bytes. */
static uint32_t tl_crc_first(uint32_t c, const uint8_t *p, size_t n);
_Atomic(tl_crc_fn) tl_crc_impl = tl_crc_first;
static _Atomic(tl_crc_shift_fn) tl_crc_shift_impl;

void tl_crc32c_choose(void) {
    pthread_once(&tl_crc_once, tl_crc_init);
    tl_crc_fn f = tl_crc_scalar;
    tl_crc_shift_fn g = tl_crc_shift_scalar;
#if defined(__x86_64__)
    if (tierlab_cpu_has_sse42()) f = tl_crc_hw, g = tl_crc_shift_hw;
#endif
    atomic_store_explicit(&tl_crc_shift_impl, g, memory_order_release);
    atomic_store_explicit(&tl_crc_impl, f, memory_order_release);
}

uint32_t tl_crc32c_shift(uint32_t crc, uint64_t len) {
    tl_crc_shift_fn g = atomic_load_explicit(&tl_crc_shift_impl, memory_order_acquire);
    if (!g) {
        tl_crc32c_choose();
        g = atomic_load_explicit(&tl_crc_shift_impl, memory_order_acquire);
    }
    return g(crc, len);
}

uint32_t tierlab_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
    return tl_crc32c_shift(crc1, len2) ^ crc2;
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
