"""Ramulator 2 back-end: the stretched device derived from the specs (what it
predicts against the spec), the trace formats, and the stats parser against
stats captured from real Ramulator 2.0 runs (v2.0a, be93be7, built from its
public source with Debian's yaml-cpp and spdlog), made by:

    tierlab sim stream --pattern random --count 300 --seed 1 --out r300.memreq
    TIERLAB_RAMULATOR2=.../ramulator2 tierlab sim run --backend ramulator2 \\
        optane-dcpmm-g1 r300.memreq --out cap
    # data/ramulator2-optane-random300-<mode>.log = cap/<mode>/ramulator2.log
"""
import math

import pytest

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import ramulator2 as r2, stream as st
from sims_inputs import DATA, mixed_stream

TIERS = [n for n in specs.names() if specs.load(n).kind == "memory"
         and specs.load(n).tier != "dram"]


@pytest.mark.parametrize("name", TIERS)
def test_stretched_device_predicts_the_spec(name):
    spec, dram = specs.load(name), specs.load("ddr4-2666")
    try:
        dev = r2.device(spec, dram)
    except TierlabError as e:  # a tier too close to DRAM is refused with the reason
        assert "too close" in str(e) or "must exceed" in str(e)
        return
    tck = r2.JEDEC["tCK_ns"]
    p = dev["predicted"]
    # rounding to whole cycles: within one cycle per rounded term
    assert p["read_latency_random_ns"] == pytest.approx(spec["read_latency_random_ns"], abs=tck)
    assert p["read_latency_seq_ns"] == pytest.approx(spec["read_latency_seq_ns"], abs=2 * tck)
    bw = r2.dimm_bandwidth(spec)
    peak = r2.JEDEC["rate"] * 1e6 * r2.BUS_BYTES
    assert p["read_bandwidth_seq_bytes_per_s"] <= max(bw, peak) * 1.0001
    if not dev["notes"]:
        assert p["read_bandwidth_seq_bytes_per_s"] == pytest.approx(bw, rel=0.01)
        assert p["read_bandwidth_random_bytes_per_s"] == pytest.approx(
            p["read_bandwidth_seq_bytes_per_s"] / 4)  # a 256 B row opened per 64 B read
    else:
        assert any("bus caps it" in n for n in dev["notes"])
    assert dev["timing"]["nREFI"] >= 1e9 and dev["org"]["column"] == 32 and dev["banks"] == 8


def test_dram_device_is_jedec_and_uncore_fits_random_latency():
    spec = specs.load("ddr4-2666")
    dev = r2.device(spec, spec)
    assert dev["org"]["preset"] == "DDR4_8Gb_x8" and dev["timing"]["preset"] == "DDR4_2666V"
    assert dev["predicted"]["read_latency_random_ns"] == pytest.approx(
        spec["read_latency_random_ns"])
    assert dev["predicted"]["read_latency_seq_ns"] < spec["read_latency_seq_ns"]


def test_latencies_out_of_order_are_refused(tmp_path):
    y = tmp_path / "odd.yaml"
    y.write_text("name: odd\nkind: memory\ntier: pm\nextends: optane-dcpmm-g1\n"
                 "read_latency_seq_ns: {value: 400, source: 'assumption: test'}\n")
    with pytest.raises(TierlabError, match="must exceed"):
        r2.device(specs.load(str(y)), specs.load("ddr4-2666"))


def test_traces():
    recs = mixed_stream()
    sat = r2.trace(recs, "saturated").splitlines()
    assert len(sat) == len(recs) and sat[8] == "ST 0x1000000" and sat[0] == "LD 0x100000"
    un = r2.trace(recs, "unloaded").splitlines()
    wbs = [int(x.split()[2]) for x in un if len(x.split()) == 3]
    assert sorted(wbs) == sorted(recs["addr"][recs["kind"] == st.WRITEBACK].tolist())
    assert "0 0 " not in "\n".join(un)  # every writeback found a read to ride on
    loads = [int(x.split()[1]) for x in un]
    assert loads == recs["addr"][recs["kind"] != st.WRITEBACK].tolist()
    assert r2.expected_insts(recs) == sum(int(x.split()[0]) + 1 for x in un)


def test_parse_rejects_output_without_stats():
    with pytest.raises(TierlabError, match="no Ramulator 2 statistics"):
        r2.parse("[info] loading trace\n")
    with pytest.raises(TierlabError, match="lack"):
        r2.parse("MemorySystem:\n  impl: GenericDRAM\n")


def _captured(mode):
    return (DATA / f"ramulator2-optane-random300-{mode}.log").read_text()


def test_parse_unloaded_capture():
    r = r2.parse(_captured("unloaded"))
    assert r["reads"] == 300 and r["reads_offered"] == 300  # one outstanding: no retries
    # controller latency of a random read on the stretched device: 1 + nRP + nRCD + nCL + nBL
    dev = r2.device(specs.load("optane-dcpmm-g1"), specs.load("ddr4-2666"))
    t = dev["timing"]
    conflict = 1 + r2.JEDEC["nRP"] + t["nRCD"] + t["nCL"] + r2.JEDEC["nBL"]
    assert r["read_latency_mean_cycles"] == pytest.approx(conflict, rel=0.02)
    assert r["read_latency_mean_ns"] + dev["uncore_ns"] == pytest.approx(305.0, rel=0.01)


def test_parse_saturated_capture_counts_served_reads_not_retries():
    """The pitfall: num_read_reqs counts every offer, also the rejected ones
    (14,304 offers for 300 reads here), so Ramulator's avg_read_latency is
    ~35 cycles, far below the ~1,900 cycles a queued read waits."""
    text = _captured("saturated")
    r = r2.parse(text)
    assert r["reads_offered"] > 10 * 300
    assert "avg_read_latency_0: 34.99" in text
    assert r["read_latency_naive_cycles"] < 40
    assert 250 <= r["reads"] < 300  # LoadStoreTrace stops when the last read is offered
    assert r["read_latency_mean_cycles"] > 1000
    assert r["read_latency_mean_cycles"] == pytest.approx(
        r["channels"][0]["read_latency"] / r["reads"])
    assert r["total_ns"] == pytest.approx(r["cycles"] * 0.75)
