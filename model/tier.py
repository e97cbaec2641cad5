"""The slow memory tier that holds the segment cache (a memory spec of
sim-configs/devices: ddr4-2666, optane-dcpmm-g1, cxl-type3, ...).

Two costs (APCACHE.md "The four configurations", TIERS.md):
- serving: a query thread decoding a term's chain from the tier stalls where
  DRAM would not. The chain is read front to back, so the hardware prefetcher
  streams it: the tier's extra latency is exposed once per stream start,
  i.e. per segment of the chain (segments are not contiguous), and the
  stream overlaps the decoding, which waits for it only where it is slower
  than the decoding (a roofline: max(compute, bytes / bandwidth)). Per
  query, over the blocks it decodes from the tier:

      stall_ns = segments * max(0, lat_seq(tier) - lat_seq(dram))
               + max(0, bytes / bw1(tier) - decode_ns)

  lat_seq = read_latency_seq_ns, bw1 = read_bandwidth_1thread_bytes_per_s
  (the spec's read_bandwidth_bytes_per_s when it has none), decode_ns the
  decoding CPU time of those blocks (the cost table's). Optane: 169.4 - 81.4
  = 88 ns per 32 KiB segment, and a stream of 2.92 GB/s (one thread, one
  DIMM) against a query thread that decodes ~0.2-0.4 GB/s: the stream keeps
  up, the stall is the stream starts (~0.3 % of an H query). A tier no
  slower than DDR4-2666 costs nothing. The reference measured on real
  Optane that DRAM and PM are equal for the skip list and dictionary and
  that hybrid-prefetch reaches base's QPS, as this rule has it. The tier's
  aggregate read bandwidth (Optane: 6.52 GB/s per DIMM, 4 threads) is not
  modelled as shared between cores: even four query threads stay below it.
  `tier_factor` (a run key) replaces this by the older rule, an upper bound:
  the decoding CPU time of the blocks served from the tier x factor (2.08
  = Optane's latency ratio counts all decoding as memory stall).
- copying a term into the segment cache: its chain bytes (postings plus 8
  bytes of offsets per block) / write_bandwidth_bytes_per_s of the tier, or
  / the rate the copying thread itself reaches when that is lower (the cost
  table's threads.copy_bytes_per_s: ~10-14 GB/s on this VM, below DDR4-2666's
  76.8 GB/s of six channels).
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


def _bw1(spec) -> float:
    v = spec.get("read_bandwidth_1thread_bytes_per_s") or spec["read_bandwidth_bytes_per_s"]
    if not v or v <= 0:
        raise TierlabError(f"memory spec '{spec.name}': read bandwidth must be > 0, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Tier:
    name: str
    factor: float | None           # the multiplicative rule when given (tier_factor)
    write_bytes_per_s: float
    factor_source: str
    segment_ns: float = 0.0        # exposed extra latency per segment read
    byte_ns: float = 0.0           # ns per byte of the tier's single-thread stream

    @classmethod
    def from_spec(cls, spec, factor: float | None = None) -> "Tier":
        from tierlab import specs

        wbw = spec.get("write_bandwidth_bytes_per_s")
        if not wbw:
            raise TierlabError(f"slow tier '{spec.name}' has no write_bandwidth_bytes_per_s: "
                               "the model needs it to copy terms into the segment cache")
        if factor is not None:
            if not factor > 0:
                raise TierlabError(f"tier_factor must be > 0, got {factor}")
            return cls(spec.name, float(factor), float(wbw), "given (tier_factor)")
        dram = specs.load(REFERENCE_DRAM, kind="memory")
        seg = max(0.0, spec["read_latency_seq_ns"] - dram["read_latency_seq_ns"])
        per_byte = 1e9 / _bw1(spec) if _bw1(spec) < _bw1(dram) else 0.0
        how = (f"access: {seg:g} ns per segment (read_latency_seq_ns {spec['read_latency_seq_ns']:g}"
               f" - {REFERENCE_DRAM} {dram['read_latency_seq_ns']:g}); stream at "
               f"{_bw1(spec) / 1e9:g} GB/s overlapping the decoding")
        return cls(spec.name, None, float(wbw), how, seg, per_byte)

    def stall_ns(self, segments: float, nbytes: float, decode_ns: float) -> float:
        """Extra stall of a query that decodes `nbytes` in `segments` segments
        from the tier in decode_ns of CPU (access rule; 0 under tier_factor)."""
        if self.factor is not None:
            return 0.0
        return segments * self.segment_ns + max(0.0, nbytes * self.byte_ns - decode_ns)

    def copy_ns(self, nbytes: int, cpu_bytes_per_s: float | None = None) -> int:
        """A copy of nbytes into the tier: at its write bandwidth, or at the
        copying thread's own rate when that is slower."""
        rate = self.write_bytes_per_s if cpu_bytes_per_s is None else \
            min(self.write_bytes_per_s, cpu_bytes_per_s)
        return int(nbytes * 1e9 / rate + 0.5)
