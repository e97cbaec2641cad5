"""VANS back-end (Wang et al., "Characterizing and Modeling Non-Volatile Memory
Systems", MICRO 2020; github TheNetAdmin/VANS): its configuration and its
`0xADDR R|W|C` trace from a memory spec and the filtered stream, and the
numbers it prints read back.

VANS models one Optane DC PM DIMM behind the integrated memory controller
(imc -> nvram_system -> rmw buffer -> AIT -> media). Its timings are its own,
validated against the real DIMM: the generated configuration keeps the values
of VANS's config/vans.cfg (commit 541d2fb) and the spec decides the tier (only
`pm` specs are modelled by VANS) and the output folder. Unloaded runs mark
every read `C` (critical: the trace waits for it), so one read is
outstanding; saturated runs use `R`.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError
from tierlab.experiments.sims import stream as st

NAME = "vans"
TCK_NS = 0.75  # VANS's DDR4-2666 clock, config/vans.cfg [basic] tCK
# The DDR4-2666 timing block VANS's config/vans.cfg gives the AIT's DRAM
# (JEDEC JESD79-4 DDR4-2666V values with VANS's secondary timings).
_DDR4 = [("rate", 2666), ("freq", 1333.33), ("tCK", 0.75), ("nCL", 19), ("nCWL", 18),
         ("nRCD", 19), ("nRC", 62), ("nRP", 19), ("nRAS", 43), ("nFAW", 16), ("nRRDS", 4),
         ("nRRDL", 7), ("nCCDS", 4), ("nCCDL", 7), ("nWTRS", 4), ("nWTRL", 10),
         ("nREFI", 10400), ("nRFC", 467), ("nRTP", 10), ("nWR", 20), ("nBL", 4), ("nRTRS", 2),
         ("nPD", 6), ("nXP", 8), ("nXPDLL", 0), ("nCKESR", 7), ("nXS", 324), ("nXSDLL", 0)]


def _sections(dump_dir: str) -> list:
    """[(section, [(key, value)])] of one Optane DIMM, VANS config/vans.cfg."""
    none = [("component_mapping_func", "none_mapping"), ("media_mapping_func", "none_mapping")]
    return [
        ("organization", [("rmc", "1 * imc"), ("imc", "1 * nvram_system"),
                          ("ddr4_system", "0 * none"), ("nvram_system", "1 * rmw"),
                          ("rmw", "1 * ait"), ("ait", "1 * nv_media"), ("nv_media", "0 * none")]),
        ("basic", [("tCK", TCK_NS)]),
        ("rmc", none + [("start_addr", 0)]),
        ("imc", [("component_mapping_func", "stride_mapping(4096)"),
                 ("media_mapping_func", "none_mapping"), ("wpq_entries", 4),
                 ("rpq_entries", 4), ("adr_epoch", 10)]),
        ("ddr4_system", [("component_mapping_func", "none_mapping"),
                         ("media_mapping_func", "RaBaBgRoCoCh"), ("report_epoch", 0),
                         ("queue_size", 64), ("start_addr", 0), ("size", 4096),
                         ("data_width", 8), ("channel", 8), ("rank", 1), ("bank_group", 4),
                         ("bank", 4), ("row", 32768), ("col", 1024)] + _DDR4),
        ("nvram_system", none),
        ("rmw", none + [("lsq_entries", 64), ("roq_entries", 128), ("buffer_entries", 64),
                        ("ait_to_rmw_latency", 150), ("rmw_to_ait_latency", 90),
                        ("read_latency", 180), ("write_latency", 10)]),
        ("ait", [("component_mapping_func", "none_mapping"),
                 ("media_mapping_func", "RaBaBgRoCoCh"), ("lsq_entries", 16),
                 ("lmemq_entries", 16), ("mediaq_entries", 64), ("buffer_entries", 4096),
                 ("min_table_entries", 4096), ("wear_leveling_threshold", 896),
                 ("migration_block_entries", 256), ("migration_latency", 270),
                 ("report_epoch", 0), ("queue_size", 64), ("start_addr", 0), ("size", 512),
                 ("data_width", 8), ("channel", 1), ("rank", 1), ("bank_group", 4),
                 ("bank", 4), ("row", 32768), ("col", 1024)] + _DDR4),
        ("nv_media", none + [("read_latency", 100), ("write_latency", 300)]),
        ("dump", [("type", "file"), ("path", dump_dir), ("cfg_dump", "config"),
                  ("cmd_dump", "cmd.trace"), ("data_dump", "data.trace"),
                  ("stat_dump", "stats"), ("addr_stat_dump", "addr_stats"),
                  ("dram_trace_dump", "dram.trace"), ("pmem_trace_dump", "pmem.trace")]),
        ("trace", [("heart_beat_epoch", 0), ("report_epoch", 0), ("report_tail_latency", 0)]),
    ]


def check_spec(spec) -> None:
    if spec.tier != "pm":
        raise TierlabError(f"VANS models Optane DC PM DIMMs only: spec '{spec.name}' is tier "
                           f"'{spec.tier}' (use --backend ramulator2 or embedded)")


def config(spec, dump_dir: str, header: str) -> str:
    """The VANS configuration text (its reader takes `key : value` lines in
    `[section]`s, `#` comments, decimal numbers only)."""
    check_spec(spec)
    lines = [f"# {header}",
             "# one Optane DC PM DIMM; values of VANS config/vans.cfg (Wang et al., MICRO 2020)"]
    for name, kv in _sections(dump_dir):
        lines.append(f"\n[{name}]")
        lines.extend(f"{k} : {v}" for k, v in kv)
    return "\n".join(lines) + "\n"


def trace(recs: np.ndarray, mode: str, header: str) -> str:
    """`0xADDR R|W|C` lines after a `#` provenance line: writebacks `W`, reads
    `C` (unloaded: the next line waits for it) or `R` (saturated)."""
    rd = "C" if mode == "unloaded" else "R"
    op = np.where(recs["kind"] == st.WRITEBACK, "W", rd)
    body = "".join(f"0x{a:08x} {o}\n" for a, o in zip(recs["addr"].tolist(), op.tolist()))
    return f"# {header}\n{body}"


def command(binary: str, config_path: Path, trace_path: Path) -> list[str]:
    return [binary, "-c", str(config_path), "-t", str(trace_path)]


_LINE = re.compile(r"^(cnt\.[\w.]+):\s*(-?\d+(?:\.\d+)?)\s*$", re.M)


def parse(stdout: str, stats: str, mode: str) -> dict:
    """Numbers from VANS's stdout ("Total clock", "Total ns") and its stats
    file (`cnt.<component>.<group>.<name>: N`). Unloaded (every read
    critical): mean read latency = total time / reads; saturated: bandwidth =
    64 B x reads / total time."""
    m = re.search(r"^Total ns:\s*([0-9.]+)", stdout, re.M)
    if not m:
        raise TierlabError("no 'Total ns:' line in VANS's output")
    total_ns = float(m.group(1))
    counters = {k: float(v) for k, v in _LINE.findall(stats)}
    if "cnt.rmw.events.read_access" not in counters:
        raise TierlabError("VANS's stats lack cnt.rmw.events.read_access")
    reads = int(counters["cnt.rmw.events.read_access"])
    writes = int(counters.get("cnt.rmw.events.write_access", 0))
    out = {"reads": reads, "writes": writes, "total_ns": total_ns,
           "read_latency_mean_ns": math.nan, "counters": counters}
    if mode == "unloaded" and reads and not writes:
        out["read_latency_mean_ns"] = total_ns / reads
    return out
