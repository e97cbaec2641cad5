"""CRC-32C, the checksum of every index region (kernels/src/index/crc32c.c):
the published check values, the hardware paths (SSE4.2, and AVX2 with
VPCLMULQDQ for long runs) and the table path giving the same value for every
length and alignment, chaining, and an
index written on either path byte for byte the same."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "index"))
import reference as ref  # noqa: E402
from index_helpers import random_corpus, write  # noqa: E402

from tierlab.core.native import ffi_lib  # noqa: E402

# RFC 3720 (iSCSI), appendix B.4, and the usual check value of "123456789"
VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0),
]


@pytest.fixture(params=["best", "scalar"])
def lib(request):
    _, lib = ffi_lib()
    lib.tierlab_force_scalar(1 if request.param == "scalar" else 0)
    yield lib
    lib.tierlab_force_scalar(0)


def _crc(lib, data: bytes, crc: int = 0) -> int:
    return lib.tierlab_crc32c(crc, data, len(data))


@pytest.mark.parametrize("data, want", VECTORS)
def test_check_values(lib, data, want):
    assert _crc(lib, data) == want
    assert ref.crc32c(data) == want


def test_paths_agree_on_every_length_and_alignment():
    _, lib = ffi_lib()
    data = os.urandom(70000)
    cases = ([(a, n) for a in range(8) for n in range(0, 1200)]  # every short path
             + [(a, n) for a in (0, 5) for n in range(1200, 6000, 37)]  # long runs, folded
             + [(3, 4997), (0, 20000), (1, 69999)])
    got = {}
    for scalar in (0, 1):
        lib.tierlab_force_scalar(scalar)
        got[scalar] = [_crc(lib, data[a:a + n]) for a, n in cases]
    lib.tierlab_force_scalar(0)
    assert got[0] == got[1]
    assert [ref.crc32c(data[a:a + n]) for a, n in cases[::97]] == got[0][::97]


def test_chain(lib):
    """Continuing a CRC over more bytes is the CRC of the whole: what the
    running block CRCs of the skip lists rest on."""
    data = os.urandom(20000)
    whole = _crc(lib, data)
    for cut in (0, 1, 7, 48, 383, 384, 385, 1000, 19999, 20000):
        assert _crc(lib, data[cut:], _crc(lib, data[:cut])) == whole
        assert ref.crc32c(data[cut:cut + 500], ref.crc32c(data[:cut])) == ref.crc32c(data[:cut + 500])


def test_index_bytes_do_not_depend_on_the_path(tmp_path):
    _, lib = ffi_lib()
    from tierlab.engine.index import FILES, build

    corpus = write(tmp_path / "c.txt", random_corpus(seed=5, docs=800))
    for scalar in (0, 1):
        lib.tierlab_force_scalar(scalar)
        try:
            build(corpus, tmp_path / f"idx{scalar}", codec="pfor-delta256", block_size=128)
        finally:
            lib.tierlab_force_scalar(0)
    for f in FILES:
        assert (tmp_path / "idx0" / f).read_bytes() == (tmp_path / "idx1" / f).read_bytes(), f
