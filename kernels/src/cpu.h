/* cpu.h — the per-process CPU feature word (internal; cpu.c). What the
 * kernels may use now, read with one relaxed load: hot paths (a codec's
 * decode of one block) test it instead of calling tierlab_cpu_has_*()
 * through the PLT, twice per block. The scalar override
 * (tierlab_force_scalar) leaves only TL_CPU_PROBED. */
#ifndef TL_CPU_H
#define TL_CPU_H

#include <stdatomic.h>

enum { TL_CPU_PROBED = 1, TL_CPU_SSSE3 = 2, TL_CPU_AVX2 = 4, TL_CPU_SSE42 = 8 };

extern _Atomic int tl_cpu_word __attribute__((visibility("hidden")));
/* Probes the CPU (once) and sets tl_cpu_word; returns it. */
__attribute__((visibility("hidden"))) int tl_cpu_word_init(void);

/* TL_CPU_* bits usable now. */
static inline int tl_cpu_now(void) {
    const int w = atomic_load_explicit(&tl_cpu_word, memory_order_relaxed);
    return w ? w : tl_cpu_word_init();
}

#endif
