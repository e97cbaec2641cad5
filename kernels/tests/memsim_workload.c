/* memsim_workload.c: a small deterministic program whose data accesses the
 * cache-filter test records with `valgrind --tool=lackey` and counts with
 * `valgrind --tool=cachegrind` (tests/kernels/test_memsim_cachegrind.py):
 * sequential scans, random reads and strided stores over 2 MiB, sizes that
 * exercise a 48 KiB L1 and a 1 MiB last level. No libc calls in the loops. */
#include <stdint.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t words = (size_t)2 << 20 >> 3, rounds = argc > 1 ? (size_t)atoi(argv[1]) : 1;
    volatile uint64_t *a = malloc(words * sizeof *a);
    if (!a)
        return 1;
    uint64_t x = 88172645463325252ull, sum = 0;
    for (size_t i = 0; i < words; i += 8) /* touch every line once */
        a[i] = i;
    for (size_t r = 0; r < rounds; r++) {
        for (size_t i = 0; i < (size_t)1 << 15; i++) /* a 256 KiB sequential scan */
            sum += a[(r * 4096 + i) % words];
        for (size_t i = 0; i < 20000; i++) { /* random reads (xorshift64) */
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sum += a[x % words];
        }
        for (size_t i = 0; i < 10000; i++) /* strided stores, 3 lines apart */
            a[(i * 24 + r) % words] = sum + i;
        for (size_t i = 0; i < 30000; i++) /* a hot 16 KiB block */
            sum += a[i % 2048];
    }
    return (int)(sum & 1) + 2 * (sum == 12345);
}
