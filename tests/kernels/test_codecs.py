"""Properties of every codec in the registry and every configuration's freq
codec (tierlab.h's contract), through the Python binding. Codecs are
collected from the library, so a new codec needs no edit here.

The exhaustive grid (every length class x every bit width x fixed patterns,
under ASan) is kernels/tests/unit.c; here Hypothesis searches around it and
shrinks what it finds. Byte-level compatibility with the reference
StreamVByte is tests/kernels/test_streamvbyte_compat.py.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from tierlab.core import native
from tierlab.core.errors import TierlabError

U32 = 0xFFFFFFFF
MAX_BLOCK = 256
# The lengths where SIMD groups, PFor blocks and the block size end.
EDGE_LENGTHS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
                255, 256]


def _collect() -> dict[str, native.Codec]:
    """Registry entries, then their freq codecs, by name (first occurrence)."""
    out: dict[str, native.Codec] = {}
    for c in native.codecs():
        out.setdefault(c.name, c)
        out.setdefault(c.freq.name, c.freq)
    return out


try:
    CODECS = _collect()
except TierlabError as e:  # the C library is not built
    pytest.skip(f"the codec tests need the C kernels: {e}", allow_module_level=True)

NAMES = sorted(CODECS)


@contextmanager
def scalar_path(on: bool):
    native.force_scalar(on)
    try:
        yield
    finally:
        native.force_scalar(False)


# --- blocks --------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    values: np.ndarray  # uint32
    prev: int
    how: str

    def __repr__(self) -> str:
        head = ", ".join(str(int(x)) for x in self.values[:12])
        more = ", ..." if len(self.values) > 12 else ""
        return f"Block({self.how}, n={len(self.values)}, prev={self.prev}, values=[{head}{more}])"


def _below(rng: np.random.Generator, width: int, size: int) -> np.ndarray:
    """Uniform values in [0, 2^width)."""
    if width == 0:
        return np.zeros(size, dtype=np.uint32)
    return rng.integers(0, 1 << width, size=size, dtype=np.uint64).astype(np.uint32)


def _wide(rng: np.random.Generator, width: int, size: int) -> np.ndarray:
    """Values exactly `width` bits wide (top bit set), so a block needs that width."""
    top = np.uint32(1 << (width - 1)) if width else np.uint32(0)
    return _below(rng, width, size) | top


def _cumulate(gaps: np.ndarray, prev: int) -> np.ndarray:
    """prev + running sum of gaps, wrapping mod 2^32 (what delta codecs store back)."""
    return ((np.cumsum(gaps, dtype=np.uint64) + prev) & U32).astype(np.uint32)


SHAPES = ["unsorted", "sorted", "runs", "sorted-runs", "max", "exceptions", "sorted-exceptions",
          "drawn"]


@st.composite
def blocks(draw, max_len: int = MAX_BLOCK) -> Block:
    """One block: a length (edges favoured), a bit width 0..32, a shape and a prev.
    Bulk values come from a drawn seed (fast for 256 values); "drawn" blocks are
    drawn value by value so Hypothesis can shrink them one by one."""
    n = draw(st.one_of(st.sampled_from([x for x in EDGE_LENGTHS if x <= max_len]),
                       st.integers(0, max_len)))
    width = draw(st.integers(0, 32))
    shape = draw(st.sampled_from(SHAPES))
    prev = draw(st.one_of(st.just(0), st.integers(0, U32), st.integers(U32 - 64, U32)))
    if shape == "drawn":
        n = min(n, 40)
        values = np.array(draw(st.lists(st.integers(0, (1 << width) - 1), min_size=n, max_size=n)),
                          dtype=np.uint32)
        return Block(values, prev, f"drawn w={width}")
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if shape == "unsorted":
        values = _below(rng, width, n)
    elif shape == "sorted":
        values = _cumulate(_below(rng, width, n), prev)
    elif shape in ("runs", "sorted-runs"):
        # Runs of equal values (or equal gaps, zero gaps among them).
        lens = rng.integers(1, 41, size=n + 1)
        run_values = _below(rng, width, n + 1)
        if shape == "sorted-runs":
            run_values[rng.random(n + 1) < 0.3] = 0
        values = np.repeat(run_values, lens)[:n].astype(np.uint32)
        if shape == "sorted-runs":
            values = _cumulate(values, prev)
    elif shape == "max":
        values = np.full(n, (1 << width) - 1, dtype=np.uint32)
    else:  # exceptions: mostly 0..3 with a drawn share of exactly-w-bit values
        share = draw(st.sampled_from([1 / 64, 1 / 16, 1 / 8, 1 / 3]))
        values = _below(rng, min(width, 2), n)
        hit = rng.random(n) < share
        values[hit] = _wide(rng, width, int(hit.sum()))
        if shape == "sorted-exceptions":
            values = _cumulate(values, prev)
    return Block(values, prev, f"{shape} w={width} seed={seed}")


def _encode_both(codec: native.Codec, b: Block) -> bytes:
    """The encoding, checked identical on the SIMD and the forced-scalar path."""
    with scalar_path(False):
        simd = codec.encode(b.values, b.prev)
    with scalar_path(True):
        scalar = codec.encode(b.values, b.prev)
    assert simd == scalar, f"{codec.name}: SIMD and scalar encodings differ"
    return simd


# --- properties ----------------------------------------------------------------

# A parametrize mark, not a fixture: Hypothesis refuses function-scoped fixtures.
each_codec = pytest.mark.parametrize("codec", [CODECS[n] for n in NAMES], ids=NAMES)


@each_codec
@given(b=blocks())
def test_round_trip_on_both_paths(codec, b):
    enc = _encode_both(codec, b)
    n = len(b.values)
    assert len(enc) <= codec.max_encoded_bytes(n)
    assert (len(enc) == 0) <= (n == 0), "encode wrote 0 bytes for a non-empty block"
    for scalar in (False, True):
        with scalar_path(scalar):
            got, used = codec.decode(enc, n, b.prev)
            assert used == len(enc)
            np.testing.assert_array_equal(got, b.values)
            # Blocks sit back to back in a file: bytes after the block are not read.
            got, used = codec.decode(enc + b"\xff\x00\x81" * 7, n, b.prev)
            assert used == len(enc)
            np.testing.assert_array_equal(got, b.values)


@each_codec
@given(b=blocks(), shift=st.integers(1, U32))
def test_prev_is_added_by_delta_codecs_and_ignored_by_others(codec, b, shift):
    """tierlab.h: a delta codec rebuilds prev + wrapping gaps, so decoding with
    another prev shifts every value by the difference."""
    enc = codec.encode(b.values, b.prev)
    got, _ = codec.decode(enc, len(b.values), (b.prev + shift) & U32)
    expect = (b.values.astype(np.uint64) + (shift if codec.delta else 0)) & U32
    np.testing.assert_array_equal(got, expect.astype(np.uint32))


@each_codec
@given(b=blocks())
def test_every_strict_prefix_is_corrupt(codec, b):
    """The block is exactly the bytes encode wrote, so any fewer bytes cannot
    hold n values: ECORRUPT (CorruptBlock), on both paths."""
    enc = codec.encode(b.values, b.prev)
    n = len(b.values)
    for scalar in (False, True):
        with scalar_path(scalar):
            for cut in range(len(enc)):
                with pytest.raises(native.CorruptBlock):
                    codec.decode(enc[:cut], n, b.prev)


@each_codec
@given(data=st.binary(max_size=1400), n=st.integers(0, MAX_BLOCK), prev=st.integers(0, U32))
def test_random_bytes_are_corrupt_or_n_values(codec, data, n, prev):
    results = []
    for scalar in (False, True):
        with scalar_path(scalar):
            try:
                got, used = codec.decode(data, n, prev)
            except native.CorruptBlock:
                results.append(None)
                continue
            assert len(got) == n and 0 <= used <= len(data)
            results.append((used, got.tolist()))
    assert results[0] == results[1], "the SIMD and scalar decoders disagree on these bytes"


@each_codec
@given(b=blocks(), data=st.data())
def test_mutated_blocks_are_corrupt_or_n_values(codec, b, data):
    """A valid block with one byte changed: the bytes may still be valid, but
    decode stays within them and both paths agree."""
    enc = bytearray(codec.encode(b.values, b.prev))
    assume(enc)
    i = data.draw(st.integers(0, len(enc) - 1), label="byte")
    enc[i] ^= data.draw(st.integers(1, 255), label="xor")
    results = []
    for scalar in (False, True):
        with scalar_path(scalar):
            try:
                got, used = codec.decode(bytes(enc), len(b.values), b.prev)
            except native.CorruptBlock:
                results.append(None)
                continue
            assert used <= len(enc)
            results.append((used, got.tolist()))
    assert results[0] == results[1]


@given(b=blocks())
def test_every_codec_agrees_on_the_same_block(b):
    """Cross-codec agreement: each codec gives back the same values, so a
    configuration can be swapped for another without changing results."""
    decoded = {}
    for name in NAMES:
        codec = CODECS[name]
        got, _ = codec.decode(codec.encode(b.values, b.prev), len(b.values), b.prev)
        decoded[name] = got.tolist()
    want = b.values.tolist()
    assert {name: v == want for name, v in decoded.items()} == {name: True for name in NAMES}


@each_codec
@pytest.mark.parametrize("n", [MAX_BLOCK + 1, 1000])
def test_blocks_longer_than_256_are_invalid(codec, n):
    with pytest.raises(TierlabError) as e:
        codec.encode(np.zeros(n, dtype=np.uint32))
    assert not isinstance(e.value, native.CorruptBlock)
    with pytest.raises(TierlabError) as e:
        codec.decode(bytes(8 * n), n)
    assert not isinstance(e.value, native.CorruptBlock)


def test_freq_codecs_are_not_delta_coded():
    for c in native.codecs():
        assert not c.freq.delta, f"{c.name}: freq blocks would be delta-coded by {c.freq.name}"
        if not c.delta:
            assert c.freq.name == c.name


@each_codec
def test_impl_is_scalar_when_forced(codec):
    assert codec.impl in ("simd", "scalar")
    with scalar_path(True):
        assert codec.impl == "scalar"


def test_unknown_codec_lists_the_known_ones():
    with pytest.raises(TierlabError, match="pfor-delta256"):
        native.codec("pfor-delta512")
