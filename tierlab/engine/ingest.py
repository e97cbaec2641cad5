"""Ingest real corpora (docs/workload.md "Corpora") into tierlab's corpus
format (see tierlab.engine.corpus for the format and its sidecars).

Inputs, by `--format` or, with `auto`, by file name:
- `text`  one document per line (any name not matched below);
- `jsonl` JSON Lines (`*.jsonl`, `*.ndjson`, `*.json`): one object per line,
  the document in a string field, `text` unless told otherwise; blank lines
  are ignored;
- `wet`   Common Crawl WET files (`*.wet`, `*.warc.wet.gz`): WARC records;
  the bodies of `WARC-Type: conversion` records are the documents (our own
  small reader: header lines up to a blank line, then Content-Length bytes);
- `paragraphs` (never detected: ask for it) documents separated by blank
  lines, e.g. a dictd dictionary (`*.dict.dz`, gzip-readable) such as
  Debian's dict-gcide, one document per entry; the line of a document is
  its first line.
Any input may be gzip-compressed; that is detected from its first bytes.

Every document is normalised, then truncated: each run of whitespace
(including newlines and other Unicode spaces) becomes one space, NUL becomes a
space, leading and trailing spaces go; then the UTF-8 bytes are cut to
`doc_bytes` at a character boundary (and a space left at the cut is dropped).
Documents left empty are skipped and counted. Term statistics are counted on
the file as written, with docs/engine.md's tokeniser, by the C counter
(tierlab_corpus_count_terms; a Python dict would cap ingest at a few MB/s).

Bad input is a TierlabError naming the file and line: an unreadable file,
corrupt gzip data, invalid UTF-8, a malformed JSON line, a missing or
non-string text field, a malformed WARC record, or no documents at all. With
`skip_bad` a bad document is skipped and counted instead (an unreadable file,
corrupt gzip data and an empty corpus still stop the ingest). Nothing is left
behind on error: outputs are written to temporary names and renamed at the end.
Memory is constant apart from the term counts (in C).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import time
import zlib
from pathlib import Path

from tierlab.core.files import atomic_outputs
from tierlab.engine.corpus import (DOC_BYTES, count_terms, make_manifest, manifest_path,
                                   read_terms, terms_path, write_manifest)
from tierlab.core.errors import TierlabError

FORMATS = ("text", "jsonl", "wet", "paragraphs")
MIN_DOC_BYTES = 16


class BadInput(TierlabError):
    """One bad document or record, at path:line."""

    def __init__(self, path, line: int, what: str):
        super().__init__(f"{path}:{line}: {what}")
        self.path, self.line = path, line


def detect_format(path: str | os.PathLike) -> str:
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".wet", ".warc.wet", ".warc")):
        return "wet"
    return "text"


def _utf8_error(path, line: int, raw: bytes, start: int) -> BadInput:
    """raw: the bytes of the line; start: offset of the first bad byte in it."""
    return BadInput(path, line, f"invalid UTF-8 at byte {start + 1} of the line "
                                f"({raw[start:start + 4]!r}); the corpus must be UTF-8")


# --- readers: yield (line, str) or (line, BadInput) ---------------------------

def _text_docs(stream, path, text_field):
    for line, raw in enumerate(stream, 1):
        try:
            yield line, raw.decode("utf-8").rstrip("\n")
        except UnicodeDecodeError as e:
            yield line, _utf8_error(path, line, raw, e.start)


_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", int: "a number",
               float: "a number", bool: "a boolean", type(None): "null"}


def _jsonl_docs(stream, path, text_field):
    for line, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        raw = raw.rstrip(b"\r\n")
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            yield line, _utf8_error(path, line, raw, e.start)
            continue
        except json.JSONDecodeError as e:
            what = e.msg.removesuffix(" at")
            yield line, BadInput(path, line, f"malformed JSON: {what} at column {e.colno}")
            continue
        if not isinstance(obj, dict):
            yield line, BadInput(path, line, f"expected a JSON object, found {_JSON_TYPES[type(obj)]}")
        elif text_field not in obj:
            fields = ", ".join(list(obj)[:8]) or "none"
            yield line, BadInput(path, line, f"no '{text_field}' field (fields: {fields}); "
                                             f"name the text field with --text-field")
        elif not isinstance(obj[text_field], str):
            yield line, BadInput(path, line, f"field '{text_field}' is "
                                             f"{_JSON_TYPES[type(obj[text_field])]}, not a string")
        else:
            yield line, obj[text_field]


def _wet_docs(stream, path, text_field):
    line = 0  # lines consumed so far
    while True:
        head = stream.readline()
        if not head:
            return
        line += 1
        if not head.strip():
            continue  # the blank lines between records
        if not head.startswith(b"WARC/"):
            shown = head[:40].decode("utf-8", "replace").rstrip()
            raise BadInput(path, line, f"expected a WARC record ('WARC/1.0'), found '{shown}'")
        start = line
        fields = {}
        while True:
            h = stream.readline()
            if not h:
                raise BadInput(path, start, "WARC record header ends before its blank line")
            line += 1
            if not h.strip():
                break
            key, sep, value = h.partition(b":")
            if not sep:
                raise BadInput(path, line, "malformed WARC header line (no ':')")
            fields[key.strip().lower()] = value.strip()
        try:
            length = int(fields[b"content-length"])
            if length < 0:
                raise ValueError
        except (KeyError, ValueError):
            raise BadInput(path, start, "WARC record without a valid Content-Length") from None
        body = stream.read(length)
        if len(body) < length:
            raise BadInput(path, start, f"WARC record truncated: Content-Length {length}, "
                                        f"{len(body)} bytes left in the file")
        body_line = line + 1
        line += body.count(b"\n")
        if fields.get(b"warc-type") != b"conversion":
            continue
        try:
            yield body_line, body.decode("utf-8")
        except UnicodeDecodeError as e:
            at = body_line + body.count(b"\n", 0, e.start)
            line_start = body.rfind(b"\n", 0, e.start) + 1
            yield at, _utf8_error(path, at, body[line_start:], e.start - line_start)


def _paragraph_docs(stream, path, text_field):
    start, lines = 0, []
    for line, raw in enumerate(stream, 1):
        if raw.strip():
            if not lines:
                start = line
            lines.append((line, raw))
            continue
        if lines:
            yield _joined(path, start, lines)
            lines = []
    if lines:
        yield _joined(path, start, lines)


def _joined(path, start: int, lines):
    """(first line, the paragraph's text) or (the bad line, BadInput)."""
    out = []
    for line, raw in lines:
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            return line, _utf8_error(path, line, raw, e.start)
    return start, "".join(out)


_READERS = {"text": _text_docs, "jsonl": _jsonl_docs, "wet": _wet_docs,
            "paragraphs": _paragraph_docs}


# --- one document -------------------------------------------------------------

_CONTROL_TO_NUL = bytes(range(256)).replace(bytes(range(32)), bytes(32))


def prepare(doc: str, doc_bytes: int) -> tuple[bytes, bool]:
    """Normalise and truncate one document; returns (UTF-8 bytes, truncated?).
    Raises UnicodeEncodeError for text that is not valid Unicode (a lone
    surrogate from a JSON escape)."""
    # Fast path for ASCII text that is already normal (no control bytes --
    # ASCII whitespace but the space is among them -- no double, leading or
    # trailing space): the common case for one-line documents.
    if doc.isascii():
        b = doc.encode("ascii")
        if (len(b) <= doc_bytes and b.translate(_CONTROL_TO_NUL).find(b"\0") < 0
                and b"  " not in b and b[:1] != b" " and b[-1:] != b" "):
            return b, False
    # Normalising only shrinks text, and the normalised prefix of a document
    # is a prefix of the normalised document: a long one is cut early first.
    limit = 2 * doc_bytes + 16
    b = None
    if len(doc) > limit:
        b = " ".join(doc[:limit].replace("\x00", " ").split()).encode("utf-8")
        if len(b) <= doc_bytes:
            b = None
    if b is None:
        b = " ".join(doc.replace("\x00", " ").split()).encode("utf-8")
    if len(b) <= doc_bytes:
        return b, False
    cut = doc_bytes
    while cut and (b[cut] & 0xC0) == 0x80:  # back off UTF-8 continuation bytes
        cut -= 1
    return b[:cut].rstrip(b" "), True


# --- the ingest -----------------------------------------------------------------

def _open(path: Path):
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise TierlabError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        magic = raw.peek(2)[:2]
    except OSError as e:
        raw.close()
        raise TierlabError(f"{path}: cannot read ({e.strerror or e})") from None
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if magic == b"\x1f\x8b" else raw
    return raw, stream


def ingest(inputs, out: str | os.PathLike, *, fmt: str = "auto", doc_bytes: int = DOC_BYTES,
           text_field: str = "text", skip_bad: bool = False, max_docs: int | None = None,
           progress: bool = True) -> dict:
    """Ingest `inputs` (paths, in order) into the corpus `out` with its term
    table and manifest. Returns the manifest."""
    from tqdm import tqdm

    inputs = [Path(p) for p in inputs]
    out = Path(out)
    if not inputs:
        raise TierlabError("no input files")
    if fmt != "auto" and fmt not in FORMATS:
        raise TierlabError(f"unknown format '{fmt}'; known: auto, {', '.join(FORMATS)}")
    if doc_bytes < MIN_DOC_BYTES:
        raise TierlabError(f"--doc-bytes must be at least {MIN_DOC_BYTES}")
    if max_docs is not None and max_docs < 1:
        raise TierlabError("--max-docs must be at least 1")
    sizes = []
    for p in inputs:  # fail before writing anything
        if p.resolve() == out.resolve():
            raise TierlabError(f"{p}: input and output are the same file")
        if not p.is_file():
            raise TierlabError(f"{p}: cannot read ({'is a directory' if p.is_dir() else 'no such file'})")
        if not os.access(p, os.R_OK):
            raise TierlabError(f"{p}: cannot read (permission denied)")
        sizes.append(p.stat().st_size)

    t0 = time.perf_counter()
    h = hashlib.blake2b()
    docs = nbytes = 0
    files = []
    with atomic_outputs(out, terms_path(out), manifest_path(out)) as (t_corpus, t_terms, t_man):
        bar = tqdm(total=sum(sizes), unit="B", unit_scale=True, desc=f"ingest {out.name}",
                   disable=None if progress else True, leave=False)
        done_bytes = 0
        w = open(t_corpus, "wb", buffering=1 << 20)

        def emit(b: bytes) -> None:
            try:
                w.write(b)
            except OSError as e:  # not a read error: keep it out of the readers' handlers
                raise TierlabError(f"cannot write {out}: {e.strerror or e}") from None

        with w:
            for path, size in zip(inputs, sizes):
                kind = detect_format(path) if fmt == "auto" else fmt
                stat = {"path": str(path), "format": kind, "input_bytes": size, "documents": 0,
                        "truncated": 0, "skipped_empty": 0, "skipped_bad": 0}
                files.append(stat)
                raw, stream = _open(path)
                last = 0
                try:
                    with raw, stream:
                        for n, (line, doc) in enumerate(_READERS[kind](stream, path, text_field)):
                            last = line
                            if n % 256 == 0:
                                bar.update(done_bytes + raw.tell() - bar.n)
                            if not isinstance(doc, str):
                                if skip_bad:
                                    stat["skipped_bad"] += 1
                                    continue
                                raise doc
                            try:
                                b, cut = prepare(doc, doc_bytes)
                            except UnicodeEncodeError as e:
                                bad = BadInput(path, line, f"text is not valid Unicode "
                                                           f"({e.reason}: {e.object[e.start:e.end]!r})")
                                if skip_bad:
                                    stat["skipped_bad"] += 1
                                    continue
                                raise bad from None
                            if not b:
                                stat["skipped_empty"] += 1
                                continue
                            b += b"\n"
                            emit(b)
                            h.update(b)
                            nbytes += len(b)
                            docs += 1
                            stat["documents"] += 1
                            stat["truncated"] += cut
                            if max_docs is not None and docs >= max_docs:
                                break
                except BadInput as e:
                    if skip_bad and kind == "wet":
                        # A broken WARC framing loses the rest of the file.
                        raise TierlabError(f"{e} (cannot resynchronise; the rest of the file "
                                           f"would be lost)") from None
                    raise
                except (EOFError, zlib.error, gzip.BadGzipFile) as e:
                    raise TierlabError(f"{path}: corrupt or truncated gzip data after line "
                                       f"{last} ({e})") from None
                except OSError as e:
                    raise TierlabError(f"{path}: read error after line {last} "
                                       f"({e.strerror or e})") from None
                done_bytes += size
                bar.update(done_bytes - bar.n)
                if max_docs is not None and docs >= max_docs:
                    break
        bar.close()
        if docs == 0:
            skipped = sum(f["skipped_empty"] + f["skipped_bad"] for f in files)
            names = ", ".join(str(p) for p in inputs)
            raise TierlabError(f"no documents in {names}: the corpus would be empty"
                               + (f" ({skipped} empty or bad documents skipped)" if skipped else ""))
        # Terms are counted in C on the file as written (docs/engine.md's tokeniser).
        counts = count_terms(t_corpus, t_terms, progress=progress, desc=f"count {out.name}")
        assert counts["documents"] == docs and counts["bytes"] == nbytes
        source = {"kind": "ingested", "files": files, "text_field": text_field,
                  "max_docs": max_docs, "skip_bad": skip_bad}
        manifest = make_manifest(
            out, documents=docs, nbytes=nbytes, doc_bytes=doc_bytes, tokens=counts["tokens"],
            vocabulary=counts["vocabulary_terms"], max_postings=counts["max_postings"],
            occurrences=read_terms(t_terms)["occurrences"].to_numpy(),
            digest="blake2b:" + h.hexdigest(), source=source, seconds=time.perf_counter() - t0)
        write_manifest(t_man, manifest)
    return manifest
