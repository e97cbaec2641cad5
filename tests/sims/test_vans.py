"""VANS back-end: configuration and trace checks, and the parser against
stats captured from a real VANS run (VANS 541d2fb, built from its public
source), made by:

    tierlab sim stream --pattern random --count 200 --seed 1 --out r200.memreq
    TIERLAB_VANS=.../vans/bin/vans tierlab sim run --backend vans optane-dcpmm-g1 \\
        r200.memreq --out cap-vr
    # data/vans-random200-<mode>.log = cap-vr/<mode>/vans.log,
    # data/vans-random200-<mode>.stats = cap-vr/<mode>/vans_dump/stats_0
"""
import pytest

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import vans
from sims_inputs import DATA, mixed_stream


def _captured(mode):
    return ((DATA / f"vans-random200-{mode}.log").read_text(),
            (DATA / f"vans-random200-{mode}.stats").read_text())


def test_parse_unloaded_capture():
    r = vans.parse(*_captured("unloaded"), "unloaded")
    assert r["reads"] == 200 and r["writes"] == 0
    assert r["total_ns"] == pytest.approx(86502.0)
    # every read critical: the mean is the simulated time per read
    assert r["read_latency_mean_ns"] == pytest.approx(86502.0 / 200)


def test_parse_saturated_capture_gives_no_latency():
    import math

    r = vans.parse(*_captured("saturated"), "saturated")
    assert r["reads"] == 200 and math.isnan(r["read_latency_mean_ns"])
    assert r["total_ns"] < vans.parse(*_captured("unloaded"), "unloaded")["total_ns"] / 2


def test_parse_errors_are_one_line():
    log, stats = _captured("unloaded")
    with pytest.raises(TierlabError, match="Total ns"):
        vans.parse("", stats, "unloaded")
    with pytest.raises(TierlabError, match="read_access"):
        vans.parse(log, "", "unloaded")


def test_only_pm_specs():
    with pytest.raises(TierlabError, match="Optane DC PM DIMMs only"):
        vans.config(specs.load("ddr4-2666"), "d", "h")


def test_config_keys_are_decimal_and_sectioned():
    text = vans.config(specs.load("optane-dcpmm-g1"), "vans_dump", "hdr")
    assert text.startswith("# hdr\n")
    assert "0x" not in text  # VANS reads numbers with std::stoul base 10
    sections = [line for line in text.splitlines() if line.startswith("[")]
    assert sections[:3] == ["[organization]", "[basic]", "[rmc]"] and "[dump]" in sections


def test_trace_ops():
    recs = mixed_stream()
    un = vans.trace(recs, "unloaded", "h").splitlines()[1:]
    sat = vans.trace(recs, "saturated", "h").splitlines()[1:]
    assert {x.split()[1] for x in un} == {"C", "W"} and {x.split()[1] for x in sat} == {"R", "W"}
    assert len(un) == len(recs)
