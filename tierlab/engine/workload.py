"""Query workloads (docs/workload.md "Frequency classes" and "Query generation
with a repetition probability"): classes, the seeded RP generator, query
files and per-workload statistics.

Frequency classes
-----------------
A term's class comes from its posting count p (documents containing it):
H if p >= h, L if p < l, M otherwise. A threshold given as a value below 1 is
a fraction of the corpus's documents, converted to ceil(value * documents)
postings; a value >= 1 is a posting count. The defaults are the reference's
fractions (1,000,000 and 1,000 postings of ~160 M documents): h = 0.00625,
l = 0.00000625. Because every term has at least one posting, a fractional l
is raised to at least 2 postings, so L holds at least the terms seen in a
single document: then a generated corpus of ~1 MB (1,000 documents) and up
already has all three classes.

The generator (exactly docs/workload.md's algorithm; randomness from Python's
random.Random(seed), drawn in this order)
------------------------------------------------------------------------
SINGLE, n queries over terms T with probability rp and capacity R:
 1. queue = T in byte order of the terms; rng.shuffle(queue).
 2. until n queries: pop the next term t of the queue (at the end of the queue,
    rng.shuffle(queue) again in place and start over); if the repeat queue is
    non-empty, draw c = rng.random() and, when c < rp, emit
    repeat[rng.randrange(len(repeat))], otherwise emit t; if the repeat queue
    is empty, emit t (no draw); then append t to the repeat queue and drop its
    oldest entry beyond R.
AND: queue = T in byte order, rng.shuffle(queue); first half = queue[:len//2],
second half = the rest; one SINGLE stream of n queries from the first half,
then one from the second (same rng, continuing; each starts with step 1, so
its half is put in byte order and shuffled again); query i =
(first[i], second[i]).
The halves are disjoint, so the two terms of a query always differ.

Query files
-----------
UTF-8 text, one query per line. A query is one or more terms separated by
spaces; `AND` (upper case) may stand between terms and means what the space
means: the engine's only multi-term query is the conjunction. Terms are
docs/engine.md tokens (lower-case ASCII letters and digits); a query has at
most 16 terms (TIERLAB_QUERY_MAX_TERMS). Blank lines and lines starting with
`#` are ignored. Generated files contain `term` or `term AND term` lines only.
`read_queries` gives a file:line error for anything else; the parser is the C
library's (kernels/src/query/workload.c), shared with the APCache runtime, and
tierlab.h "Query files" states the rules in full. Next to a generated file,
`<workload>.json` holds its parameters and statistics.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tierlab import __version__
from tierlab.core import registry
from tierlab.core.files import atomic_outputs
from tierlab.engine.corpus import read_manifest, read_terms, terms_path
from tierlab.core.errors import TierlabError

FORMAT = "tierlab-workload"
FORMAT_VERSION = 1
CLASSES = ("H", "M", "L")
DEFAULT_H = 0.00625      # reference: >= 1,000,000 postings of ~160 M documents
DEFAULT_L = 0.00000625   # reference: < 1,000 postings
REPEAT_QUEUE = 100
BLOCK_POSTINGS = 256     # docs/engine.md: B = 256 postings per block
# Reference workload sizes (more queries where each is cheaper).
DEFAULT_QUERIES = {"H": 1_000, "M": 100_000, "L": 1_000_000}



# --- classes -------------------------------------------------------------------

@dataclass(frozen=True)
class Thresholds:
    """H: postings >= h_min; L: postings < l_below; M: in between."""

    h_min: int
    l_below: int

    @classmethod
    def resolve(cls, h: float = DEFAULT_H, l: float = DEFAULT_L,
                documents: int | None = None) -> "Thresholds":
        def count(v: float, name: str, floor: int) -> int:
            if not v > 0 or math.isinf(v):
                raise TierlabError(f"--{name} must be a positive fraction (< 1) or count (>= 1), got {v}")
            if v >= 1:
                if v != int(v):
                    raise TierlabError(f"--{name} {v}: a count (>= 1) must be a whole number")
                return int(v)
            if documents is None:
                raise TierlabError(f"--{name} {v} is a fraction of the documents: give the corpus "
                                   f"(or --documents) so it can be turned into postings")
            return max(floor, math.ceil(v * documents))

        t = cls(count(h, "h", 1), count(l, "l", 2))
        if t.h_min <= t.l_below:
            raise TierlabError(f"H must start above L: H is postings >= {t.h_min}, L is postings "
                               f"< {t.l_below}, so M would be empty or negative; adjust --h/--l")
        return t

    def classify(self, postings: int) -> str:
        return "H" if postings >= self.h_min else ("L" if postings < self.l_below else "M")


def class_terms(terms_df, cls: str, t: Thresholds) -> list[str]:
    """The terms of class cls, in byte order."""
    cls = cls.upper()
    p = terms_df["postings"]
    mask = {"H": p >= t.h_min, "L": p < t.l_below, "M": (p >= t.l_below) & (p < t.h_min)}[cls]
    return sorted(terms_df.loc[mask, "term"].tolist(), key=lambda s: s.encode())


# --- the generator ---------------------------------------------------------------

def single_stream(terms: list[str], n: int, rp: float, capacity: int,
                  rng: random.Random) -> tuple[list[str], int]:
    """docs/workload.md's SINGLE stream (see the module docstring for the exact
    draws). Returns (queries, how many came from the repeat queue)."""
    queue = sorted(terms, key=str.encode)  # byte order: the input order does not matter
    rng.shuffle(queue)
    repeat: deque = deque()
    out: list[str] = []
    pos = hits = 0
    while len(out) < n:
        if pos == len(queue):
            rng.shuffle(queue)
            pos = 0
        t = queue[pos]
        pos += 1
        if repeat and rng.random() < rp:
            out.append(repeat[rng.randrange(len(repeat))])
            hits += 1
        else:
            out.append(t)
        repeat.append(t)
        if len(repeat) > capacity:
            repeat.popleft()
    return out, hits


def and_stream(terms: list[str], n: int, rp: float, capacity: int,
               rng: random.Random) -> tuple[list[tuple[str, str]], int]:
    """docs/workload.md's AND workload: two SINGLE streams over disjoint halves."""
    queue = sorted(terms, key=str.encode)
    rng.shuffle(queue)
    half = len(queue) // 2
    first, hits1 = single_stream(queue[:half], n, rp, capacity, rng)
    second, hits2 = single_stream(queue[half:], n, rp, capacity, rng)
    return list(zip(first, second)), hits1 + hits2


# Python memory per generated query (its tuple and list slot; measured with
# tracemalloc: 80 bytes at the peak of 200,000 queries) and what the
# statistics computed from the queries take on top, rounded up.
GENERATED_QUERY_BYTES = 160


def generate_queries(terms: list[str], *, n: int, qtype: str = "single", rp: float = 0.25,
                     capacity: int = REPEAT_QUEUE, seed: int = 0):
    """Queries (tuples of terms) and the number of repeat-queue draws."""
    if qtype not in registry.query_types():
        raise TierlabError(f"unknown query type '{qtype}'; known: "
                           f"{', '.join(registry.query_types())}")
    if n < 1:
        raise TierlabError("--queries must be at least 1")
    if not 0 <= rp <= 1:
        raise TierlabError(f"--rp must be a probability in [0, 1], got {rp}")
    if capacity < 1:
        raise TierlabError("--repeat-queue must be at least 1")
    from tierlab.core.native import memory_guard

    memory_guard(n * GENERATED_QUERY_BYTES, f"generating {n:,} queries",
                 f"{GENERATED_QUERY_BYTES} bytes per query", "lower --queries")
    rng = random.Random(seed)
    if qtype == "single":
        qs, hits = single_stream(terms, n, rp, capacity, rng)
        return [(q,) for q in qs], hits
    if len(terms) < 2:
        raise TierlabError(f"an AND workload needs at least 2 terms in its class, found {len(terms)}")
    return and_stream(terms, n, rp, capacity, rng)


# --- query files -----------------------------------------------------------------

def format_query(q) -> str:
    return " AND ".join(q)


def write_queries(path: Path, queries) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(format_query(q) + "\n" for q in queries)


def read_queries(path: str | os.PathLike) -> list[tuple[str, ...]]:
    """Parse a query file (format in the module docstring) with the C
    library's reader, tierlab_workload_read (tierlab.h "Query files"), the one
    the APCache runtime uses: a TierlabError names path:line."""
    from tierlab.core.native import ffi_lib

    path = Path(path)
    ffi, lib = ffi_lib()
    try:  # messages quote a whole line: room for the file
        errlen = path.stat().st_size + len(os.fsencode(path)) + 512
    except OSError:
        errlen = len(os.fsencode(path)) + 512
    err = ffi.new("char[]", errlen)
    w = ffi.new("tierlab_workload *")
    if lib.tierlab_workload_read(os.fsencode(path), w, err, errlen) != 0:
        raise TierlabError(ffi.string(err).decode("utf-8", errors="replace"))
    try:
        text = ffi.buffer(w.text, w.term_off[w.nterms])[:].decode("ascii")
        terms = text.split("\0")  # every term ends in a NUL
        first = ffi.unpack(w.query_first, w.nqueries + 1)
        return [tuple(terms[a:b]) for a, b in zip(first, first[1:])]
    finally:
        lib.tierlab_workload_free(w)


# --- generator parameters ------------------------------------------------------------

GENERATOR_KEYS = ("type", "class", "queries", "rp", "seed", "repeat_queue", "h", "l")


def check_generator(g: dict, where: str = "workload") -> dict:
    """The parameters of a generated RP workload (`generate_queries`) checked
    and normalised: type (a query type of the registry), class (H, M, L),
    queries >= 1, rp in [0, 1], seed >= 0 or None, and when present h, l > 0
    and repeat_queue >= 1. An error names `where`.key."""
    from tierlab.core import values

    unknown = [k for k in g if k not in GENERATOR_KEYS]
    if unknown:
        raise TierlabError(f"{where}: unknown key '{unknown[0]}'; known: "
                           f"{', '.join(GENERATOR_KEYS)}")
    g = dict(g)
    if g.get("type") not in registry.query_types():
        raise TierlabError(f"{where}.type: unknown query type {g.get('type')!r}; known: "
                           f"{', '.join(registry.query_types())}")
    if str(g.get("class")).upper() not in CLASSES:
        raise TierlabError(f"{where}.class: {g.get('class')!r}; known: {', '.join(CLASSES)}")
    g["class"] = str(g["class"]).upper()
    g["queries"] = values.whole(f"{where}.queries", g.get("queries"))
    g["rp"] = values.number(f"{where}.rp", g.get("rp"), 0.0, 1.0)
    if g.get("seed") is not None:
        g["seed"] = values.whole(f"{where}.seed", g["seed"], 0)
    for k in ("h", "l"):
        if k in g:
            g[k] = values.number(f"{where}.{k}", g[k], 0.0, open_lo=True)
    if "repeat_queue" in g:
        g["repeat_queue"] = values.whole(f"{where}.repeat_queue", g["repeat_queue"])
    return g


# --- statistics --------------------------------------------------------------------

def workload_stats(queries, terms_df, *, block_postings: int = BLOCK_POSTINGS,
                   thresholds: Thresholds | None = None) -> dict:
    """Per-workload statistics (docs/workload.md): unique terms, repeats, postings
    touched and the share of the index's blocks touched. Blocks of a term:
    the table's `blocks` column when it has one (an index dictionary), else
    ceil(postings / block_postings)."""
    postings = dict(zip(terms_df["term"], terms_df["postings"].astype("int64")))
    if "blocks" in terms_df.columns:
        blocks = dict(zip(terms_df["term"], terms_df["blocks"].astype("int64")))
        index_blocks = int(terms_df["blocks"].sum())
    else:
        blocks = None
        index_blocks = int(((terms_df["postings"] + block_postings - 1) // block_postings).sum())

    def nblocks(t: str) -> int:
        if blocks is not None:
            return int(blocks.get(t, 0))
        return -(-postings.get(t, 0) // block_postings)

    seen_q: set = set()
    unique: set = set()
    repeated_queries = term_slots = touched = 0
    sizes: dict[int, int] = {}
    for q in queries:
        key = tuple(sorted(q))
        repeated_queries += key in seen_q
        seen_q.add(key)
        sizes[len(q)] = sizes.get(len(q), 0) + 1
        for t in q:
            unique.add(t)
            term_slots += 1
            touched += postings.get(t, 0)
    missing = sorted(t for t in unique if t not in postings)
    touched_blocks = sum(nblocks(t) for t in unique)
    stats = {
        "queries": len(queries),
        "queries_by_terms": {str(k): v for k, v in sorted(sizes.items())},
        "term_slots": term_slots,
        "unique_terms": len(unique),
        "repeated_queries": repeated_queries,
        "repeated_terms": term_slots - len(unique),
        "postings_touched": touched,
        "postings_touched_unique": sum(postings.get(t, 0) for t in unique),
        "blocks_touched": touched_blocks,
        "index_blocks": index_blocks,
        "index_blocks_touched_share": round(touched_blocks / index_blocks, 6) if index_blocks else None,
        "block_postings": None if blocks is not None else block_postings,
        "blocks_from": "table" if blocks is not None else "ceil(postings/block_postings)",
        "terms_not_in_table": len(missing),
        "terms_not_in_table_examples": missing[:10],
    }
    if thresholds is not None:
        mix = {c: 0 for c in CLASSES}
        for t in unique:
            if t in postings:
                mix[thresholds.classify(int(postings[t]))] += 1
        stats["unique_terms_by_class"] = mix
    return stats


# --- sources and the command-level functions ------------------------------------------

def load_source(corpus: str | os.PathLike | None, terms: str | os.PathLike | None,
                documents: int | None):
    """(terms DataFrame, documents or None, description) from a corpus (its
    sidecars) or a term table (documents from --documents, else from the
    manifest of `<corpus>.terms.tsv` when there is one)."""
    if corpus is None and terms is None:
        raise TierlabError("give a corpus or a term table (--terms)")
    if corpus is not None:
        m = read_manifest(corpus)
        table = Path(terms) if terms is not None else terms_path(corpus)
        docs = documents if documents is not None else m["documents"]
    else:
        table = Path(terms)
        docs = documents
        name = os.fspath(table)
        if docs is None and name.endswith(".terms.tsv"):
            try:
                docs = read_manifest(name[: -len(".terms.tsv")])["documents"]
            except TierlabError:
                docs = None
    if docs is not None and docs < 1:
        raise TierlabError("--documents must be at least 1")
    return read_terms(table), docs, {"corpus": None if corpus is None else str(corpus),
                                     "terms_file": str(table), "documents": docs}


def _digest(path: Path) -> str:
    return "blake2b:" + hashlib.blake2b(path.read_bytes()).hexdigest()


def stats_path(workload: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(workload)}.json")


def json_header(out: Path, written: Path) -> dict:
    """The first keys of every `<workload>.json`: format, versions, the query
    file's name (out) and the digest of its bytes (written, the temporary)."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "tierlab_version": __version__,
            "queries_file": out.name, "digest": _digest(written)}


def generate(out: str | os.PathLike, *, corpus=None, terms=None, documents=None, cls: str = "H",
             qtype: str = "single", queries: int | None = None, rp: float = 0.25,
             repeat_queue: int = REPEAT_QUEUE, seed: int = 0, h: float = DEFAULT_H,
             l: float = DEFAULT_L, block_postings: int = BLOCK_POSTINGS) -> dict:
    """Write a query file and its `<workload>.json`; returns the latter."""
    cls = cls.upper()
    if cls not in CLASSES:
        raise TierlabError(f"unknown class '{cls}'; known: {', '.join(CLASSES)}")
    n = DEFAULT_QUERIES[cls] if queries is None else queries
    df, docs, src = load_source(corpus, terms, documents)
    thr = Thresholds.resolve(h, l, docs)
    members = class_terms(df, cls, thr)
    if not members:
        p = df["postings"]
        span = f"{int(p.min())} to {int(p.max())}" if len(p) else "none (empty table)"
        raise TierlabError(
            f"class {cls} is empty: H is postings >= {thr.h_min}, L is postings < {thr.l_below}"
            f" (from --h {h:g}, --l {l:g}{f' of {docs} documents' if docs else ''}); the table's "
            f"{len(df)} terms have postings {span}. Choose other --h/--l thresholds.")
    qs, hits = generate_queries(members, n=n, qtype=qtype, rp=rp, capacity=repeat_queue, seed=seed)
    out = Path(out)
    with atomic_outputs(out, stats_path(out)) as (t_out, t_json):
        write_queries(t_out, qs)
        doc = {
            **json_header(out, t_out),
            "generator": {
                "class": cls, "type": qtype, "queries": n, "rp": rp, "repeat_queue": repeat_queue,
                "seed": seed, "h": h, "l": l, "h_min_postings": thr.h_min,
                "l_below_postings": thr.l_below, "class_terms": len(members),
                "repeat_queue_draws": hits, **src,
            },
            "stats": workload_stats(qs, df, block_postings=block_postings, thresholds=thr),
        }
        with open(t_json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return doc


def stats(workload: str | os.PathLike, *, corpus=None, terms=None, documents=None,
          block_postings: int = BLOCK_POSTINGS, h: float = DEFAULT_H, l: float = DEFAULT_L) -> dict:
    """Statistics of any query file (hand-written ones too) against a term table."""
    qs = read_queries(workload)
    df, docs, src = load_source(corpus, terms, documents)
    thr = Thresholds.resolve(h, l, docs) if docs is not None or (h >= 1 and l >= 1) else None
    st = workload_stats(qs, df, block_postings=block_postings, thresholds=thr)
    return {"queries_file": str(workload), **src,
            **({"h_min_postings": thr.h_min, "l_below_postings": thr.l_below} if thr else {}),
            "stats": st}
