"""PISA (github.com/pisa-engine/pisa) as a peer, through the compiled PISA
that the `pyterrier-pisa` wheel ships: load a CIFF file into PISA, build its
compressed index and run batches of BM25 queries. The benchmark that uses it
is tierlab/experiments/bench/pisa.py.

Only the wheel's native module (`pyterrier_pisa._pisathon`) is used. It is
loaded straight from the installed package folder, without importing the
`pyterrier_pisa` package itself (that imports PyTerrier, whose Java side is
not needed here): no JVM is started or required.

What the native module offers, and what we use of it
----------------------------------------------------
- `build_binlex(lines_file, out)`: PISA's binary lexicon of a text file, one
  entry per line (its terms and document-name lexicons).
- `prepare_index(ctx, dir, encoding, scorer, stemmer, block_size=, quantize=,
  bm25_k1=, bm25_b=, stop_fname=)`: from the uncompressed PISA collection
  `dir/inv.{docs,freqs,sizes}` and the lexicons `dir/fwd.{termlex,doclex}`,
  builds (once; later calls reuse the files) the block-max "wand" metadata
  and the compressed index `dir/bm25.k1-<k1>.b-<b>.q0.bmw.<block>.<encoding>`,
  then maps both into the context. This is PISA's `compress`.
- `retrieve(ctx, algorithm, queries, k=, threads=, pretokenised=,
  query_weighted=, result_qidxs=, result_docnos=, result_ranks=,
  result_scores=)`: runs every query of an iterable of (qidx, {term: weight})
  tuples back to back in C++ and writes the top k of each into the four
  preallocated numpy arrays. Per query, the loop (1) takes the next tuple from
  the Python iterator and looks each term up in the term lexicon, (2) runs
  the query algorithm (cursors, decoding, BM25 scoring, top-k heap,
  finalize), (3) sorts the hits again by (score desc, docid asc), (4) for
  every hit copies its document name from the document lexicon and makes a
  Python str of it. (1) and (4) are the wrapper's Python overhead; (4) is
  made nearly free by `open(..., docnames=False)`, which gives PISA a
  document lexicon of one-character names (CPython hands out a cached str
  for those, no allocation), while the `docnames=True` context (real names,
  the CIFF collection_docid) is used to check results. The cost of (1) is
  measured with queries of a term that is not in the lexicon.

BM25 in PISA (scorer `bm25`, include/pisa/scorer/bm25.hpp)
-----------------------------------------------------------
score(t, d) = max(1e-6, ln((N - df + 0.5) / (df + 0.5))) * (1 + k1)
              * f / (f + k1 * (1 - b + b * len(d) / avg_len)),   in float32.
With b = 0 the length term is 1, which is docs/engine.md's constant-length BM25,
and with k1 = 1.2 the f-part equals tierlab's. The IDF differs: tierlab uses
ln(1 + (N - df + 0.5) / (df + 0.5)) (non-negative without a clamp). A
SINGLE query ranks the same under both; an AND query can rank differently
where the two IDFs weigh its terms in a different ratio. `pisa_scores`
recomputes PISA's formula exactly, to check PISA's answers on their own.

The collection: CIFF -> PISA's uncompressed format
--------------------------------------------------
`ciff_to_pisa` reads a CIFF file (see tierlab/engine/ciff.py for the format) and
writes PISA's "binary collection": files of sequences, each a little-endian
uint32 length followed by that many uint32 values. `inv.docs` holds the
sequence [documents] and then one sequence of increasing docids per term,
`inv.freqs` one sequence of frequencies per term, `inv.sizes` one sequence of
document lengths (in terms) indexed by docid. `fwd.terms` lists the terms
(one a line, term id = line number), `fwd.documents` the document names by
docid. PISA's term lexicon is looked up by binary search, so the terms must
come in byte order (tierlab exports them so; others are refused). PISA's
docids are the CIFF docids, so they are tierlab's DIDs.
The wheel's own CIFF importer needs `pyciff`, a Rust source package; this
converter needs nothing: it reads the file with tierlab/engine/ciff.py's `CiffFile`,
which decodes the postings of many lists at once with numpy when they are in
the canonical protobuf layout (fields in number order, zero fields omitted, as
tierlab and other proto3 writers emit) and parses any other list posting by
posting (slow, but any valid CIFF converts).
"""
from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tierlab.core.errors import TierlabError

# The index encodings and query algorithms the wheel's native module knows
# (its PisaIndexEncoding / PisaQueryAlgorithm enums). A name it does not know
# crashes the process instead of raising, so every name is checked here first.
ENCODINGS = ("ef", "single", "pefuniform", "pefopt", "block_optpfor", "block_varintg8iu",
             "block_streamvbyte", "block_maskedvbyte", "block_interpolative", "block_qmx",
             "block_varintgb", "block_simple8b", "block_simple16", "block_simdbp")
ALGORITHMS = ("ranked_or", "ranked_and", "maxscore", "wand", "block_max_wand",
              "block_max_maxscore", "block_max_ranked_and")
WAND_BLOCK = 64  # postings per block of the block-max metadata (the wheel's default)

_native = None


def find() -> tuple[Path | None, str]:
    """(path of the wheel's native module, pyterrier-pisa version) or
    (None, why it is not usable)."""
    try:
        spec = importlib.util.find_spec("pyterrier_pisa")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, ("pyterrier-pisa is not installed (pip install 'tierlab[bench]' or "
                      "pip install pyterrier-pisa)")
    for folder in spec.submodule_search_locations:
        for p in sorted(Path(folder).glob("_pisathon*.so")):
            try:
                from importlib.metadata import version
                v = version("pyterrier-pisa")
            except Exception:
                v = "unknown"
            return p, v
    return None, "pyterrier-pisa is installed but has no compiled _pisathon module"


def native():
    """The wheel's `_pisathon` module, loaded on its own (see the module
    docstring). TierlabError when it is missing or does not load."""
    global _native
    if _native is None:
        path, why = find()
        if path is None:
            raise TierlabError(why)
        name = "pyterrier_pisa._pisathon"
        try:
            loader = importlib.machinery.ExtensionFileLoader(name, str(path))
            spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
        except ImportError as e:
            raise TierlabError(f"cannot load PISA from {path}: {e}") from None
        for fn in ("build_binlex", "prepare_index", "retrieve", "RetrievalContext"):
            if not hasattr(mod, fn):
                raise TierlabError(f"{path} has no {fn}: an unsupported pyterrier-pisa version")
        _native = mod
    return _native


def available() -> tuple[bool, str]:
    """(True, version) when PISA can be loaded, else (False, reason)."""
    try:
        native()
    except TierlabError as e:
        return False, str(e)
    return True, find()[1]


@contextlib.contextmanager
def _quiet(log: Path):
    """Send the process's stdout/stderr (PISA logs through spdlog) to `log`."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log, "ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


# --------------------------------------------------------------------------
# CIFF -> PISA binary collection
# --------------------------------------------------------------------------

def _seq_header(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """PISA sequences: each run of `values` (lengths[i] long) prefixed by its length."""
    import numpy as np
    at = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    return np.insert(values.astype(np.uint32), at, lengths.astype(np.uint32))


def ciff_to_pisa(ciff: str | os.PathLike, out: str | os.PathLike, progress=None) -> dict:
    """Write PISA's uncompressed collection and lexicons for a CIFF file into
    folder `out` (see the module docstring). Returns counts and timings."""
    from tierlab.engine.ciff import CiffFile

    t0 = time.perf_counter()
    with CiffFile(ciff) as cf:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        return _convert(cf, out, progress, t0)


def _convert(cf, out: Path, progress, t0: float) -> dict:
    import numpy as np
    ciff = cf.path
    n_lists, n_docs = cf.header["num_postings_lists"], cf.documents
    if n_docs >= 2 ** 32 - 1:
        raise TierlabError(f"{ciff}: {n_docs} documents do not fit PISA's 32-bit docids")
    terms: list[bytes] = []
    postings = slow = 0
    docs_f = open(out / "inv.docs", "wb")
    freqs_f = open(out / "inv.freqs", "wb")
    with docs_f, freqs_f:
        np.array([1, n_docs], dtype=np.uint32).tofile(docs_f)
        for chunk in cf.postings():
            for term in chunk.terms:
                if not term or b"\n" in term or b"\r" in term:
                    raise TierlabError(f"{ciff}: term {term!r} cannot go into PISA's line lexicon")
                if terms and term <= terms[-1]:
                    raise TierlabError(f"{ciff}: terms are not in strictly increasing byte order "
                                       f"({terms[-1]!r} then {term!r}); PISA's lexicon needs them sorted")
                terms.append(term)
            if len(chunk.dids) and chunk.dids.max() >= n_docs:
                raise TierlabError(f"{ciff}: docid {int(chunk.dids.max())} is not below the "
                                   f"{n_docs} documents of the header")
            _seq_header(chunk.dids, chunk.dfs).tofile(docs_f)
            _seq_header(chunk.freqs, chunk.dfs).tofile(freqs_f)
            postings += len(chunk.dids)
            slow += chunk.parsed_slowly
            if progress:
                progress(len(terms), n_lists)
    # Document records: names and lengths by docid.
    names = [None] * n_docs
    sizes = np.zeros(n_docs, dtype=np.uint32)
    for docid, name, length in cf.doc_records():
        if docid >= n_docs:
            raise TierlabError(f"{ciff}: a DocRecord has docid {docid}, not below {n_docs}")
        names[docid] = name
        sizes[docid] = length
    np.concatenate(([n_docs], sizes)).astype(np.uint32).tofile(out / "inv.sizes")
    with open(out / "fwd.terms", "wb") as ft:
        ft.write(b"\n".join(terms) + b"\n")
    with open(out / "fwd.documents", "wb") as fd:
        for d, name in enumerate(names):
            name = name or str(d).encode()
            if b"\n" in name or b"\r" in name:
                raise TierlabError(f"{ciff}: document name {name!r} contains a line break")
            fd.write(name + b"\n")
    t1 = time.perf_counter()
    P = native()
    P.build_binlex(str(out / "fwd.terms"), str(out / "fwd.termlex"))
    P.build_binlex(str(out / "fwd.documents"), str(out / "fwd.doclex"))
    return {"terms": len(terms), "documents": n_docs, "postings": postings,
            "lists_parsed_slowly": slow, "convert_seconds": t1 - t0,
            "lexicon_seconds": time.perf_counter() - t1}


# --------------------------------------------------------------------------
# Opening and querying
# --------------------------------------------------------------------------

@dataclass
class Opened:
    ctx: object
    folder: Path
    encoding: str
    prepare_seconds: float
    index_bytes: int
    docnames: bool


def _index_file(folder: Path, encoding: str) -> Path | None:
    hits = sorted(folder.glob(f"bm25.*.bmw.{WAND_BLOCK}.{encoding}"))
    return hits[0] if hits else None


def open_index(folder: str | os.PathLike, encoding: str, *, k1: float, b: float,
               docnames: bool = True, log: Path | None = None) -> Opened:
    """A retrieval context on the PISA collection in `folder` with `encoding`
    and BM25(k1, b), compressing the index first when it does not exist yet
    (prepare_seconds is then PISA's build time). docnames=False opens it with
    one-character document names (see the module docstring) through a sibling
    folder of links, sharing the compressed files."""
    import numpy as np
    if encoding not in ENCODINGS:
        raise TierlabError(f"unknown PISA encoding '{encoding}'; known: {', '.join(ENCODINGS)}")
    P = native()
    folder = Path(folder)
    for f in ("inv.docs", "inv.freqs", "inv.sizes", "fwd.termlex", "fwd.doclex"):
        if not (folder / f).exists():
            raise TierlabError(f"{folder} is not a PISA collection: {f} is missing")
    target = folder
    if not docnames:
        if _index_file(folder, encoding) is None:
            open_index(folder, encoding, k1=k1, b=b, docnames=True, log=log)
        target = folder.with_name(folder.name + "-noname")
        target.mkdir(exist_ok=True)
        for p in folder.iterdir():
            if p.name not in ("fwd.doclex", "fwd.documents") and not (target / p.name).exists():
                (target / p.name).symlink_to(p.resolve())
        if not (target / "fwd.doclex").exists():
            n = int(np.fromfile(folder / "inv.sizes", dtype=np.uint32, count=1)[0])
            with open(target / "fwd.documents", "wb") as fd:
                fd.write(b"x\n" * n)
            P.build_binlex(str(target / "fwd.documents"), str(target / "fwd.doclex"))
    ctx = P.RetrievalContext()
    t0 = time.perf_counter()
    with _quiet(log or target / "pisa.log"):
        P.prepare_index(ctx, str(target), encoding, "bm25", "", block_size=WAND_BLOCK,
                        quantize=0, bm25_k1=float(k1), bm25_b=float(b), stop_fname="")
    secs = time.perf_counter() - t0
    ix = _index_file(target, encoding)
    if ix is None:
        raise TierlabError(f"PISA wrote no {encoding} index in {target} (see {log or target / 'pisa.log'})")
    return Opened(ctx, target, encoding, secs, ix.stat().st_size, docnames)


def pretokenised(queries) -> list[tuple[int, dict]]:
    """Queries (sequences of terms) in the form retrieve takes: (index,
    {term: 1.0}) — each term once, weight 1 (no stemming, no stopwords)."""
    return [(i, {t: 1.0 for t in q}) for i, q in enumerate(queries)]


def retrieve(opened: Opened, algorithm: str, queries: list[tuple[int, dict]], k: int,
             want_hits: bool = False):
    """Run `queries` (from `pretokenised`) in one native call on one thread.
    Returns (ns of the call, hits per query (int array), and when want_hits a
    list per query of (docname, score) best first)."""
    import numpy as np
    if algorithm not in ALGORITHMS:
        raise TierlabError(f"unknown PISA algorithm '{algorithm}'; known: {', '.join(ALGORITHMS)}")
    if k < 1:
        raise TierlabError(f"k must be at least 1, got {k}")
    n = len(queries)
    if n and (queries[0][0] != 0 or queries[-1][0] != n - 1):
        raise TierlabError("queries must be numbered 0..n-1 (build them with pretokenised)")
    P = native()
    size = max(1, n * k)
    qidx = np.empty(size, dtype=np.int32)
    names = np.empty(size, dtype=object)
    ranks = np.empty(size, dtype=np.int32)
    scores = np.empty(size, dtype=np.float32)
    t0 = time.perf_counter_ns()
    got = P.retrieve(opened.ctx, algorithm, queries, k=k, threads=1, pretokenised=1,
                     query_weighted=0, result_qidxs=qidx, result_docnos=names,
                     result_ranks=ranks, result_scores=scores)
    ns = time.perf_counter_ns() - t0
    counts = np.bincount(qidx[:got], minlength=n) if got else np.zeros(n, dtype=np.int64)
    hits = None
    if want_hits:
        hits = [[] for _ in range(n)]
        for i in range(got):
            hits[qidx[i]].append((names[i], float(scores[i])))
    return ns, counts, hits


def pisa_scores(dids_freqs: list[tuple[np.ndarray, np.ndarray]], n_docs: int,
                k1: float) -> tuple[np.ndarray, np.ndarray]:
    """PISA's BM25 (b = 0) of the conjunction of the given posting lists,
    recomputed in float32 as PISA does: (docids, scores)."""
    import numpy as np
    common = None
    for d, _ in dids_freqs:
        common = d if common is None else np.intersect1d(common, d, assume_unique=True)
    total = np.zeros(len(common), dtype=np.float32)
    k1f = np.float32(k1)
    for d, f in dids_freqs:
        df = np.float32(len(d))
        idf = np.log((np.float32(n_docs) - df + np.float32(0.5)) / (df + np.float32(0.5)),
                     dtype=np.float32)
        w = np.maximum(np.float32(1e-6), idf) * (np.float32(1) + k1f)
        ff = f[np.searchsorted(d, common)].astype(np.float32)
        total = total + w * (ff / (ff + k1f * np.float32(1.0)))
    return common, total
