"""The inverted index (docs/engine.md "Indexing", "Queries", "Placement"): build an
index directory from a corpus, open it with each file placed on a tier, and
query it. The work is done by the C kernels (kernels/src/index/, query/,
tiers/); this module is the Python face of `tierlab.h`'s index section.

An index directory holds dict.bin, skip.bin, dids.bin, freqs.bin and
manifest.json; kernels/formats/index.md documents every byte. The C build
writes all five into `<out>.tmp-<pid>` and renames the directory at the very
end, so a directory named like the index is always complete. A build stopped
by a signal removes it (the progress callback cancels, in every phase up to
the commit point; a signal inside the commit lets it finish and the
interruption says so: `committing`); one killed by SIGKILL leaves it, and the next build of the same `out` removes it
once its pid is gone (`leftovers`).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tierlab.core import signals
from tierlab.core.errors import TierlabError
from tierlab.core.native import cstr

FILES = ("dict.bin", "skip.bin", "dids.bin", "freqs.bin")
KEYS = ("dict", "skip", "did", "freq")  # names used in placements
FORMAT = "tierlab-index"
BLOCK_SIZES = (128, 256)

# Error codes of tierlab.h (negative returns).
_ERRORS = {-1: "corrupt", -2: "invalid argument", -3: "I/O error", -4: "out of memory",
           -5: "cancelled", -6: "bad index format", -7: "exists"}
ECANCELED = -5


def _native():
    from tierlab.core.native import ffi_lib
    return ffi_lib()


def parse_bytes(text: str | int) -> int:
    """'2GB', '512MiB', 65536 -> bytes (the corpus module's size syntax)."""
    if isinstance(text, int):
        return text
    from tierlab.core.values import parse_size
    return parse_size(text)


FILE_HEADER_BYTES = 128  # every index file starts with this header (kernels/formats/index.md)
SKIP_ENTRY_BYTES = 32    # one skip-list entry (kernels/formats/index.md, "skip.bin")


def postings_bytes(index: str | os.PathLike) -> int:
    """The DID and freq bytes of an index without their file headers: what a
    cache size as a fraction of the index (cache_fraction) is a share of,
    and the runtime's index_bytes."""
    index = Path(index)
    try:
        return sum((index / f).stat().st_size - FILE_HEADER_BYTES for f in ("dids.bin", "freqs.bin"))
    except OSError as e:
        raise TierlabError(f"{index}: not an index folder ({e.strerror}: {e.filename})") from None


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of an index directory; TierlabError if it is not one."""
    p = Path(path) / "manifest.json"
    if not Path(path).is_dir():
        raise TierlabError(f"{path}: no such index directory")
    try:
        m = json.loads(p.read_text())
    except FileNotFoundError:
        raise TierlabError(f"{path} has no manifest.json: not a tierlab index, or an "
                           f"unfinished build") from None
    except (OSError, ValueError) as e:
        raise TierlabError(f"{p}: unreadable manifest ({e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise TierlabError(f"{p}: not a tierlab index manifest")
    return m


def leftovers(out: str | os.PathLike) -> list[str]:
    """Remove what builds of `out` killed by SIGKILL left (tierlab.core.signals):
    `<out>.tmp-<pid>` whose process is gone; `<out>.old-<pid>` (the index a
    --force build moved aside just before its commit) is removed when `out`
    exists and renamed back to `out` otherwise. Returns one line per path."""
    out = Path(str(out).rstrip("/") or "/")
    name = re.escape(out.name)
    done = signals.remove_stale(out.parent, rf"{name}\.tmp-(?P<pid>\d+)")
    for old, _ in signals.stale(out.parent, rf"{name}\.old-(?P<pid>\d+)"):
        if out.exists():
            shutil.rmtree(old, ignore_errors=True)
            done.append(str(old))
        else:
            os.replace(old, out)
            done.append(f"{old} (the index it replaced: renamed back to {out})")
    return done


def committing(out: str | os.PathLike) -> str:
    """What a signal that came during the commit of index `out` interrupted."""
    return f"{out} was being committed: the index is complete"


@dataclass
class BuildResult:
    path: Path
    manifest: dict
    stats: dict  # tierlab_build_stats as a dict


def build(corpus: str | os.PathLike, out: str | os.PathLike, *, codec: str = "base",
          block_size: int = 256, doc_bytes: int = 1024, memory_budget: int | str | None = None,
          overwrite: bool = False, progress=None) -> BuildResult:
    """Build an index of `corpus` into directory `out` (see module docstring).

    memory_budget bounds the ingest table (bytes or '2GB'); None = a quarter
    of RAM. progress(done_bytes, total_bytes) is called about every 4 MiB
    during ingest and often during the transform (done = total), and before
    the commit; returning True (or raising: Ctrl-C) cancels. Raises
    TierlabError; nothing named `out` exists after a failure. What a killed
    build of `out` left is removed first (leftovers(); reported on stderr).
    """
    ffi, lib = _native()
    if block_size not in BLOCK_SIZES:
        raise TierlabError(f"block size must be one of {BLOCK_SIZES}, not {block_size}")
    from tierlab.core.native import codec as find_codec
    from tierlab.core.native import progress_callback
    find_codec(codec)  # a clear error listing the known codecs
    if not 1 <= doc_bytes <= lib.TIERLAB_INDEX_DOC_BYTES_MAX:
        raise TierlabError(f"doc_bytes: 1 .. {lib.TIERLAB_INDEX_DOC_BYTES_MAX}, got {doc_bytes}")
    budget = 0 if memory_budget is None else parse_bytes(memory_budget)
    if budget >= 2**64:
        raise TierlabError(f"memory budget: at most 2^64 - 1 bytes, got {budget}")
    p = ffi.new("tierlab_build_params *")
    lib.tierlab_build_params_default(p)
    cname = ffi.new("char[]", cstr(codec, "codec"))
    p.codec = cname
    p.block_size = block_size
    p.doc_bytes = doc_bytes
    p.memory_budget_bytes = budget
    p.overwrite = 1 if overwrite else 0
    st = ffi.new("tierlab_build_stats *")
    err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
    for line in leftovers(out):
        print(f"tierlab: removed {line}, left by a killed build", file=sys.stderr)
    update = progress or (lambda done, total: False)

    def poll(done: int, total: int) -> bool:  # a signal waiting in held(): cancel
        return signals.pending() is not None or bool(update(done, total))

    # The C build runs held(): a SIGINT/TERM/HUP is only recorded, and the
    # progress callback polls it. Before the commit point (the last callback
    # comes right before it) the build cancels and commits nothing; inside the
    # commit (fsync, rename) it finishes, and the interruption says so.
    with signals.held(committing(out)) as h:
        with progress_callback(poll) as cb:
            rc = lib.tierlab_index_build(os.fsencode(corpus), os.fsencode(out), p, cb, ffi.NULL,
                                         st, err, lib.TIERLAB_ERRMSG)
        if rc != 0:
            h.note = None
    if rc != 0:
        raise TierlabError(ffi.string(err).decode(errors="replace") or _ERRORS.get(rc, str(rc)))
    stats = _struct_dict(ffi, st)
    stats["corpus_digest"] = ffi.string(st.corpus_digest).decode()
    return BuildResult(Path(out), read_manifest(out), stats)


def _struct_dict(ffi, s) -> dict:
    out = {}
    for name, field in ffi.typeof(s[0]).fields:
        v = getattr(s, name)
        if field.type.kind == "array":
            if field.type.item.cname == "char":
                v = ffi.string(v).decode(errors="replace")
            else:
                v = list(v)
        out[name] = v
    return out


def dontneed(index: str | os.PathLike) -> None:
    """posix_fadvise(DONTNEED) on every index file (no root needed)."""
    _, lib = _native()
    for f in FILES:
        if lib.tierlab_file_dontneed(os.fsencode(Path(index) / f)) != 0:
            raise TierlabError(f"posix_fadvise(DONTNEED) failed on {Path(index) / f}")


def resident_bytes(index: str | os.PathLike) -> dict[str, int]:
    """Bytes of each index file in the page cache (mincore)."""
    ffi, lib = _native()
    out = {}
    for f in FILES:
        res, tot = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        if lib.tierlab_file_resident(os.fsencode(Path(index) / f), res, tot) == 0:
            out[f] = int(res[0])
    return out


@dataclass
class CheckReport:
    """What `check` found (tierlab.h, tierlab_check_report): ok, or the first
    problem: the file ('manifest.json' or one of FILES), the offset of the bad
    byte when exact (a single flipped bit is located from its checksum) or of
    the region that failed, its length, the bit, the term (dictionary position)
    and block, and `what` in one line."""
    ok: bool
    what: str
    file: str | None = None
    offset: int | None = None
    length: int | None = None
    exact: bool = False
    bit: int | None = None
    term: int | None = None
    block: int | None = None
    terms: int = 0
    blocks: int = 0
    postings: int = 0
    bytes: int = 0


def check(index: str | os.PathLike, progress=None) -> CheckReport:
    """Read every byte of an index and check it (tierlab_index_check): the
    manifest against the headers, every dictionary entry and term, skip
    record and block (checksums and invariants), the totals and each file's
    body checksum. Returns the report; raises TierlabError when `index` is not
    an index of this format version (or cannot be read). progress(done, total)
    in bytes; returning True cancels."""
    ffi, lib = _native()
    from tierlab.core.native import progress_callback

    r = ffi.new("tierlab_check_report *")
    with progress_callback(progress or (lambda done, total: False)) as cb:
        rc = lib.tierlab_index_check(str(index).encode(), r, cb, ffi.NULL)
    what = ffi.string(r.what).decode(errors="replace")
    if rc != 0:
        raise TierlabError(what or _ERRORS.get(rc, str(rc)))
    if r.ok:
        return CheckReport(True, what, terms=r.terms, blocks=r.blocks, postings=r.postings,
                           bytes=r.bytes)
    return CheckReport(
        False, what, file="manifest.json" if r.file < 0 else FILES[r.file], offset=int(r.offset),
        length=int(r.length), exact=bool(r.exact), bit=None if r.bit < 0 else int(r.bit),
        term=None if r.term < 0 else int(r.term), block=None if r.block < 0 else int(r.block),
        terms=r.terms, blocks=r.blocks, postings=r.postings, bytes=r.bytes)


def tiers() -> list[str]:
    """The tier registry as users type it ('storage', 'dram', 'pm:PATH', 'numa:N')."""
    ffi, lib = _native()
    arg = ffi.new("int *")
    out = []
    for i in range(lib.tierlab_tier_count()):
        name = ffi.string(lib.tierlab_tier_at(i, arg)).decode()
        out.append(name + {"pm": ":PATH", "numa": ":N"}.get(name, "") if arg[0] else name)
    return out


CHECKS = {"off": 0, "default": 1, "full": 2}  # tierlab.h, TIERLAB_CHECKS_*


class Index:
    """An open index, its four files placed as `placement` says:
    'dict=dram,skip=dram,did=storage,freq=storage', or one tier for all,
    or None (all storage). Use as a context manager or call close().

    Queries check the checksums of what they read (kernels/formats/index.md,
    "Checksums"); verify=True also checks every file's body checksum now
    (reading the whole index) and every posting of every block decoded."""

    def __init__(self, path: str | os.PathLike, placement: str | None = None, *,
                 verify: bool = False):
        ffi, lib = _native()
        self.path = Path(path)
        self.manifest = read_manifest(path)
        if self.manifest.get("format_version") != lib.TIERLAB_INDEX_FORMAT_VERSION:
            raise TierlabError(
                f"{path}: index format version {self.manifest.get('format_version')}; rebuild "
                f"with tierlab index build (this tierlab reads version "
                f"{lib.TIERLAB_INDEX_FORMAT_VERSION})")
        for f in FILES:
            want = self.manifest.get("files", {}).get(f)
            p = self.path / f
            if not p.exists():  # damage, like a damaged file (tierlab_index_check says so too)
                raise TierlabError(f"corrupt index: {p} is missing (the manifest lists it)")
            if want is not None and p.stat().st_size != want:
                raise TierlabError(f"{p}: {p.stat().st_size} bytes, the manifest says {want}")
        out = ffi.new("tierlab_index **")
        err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
        rc = lib.tierlab_index_open_flags(os.fsencode(path), cstr(placement or "", "placement"),
                                          lib.TIERLAB_OPEN_VERIFY if verify else 0, out, err,
                                          lib.TIERLAB_ERRMSG)
        if rc != 0:
            raise TierlabError(ffi.string(err).decode(errors="replace"))
        self._ix = out[0]
        self._ctx = {}
        self.checks = "full" if verify else "default"
        info = ffi.new("tierlab_index_info *")
        lib.tierlab_index_get_info(self._ix, info)
        self.info = _struct_dict(ffi, info)
        for key in ("documents", "terms", "postings", "blocks"):
            mine = self.info["docs" if key == "documents" else key]
            if self.manifest.get(key) != mine:
                self.close()
                raise TierlabError(f"{path}: manifest says {key}={self.manifest.get(key)}, "
                                   f"the files say {mine}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if getattr(self, "_ix", None) is not None:
            _, lib = _native()
            for ctx in self._ctx.values():
                lib.tierlab_query_ctx_free(ctx)
            self._ctx = {}
            lib.tierlab_index_close(self._ix)
            self._ix = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _check_open(self):
        if self._ix is None:
            raise TierlabError("index is closed")

    def placement(self) -> dict[str, dict]:
        """Where each file lives: tier, request, honoured, locked, numa_node,
        bytes, resident_bytes, detail (how it was honoured and verified)."""
        self._check_open()
        ffi, lib = _native()
        out = {}
        for i, key in enumerate(KEYS):
            r = ffi.new("tierlab_placement_report *")
            lib.tierlab_index_placement(self._ix, i, r)
            out[key] = _struct_dict(ffi, r)
        return out

    def lookup(self, term: str) -> int | None:
        """Posting count of a term, None if it is not in the dictionary."""
        self._check_open()
        ffi, lib = _native()
        b = cstr(term, "term")
        n = ffi.new("uint64_t *")
        rc = lib.tierlab_index_lookup(self._ix, b, len(b), n)
        if rc < 0:
            raise TierlabError(f"{self.path}: corrupt dictionary (looking up '{term}')")
        return int(n[0]) if rc else None

    def find(self, term: str) -> int | None:
        """Dictionary position of a term (what term_at, postings and extents
        are indexed by), None if it is not in the dictionary."""
        self._check_open()
        ffi, lib = _native()
        b = cstr(term, "term")
        i = ffi.new("uint64_t *")
        rc = lib.tierlab_index_find(self._ix, b, len(b), i)
        if rc < 0:
            raise TierlabError(f"{self.path}: corrupt dictionary (looking up '{term}')")
        return int(i[0]) if rc == 1 else None

    def terms(self) -> list[str]:
        """Every term, in dictionary order (byte order)."""
        self._check_open()
        ffi, lib = _native()
        ptr, length = ffi.new("const char **"), ffi.new("uint32_t *")
        out = []
        for i in range(self.info["terms"]):
            if lib.tierlab_index_term_at(self._ix, i, ptr, length, ffi.NULL) != 0:
                raise TierlabError(f"{self.path}: corrupt dictionary entry {i}")
            out.append(ffi.unpack(ptr[0], length[0]).decode("ascii", errors="replace"))
        return out

    def postings(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(dids, freqs) of the i-th term in dictionary order, decoded."""
        self._check_open()
        ffi, lib = _native()
        if not 0 <= i < self.info["terms"]:
            raise TierlabError(f"term number {i} out of range (0..{self.info['terms'] - 1})")
        p = ffi.new("uint32_t *")
        lib.tierlab_index_term_at(self._ix, i, ffi.NULL, ffi.NULL, p)
        dids = np.zeros(max(p[0], 1), dtype=np.uint32)
        freqs = np.zeros(max(p[0], 1), dtype=np.uint32)
        err = ffi.new("char[]", lib.TIERLAB_ERRMSG)
        got = lib.tierlab_index_postings(self._ix, i, ffi.from_buffer("uint32_t[]", dids),
                                         ffi.from_buffer("uint32_t[]", freqs), err,
                                         lib.TIERLAB_ERRMSG)
        if got < 0:
            raise TierlabError(ffi.string(err).decode(errors="replace"))
        return dids[:got], freqs[:got]

    def extents(self):
        """Where each term's bytes lie in the index files (tierlab.h,
        tierlab_index_term_extent): a pandas DataFrame in dictionary order with
        columns term, postings, blocks, did_offset, did_bytes, freq_offset,
        freq_bytes, skip_offset, skip_bytes. Offsets count from the start of
        each file, header included; the terms tile each file exactly."""
        import pandas as pd

        self._check_open()
        ffi, lib = _native()
        n = self.info["terms"]
        if ffi.sizeof("tierlab_term_extent") != EXTENT_DTYPE.itemsize:
            raise TierlabError("tierlab_term_extent changed in tierlab.h: update EXTENT_DTYPE")
        arr = np.zeros(n, dtype=EXTENT_DTYPE)
        if n:
            got = lib.tierlab_index_term_extents(
                self._ix, 0, n, ffi.cast("tierlab_term_extent *", ffi.from_buffer(arr)))
            if got != n:
                raise TierlabError(f"{self.path}: corrupt skip list (reading term extents: "
                                   f"{_ERRORS.get(got, got)})")
        df = pd.DataFrame({name: arr[name] for name in EXTENT_DTYPE.names})
        df.insert(0, "term", self.terms())
        return df

    def set_checks(self, level: str) -> None:
        """What queries check from now on: 'default', 'full' (every posting too)
        or 'off' (nothing: only to measure what the checks cost)."""
        if level not in CHECKS:
            raise TierlabError(f"unknown check level '{level}' ({', '.join(CHECKS)})")
        _, lib = _native()
        self.checks = level
        for ctx in self._ctx.values():
            lib.tierlab_query_ctx_set_checks(ctx, CHECKS[level])

    def kept(self, k: int) -> int:
        """The hits a query with `k` can have: k, at most the index's
        documents. Buffers are sized by it, so a huge k (up to 2^32 - 1)
        costs no more memory than the index has documents; the hits are the
        same."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 0xFFFFFFFF:
            raise TierlabError(f"k: a whole number 1 .. 4294967295, got {k!r}")
        return min(k, max(1, int(self.info["docs"])))

    def _context(self, k: int):
        _, lib = _native()
        k = self.kept(k)
        if k not in self._ctx:
            ctx = lib.tierlab_query_ctx_new(self._ix, k)
            if ctx == _native()[0].NULL:
                raise TierlabError("cannot create a query context (out of memory)")
            lib.tierlab_query_ctx_set_checks(ctx, CHECKS[self.checks])
            self._ctx[k] = ctx
        return self._ctx[k]

    def query(self, terms, k: int = 1024) -> tuple[list[tuple[int, float]], dict]:
        """One query: a single term (SINGLE) or 2..16 terms (AND). Returns
        ([(did, score)] best first, stats dict)."""
        self._check_open()
        ffi, lib = _native()
        if isinstance(terms, str):
            terms = [terms]
        terms = [cstr(t, "term") if isinstance(t, str) else t for t in terms]
        qtype = 0 if len(terms) == 1 else 1
        keep = [ffi.new("char[]", t) for t in terms]
        ptrs = ffi.new("char *[]", keep)
        lens = ffi.new("uint32_t[]", [len(t) for t in terms])
        k = self.kept(k)
        hits = ffi.new("tierlab_hit[]", k)
        st = ffi.new("tierlab_query_stats *")
        ctx = self._context(k)
        n = lib.tierlab_query(ctx, qtype, ptrs, lens, len(terms), hits, st)
        if n < 0:
            raise TierlabError(ffi.string(lib.tierlab_query_error(ctx)).decode(errors="replace"))
        return [(int(hits[i].did), float(hits[i].score)) for i in range(n)], _struct_dict(ffi, st)

    def run_batch(self, queries, k: int = 1024, want_hits: bool = False):
        """Run queries (sequences of terms) back to back in C. Returns
        (stats: structured numpy array, one row per query; wall_ns of the loop;
        hits: (n, kept(k)) array of (did, score) records or None; nhits or None)."""
        self._check_open()
        ffi, lib = _native()
        k = self.kept(k)
        n = len(queries)
        enc = [[cstr(t, "term") if isinstance(t, str) else t for t in q] for q in queries]
        for i, q in enumerate(enc):
            if not 1 <= len(q) <= lib.TIERLAB_QUERY_MAX_TERMS:
                raise TierlabError(f"query {i}: {len(q)} terms (1..{lib.TIERLAB_QUERY_MAX_TERMS})")
        flat = [t for q in enc for t in q]
        text = b"".join(flat)
        term_off = np.zeros(len(flat) + 1, dtype=np.uint64)
        if flat:
            term_off[1:] = np.cumsum([len(t) for t in flat])
        tq_first = np.zeros(n + 1, dtype=np.uint32)
        if n:
            tq_first[1:] = np.cumsum([len(q) for q in enc])
        types = np.array([0 if len(q) == 1 else 1 for q in enc], dtype=np.uint8)
        st_dtype = _stats_dtype(ffi)
        stats = np.zeros(n, dtype=st_dtype)
        hits = np.zeros((n, k), dtype=_HIT_DTYPE) if want_hits else None
        nhits = np.zeros(n, dtype=np.uint32) if want_hits else None
        wall = ffi.new("uint64_t *")
        ctx = self._context(k)
        textbuf = ffi.new("char[]", text or b"\0")
        rc = lib.tierlab_query_batch(
            ctx, textbuf, ffi.from_buffer("uint64_t[]", term_off),
            ffi.from_buffer("uint32_t[]", tq_first), ffi.from_buffer("uint8_t[]", types), n,
            ffi.cast("tierlab_query_stats *", ffi.from_buffer(stats)),
            ffi.cast("tierlab_hit *", ffi.from_buffer(hits)) if want_hits else ffi.NULL,
            ffi.from_buffer("uint32_t[]", nhits) if want_hits else ffi.NULL, wall)
        if rc != 0:
            raise TierlabError(ffi.string(lib.tierlab_query_error(ctx)).decode(errors="replace"))
        return stats, int(wall[0]), hits, nhits


_HIT_DTYPE = np.dtype([("did", "<u4"), ("reserved", "<u4"), ("score", "<f8")])
# numpy mirror of tierlab_term_extent (eight uint64 fields, no padding).
EXTENT_DTYPE = np.dtype([(name, "<u8") for name in (
    "postings", "blocks", "did_offset", "did_bytes", "freq_offset", "freq_bytes",
    "skip_offset", "skip_bytes")])


def _stats_dtype(ffi) -> np.dtype:
    """numpy mirror of tierlab_query_stats, built from cffi's layout."""
    t = ffi.typeof("tierlab_query_stats")
    names, formats, offsets = [], [], []
    kinds = {"uint64_t": "<u8", "uint32_t": "<u4"}
    for name, f in t.fields:
        if f.type.kind == "array":
            formats.append((kinds[f.type.item.cname], (f.type.length,)))
        else:
            formats.append(kinds[f.type.cname])
        names.append(name)
        offsets.append(f.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": ffi.sizeof(t)})
