"""StreamVByte format compatibility: tierlab's `svbyte-delta` and its freq codec
`svbyte` against the reference implementation, Debian's libstreamvbyte
(package libstreamvbyte-dev), byte for byte and decoder against decoder.

kernels/formats/vbyte.md promises the format of Lemire et al. (IPL 2018); this
is the check. Every case runs on the SIMD path and on the forced scalar path.
"""
from __future__ import annotations

import ctypes.util
import glob

import numpy as np
import pytest

from tierlab.core import native

U32 = 0xFFFFFFFF
MAX_BLOCK = 256
# The reference decoder may load a little past a block's last byte.
SLACK = 64


def _find_libstreamvbyte() -> str | None:
    name = ctypes.util.find_library("streamvbyte")
    if name:
        return name
    hits = sorted(glob.glob("/usr/lib/*/libstreamvbyte.so*") + glob.glob("/usr/lib/libstreamvbyte.so*")
                  + glob.glob("/usr/local/lib/libstreamvbyte.so*"))
    return hits[0] if hits else None


@pytest.fixture(scope="module")
def ref():
    """(ffi, lib) of libstreamvbyte in cffi ABI mode; skips when it is absent."""
    cffi = pytest.importorskip("cffi")
    path = _find_libstreamvbyte()
    if path is None:
        pytest.skip("libstreamvbyte not found (install Debian's libstreamvbyte-dev): "
                    "no reference to check the StreamVByte format against")
    ffi = cffi.FFI()
    # Signatures from /usr/include/streamvbyte.h and streamvbytedelta.h.
    ffi.cdef("""
        size_t streamvbyte_encode(const uint32_t *in, uint32_t length, uint8_t *out);
        size_t streamvbyte_decode(const uint8_t *in, uint32_t *out, uint32_t length);
        size_t streamvbyte_delta_encode(const uint32_t *in, uint32_t length, uint8_t *out,
                                        uint32_t prev);
        size_t streamvbyte_delta_decode(const uint8_t *in, uint32_t *out, uint32_t length,
                                        uint32_t prev);
    """)
    try:
        lib = ffi.dlopen(path)
    except OSError as e:
        pytest.skip(f"libstreamvbyte at {path} cannot be loaded: {e}")
    return ffi, lib


@pytest.fixture(scope="module")
def codecs():
    """(svbyte-delta, svbyte): the registry entry and its freq codec."""
    delta = native.codec("svbyte-delta")
    plain = delta.freq
    assert delta.delta and plain.name == "svbyte" and not plain.delta
    return delta, plain


@pytest.fixture(params=["simd", "scalar"])
def path(request):
    """Run the test on the SIMD decoder and again with the scalar path forced."""
    native.force_scalar(request.param == "scalar")
    try:
        yield request.param
    finally:
        native.force_scalar(False)


# -- the reference, through cffi --------------------------------------------

def ref_encode(ref, values: np.ndarray, prev: int | None) -> bytes:
    """streamvbyte_encode (prev None) or streamvbyte_delta_encode(prev)."""
    ffi, lib = ref
    vals = np.ascontiguousarray(values, dtype=np.uint32)
    n = len(vals)
    out = ffi.new("uint8_t[]", (n + 3) // 4 + 4 * n + SLACK)
    src = ffi.from_buffer("uint32_t[]", vals) if n else ffi.new("uint32_t[]", 1)
    if prev is None:
        got = lib.streamvbyte_encode(src, n, out)
    else:
        got = lib.streamvbyte_delta_encode(src, n, out, prev)
    return bytes(ffi.buffer(out, got))


def ref_decode(ref, data: bytes, n: int, prev: int | None) -> tuple[np.ndarray, int]:
    """streamvbyte_decode / streamvbyte_delta_decode; (values, bytes read)."""
    ffi, lib = ref
    src = ffi.new("uint8_t[]", bytes(data) + b"\0" * SLACK)
    out = np.zeros(max(n, 1) + 16, dtype=np.uint32)
    dst = ffi.from_buffer("uint32_t[]", out)
    if prev is None:
        got = lib.streamvbyte_decode(src, dst, n)
    else:
        got = lib.streamvbyte_delta_decode(src, dst, n, prev)
    return out[:n].copy(), int(got)


def gaps_of(values: np.ndarray, prev: int) -> np.ndarray:
    """The wrapping gaps the delta format stores (tierlab.h)."""
    v = np.asarray(values, dtype=np.uint32)
    return np.diff(v, prepend=np.uint32(prev)).astype(np.uint32)


# -- inputs -------------------------------------------------------------------

def _magnitudes(rng, n: int) -> np.ndarray:
    """Values of every byte length, the 2^8k boundaries and 0 / 0xFFFFFFFF."""
    edges = np.array([0, 1, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, U32 - 1, U32],
                     dtype=np.uint64)
    bits = rng.integers(0, 33, size=n)
    rand = rng.integers(0, 1 << 32, size=n, dtype=np.uint64) & ((np.uint64(1) << bits.astype(np.uint64)) - np.uint64(1))
    pick = rng.random(n) < 0.25
    rand[pick] = edges[rng.integers(0, len(edges), size=int(pick.sum()))]
    return rand.astype(np.uint32)


def _sorted(rng, n: int, prev: int, avg_gap: int) -> np.ndarray:
    """A sorted DID list continuing after prev (gaps >= 1, mean ~avg_gap)."""
    g = rng.integers(1, 2 * avg_gap, size=n, dtype=np.uint64)
    return ((np.cumsum(g) + np.uint64(prev)) & np.uint64(U32)).astype(np.uint32)


def _cases():
    """(id, values, prev): every length 0..256 and every kind of value."""
    rng = np.random.default_rng(20180101)
    out = []
    for n in range(MAX_BLOCK + 1):
        prev = int(rng.integers(0, 1 << 20))
        kind = n % 4
        if kind == 0:
            vals = _sorted(rng, n, prev, 32)
        elif kind == 1:
            vals = _magnitudes(rng, n)
            prev = int(rng.integers(0, 1 << 32))
        elif kind == 2:
            vals = _sorted(rng, n, prev, int(rng.choice([1, 300, 70000, 1 << 25])))
        else:
            vals = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
            prev = int(rng.integers(0, 1 << 32))
        out.append((f"n{n}-k{kind}", vals, prev))
    # Explicit edges: all-max (every gap 0 but the first), the wrap-around, prev = max.
    out.append(("all-max", np.full(256, U32, dtype=np.uint32), 0))
    out.append(("wrap", np.array([U32, 0, 1, U32, 5], dtype=np.uint32), U32))
    out.append(("zeros", np.zeros(256, dtype=np.uint32), 0))
    out.append(("prev-max", np.array([3, 4, 0x10000, U32], dtype=np.uint32), U32))
    return out


CASES = _cases()
CASE_IDS = [c[0] for c in CASES]


# -- the checks ---------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_delta_bytes_and_cross_decode(ref, codecs, path, case):
    """svbyte-delta == streamvbyte_delta_encode byte for byte, and each side
    decodes the other's bytes (consuming all of them)."""
    _, vals, prev = case
    delta, _ = codecs
    n = len(vals)
    ours = delta.encode(vals, prev)
    theirs = ref_encode(ref, vals, prev)
    assert ours == theirs, f"{path}: svbyte-delta bytes differ from streamvbyte_delta_encode"

    got, used = ref_decode(ref, ours, n, prev)
    assert used == len(ours)
    np.testing.assert_array_equal(got, vals)

    got, used = delta.decode(theirs, n, prev)
    assert used == len(theirs)
    np.testing.assert_array_equal(got, vals)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_plain_bytes_and_cross_decode(ref, codecs, path, case):
    """svbyte (the freq codec, never delta) == streamvbyte_encode byte for
    byte, both ways decodable; and svbyte-delta is exactly svbyte of the gaps."""
    _, vals, prev = case
    delta, plain = codecs
    n = len(vals)
    ours = plain.encode(vals, prev)  # prev must be ignored
    theirs = ref_encode(ref, vals, None)
    assert ours == theirs, f"{path}: svbyte bytes differ from streamvbyte_encode"
    assert plain.encode(vals, 0) == ours

    got, used = ref_decode(ref, ours, n, None)
    assert used == len(ours)
    np.testing.assert_array_equal(got, vals)

    got, used = plain.decode(theirs, n, prev)
    assert used == len(theirs)
    np.testing.assert_array_equal(got, vals)

    # The gaps, computed here, through the reference's non-delta encoder.
    assert delta.encode(vals, prev) == ref_encode(ref, gaps_of(vals, prev), None)


def test_documented_example(ref, codecs, path):
    """The worked example of kernels/formats/vbyte.md."""
    delta, plain = codecs
    vals = np.array([1, 300, 70000, U32, 5], dtype=np.uint32)
    expect = bytes.fromhex("e400" "01" "2c01" "701101" "ffffffff" "05")
    assert plain.encode(vals) == expect
    assert ref_encode(ref, vals, None) == expect
    assert delta.encode(np.cumsum(vals, dtype=np.uint32), 0) == expect


def test_trailing_bytes_are_left_alone(ref, codecs, path):
    """A block followed by other bytes (as blocks sit in dids.bin): both
    decoders read exactly the block."""
    delta, _ = codecs
    rng = np.random.default_rng(7)
    vals = _sorted(rng, 256, 1000, 32)
    block = ref_encode(ref, vals, 1000)
    got, used = delta.decode(block + bytes(rng.integers(0, 256, 100, dtype=np.uint8)), 256, 1000)
    assert used == len(block)
    np.testing.assert_array_equal(got, vals)


def test_random_lists_long_run(ref, codecs, path):
    """Many random blocks of the benchmark's shape (sorted, mean gap 32, and
    clustered runs of gap 1 with rare long jumps), block after block with
    prev = the previous block's last value, as the index stores them."""
    delta, plain = codecs
    rng = np.random.default_rng(4242)
    for avg in (1, 32, 4096):
        gaps = rng.integers(1, 2 * avg, size=256 * 40, dtype=np.uint64)
        gaps[rng.random(len(gaps)) < 0.02] = 1 << 20  # rare long jumps
        dids = (np.cumsum(gaps) & np.uint64(U32)).astype(np.uint32)
        prev = 0
        for b in range(0, len(dids), 256):
            blk = dids[b:b + 256]
            ours = delta.encode(blk, prev)
            assert ours == ref_encode(ref, blk, prev)
            got, used = ref_decode(ref, ours, len(blk), prev)
            assert used == len(ours)
            np.testing.assert_array_equal(got, blk)
            freqs = np.minimum(rng.zipf(2.5, size=len(blk)), 512).astype(np.uint32)
            assert plain.encode(freqs) == ref_encode(ref, freqs, None)
            prev = int(blk[-1])
