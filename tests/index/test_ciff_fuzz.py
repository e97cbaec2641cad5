"""Fuzzing the CIFF reader and import (tierlab.engine.ciff, Python) with
Hypothesis from pytest: a small real CIFF file (an export of a small index)
mutated (bits flipped, bytes set, inserted, deleted, the file cut), and raw
bytes. Derandomised and bounded by tests/conftest.py's profile.

Contract: CiffFile and import_ either work or raise TierlabError, nothing
else; a failed import leaves nothing; an index that is imported opens and
holds exactly the postings CiffFile read (checked with the independent
reader of tests/index/reference.py)."""
from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import reference as ref  # noqa: E402

from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine.ciff import CiffFile, export, import_  # noqa: E402
from tierlab.engine.index import build  # noqa: E402

FUZZ = settings(max_examples=settings.default.max_examples // 2, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WORK = Path(tempfile.mkdtemp(prefix="tierlab-ciff-fuzz-"))


def _real_ciff() -> bytes:
    d = WORK / "src"
    d.mkdir(exist_ok=True)
    lines = [" ".join(f"w{(i * 7 + j * j) % 23}" for j in range(1 + i % 5)) for i in range(40)]
    (d / "c.txt").write_text("\n".join(lines) + "\n")
    build(d / "c.txt", d / "idx", overwrite=True)
    export(d / "idx", d / "x.ciff")
    return (d / "x.ciff").read_bytes()


REAL = _real_ciff()

EDIT = st.tuples(st.sampled_from(["flip", "set", "insert", "delete", "cut"]),
                 st.integers(0, len(REAL)), st.integers(0, 255), st.integers(1, 8))


def _mutate(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for op, at, value, n in edits:
        at = at % (len(b) + 1)
        if op == "flip" and at < len(b):
            b[at] ^= 1 << (value % 8)
        elif op == "set" and at < len(b):
            b[at] = value
        elif op == "insert":
            b[at:at] = bytes([value]) * n
        elif op == "delete":
            del b[at:at + n]
        elif op == "cut":
            del b[at:]
    return bytes(b)


def _read_all(path: Path):
    """Everything CiffFile gives: {term: [(did, tf)]} and the records."""
    lists = {}
    with CiffFile(path) as cf:
        for ch in cf.postings(chunk_postings=50):
            ends = np.cumsum(ch.dfs).tolist()
            for term, e, n in zip(ch.terms, ends, ch.dfs.tolist()):
                lists[term] = list(zip(ch.dids[e - n:e].tolist(), ch.freqs[e - n:e].tolist()))
        records = list(cf.doc_records())
    return lists, records


def _check(data: bytes) -> None:
    f, out = WORK / "in.ciff", WORK / "out"
    f.write_bytes(data)
    shutil.rmtree(out, ignore_errors=True)
    try:
        lists, _ = _read_all(f)
    except TierlabError:
        lists = None
    try:
        m = import_(f, out)
    except TierlabError:
        assert not out.exists() and not list(WORK.glob("out.tmp-*")), "a failed import left files"
        return
    got, _ = ref.read_index(out)
    assert m["terms"] == len(got)
    if lists is not None:  # what the reader read is what the index holds
        assert got == lists


@FUZZ
@given(edits=st.lists(EDIT, min_size=1, max_size=4))
def test_a_mutated_ciff_file_imports_or_is_refused(edits):
    _check(_mutate(REAL, edits))


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_import_or_are_refused(data):
    _check(data)


def test_the_unmutated_file_imports_whole():
    _check(REAL)
    lists, records = _read_all(WORK / "in.ciff")
    assert len(lists) == 23 and len(records) == 40
