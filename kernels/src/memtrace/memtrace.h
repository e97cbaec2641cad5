/* memtrace.h — what the kernels say to the memory-trace recorder
 * (traces/memtrace.md). In the release build every macro here is empty: no
 * call, no symbol, no cost. In the tracing build (TIERLAB_MEMTRACE, the
 * CMake option of the same name) they reach the recorder (runtime.c).
 *
 *   TL_MT_REGION(r, p, n)   bytes [p, p + n) belong to region r
 *                           (TIERLAB_REGION_*) until TL_MT_UNREGION(p)
 *   TL_MT_LOAD(p, n)        report a load / store the compiler's
 *   TL_MT_STORE(p, n)       instrumentation cannot see (n bytes at p)
 *
 * Addresses no registered range holds are region other. */
#ifndef TL_MEMTRACE_H
#define TL_MEMTRACE_H

#include <stddef.h>

#include "tierlab.h"

#ifdef TIERLAB_MEMTRACE
void tl_mt_register(int region, const void *p, size_t n) __attribute__((visibility("hidden")));
void tl_mt_unregister(const void *p) __attribute__((visibility("hidden")));
void tl_mt_access(const void *p, size_t n, int kind) __attribute__((visibility("hidden")));
#define TL_MT_REGION(r, p, n) tl_mt_register((r), (p), (n))
#define TL_MT_UNREGION(p) tl_mt_unregister(p)
#define TL_MT_LOAD(p, n) tl_mt_access((p), (n), TIERLAB_ACCESS_LOAD)
#define TL_MT_STORE(p, n) tl_mt_access((p), (n), TIERLAB_ACCESS_STORE)
#else
#define TL_MT_REGION(r, p, n) ((void)0)
#define TL_MT_UNREGION(p) ((void)0)
#define TL_MT_LOAD(p, n) ((void)0)
#define TL_MT_STORE(p, n) ((void)0)
#endif

#endif
