"""Corpora (docs/workload.md "Corpora"): tierlab's corpus format, its two sidecars,
the seeded generator (C, kernels/src/corpus/generate.c) and helpers shared
with ingest (tierlab.engine.ingest) and the workload generator (tierlab.engine.workload).

The corpus format -- the one format the index build reads
---------------------------------------------------------
- `<corpus>`: UTF-8 text, one document per line, each line ending in "\\n".
  A line holds at most `doc_bytes` bytes (without its "\\n"), is never empty
  and contains no "\\r" and no NUL. Document ids are line numbers from 0.
- `<corpus>.terms.tsv`: the term table. UTF-8 TSV with the header line
  `term<TAB>postings<TAB>occurrences`, one row per distinct term: postings =
  number of documents containing the term (document frequency), occurrences =
  number of times it occurs (collection frequency). Terms are docs/engine.md's
  tokens: maximal runs of ASCII letters and digits, lower-cased; every other
  byte separates terms. Rows come most frequent first (generated corpora: the
  generator's rank order; ingested: occurrences descending, then term).
  Read it with `read_terms` (terms such as "nan", "null" or "007" must stay
  strings).
- `<corpus>.json`: the manifest (see `MANIFEST_KEYS`): format version,
  documents, bytes, doc_bytes, tokens, vocabulary, the fitted Zipf exponent,
  a BLAKE2b-512 digest of the corpus bytes (the same as `b2sum <corpus>`),
  the source (generator parameters or ingested files) and tierlab's version.

All three are written to temporary names in the target directory and renamed
only when complete, so an error or Ctrl-C never leaves a half-written output.

The generator
-------------
Words are i.i.d. draws of ranks from a two-regime Zipf law (tierlab.h has the
details): exponent 1.0 over the first 10,000 ranks and 2.0 beyond. One Zipf
law with s = 1 over a large vocabulary grows the vocabulary almost linearly
(~3.2 M terms in 100 MB), far from real text; real text has s ~ 1 in its head
and a steeper tail (Ferrer i Cancho & Sole, 2001: two regimes, the second
exponent near 2, a break near 10^4 ranks), which gives Heaps' law with
exponent ~1/2. With the defaults, 100 MB has ~250 k terms and 1 GB ~790 k
(Heaps exponent 0.5), and the fitted exponent is 1.00. Speed: one core; the
manifest records the rate reached (`text_mb_per_s`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tierlab import __version__
from tierlab.core.errors import TierlabError
from tierlab.core.files import atomic_outputs

FORMAT = "tierlab-corpus"
FORMAT_VERSION = 1
DOC_BYTES = 1024  # docs/engine.md: documents are capped at 1 KiB of text

MANIFEST_KEYS = (
    "format", "format_version", "tierlab_version", "documents", "bytes", "doc_bytes",
    "tokens", "vocabulary_terms", "max_postings", "zipf_exponent", "zipf_fit", "digest",
    "terms_file", "source", "seconds", "text_mb_per_s",
)

# docs/engine.md's tokeniser: lower-case ASCII alphanumerics, everything else separates.
TOKEN_RE = re.compile(rb"[a-z0-9]+")


def tokenize(doc: bytes) -> list[bytes]:
    """The terms of one document (UTF-8 bytes), in order, with repeats. The
    reference for the C counter (tierlab_corpus_count_terms), which ingest
    uses because it is far faster."""
    return TOKEN_RE.findall(doc.lower())


def manifest_path(corpus: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(corpus)}.json")


def terms_path(corpus: str | os.PathLike) -> Path:
    return Path(f"{os.fspath(corpus)}.terms.tsv")


def file_digest(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.blake2b()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return "blake2b:" + h.hexdigest()


# --- the term table ----------------------------------------------------------

TERM_COLUMNS = ("term", "postings", "occurrences")


def read_terms(path: str | os.PathLike):
    """The term table as a pandas DataFrame (term: str, postings and
    occurrences: int64), from TSV or Parquet (same columns; extra columns such
    as an index's `blocks` are kept). Clear errors for a missing or bad file."""
    import pandas as pd

    path = Path(path)
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        else:
            # No NA parsing and string terms: "nan", "null", "007" are terms.
            df = pd.read_csv(path, sep="\t", dtype={"term": str}, keep_default_na=False,
                             na_filter=False, quoting=3, engine="c")
    except FileNotFoundError:
        raise TierlabError(f"{path}: no such term table") from None
    except (OSError, ValueError) as e:
        raise TierlabError(f"{path}: cannot read the term table ({e})") from None
    missing = [c for c in TERM_COLUMNS if c not in df.columns]
    if missing:
        raise TierlabError(f"{path}: not a term table: missing column(s) {', '.join(missing)} "
                           f"(expected {', '.join(TERM_COLUMNS)})")
    for c in ("postings", "occurrences"):
        if df.empty:
            df[c] = df[c].astype("int64")
        elif not pd.api.types.is_integer_dtype(df[c]):
            raise TierlabError(f"{path}: column '{c}' must hold integers")
    df["term"] = df["term"].astype(str)
    return df


# --- Zipf fit ----------------------------------------------------------------

FIT_MAX_RANK = 10_000
FIT_MIN_OCCURRENCES = 10


def fit_zipf(occurrences) -> dict:
    """Fit f(r) ~ r^-s to term frequencies by least squares on
    (log rank, log frequency). Range: ranks 1..min(10,000, last rank with at
    least 10 occurrences) -- the head, where counts are not sampling noise and
    (for generated corpora) below the default knee of the two-regime law.
    Each rank is weighted 1/rank so that every decade of ranks counts the same
    (otherwise the points near the end of the range decide the slope).
    Returns {"zipf_exponent": s or None, "zipf_fit": {...range, r2...}}."""
    f = np.sort(np.asarray(occurrences, dtype=np.float64))[::-1]
    r_max = int(min(FIT_MAX_RANK, np.count_nonzero(f >= FIT_MIN_OCCURRENCES)))
    fit = {"ranks_from": 1, "ranks_to": r_max, "min_occurrences": FIT_MIN_OCCURRENCES,
           "weighting": "1/rank", "r2": None}
    if r_max < 10:
        return {"zipf_exponent": None, "zipf_fit": fit}
    r = np.arange(1, r_max + 1, dtype=np.float64)
    x, y, w = np.log(r), np.log(f[:r_max]), 1.0 / r
    xm, ym = np.average(x, weights=w), np.average(y, weights=w)
    slope = np.sum(w * (x - xm) * (y - ym)) / np.sum(w * (x - xm) ** 2)
    resid = y - (ym + slope * (x - xm))
    fit["r2"] = round(float(1 - np.sum(w * resid**2) / np.sum(w * (y - ym) ** 2)), 6)
    return {"zipf_exponent": round(float(-slope), 4), "zipf_fit": fit}


# --- manifests ---------------------------------------------------------------

def write_manifest(path: Path, manifest: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")


def read_manifest(corpus: str | os.PathLike) -> dict:
    """The manifest of a corpus; a clear error if it is missing or not ours."""
    path = manifest_path(corpus)
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TierlabError(f"{corpus}: no manifest {path} (is it a tierlab corpus? "
                           f"make one with `tierlab corpus generate` or `tierlab corpus ingest`)") from None
    except (OSError, ValueError) as e:
        raise TierlabError(f"{path}: cannot read the manifest ({e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise TierlabError(f"{path}: not a tierlab corpus manifest")
    if m.get("format_version") != FORMAT_VERSION:
        raise TierlabError(f"{path}: corpus format version {m.get('format_version')}; "
                           f"this tierlab reads version {FORMAT_VERSION}")
    return m


def make_manifest(corpus: Path, *, documents: int, nbytes: int, doc_bytes: int, tokens: int,
                  vocabulary: int, max_postings: int, occurrences, digest: str, source: dict,
                  seconds: float) -> dict:
    m = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "tierlab_version": __version__,
        "documents": documents,
        "bytes": nbytes,
        "doc_bytes": doc_bytes,
        "tokens": tokens,
        "vocabulary_terms": vocabulary,
        "max_postings": max_postings,
        **fit_zipf(occurrences),
        "digest": digest,
        "terms_file": terms_path(corpus).name,
        "source": source,
        "seconds": round(seconds, 3),
        "text_mb_per_s": round(nbytes / seconds / 1e6, 1) if seconds > 0 else None,
    }
    assert tuple(m) == MANIFEST_KEYS
    return m


# --- the generator -----------------------------------------------------------

@dataclass
class GenerateParams:
    """Parameters of the generator; None means the kernels' default (see
    tierlab_corpus_params_default in tierlab.h)."""

    seed: int = 0
    size_bytes: int | None = None  # scale by size (default 100 MB) ...
    docs: int | None = None        # ... or by document count
    doc_bytes: int | None = None   # 1024
    zipf_s: float | None = None    # 1.0: the head exponent of real text
    tail_s: float | None = None    # 2.0: the tail beyond the knee (Heaps ~ 0.5)
    knee: int | None = None        # 10,000
    vocab_max: int | None = None   # 2^24


def _native_params(ffi, lib, gp: GenerateParams):
    p = ffi.new("tierlab_corpus_params *")
    lib.tierlab_corpus_params_default(p)
    if gp.size_bytes is not None and gp.docs is not None:
        raise TierlabError("give either a size or a document count, not both")
    if gp.docs is not None:
        if not 1 <= gp.docs <= 2**32 - 2:
            raise TierlabError(f"--docs must be between 1 and {2**32 - 2}")
        p.docs, p.target_bytes = gp.docs, 0
    elif gp.size_bytes is not None:
        if not 1 <= gp.size_bytes < 2**64:
            raise TierlabError(f"--size must be between 1 byte and 2^64 - 1, got {gp.size_bytes}")
        p.target_bytes = gp.size_bytes
    if gp.seed is not None:
        if not 0 <= gp.seed < 2**64:
            raise TierlabError("--seed must be between 0 and 2^64 - 1")
        p.seed = gp.seed
    for name in ("doc_bytes", "zipf_s", "tail_s", "knee", "vocab_max"):
        v = getattr(gp, name)
        if v is not None:
            if isinstance(v, int) and not 0 <= v < 2**32:
                raise TierlabError(f"--{name.replace('_', '-')} must be below 2^32, got {v}")
            setattr(p, name, v)
    if p.doc_bytes < lib.TIERLAB_CORPUS_MIN_DOC_BYTES:
        raise TierlabError(f"--doc-bytes must be at least {lib.TIERLAB_CORPUS_MIN_DOC_BYTES}")
    if not 1 <= p.vocab_max <= 2**31:
        raise TierlabError("--vocab-max must be between 1 and 2^31")
    if not 1 <= p.knee <= min(p.vocab_max, lib.TIERLAB_CORPUS_MAX_KNEE):
        raise TierlabError(f"--knee must be between 1 and min(--vocab-max, "
                           f"{lib.TIERLAB_CORPUS_MAX_KNEE}), got {p.knee}")
    for name in ("zipf_s", "tail_s"):
        v = getattr(p, name)
        if not 0 < v <= 8:
            raise TierlabError(f"--{name.replace('_', '-')} must be in (0, 8], got {v}")
    return p


def generate(out: str | os.PathLike, params: GenerateParams | None = None, *,
             progress: bool = True) -> dict:
    """Generate a corpus at `out` with its term table and manifest (atomically).
    Returns the manifest. Ctrl-C stops it cleanly (KeyboardInterrupt is
    re-raised after the temporary files are removed)."""
    from tqdm import tqdm

    from tierlab.core.native import ffi_lib, progress_callback

    from tierlab.core.values import check_free_space

    gp = params or GenerateParams()
    ffi, lib = ffi_lib()
    p = _native_params(ffi, lib, gp)
    out = Path(out)
    by_docs = p.docs != 0
    # what it writes: the corpus (documents fill to within a word of doc_bytes)
    check_free_space(out, int(p.docs) * (int(p.doc_bytes) + 1) if by_docs else int(p.target_bytes),
                     f"corpus {out}")
    stats = ffi.new("tierlab_corpus_stats *")

    with atomic_outputs(out, terms_path(out), manifest_path(out)) as (t_corpus, t_terms, t_man):
        bar = tqdm(total=p.docs if by_docs else p.target_bytes, unit="doc" if by_docs else "B",
                   unit_scale=True, desc=f"generate {out.name}", disable=None if progress else True,
                   leave=False)

        def tick(done, total):
            bar.update(min(done, total) - bar.n)

        try:
            with progress_callback(tick) as on_progress:
                rc = lib.tierlab_corpus_generate(p, os.fsencode(t_corpus), os.fsencode(t_terms),
                                                 on_progress, ffi.NULL, stats)
                err = ffi.errno
        finally:
            bar.close()
        if rc == lib.TIERLAB_EIO:
            raise TierlabError(f"cannot write {out}: {os.strerror(err) if err else 'I/O error'}")
        if rc == lib.TIERLAB_ENOMEM:
            raise TierlabError(f"out of memory generating {out} (--vocab-max {p.vocab_max} "
                               f"needs {16 * (p.vocab_max + 1) / 2**20:.0f} MiB of address space)")
        if rc != 0:
            raise TierlabError(f"generating {out} failed (error {rc})")

        occ = read_terms(t_terms)["occurrences"].to_numpy()
        source = {
            "kind": "generated",
            "generator": "tierlab two-regime Zipf (kernels/src/corpus/generate.c)",
            "seed": int(p.seed),
            "target_bytes": int(p.target_bytes) or None,
            "target_docs": int(p.docs) or None,
            "zipf_s": float(p.zipf_s),
            "tail_s": float(p.tail_s),
            "knee": int(p.knee),
            "vocab_max": int(p.vocab_max),
        }
        manifest = make_manifest(
            out, documents=int(stats.docs), nbytes=int(stats.bytes), doc_bytes=int(p.doc_bytes),
            tokens=int(stats.tokens), vocabulary=int(stats.terms),
            max_postings=int(stats.max_postings), occurrences=occ, digest=file_digest(t_corpus),
            source=source, seconds=float(stats.seconds))
        write_manifest(t_man, manifest)
    return manifest


def count_terms(corpus: str | os.PathLike, out: str | os.PathLike, *, progress: bool = True,
                desc: str | None = None) -> dict:
    """Count the terms of a corpus file into a term table at `out` (the C
    counter, tierlab_corpus_count_terms). Returns the counts: documents,
    bytes, tokens, vocabulary_terms, max_postings, seconds. Not atomic: the
    caller writes to a temporary name."""
    from tqdm import tqdm

    from tierlab.core.native import ffi_lib, progress_callback

    ffi, lib = ffi_lib()
    stats = ffi.new("tierlab_corpus_stats *")
    total = os.path.getsize(corpus)
    bar = tqdm(total=total, unit="B", unit_scale=True, desc=desc or "count terms",
               disable=None if progress else True, leave=False)

    def tick(done, _total):
        bar.update(min(done, total) - bar.n)

    try:
        with progress_callback(tick) as on_progress:
            rc = lib.tierlab_corpus_count_terms(os.fsencode(corpus), os.fsencode(out),
                                                on_progress, ffi.NULL, stats)
            err = ffi.errno
    finally:
        bar.close()
    if rc == lib.TIERLAB_EIO:
        raise TierlabError(f"cannot read {corpus} or write {out}: "
                           f"{os.strerror(err) if err else 'I/O error'}")
    if rc == lib.TIERLAB_ENOMEM:
        raise TierlabError(f"out of memory counting the terms of {corpus}")
    if rc != 0:
        raise TierlabError(f"counting the terms of {corpus} failed (error {rc})")
    return {"documents": int(stats.docs), "bytes": int(stats.bytes), "tokens": int(stats.tokens),
            "vocabulary_terms": int(stats.terms), "max_postings": int(stats.max_postings),
            "seconds": float(stats.seconds)}


def verify(corpus: str | os.PathLike) -> list[str]:
    """Check a corpus against its manifest, the format rules and its term
    table (recounted); returns the problems found (empty when all is well)."""
    corpus = Path(corpus)
    m = read_manifest(corpus)
    problems = []
    h = hashlib.blake2b()
    docs = nbytes = 0
    try:
        with open(corpus, "rb") as f:
            for lineno, line in enumerate(f, 1):
                h.update(line)
                nbytes += len(line)
                docs += 1
                body = line[:-1] if line.endswith(b"\n") else line
                if not line.endswith(b"\n"):
                    problems.append(f"{corpus}:{lineno}: last line has no newline")
                if not body:
                    problems.append(f"{corpus}:{lineno}: empty document")
                if len(body) > m["doc_bytes"]:
                    problems.append(f"{corpus}:{lineno}: {len(body)} bytes > doc_bytes {m['doc_bytes']}")
                if len(problems) > 20:
                    break
    except OSError as e:
        raise TierlabError(f"{corpus}: cannot read ({e.strerror})") from None
    if not problems:
        if "blake2b:" + h.hexdigest() != m["digest"]:
            problems.append(f"{corpus}: digest differs from the manifest")
        if docs != m["documents"] or nbytes != m["bytes"]:
            problems.append(f"{corpus}: {docs} documents / {nbytes} bytes, manifest says "
                            f"{m['documents']} / {m['bytes']}")
    if not problems:  # recount the terms and compare with the table (any row order)
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            count_terms(corpus, Path(d) / "terms.tsv", progress=False)
            fresh = read_terms(Path(d) / "terms.tsv")
        table = read_terms(terms_path(corpus))
        cols = list(TERM_COLUMNS)
        a = fresh[cols].sort_values("term").reset_index(drop=True)
        b = table[cols].sort_values("term").reset_index(drop=True)
        if not a.equals(b):
            problems.append(f"{terms_path(corpus)}: term counts differ from a recount of {corpus}")
    return problems


def summary(manifest: dict) -> str:
    """A few human lines about a corpus manifest."""
    s = manifest["source"]
    fit = manifest["zipf_fit"]
    zipf = (f"{manifest['zipf_exponent']:.3f} (ranks {fit['ranks_from']}-{fit['ranks_to']}, "
            f"r2 {fit['r2']})" if manifest["zipf_exponent"] is not None else "n/a (too few terms)")
    lines = [
        f"documents        {manifest['documents']:,} (<= {manifest['doc_bytes']} bytes each)",
        f"bytes            {manifest['bytes']:,}",
        f"tokens           {manifest['tokens']:,}",
        f"vocabulary       {manifest['vocabulary_terms']:,} terms "
        f"(max postings {manifest['max_postings']:,})",
        f"zipf exponent    {zipf}",
        f"source           {s['kind']}",
        f"digest           {manifest['digest']}",
    ]
    if manifest.get("text_mb_per_s"):
        lines.append(f"speed            {manifest['text_mb_per_s']} MB/s "
                     f"({manifest['seconds']} s)")
    return "\n".join(lines)
