"""tierlab.engine.index build: postings against the pure-Python reference, read back
with an independent parser of kernels/formats/index.md and independent decoders
of the codec documents (tests/format_decoders.py), for every codec of
the registry and both block sizes; bounded memory; atomicity; refusal of
foreign, corrupt and incomplete indexes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import reference as ref  # noqa: E402
from index_helpers import codec_names, random_corpus, write  # noqa: E402

from tierlab.core import native  # noqa: E402
from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine.index import FILES, Index, build  # noqa: E402

FORMAT_VERSION = native.ffi_lib()[1].TIERLAB_INDEX_FORMAT_VERSION

DOC_BYTES = 300


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    return write(d / "c.txt", random_corpus(seed=1, docs=2500, doc_bytes=DOC_BYTES))


@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("codec", codec_names())
def test_postings_match_reference(tmp_path, corpus, codec, block):
    res = build(corpus, tmp_path / "idx", codec=codec, block_size=block, doc_bytes=DOC_BYTES)
    want, n_docs = ref.postings(corpus.read_bytes(), DOC_BYTES)
    got, hdr = ref.read_index(tmp_path / "idx")
    assert got == want
    m = res.manifest
    assert (m["documents"], m["terms"], m["postings"]) == (n_docs, len(want),
                                                           sum(map(len, want.values())))
    assert m["blocks"] == sum(-(-len(v) // block) for v in want.values())
    assert m["truncated_documents"] == sum(1 for line in corpus.read_bytes().split(b"\n")
                                           if len(line) > DOC_BYTES)
    assert m["corpus"]["digest"] == f"xxh64:{ref.xxh64(corpus.read_bytes()):016x}"
    assert m["codec"] == codec and m["block_size"] == block
    assert m["files"] == {f: (tmp_path / "idx" / f).stat().st_size for f in FILES}
    for f in FILES:
        h = ref.read_header(tmp_path / "idx" / f)
        assert h["build_id"] == int(m["build_id"], 16) and h["codec"] == codec
        assert h["version"] == m["format_version"] == FORMAT_VERSION
    assert not list(tmp_path.glob("idx.tmp-*"))


def test_edge_corpora(tmp_path):
    cases = {
        "empty": b"",
        "one-newline": b"\n",
        "no-final-newline": b"a b\nc",
        "crlf": b"Apple\r\npear APPLE\r\n",
        "utf8": "caf\u00e9 na\u00efve \u00e9t\u00e9 x\u00e9y\n".encode(),
        "exact": b"x" * DOC_BYTES + b"\n" + b"y" * (DOC_BYTES + 1) + b"\n",
        "long-last": b"a\n" + b"b " * DOC_BYTES,
    }
    for name, data in cases.items():
        c = write(tmp_path / f"{name}.txt", data)
        res = build(c, tmp_path / name, doc_bytes=DOC_BYTES)
        want, n = ref.postings(data, DOC_BYTES)
        got, _ = ref.read_index(tmp_path / name)
        assert got == want, name
        assert res.manifest["documents"] == n, name


def test_bounded_memory_gives_identical_files(tmp_path):
    c = write(tmp_path / "c.txt", random_corpus(seed=7, docs=6000, vocab=3000))
    a = build(c, tmp_path / "mem", block_size=128)
    b = build(c, tmp_path / "runs", block_size=128, memory_budget=256 * 1024)
    assert a.manifest["runs"] == 0
    assert 3 <= b.manifest["runs"] <= 200, b.manifest["runs"]
    assert b.manifest["peak_table_bytes"] < 2 * 256 * 1024
    for f in FILES:
        assert (tmp_path / "mem" / f).read_bytes() == (tmp_path / "runs" / f).read_bytes(), f
    assert not list((tmp_path / "runs").glob("*.tmp"))


def test_same_corpus_same_bytes(tmp_path, corpus):
    build(corpus, tmp_path / "a")
    build(corpus, tmp_path / "b")
    for f in FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_existing_output_refused_unless_forced(tmp_path, corpus):
    build(corpus, tmp_path / "idx")
    with pytest.raises(TierlabError, match="exists"):
        build(corpus, tmp_path / "idx")
    build(corpus, tmp_path / "idx", block_size=128, overwrite=True)
    assert Index(tmp_path / "idx").info["block_size"] == 128
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(TierlabError, match="not a tierlab index"):
        build(corpus, other, overwrite=True)
    assert (other / "notes.txt").read_text() == "keep me"
    assert not list(tmp_path.glob("*.old-*"))


def test_bad_parameters(tmp_path, corpus):
    with pytest.raises(TierlabError, match="unknown codec"):
        build(corpus, tmp_path / "x", codec="zip")
    with pytest.raises(TierlabError, match="block size"):
        build(corpus, tmp_path / "x", block_size=64)
    with pytest.raises(TierlabError, match="cannot open corpus"):
        build(tmp_path / "nope.txt", tmp_path / "x")
    assert not (tmp_path / "x").exists()


# ---- interrupted builds leave nothing that looks complete ----

def test_cancelled_build_leaves_nothing(tmp_path, corpus):
    with pytest.raises(TierlabError, match="cancelled"):
        build(corpus, tmp_path / "idx", progress=lambda done, total: True)
    assert list(tmp_path.iterdir()) == []


def test_exception_in_progress_cancels(tmp_path, corpus):
    def boom(done, total):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        build(corpus, tmp_path / "idx", progress=boom)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_output(tmp_path, corpus):
    with pytest.raises(TierlabError, match="cannot create"):
        build(corpus, tmp_path / "missing" / "idx")
    (tmp_path / "file").write_text("x")
    with pytest.raises(TierlabError):
        build(corpus, tmp_path / "file" / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_killed_build_is_refused(tmp_path):
    """SIGKILL mid-build: no directory named like the index, and the
    temporary one is refused by open."""
    big = tmp_path / "big.txt"
    chunk = random_corpus(seed=3, docs=4000, vocab=20000)
    with open(big, "wb") as f:
        for _ in range(12):
            f.write(chunk)
    code = ("import sys; from tierlab.engine.index import build; "
            "build(sys.argv[1], sys.argv[2], memory_budget=200000)")
    p = subprocess.Popen([sys.executable, "-c", code, str(big), str(tmp_path / "idx")])
    deadline = time.monotonic() + 20
    while not list(tmp_path.glob("idx.tmp-*")) and time.monotonic() < deadline:
        if p.poll() is not None:
            break
        time.sleep(0.002)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    if p.returncode == 0:
        pytest.skip("the build finished before it could be killed")
    assert not (tmp_path / "idx").exists()
    tmps = list(tmp_path.glob("idx.tmp-*"))
    assert len(tmps) == 1
    with pytest.raises(TierlabError, match="no manifest.json|unfinished"):
        Index(tmps[0])


# ---- foreign, corrupt and mismatched indexes are refused ----

@pytest.fixture
def index(tmp_path, corpus) -> Path:
    build(corpus, tmp_path / "idx")
    return tmp_path / "idx"


def test_opens_clean(index):
    with Index(index) as ix:
        assert ix.info["docs"] == ix.manifest["documents"]


@pytest.mark.parametrize("case, match", [
    ("no-manifest", "no manifest.json"),
    ("manifest-version", f"format version {FORMAT_VERSION + 1}"),
    ("foreign-manifest", "not a tierlab index manifest"),
    ("flipped-header", "checksum"),
    ("header-version", "format version 9"),
    ("truncated", "bytes"),
    ("appended", "bytes"),
    ("foreign-file", "bad magic"),
    ("missing-file", "missing"),
    ("swapped-files", "bad magic"),
])
def test_refused(index, case, match):
    if case == "no-manifest":
        (index / "manifest.json").unlink()
    elif case == "manifest-version":
        m = json.loads((index / "manifest.json").read_text())
        m["format_version"] = FORMAT_VERSION + 1
        (index / "manifest.json").write_text(json.dumps(m))
    elif case == "foreign-manifest":
        (index / "manifest.json").write_text('{"hello": 1}')
    elif case == "flipped-header":
        raw = bytearray((index / "skip.bin").read_bytes())
        raw[70] ^= 1
        (index / "skip.bin").write_bytes(bytes(raw))
    elif case == "header-version":
        ref.reseal(index / "dids.bin", version=9)
    elif case == "truncated":
        raw = (index / "dids.bin").read_bytes()
        (index / "dids.bin").write_bytes(raw[:-5])
    elif case == "appended":
        with open(index / "freqs.bin", "ab") as f:
            f.write(b"\0")
    elif case == "foreign-file":
        (index / "dict.bin").write_bytes(os.urandom((index / "dict.bin").stat().st_size))
    elif case == "missing-file":
        (index / "skip.bin").unlink()
    elif case == "swapped-files":
        a, b = (index / "dids.bin").read_bytes(), (index / "freqs.bin").read_bytes()
        (index / "dids.bin").write_bytes(b)
        (index / "freqs.bin").write_bytes(a)
    with pytest.raises(TierlabError, match=match):
        Index(index)


def test_file_of_another_build_refused(tmp_path, index):
    other = write(tmp_path / "o.txt", b"alpha beta\ngamma\n")
    build(other, tmp_path / "other")
    ref.reseal(tmp_path / "other" / "skip.bin", file_bytes=(index / "skip.bin").stat().st_size)
    (index / "skip.bin").write_bytes((tmp_path / "other" / "skip.bin").read_bytes()[:128]
                                     + (index / "skip.bin").read_bytes()[128:])
    with pytest.raises(TierlabError, match="another build"):
        Index(index)


@pytest.mark.parametrize("checks", ["default", "off"])
def test_corrupt_skip_entry_fails_the_query(index, checks):
    """Headers intact, a block offset points outside dids.bin: the query
    fails clearly instead of reading out of bounds (its checksum catches it;
    with the checks off, the bounds still do)."""
    import struct

    with Index(index) as ix:
        n = ix.lookup("t0")
    raw = bytearray((index / "dict.bin").read_bytes())
    hdr = ref.read_header(index / "dict.bin")
    pool = 128 + ref.DICT_ENTRY.size * hdr["terms"]
    for i in range(hdr["terms"]):
        _, skip_off, toff, tlen, *_ = ref.DICT_ENTRY.unpack_from(raw, 128 + ref.DICT_ENTRY.size * i)
        if raw[pool + toff:pool + toff + tlen] == b"t0":
            break
    skip = bytearray((index / "skip.bin").read_bytes())
    # block 1's DID offset
    struct.pack_into("<Q", skip, skip_off + ref.SKIP_HEAD.size + ref.SKIP_ENTRY.size + 8, 1 << 40)
    (index / "skip.bin").write_bytes(bytes(skip))
    with Index(index) as ix:
        ix.set_checks(checks)
        assert ix.lookup("t0") == n
        with pytest.raises(TierlabError, match="corrupt index"):
            ix.query("t0")
