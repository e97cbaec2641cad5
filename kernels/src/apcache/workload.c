/* workload.c — the runtime's workload: the query file parsed once and
 * shared read-only by every shard, each query's terms resolved through the
 * dictionary, and each term occurrence's next use (Belady) and segments. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

int tl_workload_parse(tl_run *r, const struct tierlab_index *ix, char *err, size_t errlen) {
    tl_workload *w = &r->wl;
    FILE *f = fopen(r->workload_path, "rb");
    if (!f) return tl_err(err, errlen, TIERLAB_EIO, "%s: %s", r->workload_path, strerror(errno));
    size_t cap = 1 << 16, qcap = 1024, tcap = 4096, n = 0, nq = 0, nt = 0;
    char *text = malloc(cap);
    uint64_t *qtext = malloc(qcap * sizeof *qtext), *toff = malloc(tcap * sizeof *toff);
    char line[65536];
    int rc = 0;
    uint64_t lineno = 0;
    if (!text || !qtext || !toff) rc = TIERLAB_ENOMEM;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s:%llu: line too long", r->workload_path,
                        (unsigned long long)lineno);
            break;
        }
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (!*p || *p == '#') continue;
        if (nq + 2 > qcap) {
            qcap *= 2;
            uint64_t *g = realloc(qtext, qcap * sizeof *qtext);
            if (!g) { rc = TIERLAB_ENOMEM; break; }
            qtext = g;
        }
        qtext[nq] = nt;
        uint32_t terms = 0;
        char *save = NULL;
        for (char *t = strtok_r(p, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (!strcmp(t, "AND")) continue;
            size_t tl = strlen(t);
            if (++terms > TIERLAB_QUERY_MAX_TERMS) {
                rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s:%llu: more than %d terms",
                            r->workload_path, (unsigned long long)lineno, TIERLAB_QUERY_MAX_TERMS);
                break;
            }
            while (n + tl > cap) {
                cap *= 2;
                char *g = realloc(text, cap);
                if (!g) { rc = TIERLAB_ENOMEM; break; }
                text = g;
            }
            if (nt + 2 > tcap) {
                tcap *= 2;
                uint64_t *g = realloc(toff, tcap * sizeof *toff);
                if (!g) { rc = TIERLAB_ENOMEM; break; }
                toff = g;
            }
            if (rc) break;
            toff[nt++] = n;
            memcpy(text + n, t, tl);
            n += tl;
        }
        if (!rc && terms == 0) continue;
        nq++;
    }
    fclose(f);
    if (!rc && nq == 0) rc = tl_err(err, errlen, TIERLAB_EINVAL, "%s: no queries", r->workload_path);
    if (!rc && nq > UINT32_MAX - 1) rc = tl_err(err, errlen, TIERLAB_EINVAL, "too many queries");
    if (rc) {
        free(text);
        free(qtext);
        free(toff);
        if (rc == TIERLAB_ENOMEM) tl_err(err, errlen, rc, "out of memory reading the workload");
        return rc;
    }
    qtext[nq] = nt;
    toff[nt] = n;
    w->nq = (uint32_t)nq;
    w->text = text;
    w->qtext = qtext;
    w->toff = toff;
    w->qfirst = malloc((nq + 1) * sizeof *w->qfirst);
    w->type = malloc(nq);
    w->nterms = malloc(nq);
    w->known = malloc(nq);
    w->term = malloc((nt ? nt : 1) * sizeof *w->term);
    w->next_use = malloc((nt ? nt : 1) * sizeof *w->next_use);
    w->nseg = malloc((nt ? nt : 1) * sizeof *w->nseg);
    uint64_t *last = malloc((ix->terms ? ix->terms : 1) * sizeof *last);
    if (!w->qfirst || !w->type || !w->nterms || !w->known || !w->term || !w->next_use ||
        !w->nseg || !last) {
        free(last);
        return tl_err(err, errlen, TIERLAB_ENOMEM, "out of memory for the workload");
    }
    uint64_t occ = 0;
    for (size_t q = 0; q < nq; q++) {
        uint64_t a = qtext[q], z = qtext[q + 1];
        w->nterms[q] = (uint8_t)(z - a);
        w->type[q] = z - a == 1 ? TIERLAB_QUERY_SINGLE : TIERLAB_QUERY_AND;
        uint64_t ids[TIERLAB_QUERY_MAX_TERMS];
        int known = 1;
        for (uint64_t t = a; t < z; t++) {
            uint64_t bytes = 0;
            int corrupt = 0;
            const tl_dict_entry *e =
                tl_dict_find(ix, text + toff[t], (size_t)(toff[t + 1] - toff[t]), &bytes, &corrupt);
            if (corrupt) {
                free(last);
                return tl_err(err, errlen, TIERLAB_EFORMAT, "corrupt dictionary");
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
    free(w->type);
    free(w->nterms);
    free(w->known);
    free(w->term);
    free(w->next_use);
    free(w->nseg);
    free(w->text);
    free(w->qtext);
    free(w->toff);
    memset(w, 0, sizeof *w);
}
