"""Real query logs into tierlab workloads (docs/workload.md "Real query logs").

Input formats (`fmt`; "auto" detects from the first 64 non-blank lines):
- "trec":  `N:query` (the TREC Terabyte efficiency topics' form), N digits;
- "tsv":   `qid<TAB>query` (split at the first tab);
- "plain": the whole line is the query.
Any of them may be gzip-compressed (detected from the magic bytes). Lines end
at '\\n'; blank lines are skipped; line numbers count from 1 over every line.

Each query's text is tokenised with the index's own tokeniser (docs/engine.md:
lower-case ASCII letters and digits, everything else separates;
tierlab.engine.corpus.tokenize) and its repeated terms dropped (the engine's
only multi-term query is a conjunction, where a repeat means nothing new),
keeping first-seen order. One term is SINGLE, 2..16 (TIERLAB_QUERY_MAX_TERMS)
an AND. Its class is the class of its rarest term known to the index, by
`tierlab.engine.workload.Thresholds` (the thresholds of `workload generate`,
the one definition) over the index's posting counts and documents; a query
with no known term has class "-". Terms the index does not hold are counted
per query (`unknown`).

A query the engine cannot run is "bad", for one of the reasons in
BAD_REASONS: without skip_bad the first one stops the conversion with
`LOG:LINE: ...`; with it, it is dropped and counted by reason.
`max_terms` cuts longer queries to their first max_terms terms (counted as
`cut`) instead. Queries left out by choice (known_only, qtype, classes) are
counted by filter, not as bad.

Outputs, written atomically together: W (a query file, `a AND b`), W.tsv (one
row per kept query: line, type, class, unknown, rarest_postings, terms) and
W.json (parameters, counts, `workload_stats` of the kept queries against the
index, and `report`: the log's repetition and popularity next to the RP
generator's on the same terms; `popularity_report`).
"""
from __future__ import annotations

import gzip
import json
import os
import random
import re
from collections import Counter
from pathlib import Path

from tierlab.core.errors import TierlabError
from tierlab.engine.corpus import atomic_outputs, tokenize
from tierlab.engine.workload import (
    CLASSES, DEFAULT_H, DEFAULT_L, REPEAT_QUEUE, Thresholds, json_header, single_stream,
    stats_path, workload_stats, write_queries,
)

FORMATS = ("auto", "trec", "tsv", "plain")
MAX_TERMS = 16  # TIERLAB_QUERY_MAX_TERMS (tierlab.h); checked against the library at run time
BAD_REASONS = ("not_utf8", "malformed", "no_terms", "too_many_terms")
DETECT_LINES = 64
_TREC = re.compile(rb"^\s*(\d+):(.*)$", re.S)
# Popularity points reported: the share of term slots taken by the top x of terms.
TOP_FRACTIONS = (0.001, 0.01, 0.1, 0.5)


def _open(path: Path):
    try:
        f = open(path, "rb")
        magic = f.read(2)
        f.seek(0)
    except OSError as e:
        raise TierlabError(f"{path}: cannot read ({e.strerror})") from None
    return gzip.open(f) if magic == b"\x1f\x8b" else f


def _lines(path: Path):
    """(line number, raw bytes without the newline) for every line."""
    with _open(path) as f:
        try:
            for n, raw in enumerate(f, 1):
                yield n, raw.rstrip(b"\r\n")
        except (OSError, EOFError, gzip.BadGzipFile) as e:
            raise TierlabError(f"{path}: cannot read ({e})") from None


def detect(path: str | os.PathLike) -> str:
    """trec if every one of the first non-blank lines is `N:...`, tsv if every
    one holds a tab, plain otherwise."""
    sample = []
    for _, raw in _lines(Path(path)):
        if raw.strip():
            sample.append(raw)
            if len(sample) == DETECT_LINES:
                break
    if not sample:
        raise TierlabError(f"{path}: no queries (empty log)")
    if all(_TREC.match(s) for s in sample):
        return "trec"
    if all(b"\t" in s for s in sample):
        return "tsv"
    return "plain"


class _Bad(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _query_text(raw: bytes, fmt: str) -> bytes:
    if fmt == "trec":
        m = _TREC.match(raw)
        if not m:
            raise _Bad("malformed", "not a TREC `N:query` line")
        return m.group(2)
    if fmt == "tsv":
        if b"\t" not in raw:
            raise _Bad("malformed", "no tab: not a `qid<TAB>query` line")
        return raw.split(b"\t", 1)[1]
    return raw


def parse_query(raw: bytes, fmt: str, max_terms: int | None) -> tuple[list[str], bool]:
    """The query of one log line: (terms, whether it was cut to max_terms).
    Raises _Bad with a reason from BAD_REASONS."""
    text = _query_text(raw, fmt)
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Bad("not_utf8", f"invalid UTF-8 at byte {e.start + 1}") from None
    terms = list(dict.fromkeys(t.decode("ascii") for t in tokenize(text)))
    if not terms:
        raise _Bad("no_terms", f"no terms in {text.decode('utf-8')[:80]!r}")
    cut = False
    if max_terms is not None and len(terms) > max_terms:
        terms, cut = terms[:max_terms], True
    if len(terms) > MAX_TERMS:
        raise _Bad("too_many_terms", f"{len(terms)} terms: a query has at most {MAX_TERMS} "
                   f"(TIERLAB_QUERY_MAX_TERMS); --max-terms N cuts such queries")
    return terms, cut


def _index_terms(index):
    """(postings by term, documents, the extents table) of an index."""
    from tierlab.engine.index import Index

    with Index(index) as ix:
        df = ix.extents()
        docs = int(ix.info["docs"])
    return dict(zip(df["term"], df["postings"].astype("int64").tolist())), docs, df


def popularity(slots: Counter) -> dict:
    """The popularity curve of term slots: ranked counts and the share of
    slots taken by the top x of terms for x in TOP_FRACTIONS."""
    counts = sorted(slots.values(), reverse=True)
    total = sum(counts)
    top = {}
    for x in TOP_FRACTIONS:
        k = max(1, round(x * len(counts))) if counts else 0
        top[f"{x:g}"] = round(sum(counts[:k]) / total, 6) if total else None
    ranks = sorted({min(len(counts), round(1.1 ** i)) for i in range(400)
                    if round(1.1 ** i) <= len(counts)} | ({len(counts)} if counts else set()))
    cum, acc, j = [], 0, 0
    for r in ranks:
        acc += sum(counts[j:r])
        j = r
        cum.append([r, counts[r - 1], round(acc / total, 6)])
    return {"terms": len(counts), "slots": total, "top_share": top,
            "curve": cum, "curve_columns": ["rank", "slots", "cumulative_share"]}


def repetition(queries) -> float | None:
    """Share of queries equal (as a term set) to an earlier one."""
    seen: set = set()
    rep = 0
    for q in queries:
        key = frozenset(q)
        rep += key in seen
        seen.add(key)
    return round(rep / len(queries), 6) if queries else None


def popularity_report(queries, *, rp: float = 0.25, capacity: int = REPEAT_QUEUE,
                      seed: int = 0) -> dict:
    """The log's repetition rate and term popularity next to the RP
    generator's (docs/workload.md; `single_stream`) run over the same terms for
    the same number of term slots, so the two differ only in how terms are
    drawn. The generator's repetition is that of the SINGLE stream it makes."""
    slots = Counter(t for q in queries for t in q)
    log = {"repeated_queries_share": repetition(queries), **popularity(slots)}
    gen_terms = sorted(slots, key=str.encode)
    n = sum(slots.values())
    if gen_terms:
        stream, _ = single_stream(gen_terms, n, rp, capacity, random.Random(seed))
        gen = {"repeated_queries_share": repetition([(t,) for t in stream]),
               **popularity(Counter(stream))}
    else:
        gen = {"repeated_queries_share": None, **popularity(Counter())}
    return {"log": log, "rp_generator": {"rp": rp, "repeat_queue": capacity, "seed": seed,
                                         "queries": n, **gen}}


def from_log(log: str | os.PathLike, index: str | os.PathLike, out: str | os.PathLike, *,
             fmt: str = "auto", max_terms: int | None = None, skip_bad: bool = False,
             known_only: bool = False, qtype: str | None = None, classes=None,
             h: float = DEFAULT_H, l: float = DEFAULT_L, rp: float = 0.25, seed: int = 0,
             progress=None) -> dict:
    """Convert a query log into a workload (module docstring); returns W.json."""
    log = Path(log)
    if fmt not in FORMATS:
        raise TierlabError(f"unknown log format '{fmt}'; known: {', '.join(FORMATS)}")
    if max_terms is not None and not 1 <= max_terms <= MAX_TERMS:
        raise TierlabError(f"--max-terms must be 1..{MAX_TERMS}, got {max_terms}")
    if qtype not in (None, "single", "and"):
        raise TierlabError(f"unknown query type '{qtype}'; known: single, and")
    classes = None if not classes else [c.upper() for c in classes]
    for c in classes or ():
        if c not in CLASSES:
            raise TierlabError(f"unknown class '{c}'; known: {', '.join(CLASSES)}")
    from tierlab.core.native import ffi_lib

    if ffi_lib()[1].TIERLAB_QUERY_MAX_TERMS != MAX_TERMS:
        raise TierlabError("TIERLAB_QUERY_MAX_TERMS changed in tierlab.h: update querylog")
    detected = detect(log) if fmt == "auto" else fmt
    postings, docs, table = _index_terms(index)
    thr = Thresholds.resolve(h, l, docs)

    kept, rows = [], []
    bad = {r: 0 for r in BAD_REASONS}
    filtered = {"unknown_terms": 0, "type": 0, "class": 0}
    lines = cut = 0
    for n, raw in _lines(log):
        if progress is not None and n % 4096 == 0:
            progress(n)
        if not raw.strip():
            continue
        lines += 1
        try:
            terms, was_cut = parse_query(raw, detected, max_terms)
        except _Bad as e:
            if not skip_bad:
                raise TierlabError(f"{log}:{n}: {e} (--skip-bad drops such queries)") from None
            bad[e.reason] += 1
            continue
        known = [postings[t] for t in terms if t in postings]
        unknown = len(terms) - len(known)
        rarest = min(known) if known else None
        cls = thr.classify(rarest) if known else "-"
        kind = "single" if len(terms) == 1 else "and"
        if known_only and unknown:
            filtered["unknown_terms"] += 1
            continue
        if qtype is not None and kind != qtype:
            filtered["type"] += 1
            continue
        if classes is not None and cls not in classes:
            filtered["class"] += 1
            continue
        cut += was_cut
        kept.append(tuple(terms))
        rows.append((n, kind, cls, unknown, "" if rarest is None else rarest, " ".join(terms)))
    if not kept:
        raise TierlabError(f"{log}: no queries kept of {lines:,} (bad: "
                           + ", ".join(f"{k} {v:,}" for k, v in bad.items() if v)
                           + "; filtered: " + ", ".join(f"{k} {v:,}" for k, v in filtered.items()
                                                       if v) + ")")
    out = Path(out)
    tsv = Path(f"{os.fspath(out)}.tsv")
    with atomic_outputs(out, tsv, stats_path(out)) as (t_out, t_tsv, t_json):
        write_queries(t_out, kept)
        with open(t_tsv, "w", encoding="utf-8", newline="\n") as f:
            f.write("line\ttype\tclass\tunknown\trarest_postings\tterms\n")
            f.writelines("\t".join(map(str, r)) + "\n" for r in rows)
        by = Counter((r[1], r[2]) for r in rows)
        doc = {
            **json_header(out, t_out),
            "from_log": {
                "log": str(log), "log_format": detected, "index": str(index),
                "documents": docs, "h": h, "l": l, "h_min_postings": thr.h_min,
                "l_below_postings": thr.l_below, "max_terms": max_terms, "skip_bad": skip_bad,
                "known_only": known_only, "type": qtype, "classes": classes,
                "log_queries": lines, "kept": len(kept), "cut": cut, "bad": bad,
                "filtered": filtered,
                "with_unknown_terms": sum(1 for r in rows if r[3]),
                "by_type_class": {f"{k}:{c}": v for (k, c), v in sorted(by.items())},
            },
            "stats": workload_stats(kept, table, thresholds=thr),
            "report": popularity_report(kept, rp=rp, seed=seed),
        }
        with open(t_json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return doc
