"""gem5 back-end: a run script with a DRAM controller and a separate NVM
controller on their own address ranges, driven by a TrafficGen that replays a
packet trace tierlab writes itself, and an SE-mode script that runs the static
`tierlab-kernels` on a gem5 with an ISA; the stats read back.

The packet trace is gem5's protobuf stream (src/proto/protoio.cc,
src/proto/packet.proto, gem5 v24): the 4 bytes "gem5" (0x356d6567
little-endian), then messages each preceded by its varint length: one
PacketHeader {obj_id = 1 (string), ver = 2, tick_freq = 3 (uint64)}, then
Packets {tick = 1, cmd = 2, addr = 3, size = 4} (all varints). TraceGen
(src/cpu/testers/traffic_gen/trace_gen.cc) checks tick_freq against the
simulator's 1 THz tick. cmd is the MemCmd index (src/mem/packet.hh):
ReadReq = 1, WriteReq = 4. No protobuf compiler is needed.

Two controllers, not one HeteroMemCtrl: gem5 v24's one-channel
HeteroMemCtrl stalls on NVM traffic (issue 22). The NVM controller's
NVMInterface is retuned from the spec (docs/simulators.md "gem5"): tREAD so
that the controller's idle read latency plus the uncore latency equals the
spec's random read latency; banks so that banks x 64 B / tREAD is the spec's
read bandwidth; tWRITE so that banks x 64 B / tWRITE is its write bandwidth.
gem5's NVM model has no row buffer hits: sequential and random reads cost the
same (a documented limit).
"""
from __future__ import annotations

import json
import math
import re

import numpy as np

from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import stream as st
from tierlab.experiments.sims.ramulator2 import dimm_bandwidth

NAME = "gem5"
TICKS_PER_S = 10**12          # gem5's tick: 1 ps
READ_REQ, WRITE_REQ = 1, 4    # MemCmd::ReadReq, MemCmd::WriteReq (src/mem/packet.hh)
MAGIC = 0x356D6567            # "gem5", src/proto/protoio.hh
# NVMInterface defaults of NVM_2400_1x64 (src/mem/NVMInterface.py, gem5 v24)
# that the retuning keeps; MemCtrl's static front- and back-end latencies
# (src/mem/MemCtrl.py: 10 ns each).
NVM_TSEND_NS, NVM_TBURST_NS, CTRL_STATIC_NS = 14.16, 3.332, 20.0
DRAM_SIZE = 1 << 32           # DRAM range [0, 4 GiB)
NVM_BASE = 1 << 32            # NVM range [4 GiB, 4 GiB + NVM_SIZE)
NVM_SIZE = 1 << 34


# --- protobuf by hand ------------------------------------------------------------

def _varint(n: int) -> bytes:
    if n < 0:
        raise ValueError("varint of a negative number")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_varint(num: int, value: int) -> bytes:
    return _varint(num << 3 | 0) + _varint(value)


def _field_bytes(num: int, value: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(value)) + value


def _delimited(msg: bytes) -> bytes:
    return _varint(len(msg)) + msg


def packet_trace(recs: np.ndarray, ticks: np.ndarray, obj_id: str,
                 addr_offset: np.ndarray | int = 0) -> bytes:
    """The packet trace of `recs` (bytes, uncompressed) with `ticks` (ps) per
    request; writebacks become WriteReq, reads and prefetches ReadReq, 64 B."""
    head = (_field_bytes(1, obj_id.encode()) + _field_varint(2, 0)
            + _field_varint(3, TICKS_PER_S))
    parts = [MAGIC.to_bytes(4, "little"), _delimited(head)]
    addrs = (recs["addr"].astype(np.uint64) + np.asarray(addr_offset, dtype=np.uint64)).tolist()
    cmds = np.where(recs["kind"] == st.WRITEBACK, WRITE_REQ, READ_REQ).tolist()
    for t, c, a in zip(np.asarray(ticks, dtype=np.uint64).tolist(), cmds, addrs):
        parts.append(_delimited(_field_varint(1, t) + _field_varint(2, c) + _field_varint(3, a)
                                + _field_varint(4, st.LINE)))
    return b"".join(parts)


def read_packet_trace(data: bytes) -> tuple[dict, list[dict]]:
    """Decode a packet trace (the inverse of packet_trace, for checks)."""
    if int.from_bytes(data[:4], "little") != MAGIC:
        raise TierlabError("not a gem5 packet trace (magic number)")
    pos = 4

    def varint():
        nonlocal pos
        shift = val = 0
        while True:
            b = data[pos]
            pos += 1
            val |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return val

    def message(end):
        nonlocal pos
        out = {}
        while pos < end:
            key = varint()
            num, wire = key >> 3, key & 7
            if wire == 0:
                out[num] = varint()
            elif wire == 2:
                n = varint()
                out[num] = data[pos:pos + n]
                pos += n
            else:
                raise TierlabError(f"unexpected wire type {wire}")
        return out

    n = varint()
    header = message(pos + n)
    pkts = []
    while pos < len(data):
        n = varint()
        pkts.append(message(pos + n))
    return header, pkts


# --- timing ---------------------------------------------------------------------------

def nvm_params(spec, uncore_ns: float) -> dict:
    """The NVMInterface parameters retuned from the spec."""
    t_read = spec["read_latency_random_ns"] - uncore_ns - NVM_TSEND_NS - NVM_TBURST_NS \
        - CTRL_STATIC_NS
    if t_read <= 0:
        raise TierlabError(f"{spec.path}: random read latency too small for gem5's NVM "
                           f"interface (tREAD would be {t_read:.1f} ns)")
    banks = max(1, math.ceil(dimm_bandwidth(spec) * t_read * 1e-9 / st.LINE))
    wbw = spec.get("write_bandwidth_bytes_per_s") or dimm_bandwidth(spec)
    t_write = banks * st.LINE / wbw * 1e9
    return {"tREAD": f"{t_read:.2f}ns", "tWRITE": f"{t_write:.2f}ns", "banks_per_rank": banks,
            "device_rowbuffer_size": f"{int(spec['access_granularity_bytes'])}B",
            "read_buffer_size": 64, "write_buffer_size": 128,
            "max_pending_reads": 64, "max_pending_writes": 128}


def ticks(recs: np.ndarray, mode: str, spacing_ns: float, gap_ns: float) -> np.ndarray:
    """Issue times (ps): saturated all at 1 ns (TraceGen sends as fast as the
    memory takes them); unloaded spaced by `spacing_ns` (more than one read
    takes, so at most one is outstanding) plus each request's gap x gap_ns."""
    if mode == "saturated":  # at 1 ns, not 0: gem5 v24 asserts retryPktTick != 0
        return np.full(len(recs), 1000, np.uint64)
    step = spacing_ns + recs["gap"].astype(np.float64) * gap_ns
    return (np.cumsum(step) * 1000).astype(np.uint64)


def tgen_config(trace_name: str, duration_ticks: int) -> str:
    """TrafficGen's state-machine file (src/cpu/testers/traffic_gen/
    traffic_gen.cc): a TRACE state of `duration_ticks`, then EXIT for 1 ns
    (an EXIT state of duration 0 with its self-transition loops at one tick
    and never ends the simulation: gem5 v24.0.0.1 grew to the OOM killer). The
    simulated time is the state's duration (the trace may end earlier): read
    latencies are exact, total time and bandwidth an upper bound."""
    return (f"STATE 0 {duration_ticks} TRACE {trace_name} 0\nSTATE 1 1000 EXIT\nINIT 0\n"
            "TRANSITION 0 1 1\nTRANSITION 1 1 1\n")


_SCRIPT = '''# {header}
# gem5 v24 (NULL ISA is enough): a TrafficGen replays {trace} into a DDR4 controller
# on [0, {dram_size:#x}) and a separate NVM controller on [{nvm_base:#x}, +{nvm_size:#x}).
# Run: gem5.opt --outdir=OUT {script}
import os

import m5
from m5.objects import *

HERE = os.path.dirname(os.path.abspath(__file__))
NVM = {nvm}

system = System(mem_mode="timing")
system.clk_domain = SrcClockDomain(clock="2GHz", voltage_domain=VoltageDomain())
system.mem_ranges = [AddrRange(0, size={dram_size:#x}), AddrRange({nvm_base:#x}, size={nvm_size:#x})]
system.membus = SystemXBar()
system.system_port = system.membus.cpu_side_ports
# the generator idles from the trace's last packet to the state's end (tgen.cfg:
# a margin for the slowest case); that is no lack of progress
system.tgen = TrafficGen(config_file=os.path.join(HERE, "{tgen_cfg}"), progress_check="1s")
system.tgen.port = system.membus.cpu_side_ports
system.dram_ctrl = MemCtrl(dram=DDR4_2400_8x8(range=system.mem_ranges[0]))
system.dram_ctrl.port = system.membus.mem_side_ports
system.nvm_ctrl = MemCtrl(dram=NVM_2400_1x64(range=system.mem_ranges[1], **NVM))
system.nvm_ctrl.port = system.membus.mem_side_ports

root = Root(full_system=False, system=system)
m5.instantiate()
event = m5.simulate()
print("tierlab: exit", event.getCause(), "at tick", m5.curTick())
'''

_SE_SCRIPT = '''# {header}
# gem5 v24 with an ISA (X86 or ARM), SE mode: the statically linked tierlab-kernels runs a
# query workload with the whole memory either DDR4 (--memory dram) or the NVM tier
# retuned from the spec (--memory nvm).
# Run: gem5.opt --outdir=OUT {script} --binary tierlab-kernels --memory nvm -- ARGS...
import argparse

import m5
import m5.objects
from m5.objects import *

NVM = {nvm}
# the CPU of the ISA this gem5 was built with (multi-ISA builds name it per ISA)
CPU = next((getattr(m5.objects, n) for n in ("X86TimingSimpleCPU", "ArmTimingSimpleCPU",
                                             "TimingSimpleCPU") if hasattr(m5.objects, n)), None)
if CPU is None:
    raise SystemExit("this gem5 has no ISA (a NULL build): SE mode needs X86 or ARM")

p = argparse.ArgumentParser()
p.add_argument("--binary", required=True)
p.add_argument("--memory", choices=["dram", "nvm"], default="dram")
p.add_argument("args", nargs=argparse.REMAINDER)
a = p.parse_args()

system = System(mem_mode="timing", mem_ranges=[AddrRange("{se_size}")])
system.clk_domain = SrcClockDomain(clock="3GHz", voltage_domain=VoltageDomain())
system.cpu = CPU()
system.membus = SystemXBar()
system.cpu.icache_port = system.membus.cpu_side_ports
system.cpu.dcache_port = system.membus.cpu_side_ports
system.cpu.createInterruptController()
if hasattr(system.cpu.interrupts[0], "pio"):  # X86
    system.cpu.interrupts[0].pio = system.membus.mem_side_ports
    system.cpu.interrupts[0].int_requestor = system.membus.cpu_side_ports
    system.cpu.interrupts[0].int_responder = system.membus.mem_side_ports
system.system_port = system.membus.cpu_side_ports
if a.memory == "dram":
    system.mem_ctrl = MemCtrl(dram=DDR4_2400_8x8(range=system.mem_ranges[0]))
else:
    system.mem_ctrl = MemCtrl(dram=NVM_2400_1x64(range=system.mem_ranges[0], **NVM))
system.mem_ctrl.port = system.membus.mem_side_ports
system.workload = SEWorkload.init_compatible(a.binary)
process = Process(cmd=[a.binary] + [x for x in a.args if x != "--"])
system.cpu.workload = process
system.cpu.createThreads()

root = Root(full_system=False, system=system)
m5.instantiate()
event = m5.simulate()
print("tierlab: exit", event.getCause(), "at tick", m5.curTick())
'''


def script(header: str, nvm: dict, trace_name: str, tgen_cfg: str, script_name: str) -> str:
    return _SCRIPT.format(header=header, trace=trace_name, dram_size=DRAM_SIZE, nvm_base=NVM_BASE,
                          nvm_size=NVM_SIZE, nvm=json.dumps(nvm, sort_keys=True),
                          tgen_cfg=tgen_cfg, script=script_name)


def se_script(header: str, nvm: dict, script_name: str, mem_size: str = "4GiB") -> str:
    return _SE_SCRIPT.format(header=header, nvm=json.dumps(nvm, sort_keys=True),
                             script=script_name, se_size=mem_size)


def command(binary: str, outdir, script_path) -> list[str]:
    return [binary, f"--outdir={outdir}", str(script_path)]


_STAT = re.compile(r"^(\S+)\s+(-?[0-9.eE+-]+|nan|inf)\s", re.M)


def parse(stats: str) -> dict:
    """Numbers from gem5's stats.txt (first dump): simSeconds, and per
    controller (`system.<ctrl>`) the reads served, their summed latency
    (requestorReadAccesses / requestorReadTotalLat, summed over requestors)
    and bytes read; per interface (`system.<ctrl>.dram.*` or `.nvm.*`, the
    keys differ by interface) its read bursts."""
    first = stats.split("---------- End Simulation Statistics", 1)[0]
    vals = {k: float(v) for k, v in _STAT.findall(first)}
    if "simSeconds" not in vals:
        raise TierlabError("no simSeconds in gem5's stats.txt")
    ctrls: dict = {}
    for k, v in vals.items():
        m = re.match(r"^(system\.\w+)\.(requestorReadAccesses|requestorReadTotalLat|"
                     r"requestorReadBytes)::(\S+)$", k)
        if m and m.group(3) != "total":
            c = ctrls.setdefault(m.group(1), {})
            c[m.group(2)] = c.get(m.group(2), 0.0) + v
        m = re.match(r"^(system\.\w+)\.(dram|nvm)\.readBursts$", k)
        if m:
            ctrls.setdefault(m.group(1), {})["interface"] = m.group(2)
            ctrls[m.group(1)]["readBursts"] = v
    reads = sum(c.get("requestorReadAccesses", 0) for c in ctrls.values())
    lat = sum(c.get("requestorReadTotalLat", 0) for c in ctrls.values())
    return {"reads": int(reads), "total_ns": vals["simSeconds"] * 1e9,
            "read_latency_mean_ns": lat / reads / 1000 if reads else math.nan,
            "read_bytes": sum(c.get("requestorReadBytes", 0) for c in ctrls.values()),
            "controllers": ctrls}
