"""The codec format documents against the kernels, byte for byte.

1. The worked examples of kernels/formats/vbyte.md (the VByte table, the
   StreamVByte example) and kernels/formats/pfor.md (the VBYTE-exception
   block), parsed out of the documents: the native encoders write exactly
   those bytes and both decoders give back the documented values.
2. The independent pure-Python decoders of tests/format_decoders.py (written
   from the documents) against the native decoders: every DID and freq block
   of small indexes of every codec and both block sizes, random blocks, and
   mutated blocks (a valid block by the document must decode alike, an
   invalid one must be refused by both).
"""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "index"))
import format_decoders as fd  # noqa: E402
import reference as ref  # noqa: E402

from tierlab.core import native  # noqa: E402
from tierlab.engine.index import build  # noqa: E402

FORMATS = Path(__file__).resolve().parents[2] / "kernels" / "formats"


def _codec(name: str) -> native.Codec:
    """A registry entry or a freq codec, by name."""
    for c in native.codecs():
        for x in (c, c.freq):
            if x.name == name:
                return x
    raise KeyError(name)


def _native_decode(name: str, data: bytes, n: int, prev: int = 0):
    vals, used = _codec(name).decode(data, n, prev)
    return [int(v) for v in vals], used


def _hex(text: str) -> bytes:
    return bytes(int(t, 16) for t in re.findall(r"\b(?:0x)?([0-9A-Fa-f]{2})\b", text))


def _number(text: str) -> int:
    """'300', '2^32 - 1' as the documents write them."""
    m = re.fullmatch(r"\s*(\d+)(?:\^(\d+))?(?:\s*-\s*(\d+))?\s*", text)
    assert m, text
    base, exp, minus = m.groups()
    return int(base) ** int(exp or 1) - int(minus or 0)


# ---- 1. the documents' examples ------------------------------------------------------

def _vbyte_table() -> list[tuple[int, bytes]]:
    """vbyte.md, section "VByte": the `| x | bytes |` table."""
    text = (FORMATS / "vbyte.md").read_text()
    section = text[text.index("## VByte"):text.index("## StreamVByte")]
    rows = re.findall(r"^\| ([^|`]+) \| `([0-9A-F ]+)` \|$", section, flags=re.M)
    return [(_number(x), _hex(b)) for x, b in rows]


def test_vbyte_table_byte_for_byte():
    table = _vbyte_table()
    assert [x for x, _ in table] == [0, 127, 128, 300, 2**32 - 1]  # the rows were all found
    for name in ("vbyte", "vbyte-delta"):
        for x, want in table:
            # one value; for the delta codec it is the gap from prev
            prev = 7 if name == "vbyte-delta" else 0
            value = (x + prev) & fd.MASK32 if name == "vbyte-delta" else x
            assert _codec(name).encode([value], prev) == want, (name, x)
            assert fd.decode(name, want, 1, prev) == ([value], len(want))
            assert _native_decode(name, want, 1, prev) == ([value], len(want))


def test_vbyte_decoder_rules_of_the_document():
    """vbyte.md: non-shortest sequences of at most 5 bytes are accepted; a
    fifth byte above 0x0F and a sequence running past the block are not."""
    for name in ("vbyte", "vbyte-delta"):
        assert fd.decode(name, b"\x80\x00", 1)[0] == [0]
        assert _native_decode(name, b"\x80\x00", 1) == ([0], 2)
        for bad in (b"\xff\xff\xff\xff\x10", b"\x80", b"\x80\x80\x80\x80\x80\x01"):
            with pytest.raises(fd.Corrupt):
                fd.decode(name, bad, 1)
            with pytest.raises(native.CorruptBlock):
                _native_decode(name, bad, 1)


def _svbyte_example() -> tuple[list[int], bytes, bytes]:
    """vbyte.md, section "StreamVByte": "Example, n = 5, x = [...]" and its
    control and data lines."""
    text = (FORMATS / "vbyte.md").read_text()
    section = text[text.index("## StreamVByte"):]
    m = re.search(r"Example, n = (\d+), x = \[([^\]]+)\]:\s*```\s*control:([^\n]*)\n\s*data:([^\n]*)",
                  section)
    assert m, "the StreamVByte example moved"
    n, xs, control, data = m.groups()
    x = [_number(v) for v in xs.split(",")]
    assert len(x) == int(n)
    return x, _hex(control.split("codes")[0]), _hex(data)


def test_svbyte_example_byte_for_byte():
    x, control, data = _svbyte_example()
    assert control == bytes([0xE4, 0x00]) and len(data) == 11  # parsed whole
    assert _codec("svbyte").encode(x, 0) == control + data
    assert fd.decode("svbyte", control + data, len(x)) == (x, len(control + data))
    assert _native_decode("svbyte", control + data, len(x)) == (x, len(control + data))
    # svbyte-delta stores the same integers as gaps from prev
    prev = 1000
    values = list(np.cumsum([prev] + x, dtype=np.uint64)[1:] & fd.MASK32)
    assert _codec("svbyte-delta").encode(values, prev) == control + data
    assert _native_decode("svbyte-delta", control + data, len(x), prev)[0] == values


def _pfor_example() -> tuple[list[int], bytes, int]:
    """pfor.md, section "Block layout": "Example: 256 gaps, all 1 except gap 40
    (= 300) and gap 200 (= 5): ... `0x81` ...: 39 bytes in all." Returns the
    gaps, the documented bytes before the low bits, and the total length."""
    text = " ".join((FORMATS / "pfor.md").read_text().split())
    m = re.search(r"Example: (\d+) gaps, all (\d+) except gap (\d+) \(= (\d+)\) and gap (\d+) "
                  r"\(= (\d+)\): (.*?) then (\d+) bytes of low bits: (\d+) bytes in all", text)
    assert m, "the PFor example moved"
    n, fill, i, vi, j, vj, head, nlow, total = m.groups()
    gaps = [int(fill)] * int(n)
    gaps[int(i)], gaps[int(j)] = int(vi), int(vj)
    quoted = re.findall(r"`(0x[0-9A-F]{2}(?: 0x[0-9A-F]{2})*)`", head)
    head_bytes = bytes(int(byte, 16) for q in quoted for byte in q.split())
    assert len(head_bytes) + int(nlow) == int(total)
    return gaps, head_bytes, int(total)


def _pack(values: list[int], b: int, vertical: bool) -> bytes:
    """`low` by pfor.md's "The two layouts of `low`" (n = 256 here)."""
    mask = (1 << b) - 1
    if not vertical:
        bits = sum((v & mask) << (i * b) for i, v in enumerate(values))
        return bits.to_bytes((len(values) * b + 7) // 8, "little")
    lanes = [sum((values[8 * k + j] & mask) << (k * b) for k in range(len(values) // 8))
             for j in range(8)]
    rows = len(values) // 8 * b // 32
    return b"".join(((lanes[j] >> (32 * r)) & fd.MASK32).to_bytes(4, "little")
                    for r in range(rows) for j in range(8))


def _pfor256_example() -> tuple[bytes, bytes]:
    """pfor.md's second example ("the 256 flavours"): the bytes of the
    pfor-delta256 block and of the pfor256 block, of the first example's
    numbers."""
    text = " ".join((FORMATS / "pfor.md").read_text().split())
    m = re.search(r"Example \(the 256 flavours\): (.*?) then 0 bytes of low bits: (\d+) bytes "
                  r"in all\. The same 256 numbers as frequencies in `pfor256` .*?: `([0-9A-Fx ]+)`, "
                  r"(\d+) bytes", text)
    assert m, "the second PFor example moved"
    delta_text, n_delta, freq_text, n_freq = m.groups()
    quoted = re.findall(r"`(0x[0-9A-F]{2}(?: 0x[0-9A-F]{2})*)`", delta_text)
    d = bytes(int(byte, 16) for q in quoted for byte in q.split())
    f = bytes(int(byte, 16) for byte in freq_text.split())
    assert (len(d), len(f)) == (int(n_delta), int(n_freq))
    return d, f


@pytest.mark.parametrize("name", ["pfor-delta256", "pfor256"])
def test_pfor256_example_byte_for_byte(name):
    """Index format 4: the 256 flavours store values minus one."""
    gaps, _, _ = _pfor_example()
    delta_block, freq_block = _pfor256_example()
    assert delta_block == bytes([0x80, 0x03, 0x00, 0x28, 0xC8, 0x01, 0xAB, 0x02, 0x04])
    want = delta_block if name == "pfor-delta256" else freq_block
    c = _codec(name)
    values = list(np.cumsum(gaps, dtype=np.uint64) & fd.MASK32) if c.delta else gaps
    assert c.encode(values, 0) == want
    assert fd.decode(name, want, len(gaps)) == (values, len(want))
    assert _native_decode(name, want, len(gaps)) == (values, len(want))


def test_format_3_index_is_refused(tmp_path):
    """Blocks of format 3 mean other numbers: an index of version 3 must be
    rebuilt, not read."""
    from tierlab.core.errors import TierlabError
    from tierlab.engine.index import FILES, Index

    (tmp_path / "c.txt").write_text("a b\nb c\n")
    build(tmp_path / "c.txt", tmp_path / "idx", codec="pfor-delta256")
    for f in FILES:
        ref.reseal(tmp_path / "idx" / f, version=3)
    with pytest.raises(TierlabError, match="format version 3; rebuild with tierlab index build"):
        Index(tmp_path / "idx")


@pytest.mark.parametrize("name, vertical", [("pfor-delta", False), ("pfor", False)])
def test_pfor_example_byte_for_byte(name, vertical):
    gaps, head, total = _pfor_example()
    assert head == bytes([0x81, 0x02, 0x28, 0xC8, 0x96, 0x01, 0x02])  # parsed whole
    c = _codec(name)
    values = list(np.cumsum(gaps, dtype=np.uint64) & fd.MASK32) if c.delta else gaps
    enc = c.encode(values, 0)
    want = head + _pack(gaps, head[0] & 0x3F, vertical)
    assert len(want) == total
    assert enc == want
    assert fd.decode(name, enc, len(gaps)) == (values, total)
    assert _native_decode(name, enc, len(gaps)) == (values, total)


def test_the_freq_codecs_are_the_documented_ones():
    assert {c.name: c.freq.name for c in native.codecs()} == fd.FREQ


# ---- 2. the independent decoders against the native ones -------------------------------

def _small_corpus() -> bytes:
    """Terms from everywhere (1 posting, a few, more than 256), DIDs dense and
    sparse, frequencies 1 to hundreds: every block kind of every codec."""
    rng = random.Random(11)
    lines = []
    for d in range(1200):
        words = [f"w{int(300 ** rng.random())}" for _ in range(rng.randint(1, 20))]
        if d % 3 == 0:
            words += ["third"] * rng.choice((1, 1, 2, 40))
        if d % 97 == 0:
            words += ["rare", "heavy " * rng.randint(100, 400)]
        if 500 <= d < 520:
            words.append("cluster")
        lines.append(" ".join(words))
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def small_indexes(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    (d / "c.txt").write_bytes(_small_corpus())
    out = {}
    for c in native.codecs():
        for block in (128, 256):
            build(d / "c.txt", d / f"{c.name}-{block}", codec=c.name, block_size=block)
            out[c.name, block] = d / f"{c.name}-{block}"
    return out


@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("codec", [c.name for c in native.codecs()])
def test_every_index_block_decodes_alike(small_indexes, codec, block):
    freq = fd.FREQ[codec]
    seen = {"full": 0, "partial": 0}
    for term, _, blocks, _ in ref.blocks(small_indexes[codec, block]):
        for blk in blocks:
            n = blk["n"]
            seen["full" if n == block else "partial"] += 1
            for name, data, prev in ((codec, blk["did"], blk["prev"]), (freq, blk["freq"], 0)):
                want = _native_decode(name, data, n, prev)
                assert fd.decode(name, data, n, prev) == want, (term, name, n)
                assert want[1] == len(data)
    assert seen["full"] and seen["partial"]


def _random_values(rng: random.Random, n: int) -> list[int]:
    kind = rng.randrange(5)
    if kind == 0:
        return [rng.getrandbits(rng.randint(0, 32)) for _ in range(n)]
    width = rng.randint(0, 32)
    vals = [rng.getrandbits(width) for _ in range(n)]
    if kind == 1:  # a few large exceptions
        for _ in range(rng.randint(1, 6)):
            vals[rng.randrange(n)] = rng.getrandbits(32)
    elif kind == 2:  # constant
        vals = [vals[0]] * n
    elif kind == 3:  # many exceptions of a narrow width
        vals = [v if rng.random() < 0.7 else v | (rng.getrandbits(4) << width) & fd.MASK32
                for v in vals]
    return vals


@pytest.mark.parametrize("name", sorted(fd.CODECS))
def test_random_and_mutated_blocks_decode_alike(name):
    """Random blocks of every size: the native encoding decodes to the values
    with both. Mutated and cut blocks: both accept with the same values and
    length, or both refuse (the documents' decoding rules are complete)."""
    rng = random.Random(name)
    c = _codec(name)
    agree = refused = 0
    for trial in range(150):
        n = rng.choice((1, 2, 3, 4, 5, 7, 8, 9, 31, 33, 100, 127, 128, 129, 200, 255, 256))
        vals = _random_values(rng, n)
        prev = rng.getrandbits(32) if c.delta else 0
        if c.delta:
            vals = list(np.cumsum([prev] + vals, dtype=np.uint64)[1:] & fd.MASK32)
        enc = c.encode(vals, prev)
        assert fd.decode(name, enc, n, prev) == (vals, len(enc)), (n, trial)
        for _ in range(4):
            bad = bytearray(enc)
            how = rng.randrange(3)
            if how == 0 and bad:
                bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
            elif how == 1 and bad:
                bad[rng.randrange(len(bad))] = rng.getrandbits(8)
            else:
                bad = bad[:rng.randrange(len(bad) + 1)]
            bad = bytes(bad)
            try:
                want = _native_decode(name, bad, n, prev)
            except native.CorruptBlock:
                with pytest.raises(fd.Corrupt):
                    fd.decode(name, bad, n, prev)
                refused += 1
                continue
            assert fd.decode(name, bad, n, prev) == want, (bad.hex(), n, prev)
            agree += 1
    assert refused and agree  # both sides of the rule were exercised
