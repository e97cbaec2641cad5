/* fuzz_workload.c — libFuzzer harness for the query-file reader,
 * tierlab_workload_read (kernels/src/query/workload.c), public API only.
 *
 * The input is the file. It is written to a scratch file and read; then:
 *  - the return is 0 or TIERLAB_EINVAL (the file is readable and small), and
 *    a refusal leaves *out zeroed with a message that starts "PATH:" and,
 *    when it names a line, one that exists;
 *  - a success keeps every documented invariant of tierlab_workload: at
 *    least one query, 1..TIERLAB_QUERY_MAX_TERMS terms each, the type
 *    SINGLE exactly for one term, offsets starting at 0 and increasing, each
 *    term NUL-terminated [a-z0-9]+, lines increasing and inside the file;
 *  - each query's terms are whole words of its line, in order, and what
 *    lies between them is only whitespace or the word AND;
 *  - reading the file again gives the same queries, and tierlab_workload_free
 *    takes the freed workload again.
 * A violation says which contract broke and aborts; ASan and UBSan catch
 * the rest. */
#include "fuzz_common.h"

#include "tierlab.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int tl_ascii_space(uint8_t c) { return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F); }

/* Is [p, end) whitespace and ANDs only (ASCII whitespace and the multi-byte
 * spaces of tierlab.h's list, without validating them again)? */
static int tl_gap_ok(const uint8_t *p, const uint8_t *end) {
    while (p < end) {
        if (tl_ascii_space(*p)) p++;
        else if (end - p >= 3 && !memcmp(p, "AND", 3) && (end - p == 3 || !(p[3] >= 'A' && p[3] <= 'Z')))
            p += 3;
        else if (*p >= 0x80) p++; /* a byte of a Unicode space: the reader checked the rest */
        else return 0;
    }
    return 1;
}

static void tl_check(const tierlab_workload *w, const uint8_t *data, size_t size) {
    TL_FZ_CHECK(w->nqueries >= 1 && w->query_first[0] == 0 && w->term_off[0] == 0 &&
                    w->query_first[w->nqueries] == w->nterms,
                "workload: %llu queries, %llu terms, first offsets %llu %llu, last query end %llu",
                (unsigned long long)w->nqueries, (unsigned long long)w->nterms,
                (unsigned long long)w->query_first[0], (unsigned long long)w->term_off[0],
                (unsigned long long)w->query_first[w->nqueries]);
    /* the start of each line, to find a query's line */
    size_t nlines = 1;
    for (size_t i = 0; i < size; i++) nlines += data[i] == '\n';
    const uint8_t *line = data;
    uint64_t at_line = 1;
    for (uint64_t q = 0; q < w->nqueries; q++) {
        uint64_t a = w->query_first[q], b = w->query_first[q + 1];
        TL_FZ_CHECK(b > a && b - a <= TIERLAB_QUERY_MAX_TERMS, "query %llu has %lld terms",
                    (unsigned long long)q, (long long)(b - a));
        TL_FZ_CHECK(w->type[q] == (b - a == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND),
                    "query %llu: type %u for %llu terms", (unsigned long long)q, w->type[q],
                    (unsigned long long)(b - a));
        TL_FZ_CHECK(w->line[q] >= 1 && w->line[q] <= nlines && (!q || w->line[q] > w->line[q - 1]),
                    "query %llu: line %llu (the file has %zu; the query before is on %llu)",
                    (unsigned long long)q, (unsigned long long)w->line[q], nlines,
                    (unsigned long long)(q ? w->line[q - 1] : 0));
        while (at_line < w->line[q]) {
            line = (const uint8_t *)memchr(line, '\n', (size_t)(data + size - line)) + 1;
            at_line++;
        }
        const uint8_t *nl = memchr(line, '\n', (size_t)(data + size - line));
        const uint8_t *end = nl ? nl : data + size, *p = line;
        for (uint64_t j = a; j < b; j++) {
            uint64_t o = w->term_off[j], len = w->term_off[j + 1] - o - 1;
            TL_FZ_CHECK(w->term_off[j + 1] > o + 1 && w->text[o + len] == 0,
                        "term %llu: offsets %llu..%llu", (unsigned long long)j,
                        (unsigned long long)o, (unsigned long long)w->term_off[j + 1]);
            for (uint64_t c = 0; c < len; c++) {
                char ch = w->text[o + c];
                TL_FZ_CHECK((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'),
                            "term %llu '%s' is not [a-z0-9]+", (unsigned long long)j, w->text + o);
            }
            /* the next whole word of the line equal to the term, after a gap of
             * whitespace and ANDs only */
            const uint8_t *hit = NULL;
            for (const uint8_t *s = p; s + len <= end; s++) {
                if (memcmp(s, w->text + o, len)) continue;
                if ((s > line && !tl_ascii_space(s[-1]) && s[-1] < 0x80) ||
                    (s + len < end && !tl_ascii_space(s[len]) && s[len] < 0x80))
                    continue;
                hit = s;
                break;
            }
            TL_FZ_CHECK(hit && tl_gap_ok(p, hit),
                        "query %llu: term '%s' is not the next word of line %llu",
                        (unsigned long long)q, w->text + o, (unsigned long long)w->line[q]);
            p = hit + len;
        }
        TL_FZ_CHECK(tl_gap_ok(p, end), "query %llu: line %llu has words after its last term",
                    (unsigned long long)q, (unsigned long long)w->line[q]);
    }
}

static int tl_same(const tierlab_workload *a, const tierlab_workload *b) {
    return a->nqueries == b->nqueries && a->nterms == b->nterms &&
           !memcmp(a->term_off, b->term_off, (a->nterms + 1) * sizeof *a->term_off) &&
           !memcmp(a->text, b->text, a->term_off[a->nterms]) &&
           !memcmp(a->query_first, b->query_first, (a->nqueries + 1) * sizeof *a->query_first) &&
           !memcmp(a->line, b->line, a->nqueries * sizeof *a->line) &&
           !memcmp(a->type, b->type, a->nqueries);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024];
    tl_fz_path(path, sizeof path, "w.queries");
    tl_fz_write(path, data, size);
    size_t errlen = size + strlen(path) + 200; /* every message whole (tierlab.h) */
    char *err = tl_fz_alloc(errlen);
    tierlab_workload w, again;
    int rc = tierlab_workload_read(path, &w, err, errlen);
    if (rc != 0) {
        static const tierlab_workload zero;
        TL_FZ_CHECK(rc == TIERLAB_EINVAL, "workload_read returned %d: %s", rc, err);
        TL_FZ_CHECK(!memcmp(&w, &zero, sizeof w), "a refused workload is not zeroed");
        size_t pl = strlen(path);
        TL_FZ_CHECK(!strncmp(err, path, pl) && err[pl] == ':', "message '%s' does not start "
                    "with the path", err);
        if (err[pl + 1] >= '0' && err[pl + 1] <= '9') { /* PATH:LINE: */
            unsigned long long ln = strtoull(err + pl + 1, NULL, 10), nlines = 1;
            for (size_t i = 0; i < size; i++) nlines += data[i] == '\n';
            TL_FZ_CHECK(ln >= 1 && ln <= nlines, "message '%s' names line %llu of %llu", err, ln,
                        nlines);
        }
        free(err);
        return 0;
    }
    tl_check(&w, data, size);
    TL_FZ_CHECK(tierlab_workload_read(path, &again, err, errlen) == 0 && tl_same(&w, &again),
                "reading the file again gave other queries");
    tierlab_workload_free(&again);
    tierlab_workload_free(&w);
    tierlab_workload_free(&w); /* a freed workload again: documented as fine */
    free(err);
    return 0;
}
