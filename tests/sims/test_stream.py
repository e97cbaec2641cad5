"""The memory-side stream file (tierlab_mem_request records, tierlab.h)."""
import struct

import numpy as np
import pytest

from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import stream as st

from sims_inputs import mixed_stream


def test_record_layout_matches_tierlab_h(repo_root):
    """24 bytes, fields in the order of the C struct."""
    h = (repo_root / "kernels/include/tierlab.h").read_text()
    body = h[h.index("typedef struct tierlab_mem_request"):]
    body = body[:body.index("} tierlab_mem_request;")]
    fields = [line.split()[1].rstrip(";") for line in body.splitlines()[1:] if ";" in line]
    assert fields == list(st.DTYPE.names)
    assert st.DTYPE.itemsize == 24


def test_round_trip_bare_and_with_header(tmp_path):
    recs = mixed_stream()
    st.write(tmp_path / "a", recs)
    assert (st.read(tmp_path / "a") == recs).all()
    hdr = st.MAGIC + struct.pack("<I", 32) + bytes(20)
    (tmp_path / "b").write_bytes(hdr + recs.tobytes())
    assert (st.read(tmp_path / "b") == recs).all()


@pytest.mark.parametrize("data,why", [(b"", "no requests"), (bytes(25), "multiple of 24"),
                                      (st.MAGIC + b"\x01", "cut short"),
                                      (st.MAGIC + struct.pack("<I", 4), "not valid")])
def test_bad_files_are_one_error(tmp_path, data, why):
    (tmp_path / "x").write_bytes(data)
    with pytest.raises(TierlabError, match=why):
        st.read(tmp_path / "x")


def test_bad_kind_is_named(tmp_path):
    recs = mixed_stream()
    recs["kind"][5] = 9
    st.write(tmp_path / "x", recs)
    with pytest.raises(TierlabError, match="request 5 has kind 9"):
        st.read(tmp_path / "x")


def test_synthetic_streams():
    s = st.synthetic("sequential", 10, base=128)
    assert s["addr"].tolist() == [128 + 64 * i for i in range(10)]
    r = st.synthetic("random", 1000, span_bytes=1 << 20, seed=3)
    assert (r["addr"] % 64 == 0).all() and r["addr"].max() < 1 << 20
    assert len(np.unique(r["addr"])) > 900
    assert (r == st.synthetic("random", 1000, span_bytes=1 << 20, seed=3)).all()
    for kw in ({"count": 0}, {"seed": -1}, {"gap": -1}, {"span_bytes": 1}):
        with pytest.raises(TierlabError):
            st.synthetic("random", **{"count": 5, **kw})


def test_compact_keeps_page_offsets_and_order():
    recs = st.synthetic("sequential", 4, base=0x7F00_0000_0000)
    far = st.synthetic("random", 4, span_bytes=1 << 40, seed=1, base=1 << 44)
    both = np.concatenate([recs, far, recs])
    c = st.compact(both)
    assert c["addr"].max() < 1 << 33
    assert (c["addr"] % 4096 == both["addr"] % 4096).all()
    assert c["addr"][:4].tolist() == c["addr"][8:].tolist()  # same lines, same addresses
    assert c["addr"][0] // 4096 == 0  # first page used is page 0
    small = st.synthetic("sequential", 4)
    assert st.compact(small) is small


def test_select_regions():
    recs = mixed_stream()
    assert set(st.select(recs, [1, 6])["region"].tolist()) == {1, 6}
    assert st.select(recs, None) is recs
