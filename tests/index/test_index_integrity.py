"""A damaged index is refused, never answered (issue 19): single-bit flips in
every region of the files (headers, dictionary entries, term bytes, skip-list
heads and entries, DID and freq blocks) and edited manifest fields, on a
small index of a compressed and an uncompressed (`base`) codec. Each flip
must be refused by the open, by the query of the term whose bytes it hit
(the pool bytes of a term of at most 8 bytes, which no query reads, by the
readers of the term list), and by `index check`, which must name the flipped
bit; no query may return a hit list that differs from the undamaged index's.

The regions are found through the public API (terms, extents, file sizes),
not from the layout of a format version, so the flip tests also run against
an older library (they fail there: it answered wrongly)."""
from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import reference as ref  # noqa: E402
from index_helpers import random_corpus, write  # noqa: E402

from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine import index as index_mod  # noqa: E402
from tierlab.engine.index import FILES, Index, build  # noqa: E402

CODECS = ("pfor-delta256", "base")
BLOCK = 128  # more blocks per term, more skip entries
K = 4000     # more than any term's postings: whole hit lists are compared
FLIPS = 12   # per region class and codec
HEADER = 128
CLASSES = ("header", "dict entry", "term bytes", "skip head", "skip entries", "DID blocks",
           "freq blocks")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    return write(d / "c.txt", random_corpus(seed=19, docs=1500, doc_bytes=400))


@pytest.fixture(scope="module", params=CODECS)
def index(request, corpus, tmp_path_factory):
    """(path, regions, reference): the index, its regions by class, and a
    function giving a query's hits on the undamaged index."""
    path = tmp_path_factory.mktemp(f"idx-{request.param}") / "idx"
    build(corpus, path, codec=request.param, block_size=BLOCK, doc_bytes=400)
    with Index(path) as ix:
        terms = ix.terms()
        ext = ix.extents()
        known = {}

        def reference(q):
            if q not in known:
                known[q] = ix.query(list(q), K)[0]
            return known[q]
        for t in terms:  # every SINGLE and its AND with `every`, while the index is sound
            reference((t,))
            reference((t, "every"))
        for q in (("t0", "t1"), ("t1", "t2", "t3")):
            reference(q)
    return path, _regions(path, terms, ext), lambda q: known[q], terms


def _regions(path: Path, terms: list[str], ext) -> dict[str, list[tuple]]:
    """class -> [(file, lo, hi, term position or None)]"""
    size = {f: (path / f).stat().st_size for f in FILES}
    lens = [len(t.encode()) for t in terms]
    n = len(terms)
    entry = (size["dict.bin"] - HEADER - sum(lens)) // n
    pool = HEADER + entry * n
    out = {c: [] for c in CLASSES}
    out["header"] = [(f, 0, HEADER, None) for f in FILES]
    at = pool
    for i, r in enumerate(ext.itertuples()):
        out["dict entry"].append(("dict.bin", HEADER + entry * i, HEADER + entry * (i + 1), i))
        out["term bytes"].append(("dict.bin", at, at + lens[i], i))
        at += lens[i]
        out["skip head"].append(("skip.bin", r.skip_offset, r.skip_offset + 8, i))
        out["skip entries"].append(("skip.bin", r.skip_offset + 8, r.skip_offset + r.skip_bytes, i))
        out["DID blocks"].append(("dids.bin", r.did_offset, r.did_offset + r.did_bytes, i))
        out["freq blocks"].append(("freqs.bin", r.freq_offset, r.freq_offset + r.freq_bytes, i))
    assert at == size["dict.bin"]
    return out


def _flips(regions, cls: str, seed: int):
    """FLIPS (file, byte, bit, term) drawn uniformly over the class's bytes."""
    rng = random.Random(seed)
    spans = regions[cls]
    weights = [hi - lo for _, lo, hi, _ in spans]
    for f, lo, hi, term in rng.choices(spans, weights=weights, k=FLIPS):
        yield f, rng.randrange(lo, hi), rng.randrange(8), term


class _Flipped:
    """Flip one bit of a file in place; undo on exit."""

    def __init__(self, path: Path, byte: int, bit: int):
        self.path, self.byte, self.bit = path, byte, bit

    def __enter__(self):
        with open(self.path, "r+b") as f:
            f.seek(self.byte)
            self.old = f.read(1)[0]
            f.seek(self.byte)
            f.write(bytes([self.old ^ (1 << self.bit)]))
        return self

    def __exit__(self, *exc):
        with open(self.path, "r+b") as f:
            f.seek(self.byte)
            f.write(bytes([self.old]))


def _queries(term: str | None, terms: list[str]) -> list[tuple]:
    qs = [("t0", "t1"), ("t1", "t2", "t3"), ("every",), (terms[len(terms) // 2],)]
    if term is not None:
        qs = [(term,), (term, "every")] + qs
    return qs


def _outcome(path: Path, reference, queries):
    """('open', message) if the open refuses; else [(query, message or None)]
    with None for a query that answered, after asserting that it answered
    exactly as the undamaged index does."""
    try:
        ix = Index(path)
    except TierlabError as e:
        return "open", str(e)
    out = []
    with ix:
        for q in queries:
            try:
                hits = ix.query(list(q), K)[0]
            except TierlabError as e:
                out.append((q, str(e)))
                continue
            assert hits == reference(q), f"query {q} answered wrongly, without an error"
            out.append((q, None))
    return "queries", out


@pytest.mark.parametrize("cls", CLASSES)
def test_flips_are_refused_never_answered(index, cls):
    path, regions, reference, terms = index
    for n, (f, byte, bit, term) in enumerate(_flips(regions, cls, seed=CLASSES.index(cls))):
        where = f"{f} byte {byte} bit {bit}"
        name = terms[term] if term is not None else None
        with _Flipped(path / f, byte, bit):
            kind, what = _outcome(path, reference, _queries(name, terms))
        if kind == "open":
            assert f in what, (where, what)  # names the damaged file
            continue
        assert cls != "header", f"{where}: a damaged header was accepted"
        if cls == "term bytes" and len(name.encode()) <= 8:
            # a short term is its entry's prefix and length: a query does not
            # read its pool bytes (it answered rightly, see _outcome); the
            # readers that do, refuse
            with _Flipped(path / f, byte, bit), Index(path) as ix:
                with pytest.raises(TierlabError, match="corrupt dictionary entry"):
                    ix.terms()
            continue
        # the query of the term whose bytes were hit reads them: refused
        single = dict(what)[(name,)]
        assert single is not None, f"{where} (term {name!r}): its query answered"
        assert single.startswith("corrupt index: "), single
        if cls in ("DID blocks", "freq blocks"):
            assert f"{f}: term '{name}'" in single and "block" in single, single


def test_check_locates_every_flip(index):
    path, regions, _, terms = index
    for cls in CLASSES:
        flips = list(_flips(regions, cls, seed=100 + CLASSES.index(cls)))
        if cls == "header":  # the magic, the version, the checksum: each found by another check
            flips += [("skip.bin", 3, 1, None), ("dids.bin", 8, 0, None), ("dict.bin", 127, 7, None)]
        for f, byte, bit, term in flips:
            with _Flipped(path / f, byte, bit):
                r = index_mod.check(path)
            where = f"{cls}: {f} byte {byte} bit {bit}"
            assert not r.ok, f"{where}: check found nothing"
            assert r.file == f, (where, r)
            assert r.exact and (r.offset, r.bit) == (byte, bit), (where, r)
            if term is not None and cls != "term bytes":
                assert r.term == term, (where, r)
    assert index_mod.check(path).ok  # every flip undone


def test_check_reports_and_exit_status(index, capsys):
    from tierlab.cli import main

    path, regions, _, terms = index
    assert main(["index", "check", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"OK {path}")
    f, lo, hi, term = next(r for r in regions["DID blocks"] if r[2] - r[1] > 40)
    with _Flipped(path / f, lo + 17, 3):
        assert main(["index", "check", str(path)]) == 1
        out = capsys.readouterr().out
        assert out.startswith(f"DAMAGED {path}: dids.bin byte {lo + 17:,} bit 3: ")
        assert f"term '{terms[term]}'" in out and "checksum mismatch" in out
        assert main(["index", "check", str(path), "--json"]) == 1
        doc = json.loads(capsys.readouterr().out)
        assert (doc["file"], doc["offset"], doc["bit"], doc["term"]) == ("dids.bin", lo + 17, 3,
                                                                        term)
        # the query of that term fails the run: exit status 2, one line
        assert main(["query", "terms", str(path), terms[term]]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tierlab: error: corrupt index: dids.bin: term") and "block" in err


def test_table_path_refuses_too(index):
    """Without SSE4.2 (the table path of the CRC) the same flips are refused."""
    from tierlab.core.native import ffi_lib

    path, regions, reference, terms = index
    _, lib = ffi_lib()
    lib.tierlab_force_scalar(1)
    try:
        for cls in ("dict entry", "skip entries", "DID blocks", "freq blocks"):
            f, byte, bit, term = next(_flips(regions, cls, seed=7))
            with _Flipped(path / f, byte, bit):
                kind, what = _outcome(path, reference, [(terms[term],)])
                assert kind == "queries" and what[0][1] is not None, (cls, what)
                r = index_mod.check(path)
                assert (r.ok, r.offset, r.bit) == (False, byte, bit), (cls, r)
    finally:
        lib.tierlab_force_scalar(0)


def test_verify_reads_every_byte_at_open(index):
    """A flip in a block no query reads: queries answer (rightly); --verify
    refuses the open."""
    path, regions, reference, terms = index
    f, lo, hi, term = regions["freq blocks"][terms.index("rare")]
    with _Flipped(path / f, lo, 0):
        with Index(path) as ix:
            assert ix.query(["t0"], K)[0] == reference(("t0",))
        with pytest.raises(TierlabError, match="freqs.bin: body checksum mismatch"):
            Index(path, verify=True)


def test_checks_full_catches_what_a_resealed_block_hides(tmp_path, corpus):
    """DIDs out of order in a block whose checksums were made to match (a
    bug, not damage): the default checks see only the block's ends, the full
    checks every posting."""
    import struct

    path = tmp_path / "idx"
    build(corpus, path, codec="base", block_size=BLOCK, doc_bytes=400)
    with Index(path) as ix:
        i = ix.find("every")
        r = ix.extents().iloc[i]
    raw = bytearray((path / "dids.bin").read_bytes())
    a = int(r.did_offset)
    d = struct.unpack_from("<4I", raw, a + 4 * 10)
    struct.pack_into("<4I", raw, a + 4 * 10, d[0], d[2], d[1], d[3])  # swap two DIDs
    (path / "dids.bin").write_bytes(bytes(raw))
    _reseal_term(path, int(r.skip_offset), int(r.blocks))
    with Index(path) as ix:
        assert ix.query(["every"], K)[0]  # the swap is invisible to the default checks
        ix.set_checks("full")
        with pytest.raises(TierlabError, match=r"dids.bin: term 'every' .*block 0 .*DIDs must "
                                               r"increase"):
            ix.query(["every"], K)
    r = index_mod.check(path)
    assert not r.ok and r.file == "dids.bin" and "DIDs must increase" in r.what


def _reseal_term(path: Path, skip_offset: int, nb: int) -> None:
    """Recompute a term's running DID checksums, its skip record's checksum
    and the body checksums of dids.bin and skip.bin (kernels/formats/index.md)."""
    import struct

    dids = (path / "dids.bin").read_bytes()
    skip = bytearray((path / "skip.bin").read_bytes())
    ents = [ref.SKIP_ENTRY.unpack_from(skip, skip_offset + 8 + 32 * b) for b in range(nb + 1)]
    for b in range(nb):
        struct.pack_into("<I", skip, skip_offset + 8 + 32 * b + 24,
                         ref.crc32c(dids[ents[0][2]:ents[b + 1][2]]))
    rec = 8 + 32 * (nb + 1)
    struct.pack_into("<I", skip, skip_offset + rec - 4,
                     ref.crc32c(bytes(skip[skip_offset:skip_offset + rec - 4])))
    (path / "skip.bin").write_bytes(bytes(skip))
    for f in ("dids.bin", "skip.bin"):
        ref.reseal(path / f, body_crc=ref.crc32c((path / f).read_bytes()[HEADER:]))


# ---- the manifest against the headers ----

@pytest.fixture
def fresh(tmp_path, corpus) -> Path:
    build(corpus, tmp_path / "idx", codec="pfor-delta256", doc_bytes=400)
    return tmp_path / "idx"


@pytest.mark.parametrize("key, value", [
    ("codec", "base"),
    ("freq_codec", "base"),
    ("block_size", 128),
    ("doc_bytes", 1024),
    ("documents", "+1"),
    ("terms", "+1"),
    ("postings", "-1"),
    ("blocks", "+1"),
    ("build_id", "0123456789abcdef"),
    ("did_block_bytes", "+1"),
    ("files.skip.bin", "+8"),
])
def test_edited_manifest_is_refused(fresh, key, value, capsys):
    from tierlab.cli import main

    m = json.loads((fresh / "manifest.json").read_text())
    holder, field = (m["files"], key[6:]) if key.startswith("files.") else (m, key)
    old = holder[field]
    new = old + int(value) if isinstance(value, str) and value[0] in "+-" else value
    holder[field] = new
    (fresh / "manifest.json").write_text(json.dumps(m, indent=2))
    with pytest.raises(TierlabError) as e:
        Index(fresh)
    msg = str(e.value)
    assert "\n" not in msg
    assert str(old) in msg and str(new) in msg, msg  # names both values
    assert main(["index", "info", str(fresh)]) == 2
    assert main(["index", "check", str(fresh)]) == 1
    assert "DAMAGED" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["manifest", "headers"])
def test_older_format_says_rebuild(fresh, where, capsys):
    from tierlab.cli import main

    if where == "manifest":
        m = json.loads((fresh / "manifest.json").read_text())
        m["format_version"] = 2
        (fresh / "manifest.json").write_text(json.dumps(m))
    else:
        for f in FILES:
            ref.reseal(fresh / f, version=2)
    for call in (lambda: Index(fresh), lambda: index_mod.check(fresh)):
        with pytest.raises(TierlabError, match="format version 2; rebuild with tierlab index "
                                               "build"):
            call()
    assert main(["index", "check", str(fresh)]) == 2
    assert "rebuild with tierlab index build" in capsys.readouterr().err


def test_missing_or_foreign_is_not_damage(tmp_path, fresh):
    """`index check` on what is not an index: an error (exit 2), not a report."""
    with pytest.raises(TierlabError, match="no manifest.json"):
        index_mod.check(tmp_path)
    shutil.copy(fresh / "manifest.json", tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text('{"hello": 1}')
    with pytest.raises(TierlabError, match="not a tierlab index manifest"):
        index_mod.check(tmp_path)


# ---- a term's skip record, checked after its walk; long terms' pool bytes; missing files ----

def test_skip_record_flips_name_the_skip_record(index):
    """Queries check a term's skip record once, after its walk (while its
    bytes are cached) and first when one of its blocks fails: a flip anywhere
    in the record of the longest term (most blocks) is refused by that term's
    query, naming skip.bin, never answered and never blamed on a block."""
    path, regions, reference, terms = index
    spans = [s for s in regions["skip entries"] + regions["skip head"]
             if s[3] == terms.index("t0")]
    rng = random.Random(1919)
    for f, lo, hi, term in spans:
        for byte in sorted(rng.sample(range(lo, hi), min(FLIPS, hi - lo))):
            bit = rng.randrange(8)
            with _Flipped(path / f, byte, bit):
                kind, what = _outcome(path, reference, [("t0",), ("t0", "every")])
            assert kind == "queries", what
            for q, msg in what:
                assert msg is not None, f"skip.bin byte {byte} bit {bit}: {q} answered"
                assert msg.startswith("corrupt index: skip.bin: term 't0'"), msg


LONG = "transubstantiationalist"  # far longer than the 8 bytes a dictionary entry holds


@pytest.fixture(scope="module")
def long_terms(corpus, tmp_path_factory):
    """An index whose dictionary holds terms longer than 8 bytes (their bytes
    live in the term pool only), with their pool spans."""
    d = tmp_path_factory.mktemp("long")
    text = corpus.read_bytes() + b"".join(
        f"{LONG} t{i} every {LONG}x{i % 3}\n".encode() for i in range(300))
    write(d / "c.txt", text)
    path = d / "idx"
    build(d / "c.txt", path, codec="pfor-delta256", block_size=BLOCK, doc_bytes=400)
    with Index(path) as ix:
        terms = ix.terms()
        regions = _regions(path, terms, ix.extents())
        known = {q: ix.query(list(q), K)[0] for t in terms for q in ((t,), (t, "every"))}
    longs = [t for t in terms if len(t.encode()) > 8]
    assert LONG in longs and len(longs) >= 4
    return path, regions, known.__getitem__, terms, longs


def test_flipped_pool_byte_of_a_long_term_is_refused(long_terms):
    """A long term is compared with the query's bytes in the pool: a flipped
    bit there is refused by the term's query (a miss re-checks every entry it
    probed) and located by `index check`, never answered."""
    path, regions, reference, terms, longs = long_terms
    rng = random.Random(19)
    for name in longs:
        f, lo, hi, term = regions["term bytes"][terms.index(name)]
        assert terms[term] == name
        for byte in (lo, hi - 1, rng.randrange(lo, hi)):
            bit = rng.randrange(8)
            with _Flipped(path / f, byte, bit):
                kind, what = _outcome(path, reference, [(name,), (name, "every")])
                report = index_mod.check(path)
            assert kind == "queries", what
            for q, msg in what:
                assert msg is not None, f"pool byte {byte} bit {bit} of {name!r}: {q} answered"
                assert msg.startswith("corrupt index: dict.bin"), msg
            assert not report.ok and report.file == "dict.bin", report
            assert (report.exact, report.offset, report.bit) == (True, byte, bit), report


@pytest.mark.parametrize("name", FILES)
def test_missing_file_is_damage(fresh, name, capsys):
    """An index file that is not there is damage (the manifest lists it):
    refused at open like a damaged one, reported by `index check` (exit 1),
    not taken for a folder that is not an index."""
    from tierlab.cli import main

    (fresh / name).unlink()
    with pytest.raises(TierlabError, match=rf"^corrupt index: .*{name} is missing"):
        Index(fresh)
    report = index_mod.check(fresh)
    assert not report.ok and report.file == name and "is missing" in report.what, report
    assert main(["index", "check", str(fresh)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"DAMAGED {fresh}: {name}: corrupt index:"), out
    assert main(["query", "terms", str(fresh), "t0"]) == 2
    assert f"{name} is missing" in capsys.readouterr().err
