/* workload.c — C tests of the query-file reader (tierlab_workload_read,
 * kernels/src/query/workload.c): what it returns for a good file (terms,
 * offsets, query types, file lines) and the path:line of each kind of bad
 * line. Python's tests/workload/ run the same reader through
 * tierlab.workload.read_queries; these run it plain and under ASan/UBSan.
 * A plain main returning an exit status; prints what failed. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tierlab.h"

#include "check.h"

static char path[64];

static void put(const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

/* Read a file of these bytes; 0 or the error, its message in err. */
static int read_bytes(const char *bytes, size_t n, tierlab_workload *w, char *err, size_t len) {
    put(bytes, n);
    return tierlab_workload_read(path, w, err, len);
}
#define READ(lit, w, err) read_bytes(lit, sizeof lit - 1, w, err, sizeof err)

/* The message is "<path><rest>". */
static int says(const char *err, const char *rest) {
    size_t n = strlen(path);
    return !strncmp(err, path, n) && !strcmp(err + n, rest);
}

static void test_good_file(void) {
    tierlab_workload w;
    char err[TIERLAB_ERRMSG];
    /* comments, blank lines, CRLF, tabs, AND, a NBSP (U+00A0) between terms,
     * a last line without '\n' */
    int rc = READ("# a comment\nalpha\n\n  beta AND gamma  \r\n\tdelta\xc2\xa0" "epsilon\n"
                  "   # indented comment\n007 AND x AND y", &w, err);
    CHECK(rc == 0, "good file: %s", err);
    if (rc) return;
    static const char *const want[] = {"alpha", "beta", "gamma", "delta", "epsilon", "007",
                                       "x", "y"};
    static const uint64_t first[] = {0, 1, 3, 5, 8}, line[] = {2, 4, 5, 7};
    CHECK(w.nqueries == 4 && w.nterms == 8, "%llu queries, %llu terms",
          (unsigned long long)w.nqueries, (unsigned long long)w.nterms);
    for (uint64_t j = 0; j < 8 && w.nterms == 8; j++) {
        const char *t = w.text + w.term_off[j];
        CHECK(!strcmp(t, want[j]) && w.term_off[j + 1] - w.term_off[j] - 1 == strlen(want[j]),
              "term %llu: '%s'", (unsigned long long)j, t);
    }
    for (uint64_t q = 0; q < 4 && w.nqueries == 4; q++) {
        CHECK(w.query_first[q] == first[q] && w.line[q] == line[q], "query %llu",
              (unsigned long long)q);
        CHECK(w.type[q] == (q == 0 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND), "type of %llu",
              (unsigned long long)q);
    }
    CHECK(w.nqueries != 4 || w.query_first[4] == 8, "the end of the last query");
    tierlab_workload_free(&w);
    CHECK(w.text == NULL && w.nqueries == 0, "free zeroes");
    tierlab_workload_free(&w); /* again: fine */
    tierlab_workload_free(NULL);
    /* sixteen terms are a query */
    rc = READ("a b c d e f g h i j k l m n o p\n", &w, err);
    CHECK(rc == 0 && w.nqueries == 1 && w.nterms == TIERLAB_QUERY_MAX_TERMS, "16 terms: %s", err);
    tierlab_workload_free(&w);
}

static void test_bad_files(void) {
    tierlab_workload w;
    char err[TIERLAB_ERRMSG];
    CHECK(READ("ok\nAND b\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":2: 'AND' must stand between two terms: 'AND b'"),
          "AND first: %s", err);
    CHECK(w.text == NULL && w.nqueries == 0, "nothing returned on an error");
    CHECK(READ("a AND AND b\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":1: 'AND' must stand between two terms: 'a AND AND b'"),
          "AND AND: %s", err);
    CHECK(READ("  a AND \t\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":1: 'AND' must stand between two terms: 'a AND'"),
          "AND last, the line stripped: %s", err);
    CHECK(READ("ok\n\nHello\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":3: 'Hello' is not a term: terms are lower-case ASCII letters and digits "
                        "(as the index tokenises text), and only 'AND' joins them"),
          "upper case: %s", err);
    CHECK(READ("a caf\xc3\xa9\n", &w, err) == TIERLAB_EINVAL &&
              !strncmp(err + strlen(path), ":1: 'caf\xc3\xa9' is not a term", 18),
          "non-ASCII letters: %s", err);
    CHECK(READ("ok\nab\xff\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":2: invalid UTF-8 at byte 3"),
          "invalid UTF-8: %s", err);
    CHECK(READ("ok\nHello \xed\xa0\x80\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":2: invalid UTF-8 at byte 7"),
          "a surrogate, checked before the words: %s", err);
    CHECK(READ("x\n\xe2\x82", &w, err) == TIERLAB_EINVAL &&
              says(err, ":2: invalid UTF-8 at byte 1"),
          "a cut sequence at the end: %s", err);
    CHECK(READ("ok\na b c d e f g h i j k l m n o p q\n", &w, err) == TIERLAB_EINVAL &&
              says(err, ":2: 17 terms: a query has at most 16 (TIERLAB_QUERY_MAX_TERMS)"),
          "17 terms, named by the file line: %s", err);
    CHECK(READ("# nothing\n\n   \n", &w, err) == TIERLAB_EINVAL && says(err, ": no queries"),
          "no queries: %s", err);
    CHECK(READ("", &w, err) == TIERLAB_EINVAL && says(err, ": no queries"), "empty: %s", err);
    unlink(path);
    CHECK(tierlab_workload_read(path, &w, err, sizeof err) == TIERLAB_EIO &&
              says(err, ": cannot read (No such file or directory)"),
          "missing file: %s", err);
    CHECK(tierlab_workload_read(NULL, &w, err, sizeof err) == TIERLAB_EINVAL, "NULL path");
    CHECK(tierlab_workload_read(path, NULL, err, sizeof err) == TIERLAB_EINVAL, "NULL out");
    /* a message longer than err is cut, never overrun */
    char small[24];
    CHECK(READ("a AND\n", &w, small) == TIERLAB_EINVAL && strlen(small) == sizeof small - 1,
          "cut message");
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/tierlab-workload-test-%ld.txt", (long)getpid());
    test_good_file();
    test_bad_files();
    unlink(path);
    printf("workload: %d checks, %d failed\n", tl_checks, tl_check_failures);
    return tl_check_failures != 0;
}
