"""Fuzzing the corpus readers (tierlab.engine.ingest: text, JSON Lines, WET,
each plain or gzip), which are Python, with Hypothesis from pytest (the C
side of ingest, tokenising and the index build, has a libFuzzer harness:
kernels/fuzz/fuzz_build.c). Derandomised and bounded (the "ci" profile of
tests/conftest.py; a few seconds in all).

Any input bytes: ingest returns a manifest or raises TierlabError, nothing
else, leaves nothing behind on error, and what it writes is a corpus in
tierlab's format (docs/workload.md "Corpora"): UTF-8, one non-empty document
per line of at most doc_bytes bytes, whitespace runs made single spaces, no
space at either end, and a manifest that counts it. Well-formed inputs built
from known texts give exactly those texts, normalised and cut by the rule
of the module's docstring."""
from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from tierlab.core.errors import TierlabError
from tierlab.engine.ingest import ingest

# a share of the profile's examples (ci: 200, so 100 and 40; HYPOTHESIS_PROFILE=dev for more)
FUZZ = settings(max_examples=settings.default.max_examples // 2, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FORMED = settings(FUZZ, max_examples=settings.default.max_examples // 5)  # two ingests each
WORK = Path(tempfile.mkdtemp(prefix="tierlab-ingest-fuzz-"))  # one folder, files overwritten

# text with the awkward characters: whitespace of every kind, NUL, controls,
# multi-byte UTF-8, lone surrogates (from JSON escapes)
CHARS = st.sampled_from(list("ab Z9 \t\n\r\x00\x0b\x0c\x1c\x85\xa0\u2003\u3000\u00e9\u4e2d\U0001F600"
                             "\"\\{}:,\ud800"))
TEXT = st.text(alphabet=CHARS, max_size=60) | st.text(max_size=40)


def _normal(text: str, doc_bytes: int) -> bytes:
    """The document rule, written again: whitespace runs (str.isspace) and NULs
    become one space, none at the ends; the UTF-8 bytes cut to doc_bytes at a
    character boundary, a space left at the cut dropped."""
    b = " ".join(text.replace("\x00", " ").split()).encode("utf-8")
    if len(b) <= doc_bytes:
        return b
    cut = doc_bytes
    while cut and (b[cut] & 0xC0) == 0x80:
        cut -= 1
    return b[:cut].rstrip(b" ")


def _ingest(data: bytes, fmt: str, name: str, **kw):
    src, out = WORK / name, WORK / "out.txt"
    src.write_bytes(data)
    for f in WORK.glob("out.txt*"):
        f.unlink()
    try:
        m = ingest([src], out, fmt=fmt, progress=False, **kw)
    except TierlabError:
        assert not list(WORK.glob("out.txt*")), "a failed ingest left files behind"
        return None
    return m, out.read_bytes()


def _check_corpus(m: dict, corpus: bytes, doc_bytes: int) -> list[bytes]:
    text = corpus.decode("utf-8")  # UTF-8, or this raises
    assert corpus.endswith(b"\n") and m["bytes"] == len(corpus)
    lines = corpus.split(b"\n")[:-1]
    assert m["documents"] == len(lines) >= 1
    for line, s in zip(lines, text.split("\n")):
        assert 0 < len(line) <= doc_bytes, line
        assert s == " ".join(s.split()) and "\x00" not in s, s  # normalised
    f = m["source"]["files"][0]
    assert f["documents"] == len(lines)
    assert m["tokens"] >= 0 and m["vocabulary_terms"] <= m["tokens"]
    return lines


def _maybe_gzip(data: bytes, how: int) -> bytes:
    if how == 0:
        return data
    z = gzip.compress(data)
    return z if how == 1 else z[:max(2, len(z) * 2 // 3)]  # 2: truncated gzip


# --- any bytes -----------------------------------------------------------------------

@FUZZ
@given(data=st.binary(max_size=600), fmt=st.sampled_from(["text", "jsonl", "wet"]),
       gz=st.integers(0, 2), skip_bad=st.booleans(), doc_bytes=st.integers(16, 80))
def test_any_bytes_are_a_corpus_or_a_clear_error(data, fmt, gz, skip_bad, doc_bytes):
    got = _ingest(_maybe_gzip(data, gz), fmt, f"in.{fmt}", skip_bad=skip_bad,
                  doc_bytes=doc_bytes)
    if got:
        _check_corpus(*got, doc_bytes)


# --- well-formed inputs of known texts ---------------------------------------------------

@FORMED
@given(texts=st.lists(TEXT, min_size=1, max_size=8), gz=st.integers(0, 1),
       doc_bytes=st.integers(16, 64), junk=st.lists(st.binary(max_size=20), max_size=3))
def test_jsonl_gives_its_texts(texts, gz, doc_bytes, junk):
    lines = [json.dumps({"id": i, "text": t}).encode() for i, t in enumerate(texts)]
    lines += [b"", b"   "]  # blank lines are ignored
    got = _ingest(_maybe_gzip(b"\n".join(lines) + b"\n", gz), "jsonl", "in.jsonl",
                  doc_bytes=doc_bytes)
    want = []
    for t in texts:
        try:
            want.append(_normal(t, doc_bytes))
        except UnicodeEncodeError:  # a lone surrogate (from a JSON escape): a bad document
            # (refused; past the cut of a long document it may go with the cut)
            assert got is None or _check_corpus(*got, doc_bytes)
            return
    want = [w for w in want if w]
    if not want:
        assert got is None  # nothing but empty documents: refused
        return
    m, corpus = got
    assert _check_corpus(m, corpus, doc_bytes) == want
    # junk lines: each a bad document (skipped with skip_bad) or a valid one
    bad = b"\n".join(lines + [j.replace(b"\n", b" ") for j in junk]) + b"\n"
    again = _ingest(bad, "jsonl", "in.jsonl", doc_bytes=doc_bytes, skip_bad=True)
    if again:
        _check_corpus(*again, doc_bytes)


def _wet(records) -> bytes:
    out = b""
    for kind, body, extra in records:
        out += (f"WARC/1.0\r\nWARC-Type: {kind}\r\nContent-Length: {len(body) + extra}\r\n"
                f"\r\n").encode() + body + b"\r\n\r\n"
    return out


@FORMED
@given(records=st.lists(st.tuples(st.sampled_from(["conversion", "conversion", "warcinfo"]),
                                  TEXT.map(lambda t: t.encode("utf-8", "surrogatepass"))),
                        min_size=1, max_size=6),
       gz=st.integers(0, 1), doc_bytes=st.integers(16, 64), lie=st.integers(-3, 3))
def test_wet_gives_the_bodies_of_its_conversion_records(records, gz, doc_bytes, lie):
    data = _wet([(k, b, 0) for k, b in records])
    got = _ingest(_maybe_gzip(data, gz), "wet", "in.wet", doc_bytes=doc_bytes)
    want = []
    for kind, body in records:
        if kind != "conversion":
            continue
        try:
            want.append(_normal(body.decode("utf-8"), doc_bytes))
        except UnicodeDecodeError:  # a surrogate's bytes are not UTF-8: a bad document
            assert got is None
            return
    want = [w for w in want if w]
    if not want:
        assert got is None
        return
    m, corpus = got
    assert _check_corpus(m, corpus, doc_bytes) == want
    # a Content-Length that lies: a clear error or some corpus, never a crash
    kind, body = records[-1]
    lied = _wet([(k, b, 0) for k, b in records[:-1]] + [(kind, body, lie)])
    again = _ingest(lied, "wet", "in.wet", doc_bytes=doc_bytes)
    if again:
        _check_corpus(*again, doc_bytes)


@FORMED
@given(texts=st.lists(TEXT.filter(lambda t: "\n" not in t), min_size=1, max_size=8),
       doc_bytes=st.integers(16, 64))
def test_text_gives_its_lines(texts, doc_bytes):
    try:
        data = "\n".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return  # a lone surrogate cannot be written as UTF-8 text
    got = _ingest(data + b"\n", "text", "in.txt", doc_bytes=doc_bytes)
    # str.splitlines would also split at \r, \x0b, \x1c, \x85, ...: the reader splits at \n only
    want = [w for w in (_normal(t, doc_bytes) for t in texts) if w]
    if not want:
        assert got is None
        return
    assert _check_corpus(*got, doc_bytes) == want
