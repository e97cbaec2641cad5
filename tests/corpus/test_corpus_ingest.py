"""Ingest (tierlab.engine.ingest): plain text, JSON Lines and WET (gzip, made here),
normalisation and truncation, term counts, and every kind of bad input:
exit status 2, FILE:LINE in the message, nothing left behind."""
from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from tierlab.cli import main
from tierlab.engine.corpus import read_terms, tokenize
from tierlab.engine.ingest import ingest, prepare


def run(*args) -> int:
    return main(["corpus", "ingest", "--quiet", *map(str, args)])


def wet_record(kind: str, body: bytes, length: int | None = None) -> bytes:
    head = (f"WARC/1.0\r\nWARC-Type: {kind}\r\nWARC-Target-URI: http://example.org/\r\n"
            f"Content-Type: text/plain\r\nContent-Length: {len(body) if length is None else length}"
            f"\r\n\r\n").encode()
    return head + body + b"\r\n\r\n"


def write_wet(path, records, compress=True):
    data = b"".join(gzip.compress(r) if compress else r for r in records)
    path.write_bytes(data)
    return path


def lines(path):
    return path.read_text(encoding="utf-8").split("\n")[:-1]


# --- formats ------------------------------------------------------------------

def test_plain_text_one_document_per_line(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"Hello,  World!\r\n\n \t \nTabs\there\x00and NULs\n\xc3\xa9t\xc3\xa9 \xe2\x80\x83 x\nlast")
    m = ingest([src], tmp_path / "c.txt", progress=False)
    assert lines(tmp_path / "c.txt") == ["Hello, World!", "Tabs here and NULs", "été x", "last"]
    f = m["source"]["files"][0]
    assert (f["format"], f["documents"], f["skipped_empty"]) == ("text", 4, 2)
    assert m["documents"] == 4 and m["bytes"] == (tmp_path / "c.txt").stat().st_size


def test_truncation_at_a_character_boundary():
    assert prepare("é" * 10, 16) == (("é" * 8).encode(), True)
    b, cut = prepare("a" + "é" * 10, 16)  # byte 16 is the first of an 'é': cut before it
    assert cut and b.decode() == "a" + "é" * 7
    b, cut = prepare("word " * 10, 16)
    assert cut and b == b"word word word w"
    b, cut = prepare("abcdefghijklmno p", 16)  # the cut leaves a trailing space: dropped
    assert cut and b == b"abcdefghijklmno"
    assert prepare("short", 16) == (b"short", False)
    long_ws = "x" + " " * 5000 + "y" * 40
    assert prepare(long_ws, 16) == (b"x " + b"y" * 14, True)


def test_json_lines_with_a_chosen_field(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "body": "One\\ntwo"}\n\n{"id": 2, "body": "Three \\u00e9"}\n',
                   encoding="utf-8")
    m = ingest([src], tmp_path / "c.txt", text_field="body", progress=False)
    assert lines(tmp_path / "c.txt") == ["One two", "Three é"]
    assert m["source"]["files"][0]["format"] == "jsonl"


@pytest.mark.parametrize("compress", [True, False])
def test_common_crawl_wet(tmp_path, compress):
    src = write_wet(tmp_path / ("in.warc.wet.gz" if compress else "in.wet"), [
        wet_record("warcinfo", b"Software-Info: test\r\n"),
        wet_record("conversion", "Première page\nsecond line\n".encode()),
        wet_record("conversion", b"  \n\n"),
        wet_record("conversion", b"Third page " * 200),
    ], compress)
    m = ingest([src], tmp_path / "c.txt", doc_bytes=64, progress=False)
    got = lines(tmp_path / "c.txt")
    assert got[0] == "Première page second line"
    assert got[1] == ("Third page " * 6).strip()[:64].rstrip()
    f = m["source"]["files"][0]
    assert (f["format"], f["documents"], f["skipped_empty"], f["truncated"]) == ("wet", 2, 1, 1)


def test_gzip_text_and_several_inputs_in_order(tmp_path):
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(b"first doc\nsecond doc\n"))
    (tmp_path / "b.txt").write_text("third doc\n")
    m = ingest([tmp_path / "a.txt.gz", tmp_path / "b.txt"], tmp_path / "c.txt", progress=False)
    assert lines(tmp_path / "c.txt") == ["first doc", "second doc", "third doc"]
    assert [f["format"] for f in m["source"]["files"]] == ["text", "text"]


def test_term_table_matches_a_python_recount(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("The cat's HAT, the 2nd hat!\nnaïve café: NaN null 007 x_y\nthe\n", encoding="utf-8")
    m = ingest([src], tmp_path / "c.txt", progress=False)
    occ, post = Counter(), Counter()
    for line in (tmp_path / "c.txt").read_bytes().splitlines():
        toks = tokenize(line)
        occ.update(toks)
        post.update(set(toks))
    df = read_terms(tmp_path / "c.txt.terms.tsv")
    assert list(df["term"])[:2] == ["the", "hat"]  # occurrences descending, then term
    got = {t: (p, o) for t, p, o in df.itertuples(index=False)}
    assert got == {t.decode(): (post[t], o) for t, o in occ.items()}
    assert {"nan", "null", "007", "na", "ve", "caf"} <= set(got)
    assert m["vocabulary_terms"] == len(got) and m["tokens"] == sum(occ.values())


def test_max_docs(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("".join(f"doc {i}\n" for i in range(100)))
    m = ingest([src], tmp_path / "c.txt", max_docs=7, progress=False)
    assert m["documents"] == 7 and len(lines(tmp_path / "c.txt")) == 7


# --- bad input ----------------------------------------------------------------

def bad_cases(tmp_path):
    def text(name, data):
        p = tmp_path / name
        p.write_bytes(data)
        return p

    yield "utf8", text("u.txt", b"fine\nbad \xff byte\n"), "u.txt:2: invalid UTF-8"
    yield "json", text("j.jsonl", b'{"text": "a"}\n\n{"text": "b"\n'), "j.jsonl:3: malformed JSON"
    yield "field", text("f.jsonl", b'{"text": "a"}\n{"body": "b"}\n'), "f.jsonl:2: no 'text' field"
    yield "type", text("t.jsonl", b'{"text": 3}\n'), "t.jsonl:1: field 'text' is a number"
    yield "object", text("o.jsonl", b'["text"]\n'), "o.jsonl:1: expected a JSON object"
    yield "surrogate", text("s.jsonl", b'{"text": "a \\ud800 b"}\n'), "s.jsonl:1: text is not valid Unicode"
    yield "empty", text("e.txt", b"\n  \n\t\n"), "no documents in"
    yield "missing", tmp_path / "nope.txt", "nope.txt: cannot read"
    yield "directory", tmp_path, "cannot read (is a directory)"
    good = gzip.compress(b"line one\nline two\n" * 1000)
    yield "gzip", text("g.txt.gz", good[: len(good) // 2]), "g.txt.gz: corrupt or truncated gzip"
    yield "wet-length", write_wet(tmp_path / "l.warc.wet.gz", [
        wet_record("conversion", b"ok\n"), wet_record("conversion", b"short", length=50)]), \
        "l.warc.wet.gz:10: WARC record truncated"
    yield "wet-header", write_wet(tmp_path / "h.wet", [b"HTTP/1.1 200 OK\r\n\r\n"], False), \
        "h.wet:1: expected a WARC record"
    yield "wet-no-length", write_wet(tmp_path / "n.wet", [
        b"WARC/1.0\r\nWARC-Type: conversion\r\n\r\nbody\r\n\r\n"], False), \
        "n.wet:1: WARC record without a valid Content-Length"
    yield "wet-utf8", write_wet(tmp_path / "w.wet.gz", [
        wet_record("conversion", b"line one\nline \xc3( two\n")]), "w.wet.gz:8: invalid UTF-8"


@pytest.mark.parametrize("case", ["utf8", "json", "field", "type", "object", "surrogate", "empty",
                                  "missing", "directory", "gzip", "wet-length", "wet-header",
                                  "wet-no-length", "wet-utf8"])
def test_bad_input_is_a_clear_error_and_leaves_nothing(tmp_path, capsys, case):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    name, path, message = next(c for c in bad_cases(inputs) if c[0] == case)
    assert run(path, "--out", out / "c.txt") == 2
    err = capsys.readouterr().err
    assert err.startswith("tierlab: error: ") and message in err, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert list(out.iterdir()) == []


def test_a_failed_ingest_keeps_the_previous_corpus(tmp_path, capsys):
    good = tmp_path / "good.txt"
    good.write_text("one\ntwo\n")
    assert run(good, "--out", tmp_path / "c.txt") == 0
    before = (tmp_path / "c.txt").read_bytes(), (tmp_path / "c.txt.json").read_bytes()
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\n")
    assert run(bad, "--out", tmp_path / "c.txt") == 2
    assert ((tmp_path / "c.txt").read_bytes(), (tmp_path / "c.txt.json").read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.txt", "c.txt", "c.txt.json", "c.txt.terms.tsv", "good.txt"]


def test_skip_bad_counts_and_goes_on(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"text": "a"}\n{"text": \n\xff\n{"body": 1}\n{"text": "b"}\n')
    m = ingest([src], tmp_path / "c.txt", skip_bad=True, progress=False)
    assert lines(tmp_path / "c.txt") == ["a", "b"]
    assert m["source"]["files"][0]["skipped_bad"] == 3


def test_manifest_describes_the_corpus(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("alpha beta\ngamma\n")
    ingest([src], tmp_path / "c.txt", progress=False)
    m = json.loads((tmp_path / "c.txt.json").read_text())
    assert m["format"] == "tierlab-corpus" and m["format_version"] == 1
    assert (m["documents"], m["tokens"], m["vocabulary_terms"], m["doc_bytes"]) == (2, 3, 3, 1024)
    assert m["terms_file"] == "c.txt.terms.tsv" and m["digest"].startswith("blake2b:")
    assert main(["corpus", "stats", str(tmp_path / "c.txt"), "--verify"]) == 0


def test_ctrl_c_leaves_nothing_behind(tmp_path, monkeypatch):
    import tierlab.engine.ingest as ingest_module

    src = tmp_path / "in.txt"
    src.write_text("".join(f"doc {i}\n" for i in range(10)))
    calls = []

    def interrupted(doc, doc_bytes):
        calls.append(doc)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return prepare(doc, doc_bytes)

    monkeypatch.setattr(ingest_module, "prepare", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest([src], tmp_path / "c.txt", progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["in.txt"]


def test_output_must_not_be_a_directory(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("a\n")
    (tmp_path / "out").mkdir()
    assert run(tmp_path / "in.txt", "--out", tmp_path / "out") == 2
    assert "it is a directory" in capsys.readouterr().err
