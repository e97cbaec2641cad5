"""The slow memory tier that holds the segment cache (a memory spec of
sim-configs/devices: ddr4-2666, optane-dcpmm-g1, cxl-type3, ...).

Two costs (APCACHE.md "The four configurations", TIERS.md):
- serving: the decoding part of the CPU cost of the blocks served from the
  tier (the cost table's measured decode time per block; model/sim.py) is
  multiplied by `factor`; scoring and the per-query work are not. The
  default factor is the ratio of the tier's sequential read latency to
  DDR4-2666's (read_latency_seq_ns: Optane 169.4 / 81.4 = 2.08, the CXL
  spec 181.4 / 81.4 = 2.23, DRAM 1). Sequential, because a term's chain is
  read front to back in 32 KiB segments; latency rather than bandwidth,
  because one query thread decoding ~1-2 GB/s is far below any tier's
  bandwidth but waits for every line the hardware prefetcher does not
  bring in time. Counting all of the decoding as memory stall makes this an
  upper bound on the slowdown; override it with `tier_factor`.
- copying a term into the segment cache: its chain bytes (postings plus 8
  bytes of offsets per block) / write_bandwidth_bytes_per_s of the tier.
  The tier's write bandwidth is shared: copies of all cores' workers go one
  at a time (FIFO), since a PM DIMM's write bandwidth does not grow with
  writers (TIERS.md: one Optane DIMM, 2.22 GB/s with 1 thread, 0.80 GB/s
  with 24).

Units: ns, bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from tierlab.errors import TierlabError

REFERENCE_DRAM = "ddr4-2666"


@dataclass(frozen=True)
class Tier:
    name: str
    factor: float
    write_bytes_per_s: float
    factor_source: str

    @classmethod
    def from_spec(cls, spec, factor: float | None = None) -> "Tier":
        from tierlab import specs

        if factor is not None:
            if not factor > 0:
                raise TierlabError(f"tier_factor must be > 0, got {factor}")
            how = "given (tier_factor)"
        else:
            dram = specs.load(REFERENCE_DRAM, kind="memory")
            factor = spec["read_latency_seq_ns"] / dram["read_latency_seq_ns"]
            how = (f"read_latency_seq_ns {spec['read_latency_seq_ns']:g} / "
                   f"{REFERENCE_DRAM} {dram['read_latency_seq_ns']:g}")
        wbw = spec.get("write_bandwidth_bytes_per_s")
        if not wbw:
            raise TierlabError(f"slow tier '{spec.name}' has no write_bandwidth_bytes_per_s: "
                               "the model needs it to copy terms into the segment cache")
        return cls(spec.name, float(factor), float(wbw), how)

    def copy_ns(self, nbytes: int) -> int:
        return int(nbytes * 1e9 / self.write_bytes_per_s + 0.5)
