"""Ramulator 2.0 back-end: a device and a run configuration (2.0 YAML) from a
memory spec, the filtered stream as a LoadStoreTrace (saturated) or SimpleO3
(unloaded) trace, and the stats it prints read back.

The derivation of the timings is in docs/simulators.md ("Ramulator 2: the
device from the spec"); `device()` computes it and says what it predicts.

Pitfalls (docs/simulators.md "Pitfalls"):
- The generic controller counts a read in `num_read_reqs_<ch>` every time the
  front end *offers* it, also when the full read queue rejects it and it is
  offered again next cycle, so `avg_read_latency_<ch>` (read_latency /
  num_read_reqs) is far too low under load. The mean here is
  `read_latency_<ch>` over the reads served, read_row_hits + misses +
  conflicts of that channel (each counted once, when first scheduled).
- LoadStoreTrace and the SimpleO3 trace carry no time stamps: LoadStoreTrace
  offers one request per cycle (saturated: bandwidth); unloaded latency comes
  from SimpleO3 with a one-instruction window, so one read is outstanding at a
  time and the `gap` of each request becomes that many instructions before it.
- Neither trace reader accepts a comment line, so the two traces have no
  provenance line; the configuration that names them has it.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import yaml

from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import stream as st

NAME = "ramulator2"

# JEDEC JESD79-4 (DDR4 SDRAM standard), speed bin DDR4-2666V (19-19-19):
# tCK 0.75 ns, CL = tRCD = tRP = 19 clocks; BL8 takes 4 clocks; CWL 14 (1tCK
# write preamble); tCCD_L 5 ns -> 7 clocks; tRTP 7.5 ns -> 10; tWR 15 ns -> 20.
JEDEC_PRESET = "DDR4_2666V"
JEDEC = {"tCK_ns": 0.75, "rate": 2666, "nCL": 19, "nRCD": 19, "nRP": 19, "nBL": 4,
         "nCWL": 14, "nCCDL": 7, "nRTP": 10, "nWR": 20}
# Generic controller of Ramulator 2.0 (src/dram_controller/impl/
# generic_dram_controller.cpp): a read that arrives at cycle t issues its
# first command at t + 1 at the earliest (one command per controller tick),
# and departs nCL + nBL after its RD: a closed-row read takes
# 1 + nRCD + nCL + nBL cycles, a row conflict 1 + nRP + nRCD + nCL + nBL.
SCHED_CYCLES = 1
# The unloaded runs' core: SimpleO3 at 8/3 of the memory clock, one
# instruction per cycle.
CORE_CLOCK_RATIO, MEM_CLOCK_RATIO = 8, 3
CORE_CYCLE_NS = JEDEC["tCK_ns"] * MEM_CLOCK_RATIO / CORE_CLOCK_RATIO
BUS_BYTES = 8        # a 64-bit DDR4 channel
BURST_BYTES = 64     # BL8 on a 64-bit channel: one cache line
# The stretched device of a slow tier (issue 22): 256-byte rows of 32 columns
# (4 bursts: Optane's 256 B XPLine, Yang et al. FAST 2020), 8 banks in 2 bank
# groups, one rank, refresh off.
TIER_ROW_BYTES = 256
TIER_BANKGROUPS, TIER_BANKS = 2, 4
TIER_DENSITY_MB = 8192   # chip density Ramulator checks: 2 x 4 x rows x 32 x 8 bits
REFRESH_OFF_NREFI = 2_000_000_000  # ~1.5 s of simulated time: no refresh in any run here
DRAM_ORG = "DDR4_8Gb_x8"   # 16 banks, 8 KiB rows (1024 columns x 8 chips)
DRAM_ROW_BYTES = 8192


def _cyc(ns: float, tck: float) -> int:
    return int(round(ns / tck))


def uncore_ns(dram) -> float:
    """The part of a load-to-use latency outside the memory controller (core,
    caches, mesh): the DRAM spec's random latency less what the JEDEC device
    takes for a row conflict here. The one number fitted to a spec."""
    t = JEDEC
    inside = t["tCK_ns"] * (SCHED_CYCLES + t["nRP"] + t["nRCD"] + t["nCL"] + t["nBL"])
    return dram["read_latency_random_ns"] - inside


def dimm_bandwidth(spec) -> float:
    """One DIMM's read bandwidth: read_bandwidth_per_dimm_bytes_per_s, else
    read_bandwidth_bytes_per_s (a spec without DIMMs is one device)."""
    return spec.get("read_bandwidth_per_dimm_bytes_per_s") or spec["read_bandwidth_bytes_per_s"]


def device(spec, dram) -> dict:
    """The Ramulator DDR4 device of one DIMM of `spec` (one channel) and what
    the derivation predicts.
    `dram` is the DRAM spec the tier is measured against (its random latency
    fixes the uncore latency). Returns {org, timing, channels, row_bytes, banks,
    predicted: {read_latency_seq_ns, read_latency_random_ns,
    read_bandwidth_seq_bytes_per_s, read_bandwidth_random_bytes_per_s},
    uncore_ns, notes}."""
    t = JEDEC
    tck = t["tCK_ns"]
    u = uncore_ns(dram)
    channel_peak = t["rate"] * 1e6 * BUS_BYTES
    notes = []
    if spec.tier == "dram":
        channels = 1  # one DIMM, like the tier devices and VANS
        org = {"preset": DRAM_ORG, "channel": channels, "rank": 1}
        timing = {"preset": JEDEC_PRESET, "nREFI": REFRESH_OFF_NREFI}
        n = dict(t)
        row, banks = DRAM_ROW_BYTES, 16
        n["nRC"] = None
    else:
        channels = 1
        row, banks = TIER_ROW_BYTES, TIER_BANKGROUPS * TIER_BANKS
        lines = row // BURST_BYTES
        seq, rnd = spec["read_latency_seq_ns"], spec["read_latency_random_ns"]
        if rnd <= seq:
            raise TierlabError(f"{spec.path}: read_latency_random_ns ({rnd:g}) must exceed "
                               f"read_latency_seq_ns ({seq:g}) for the stretched device")
        # One row of `lines` bursts: a sequential stream opens a row (conflict)
        # once per `lines` reads, so seq = hit + (tRP + tRCD) / lines and
        # random = hit + tRP + tRCD.
        open_cyc = _cyc(lines * (rnd - seq) / (lines - 1), tck)
        n = dict(t)
        n["nRCD"] = open_cyc - t["nRP"]
        n["nCL"] = _cyc(rnd - u, tck) - SCHED_CYCLES - t["nRP"] - n["nRCD"] - t["nBL"]
        if n["nRCD"] < 1 or n["nCL"] < 1:
            raise TierlabError(f"{spec.path}: latencies {seq:g}/{rnd:g} ns are too close to "
                               f"DRAM's for a stretched DDR4 device (nRCD {n['nRCD']}, "
                               f"nCL {n['nCL']})")
        # Saturated sequential reads keep every bank cycling: bandwidth =
        # banks x row / tRC.
        bw = dimm_bandwidth(spec)
        n_rc = math.ceil(banks * row / (bw * tck * 1e-9))
        n_ras_min = n["nRCD"] + (lines - 1) * t["nCCDL"] + t["nRTP"]
        n["nRAS"] = max(n_rc - t["nRP"], n_ras_min)
        n["nRC"] = n["nRAS"] + t["nRP"]
        if n["nRC"] > n_rc:
            notes.append(f"tRC raised to {n['nRC']} cycles by tRAS >= tRCD + reads + tRTP: "
                         "sequential bandwidth below the spec")
        wbw = spec.get("write_bandwidth_bytes_per_s")
        if wbw:
            cyc_w = math.ceil(banks * row / (wbw * tck * 1e-9))
            rest = n["nRCD"] + (lines - 1) * t["nCCDL"] + t["nCWL"] + t["nBL"] + t["nRP"]
            n["nWR"] = max(t["nWR"], cyc_w - rest)
        org = {"channel": 1, "rank": 1, "bankgroup": TIER_BANKGROUPS, "bank": TIER_BANKS,
               "row": TIER_DENSITY_MB * 2**20 // (TIER_BANKGROUPS * TIER_BANKS * 32 * 8),
               "column": 32, "dq": 8, "density": TIER_DENSITY_MB}
        timing = {"preset": JEDEC_PRESET, **{k: n[k] for k in ("nCL", "nRCD", "nRAS", "nRC",
                                                               "nWR")},
                  "nREFI": REFRESH_OFF_NREFI}
    lines = row // BURST_BYTES
    hit = tck * (SCHED_CYCLES + n["nCL"] + n["nBL"])
    opening = tck * (n["nRP"] + n["nRCD"])
    predicted = {"read_latency_seq_ns": u + hit + opening / lines,
                 "read_latency_random_ns": u + hit + opening}
    peak = channels * channel_peak
    if n.get("nRC"):
        bank_bw = banks * row / (n["nRC"] * tck * 1e-9)
        predicted["read_bandwidth_seq_bytes_per_s"] = min(peak, bank_bw)
        predicted["read_bandwidth_random_bytes_per_s"] = min(peak, bank_bw / lines)
        if bank_bw > channel_peak:
            notes.append(f"the spec's {dimm_bandwidth(spec) / 1e9:g} GB/s exceeds "
                         f"one DDR4-2666 channel ({channel_peak / 1e9:.1f} GB/s): the bus caps it")
    else:
        predicted["read_bandwidth_seq_bytes_per_s"] = peak
    return {"org": org, "timing": timing, "channels": channels, "row_bytes": row,
            "banks": banks, "uncore_ns": u, "predicted": predicted, "notes": notes}


def config(spec, dram, mode: str, trace_name: str, header: str, *, n_insts: int = 0,
           max_addr: int = 1 << 33) -> str:
    """The 2.0 YAML run configuration (text). `mode` 'saturated' replays
    `trace_name` with LoadStoreTrace, 'unloaded' with SimpleO3 (one
    instruction window; `n_insts` instructions, the whole trace once)."""
    dev = device(spec, dram)
    if mode == "saturated":
        front = {"impl": "LoadStoreTrace", "clock_ratio": 1, "path": trace_name}
        mem_ratio = 1
    else:
        # Core at 8/3 of the 1333 MHz memory clock (3.56 GHz); one instruction
        # in flight; SimpleO3's own LLC is shrunk to 8 KB (16 sets): the
        # stream is already filtered by tierlab's caches; its latency, which
        # every miss pays before it reaches the controller, is the uncore
        # latency, so the simulated time holds each read's whole latency.
        front = {"impl": "SimpleO3", "clock_ratio": CORE_CLOCK_RATIO, "num_expected_insts": int(n_insts),
                 "inst_window_depth": 1, "ipc": 1, "traces": [trace_name],
                 "llc_capacity_per_core": "8KB",
                 "llc_latency": int(round(dev["uncore_ns"] / CORE_CYCLE_NS)),
                 "Translation": {"impl": "NoTranslation", "max_addr": int(max_addr)}}
        mem_ratio = MEM_CLOCK_RATIO
    doc = {
        "Frontend": front,
        "MemorySystem": {
            "impl": "GenericDRAM", "clock_ratio": mem_ratio,
            "DRAM": {"impl": "DDR4", "org": dev["org"], "timing": dev["timing"]},
            "Controller": {"impl": "Generic", "Scheduler": {"impl": "FRFCFS"},
                           "RefreshManager": {"impl": "AllBank"},
                           "RowPolicy": {"impl": "OpenRowPolicy"}, "plugins": []},
            "AddrMapper": {"impl": "RoBaRaCoCh"},
        },
    }
    notes = "".join(f"# note: {x}\n" for x in dev["notes"])
    pred = ", ".join(f"{k} {v:.4g}" for k, v in dev["predicted"].items())
    return (f"# {header}\n# derivation (docs/simulators.md): uncore {dev['uncore_ns']:.2f} ns; "
            f"predicted {pred}\n{notes}" + yaml.safe_dump(doc, sort_keys=False))


def trace(recs: np.ndarray, mode: str) -> str:
    """The trace text: `LD|ST 0xADDR` lines (LoadStoreTrace, saturated) or
    `GAP ADDR` / `GAP ADDR WBADDR` lines (SimpleO3, unloaded). SimpleO3 issues
    a writeback only together with a load: a writeback rides on the read
    before it when that read carries none, else on the next read; any left
    at the end ride on loads of address 0."""
    addr = recs["addr"]
    if mode == "saturated":
        op = np.where(recs["kind"] == st.WRITEBACK, "ST", "LD")
        return "".join(f"{o} 0x{a:x}\n" for o, a in zip(op.tolist(), addr.tolist()))
    out, free, pending = [], False, []
    for a, g, k in zip(addr.tolist(), recs["gap"].tolist(), recs["kind"].tolist()):
        if k == st.WRITEBACK:
            if free and not pending:
                out[-1] += f" {a}"
                free = False
            else:
                pending.append(a)
        elif pending:
            out.append(f"{g} {a} {pending.pop(0)}")
            free = False
        else:
            out.append(f"{g} {a}")
            free = True
    out.extend(f"0 0 {a}" for a in pending)
    return "".join(x + "\n" for x in out)


def expected_insts(recs: np.ndarray) -> int:
    """Instructions SimpleO3 retires for one pass over trace(recs, 'unloaded'):
    each line's bubbles plus its load."""
    text = trace(recs, "unloaded")
    return sum(int(line.split(" ", 1)[0]) + 1 for line in text.splitlines())


def command(binary: str, config_path: Path) -> list[str]:
    return [binary, "-f", str(config_path)]


_STAT = re.compile(r"^(read_latency|read_row_hits|read_row_misses|read_row_conflicts|"
                   r"num_read_reqs|num_write_reqs|avg_read_latency)_(\d+)$")


def parse(text: str, tck_ns: float = JEDEC["tCK_ns"]) -> dict:
    """Numbers from the stats Ramulator 2.0 prints on exit (a YAML document
    after its log lines): reads served, mean read latency (ns, from the summed
    latency over served reads, plus nothing else: the caller adds the uncore),
    total memory cycles and ns, the naive average (for the record), per
    channel."""
    start = re.search(r"^(Frontend|MemorySystem):", text, re.M)
    if not start:
        raise TierlabError("no Ramulator 2 statistics in its output (no 'MemorySystem:' "
                           "block)")
    try:
        doc = yaml.safe_load(text[start.start():])
    except yaml.YAMLError as e:
        raise TierlabError(f"cannot read Ramulator 2 statistics: {e}") from None
    found: dict = {}
    per_ch: dict = {}

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                m = _STAT.match(str(k))
                if m and isinstance(v, (int, float)):
                    per_ch.setdefault(int(m.group(2)), {})[m.group(1)] = float(v)
                elif k in ("memory_system_cycles", "total_num_read_requests",
                           "total_num_write_requests") and isinstance(v, (int, float)):
                    found[k] = float(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc.get("MemorySystem", doc))
    if "memory_system_cycles" not in found or not per_ch:
        raise TierlabError("Ramulator 2 statistics lack memory_system_cycles or the "
                           "controllers' read_latency_<ch>")
    served = sum(c.get("read_row_hits", 0) + c.get("read_row_misses", 0)
                 + c.get("read_row_conflicts", 0) for c in per_ch.values())
    lat = sum(c.get("read_latency", 0) for c in per_ch.values())
    offered = sum(c.get("num_read_reqs", 0) for c in per_ch.values())
    cycles = found["memory_system_cycles"]
    return {
        "reads": int(served),
        "reads_offered": int(offered),
        "writes": int(found.get("total_num_write_requests", 0)),
        "read_latency_mean_cycles": lat / served if served else math.nan,
        "read_latency_naive_cycles": lat / offered if offered else math.nan,
        "read_latency_mean_ns": lat / served * tck_ns if served else math.nan,
        "cycles": int(cycles),
        "total_ns": cycles * tck_ns,
        "channels": {ch: {k: v for k, v in c.items()} for ch, c in sorted(per_ch.items())},
    }
