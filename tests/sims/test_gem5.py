"""gem5 back-end: the hand-encoded packet trace read back by Google's protobuf
runtime with gem5's packet.proto messages built at run time (no protoc), the
NVM retuning, the stats parser.

gem5 was not built on this machine (a NULL-ISA scons build takes hours on two
shared cores), so the stats parser is checked against a stats excerpt in
gem5 v24's format written for this test (data/gem5-stats-format.txt), not a
captured run."""
import math

import numpy as np
import pytest

from tierlab.core import specs
from tierlab.experiments.sims import gem5, ramulator2, stream as st
from sims_inputs import DATA, mixed_stream


def _messages():
    """PacketHeader and Packet of gem5's src/proto/packet.proto (proto2),
    built from a FileDescriptorProto."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="packet.proto", package="ProtoMessage",
                                           syntax="proto2")
    T = descriptor_pb2.FieldDescriptorProto
    req, opt = T.LABEL_REQUIRED, T.LABEL_OPTIONAL
    h = f.message_type.add(name="PacketHeader")
    h.field.add(name="obj_id", number=1, label=req, type=T.TYPE_STRING)
    h.field.add(name="ver", number=2, label=opt, type=T.TYPE_UINT32)
    h.field.add(name="tick_freq", number=3, label=req, type=T.TYPE_UINT64)
    p = f.message_type.add(name="Packet")
    for name, num, typ, lab in (("tick", 1, T.TYPE_UINT64, req), ("cmd", 2, T.TYPE_UINT32, req),
                                ("addr", 3, T.TYPE_UINT64, req), ("size", 4, T.TYPE_UINT32, req),
                                ("flags", 5, T.TYPE_UINT32, opt), ("pkt_id", 6, T.TYPE_UINT64, opt),
                                ("pc", 7, T.TYPE_UINT64, opt)):
        p.field.add(name=name, number=num, label=lab, type=typ)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    get = message_factory.GetMessageClass
    return (get(pool.FindMessageTypeByName("ProtoMessage.PacketHeader")),
            get(pool.FindMessageTypeByName("ProtoMessage.Packet")))


def _delimited(data: bytes, pos: int):
    from google.protobuf.internal.decoder import _DecodeVarint32

    n, pos = _DecodeVarint32(data, pos)
    return data[pos:pos + n], pos + n


def test_packet_trace_parses_with_protobuf():
    pytest.importorskip("google.protobuf")
    Header, Packet = _messages()
    recs = mixed_stream()
    recs["addr"][0] = (1 << 40) + 64  # a varint of 6+ bytes
    ticks = np.arange(len(recs), dtype=np.uint64) * 300_000
    data = gem5.packet_trace(recs, ticks, "tierlab test", addr_offset=gem5.NVM_BASE)
    assert data[:4] == b"gem5"
    msg, pos = _delimited(data, 4)
    h = Header()
    h.ParseFromString(msg)
    assert h.obj_id == "tierlab test" and h.tick_freq == 10**12 and h.ver == 0
    got = []
    while pos < len(data):
        msg, pos = _delimited(data, pos)
        p = Packet()
        p.ParseFromString(msg)
        got.append((p.tick, p.cmd, p.addr, p.size))
    want = [(int(t), 4 if k == st.WRITEBACK else 1, int(a) + gem5.NVM_BASE, 64)
            for t, k, a in zip(ticks, recs["kind"], recs["addr"])]
    assert got == want
    # tierlab's own decoder agrees
    header, pkts = gem5.read_packet_trace(data)
    assert header[1] == b"tierlab test" and [p[3] for p in pkts] == [w[2] for w in want]


def test_ticks_unloaded_spacing_and_saturated():
    recs = mixed_stream()
    sat = gem5.ticks(recs, "saturated", 600.0, 0.25)
    assert (sat == 1000).all()  # all at once, at 1 ns: gem5 asserts a retry tick != 0
    un = gem5.ticks(recs, "unloaded", 600.0, 0.25)
    steps = np.diff(un.astype(np.int64))
    assert (steps >= 600_000).all()
    assert steps.max() == 600_000 + 5 * 250  # a gap of 5 accesses x 0.25 ns


def test_nvm_retuned_from_spec():
    spec, dram = specs.load("optane-dcpmm-g1"), specs.load("ddr4-2666")
    u = ramulator2.uncore_ns(dram)
    p = gem5.nvm_params(spec, u)
    t_read = float(p["tREAD"][:-2])
    # idle read = uncore + controller statics + tREAD + tSEND + tBURST = the spec's random latency
    assert u + gem5.CTRL_STATIC_NS + t_read + gem5.NVM_TSEND_NS + gem5.NVM_TBURST_NS == \
        pytest.approx(spec["read_latency_random_ns"], abs=0.01)
    bw = p["banks_per_rank"] * 64 / (t_read * 1e-9)
    assert ramulator2.dimm_bandwidth(spec) <= bw < ramulator2.dimm_bandwidth(spec) * 1.1
    t_write = float(p["tWRITE"][:-2])
    assert p["banks_per_rank"] * 64 / (t_write * 1e-9) == pytest.approx(
        spec["write_bandwidth_bytes_per_s"], rel=1e-3)
    assert p["device_rowbuffer_size"] == "256B"


def test_stats_parser_sums_requestors_and_names_interfaces():
    r = gem5.parse((DATA / "gem5-stats-format.txt").read_text())
    assert r["reads"] == 1000 + 3000
    assert r["read_latency_mean_ns"] == pytest.approx((80e6 + 900e6) / 4000 / 1000)
    assert r["total_ns"] == pytest.approx(0.002 * 1e9)
    assert r["controllers"]["system.nvm_ctrl"]["interface"] == "nvm"
    assert r["controllers"]["system.dram_ctrl"]["interface"] == "dram"


def test_stats_parser_needs_sim_seconds():
    from tierlab.core.errors import TierlabError

    with pytest.raises(TierlabError, match="simSeconds"):
        gem5.parse("system.x.y 3 # nothing\n")
    assert math.isnan(gem5.parse("simSeconds 0.1 # s\n")["read_latency_mean_ns"])


def test_generated_scripts_are_python(tmp_path):
    from tierlab.experiments.sims import run

    spec = specs.load("optane-dcpmm-g1")
    nvm = gem5.nvm_params(spec, ramulator2.uncore_ns(specs.load("ddr4-2666")))
    for text in (gem5.script("h", nvm, "packets.trace", "tgen.cfg", "run.py"),
                 gem5.se_script("h", nvm, "se.py")):
        compile(text, "gem5-config", "exec")
        assert text.startswith("# h\n")
    assert run.BACKENDS  # the runner imports with the generator
