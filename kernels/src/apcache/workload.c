/* workload.c — the runtime's workload: the query file read once by the
 * library's one reader (tierlab_workload_read, kernels/src/query/workload.c,
 * which refuses a bad line by its file line) and shared read-only by every
 * shard; here each query's terms are resolved through the dictionary, and
 * each term occurrence gets its next use (Belady). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

int tl_workload_parse(tl_run *r, const struct tierlab_index *ix, char *err, size_t errlen) {
    tl_workload *w = &r->wl;
    int rc = tierlab_workload_read(r->workload_path, &w->file, err, errlen);
    if (rc) return rc;
    const tierlab_workload *f = &w->file;
    if (f->nqueries > UINT32_MAX - 1) return tl_err(err, errlen, TIERLAB_EINVAL, "too many queries");
    uint64_t nq = f->nqueries, nt = f->nterms;
    w->nq = (uint32_t)nq;
    w->type = f->type;
    w->qfirst = malloc((nq + 1) * sizeof *w->qfirst);
    w->nterms = malloc(nq);
    w->known = malloc(nq);
    w->term = malloc((nt ? nt : 1) * sizeof *w->term);
    w->next_use = malloc((nt ? nt : 1) * sizeof *w->next_use);
    w->nseg = malloc((nt ? nt : 1) * sizeof *w->nseg);
    uint64_t *last = malloc((ix->terms ? ix->terms : 1) * sizeof *last);
    if (!w->qfirst || !w->nterms || !w->known || !w->term || !w->next_use || !w->nseg || !last) {
        free(last);
        return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for the workload");
    }
    uint64_t occ = 0;
    for (size_t q = 0; q < nq; q++) {
        uint64_t a = f->query_first[q], z = f->query_first[q + 1];
        w->nterms[q] = (uint8_t)(z - a); /* <= TIERLAB_QUERY_MAX_TERMS: the reader checks */
        uint64_t ids[TIERLAB_QUERY_MAX_TERMS];
        int known = 1;
        for (uint64_t t = a; t < z; t++) {
            uint64_t bytes = 0;
            size_t len;
            const char *term = tl_workload_term(w, t, &len);
            const tl_dict_entry *e;
            int rc2 = tl_dict_find(ix, term, len, ix->checks, &e, &bytes, err, errlen);
            if (rc2 < 0) {
                free(last);
                return rc2;
            }
            if (!e) known = 0;
            else ids[t - a] = (uint64_t)(e - ix->dict);
        }
        w->known[q] = (uint8_t)known;
        w->qfirst[q] = occ;
        if (known)
            for (uint64_t t = a; t < z; t++) w->term[occ++] = ids[t - a];
    }
    w->qfirst[nq] = occ;
    w->nocc = occ;
    for (uint64_t i = 0; i < ix->terms; i++) last[i] = TIERLAB_NEVER;
    for (uint64_t j = occ; j-- > 0;) {
        w->next_use[j] = last[w->term[j]];
        last[w->term[j]] = j;
    }
    free(last);
    return 0;
}

void tl_workload_free(tl_workload *w) {
    free(w->qfirst);
    free(w->nterms);
    free(w->known);
    free(w->term);
    free(w->next_use);
    free(w->nseg);
    tierlab_workload_free(&w->file); /* w->type is the file's */
    memset(w, 0, sizeof *w);
}
