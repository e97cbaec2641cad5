/* check.h — the check macro of the C tests (each a plain main returning an
 * exit status, as streamvbyte's tests/unit.c). CHECK(cond, fmt, ...) counts
 * the check and, when cond is false, the failure, printing FILE:LINE and the
 * message to stderr. A test prints its totals and returns
 * `tl_check_failures != 0`. Static state: one test program per .c file. */
#ifndef TL_TESTS_CHECK_H
#define TL_TESTS_CHECK_H

#include <stdio.h>

static int tl_check_failures, tl_checks;

#define CHECK(cond, ...)                                         \
    do {                                                         \
        tl_checks++;                                             \
        if (!(cond)) {                                           \
            tl_check_failures++;                                 \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fputc('\n', stderr);                                 \
        }                                                        \
    } while (0)

#endif
