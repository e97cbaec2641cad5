"""`tierlab bench memsim`: how fast the memory-tier model is (issue 20,
section 5): accesses per second through the cache filter and the tier-timing
model together, on one core (kernels/src/memsim/, called through
tierlab.engine.memsim).

Streams (each a RECORD array built before the clock starts):
- sequential: 8-byte loads over 64 MiB, a DID-block stream that misses one
  line in eight accesses (the prefetchers on);
- l1-resident: 8-byte loads cycling over 16 KiB (the filter's fast path);
- random-miss: 64-byte loads at random lines of 4 GiB, a miss at every level
  on every access (the slow path, a request per access);
- query: the memory stream of a query workload when --index and --workload
  are given: recorded by `tierlab trace memory` (--trace) or synthesised
  (tierlab.engine.memstream); else a mixed stream:
  blocks of 200 sequential bytes at random places with 150 cached accesses
  each (decode buffer and heap), the shape of a query's stream.
Each stream goes through a fresh filter (the machine spec's geometry) and a
timing model (DID and freq on the tier spec, the rest on the machine's DRAM)
`reps` times; the median and best wall time and the CPU time of the process
are recorded. Target: >= 20 M accesses/s on the query (or mixed) stream.
"""
from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

TARGET = 20e6


@dataclass
class Config:
    machine: str = "xeon-gold-6252n"
    tier: str = "optane-dcpmm-g1-x6"
    accesses: int = 8_000_000
    reps: int = 3
    index: Path | None = None
    workload: Path | None = None
    trace: Path | None = None
    seed: int = 0


def _streams(cfg: Config) -> dict:
    from tierlab.engine import memsim

    rng = np.random.default_rng(cfg.seed)
    n = cfg.accesses
    did = memsim.region_id("did")
    out = {}
    r = np.zeros(n, dtype=memsim.RECORD)
    r["addr"] = (1 << 32) + 8 * (np.arange(n, dtype=np.uint64) % ((64 << 20) // 8))
    r["size"], r["region"] = 8, did
    out["sequential"] = r
    r = np.zeros(n, dtype=memsim.RECORD)
    r["addr"] = (2 << 32) + 8 * (np.arange(n, dtype=np.uint64) % 2048)
    r["size"], r["region"] = 8, memsim.region_id("decode_buffer")
    out["l1-resident"] = r
    m = max(1, n // 4)
    r = np.zeros(m, dtype=memsim.RECORD)
    r["addr"] = (3 << 32) + 64 * rng.integers(0, (4 << 30) // 64, m, dtype=np.uint64)
    r["size"], r["region"] = 8, did
    out["random-miss"] = r
    if cfg.index is not None and cfg.workload is not None:
        from tierlab.engine import memstream

        out["query"] = (memstream.recorded(cfg.index, cfg.workload, cfg.trace)
                        if cfg.trace is not None else
                        memstream.workload_stream(cfg.index, cfg.workload)).records
    else:
        blocks = n // 175
        starts = (4 << 32) + 64 * rng.integers(0, (1 << 30) // 64, blocks, dtype=np.uint64)
        per = np.zeros((blocks, 175), dtype=memsim.RECORD)
        per["addr"][:, :25] = starts[:, None] + 8 * np.arange(25, dtype=np.uint64)
        per["region"][:, :25] = did
        per["addr"][:, 25:] = (5 << 32) + 8 * (np.arange(150, dtype=np.uint64) % 256)
        per["region"][:, 25:] = memsim.region_id("decode_buffer")
        per["kind"][:, 25:57] = memsim.STORE
        per["size"] = 8
        out["mixed"] = per.reshape(-1)
    return out


def run(cfg: Config, progress=None) -> dict:
    from tierlab.engine import memsim

    streams = _streams(cfg)
    rows = []
    for name, rec in streams.items():
        walls, cpus, reqs = [], [], 0
        for _ in range(cfg.reps):
            f = memsim.Filter(cfg.machine)
            t = memsim.Timing({"did": cfg.tier, "freq": cfg.tier}, cfg.machine, cores=1,
                              cpu_ns_per_access=0.5)
            c0, w0 = time.process_time(), time.perf_counter()
            req = f.run(rec)
            t.run(req)
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
            reqs = len(req)
            if progress:
                progress(name)
        w = float(np.median(walls))
        rows.append({"stream": name, "accesses": int(len(rec)), "requests": int(reqs),
                     "wall_s_median": w, "wall_s_best": float(min(walls)),
                     "cpu_s_median": float(np.median(cpus)),
                     "accesses_per_s": len(rec) / w,
                     "accesses_per_s_best": len(rec) / min(walls),
                     "accesses_per_cpu_s": len(rec) / max(float(np.median(cpus)), 1e-9)})
    key = "query" if "query" in streams else "mixed"
    main = next(r for r in rows if r["stream"] == key)
    return {
        "benchmark": "memsim",
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "loadavg_before_after": None},
        "config": {"machine_spec": cfg.machine, "tier": cfg.tier, "accesses": cfg.accesses,
                   "reps": cfg.reps, "index": str(cfg.index) if cfg.index else None,
                   "workload": str(cfg.workload) if cfg.workload else None,
                   "trace": str(cfg.trace) if cfg.trace else None},
        "streams": rows,
        "target": {"stream": key, "accesses_per_s": TARGET,
                   "measured": main["accesses_per_s"],
                   "met": bool(main["accesses_per_s"] >= TARGET)},
    }


def format_table(doc: dict) -> str:
    lines = [f"{'stream':<12} {'accesses':>11} {'requests':>10} {'M acc/s':>8} "
             f"{'best':>8} {'per CPU s':>9}"]
    for r in doc["streams"]:
        lines.append(f"{r['stream']:<12} {r['accesses']:>11,} {r['requests']:>10,} "
                     f"{r['accesses_per_s'] / 1e6:>8.1f} {r['accesses_per_s_best'] / 1e6:>8.1f} "
                     f"{r['accesses_per_cpu_s'] / 1e6:>9.1f}")
    t = doc["target"]
    lines.append(f"target >= {t['accesses_per_s'] / 1e6:g} M accesses/s on '{t['stream']}': "
                 f"{t['measured'] / 1e6:.1f} M, {'MET' if t['met'] else 'MISSED'}; "
                 f"load before/after {doc['machine']['loadavg_before_after']}")
    return "\n".join(lines)
