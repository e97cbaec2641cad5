/* cpu.c — probe the CPU once, cache the answer; the scalar override.
 * SIMD code is compiled in target regions (no global -m flags), so the
 * library runs on any x86-64 and picks its path here at run time. */
#include <stdatomic.h>
#include <string.h>

#include "cpu.h"
#include "tierlab.h"

enum { TL_PROBED = TL_CPU_PROBED, TL_SSSE3 = TL_CPU_SSSE3, TL_AVX2 = TL_CPU_AVX2,
       TL_SSE42 = TL_CPU_SSE42 };
_Atomic int tl_cpu_word = 0; /* cpu.h: the probe's bits, or TL_PROBED when scalar */

static _Atomic int tl_cpu_bits = 0;
static _Atomic int tl_scalar = 0;

static int tl_probe(void) {
    int bits = atomic_load_explicit(&tl_cpu_bits, memory_order_relaxed);
    if (bits) return bits;
    bits = TL_PROBED;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1")) bits |= TL_SSSE3;
    /* The AVX2 kernels also use POPCNT, which every AVX2 CPU has; check anyway. */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt")) bits |= TL_AVX2;
    /* the CRC32 instruction, and carry-less multiply to combine CRC streams */
    if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul")) bits |= TL_SSE42;
#endif
    atomic_store_explicit(&tl_cpu_bits, bits, memory_order_relaxed);
    return bits;
}

int tierlab_cpu_has_avx2(void) { return !atomic_load(&tl_scalar) && (tl_probe() & TL_AVX2); }
int tierlab_cpu_has_ssse3(void) { return !atomic_load(&tl_scalar) && (tl_probe() & TL_SSSE3); }
int tierlab_cpu_has_sse42(void) { return !atomic_load(&tl_scalar) && (tl_probe() & TL_SSE42); }

const char *tierlab_cpu_features(void) {
    static const char *names[] = {"", "ssse3,sse4.1", "avx2", "ssse3,sse4.1,avx2"};
    int bits = tl_probe();
    return names[((bits & TL_SSSE3) ? 1 : 0) + ((bits & TL_AVX2) ? 2 : 0)];
}

void tl_crc32c_choose(void); /* index/crc32c.c: caches its choice of path */

int tl_cpu_word_init(void) {
    const int w = atomic_load(&tl_scalar) ? TL_PROBED : tl_probe();
    atomic_store_explicit(&tl_cpu_word, w, memory_order_relaxed);
    return w;
}

void tierlab_force_scalar(int on) {
    atomic_store(&tl_scalar, on ? 1 : 0);
    tl_cpu_word_init();
    tl_crc32c_choose();
}
int tierlab_scalar_forced(void) { return atomic_load(&tl_scalar); }
