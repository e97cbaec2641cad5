/* text.h — small text-output helpers shared by the corpus writers (internal). */
#ifndef TL_CORPUS_TEXT_H
#define TL_CORPUS_TEXT_H

#include <stdint.h>

/* Writes v in decimal at p (no terminator); returns the end. */
static inline char *tl_put_u64(char *p, uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) *p++ = tmp[--n];
    return p;
}

#endif
