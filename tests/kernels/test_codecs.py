"""Property tests of every codec in the registry and of each configuration's
freq codec, through the Python binding (the C unit tests cover the same
contract exhaustively on fixed data; Hypothesis explores and shrinks)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierlab import native
from tierlab.errors import TierlabError

try:
    CODECS = {c.name: c for c in native.codecs()}
    for c in list(CODECS.values()):
        CODECS.setdefault(c.freq.name, c.freq)
except TierlabError as e:  # the library is not built
    pytest.skip(f"{e}", allow_module_level=True)

NAMES = sorted(CODECS)
MAX = 2**32 - 1


@st.composite
def blocks(draw):
    """(values, prev): a block of 0..256 values drawn to cover every bit width,
    sorted gap lists, runs of equal values, max uint32 and exception-heavy mixes."""
    n = draw(st.integers(0, 256))
    width = draw(st.integers(0, 32))
    top = (1 << width) - 1
    kind = draw(st.sampled_from(["random", "sorted", "runs", "max", "exceptions"]))
    prev = draw(st.integers(0, MAX))
    if kind == "random":
        vals = draw(st.lists(st.integers(0, top), min_size=n, max_size=n))
    elif kind == "sorted":
        gaps = draw(st.lists(st.integers(0, top), min_size=n, max_size=n))
        vals = list((prev + np.cumsum(np.array(gaps, dtype=np.uint64))) % 2**32) if n else []
    elif kind == "runs":
        vals = []
        while len(vals) < n:
            vals += [draw(st.integers(0, top))] * draw(st.integers(1, 40))
        vals = vals[:n]
    elif kind == "max":
        vals = [top] * n
    else:
        small = draw(st.lists(st.integers(0, 7), min_size=n, max_size=n))
        vals = [v if draw(st.booleans()) or v else top for v in small]
    return np.array(vals, dtype=np.uint32), prev


PATHS = pytest.mark.parametrize("scalar", [False, True], ids=["simd", "scalar"])


@pytest.mark.parametrize("name", NAMES)
@given(block=blocks())
def test_round_trip(name, block):
    vals, prev = block
    c = CODECS[name]
    enc = c.encode(vals, prev)
    assert len(enc) <= c.max_encoded_bytes(len(vals))
    out, used = c.decode(enc, len(vals), prev)
    assert used == len(enc)
    assert np.array_equal(out, vals)


@pytest.mark.parametrize("name", NAMES)
@given(block=blocks())
def test_scalar_and_simd_agree(name, block):
    vals, prev = block
    c = CODECS[name]
    try:
        native.force_scalar(True)
        scalar = c.encode(vals, prev)
        out_scalar, _ = c.decode(scalar, len(vals), prev)
    finally:
        native.force_scalar(False)
    simd = c.encode(vals, prev)
    assert simd == scalar
    assert np.array_equal(c.decode(simd, len(vals), prev)[0], out_scalar)


@given(block=blocks())
def test_all_codecs_agree(block):
    """Cross-codec agreement: every codec gives back the same values."""
    vals, prev = block
    decoded = {n: CODECS[n].decode(CODECS[n].encode(vals, prev), len(vals), prev)[0]
               for n in NAMES}
    for n, out in decoded.items():
        assert np.array_equal(out, vals), n


@PATHS
@pytest.mark.parametrize("name", NAMES)
@given(block=blocks(), data=st.data())
def test_strict_prefix_is_corrupt(name, scalar, block, data):
    vals, prev = block
    c = CODECS[name]
    enc = c.encode(vals, prev)
    if not enc:
        return
    cut = data.draw(st.integers(0, len(enc) - 1))
    native.force_scalar(scalar)
    try:
        with pytest.raises(native.CorruptBlock):
            c.decode(enc[:cut], len(vals), prev)
    finally:
        native.force_scalar(False)


@PATHS
@pytest.mark.parametrize("name", NAMES)
@given(junk=st.binary(max_size=1200), n=st.integers(0, 256), prev=st.integers(0, MAX))
def test_garbage_never_crashes(name, scalar, junk, n, prev):
    c = CODECS[name]
    native.force_scalar(scalar)
    try:
        out, used = c.decode(junk, n, prev)
    except native.CorruptBlock:
        return
    finally:
        native.force_scalar(False)
    assert len(out) == n and 0 <= used <= len(junk)


@pytest.mark.parametrize("name", NAMES)
def test_too_long_block_is_refused(name):
    with pytest.raises(TierlabError):
        CODECS[name].encode(np.zeros(257, dtype=np.uint32))


def test_delta_configurations_have_plain_freq_codecs():
    for c in native.codecs():
        assert not c.freq.delta
        if not c.delta:
            assert c.freq.name == c.name


def test_unknown_codec_lists_the_known_ones():
    with pytest.raises(TierlabError, match="pfor-delta256"):
        native.codec("pfor-delta512")
