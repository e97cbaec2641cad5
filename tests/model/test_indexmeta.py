"""Index metadata: the synthetic index reproduces its statistics (and the
reference's totals), lays terms out without overlap, and the model's
segment count is the C formula's."""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.core.errors import TierlabError
from tierlab.model import indexmeta as im
from tierlab.model import replay as tr


def test_small_synthetic_index_matches_its_statistics():
    st = {"documents": 3000, "postings": 250_000, "vocabulary": 15_000, "index_bytes": 350_000}
    m = im.synthesise(st)
    assert len(m) == 15_000 == m.vocabulary  # all materialised
    assert m.total_postings == m.postings.sum() == 250_000 or \
        abs(m.postings.sum() - 250_000) / 250_000 < 1e-3
    assert abs(m.index_bytes / 350_000 - 1) < 0.01
    assert (m.postings <= 3000).all() and (m.postings >= 1).all()
    assert (np.diff(m.postings) <= 0).all()  # t1 is the most frequent
    for off, size, total in ((m.did_offset, m.did_bytes, m.did_file_bytes),
                             (m.freq_offset, m.freq_bytes, m.freq_file_bytes)):
        o = np.argsort(off)
        assert (off[o][1:] >= off[o][:-1] + size[o][:-1]).all()  # no overlap
        assert (off + size).max() <= total
    # dictionary order is not frequency order
    assert abs(np.corrcoef(np.argsort(m.did_offset), np.arange(len(m)))[0, 1]) < 0.1
    assert (m.blocks == -(-m.postings // 256)).all()


def test_reference_preset_reproduces_the_reference_totals():
    m = im.reference(materialise_min_postings=1_000_000)
    checks = im.check_reference(m)
    assert all(ok for _, _, ok in checks.values()), checks
    assert 500 < len(m) < 3000  # the H terms only
    assert (m.postings >= 1_000_000).all()
    t = tr.generate(m, qtype="single", cls="H", queries=1000, rp=0.25)
    assert t.queries == 1000 and t.occurrences == 1000


def test_segments_formula_is_the_c_one():
    from tierlab.core.native import ffi_lib

    _, lib = ffi_lib()
    m = im.synthesise({"documents": 3000, "postings": 250_000, "vocabulary": 15_000,
                       "index_bytes": 350_000})
    for seg in (64, 4096, 32768):
        got = m.segments(seg)
        for i in range(0, len(m), 997):
            assert got[i] == lib.tierlab_segcache_segments(int(m.term_bytes[i]),
                                                           int(m.blocks[i]), seg)


def test_bad_statistics():
    with pytest.raises(TierlabError, match="vocabulary"):
        im.synthesise({"documents": 10, "postings": 5, "vocabulary": 50, "index_bytes": 100})
    with pytest.raises(TierlabError, match="index_bytes"):
        im.synthesise({"documents": 1000, "postings": 10**6, "vocabulary": 1000,
                       "index_bytes": 1000})


def test_zipf_shift_flattens_the_head_and_keeps_the_totals():
    """Zipf-Mandelbrot (zipf_shift q > 0): the same totals, fewer postings at the
    top ranks; q = 0 is the plain law."""
    from tierlab.model import indexmeta as im

    st = {"documents": 1_000_000, "postings": 50_000_000, "vocabulary": 200_000,
          "index_bytes": 80_000_000, "materialise_min_postings": 10_000}
    plain = im.synthesise(dict(st, zipf=1.3))
    same = im.synthesise(dict(st, zipf=1.3, zipf_shift=0))
    flat = im.synthesise(dict(st, zipf=1.3, zipf_shift=20))
    assert plain.postings.tolist() == same.postings.tolist()
    for m in (plain, flat):
        assert abs(m.total_postings / 50_000_000 - 1) < 1e-6
        assert abs(m.index_bytes / 80_000_000 - 1) < 1e-6
    assert flat.postings.max() < plain.postings.max()
    assert (flat.postings >= 10_000).sum() > (plain.postings >= 10_000).sum()
    with pytest.raises(TierlabError, match="zipf_shift"):
        im.synthesise(dict(st, zipf_shift=-1))


def test_derived_head_has_about_1800_h_terms_none_in_every_document():
    from tierlab.model import config as cfgmod
    from tierlab.model import indexmeta as im

    m = im.reference(materialise_min_postings=1_000_000, head="derived")
    h = m.postings >= 1_000_000
    assert 1_700 <= h.sum() <= 1_900  # 1,000 x 56 / 31 (module docstring)
    assert m.postings.max() < m.documents
    chk = im.check_reference(m, tolerance=0.025)
    assert all(ok for _, _, ok in chk.values()), chk
    with pytest.raises(TierlabError, match="index.head"):
        cfgmod.validate({"index": {"preset": "reference", "head": "flat"}})
