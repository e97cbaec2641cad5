"""The slow memory tier that holds the segment cache (a memory spec of
sim-configs/devices: ddr4-2666, optane-dcpmm-g1, cxl-type3, ...).

Two costs (docs/apcache.md "The four configurations", docs/tiers.md):
- serving: a query thread decoding a term's chain from the tier stalls where
  DRAM would not. The chain is read front to back, so the hardware prefetcher
  streams it: the tier's extra latency is exposed once per stream start,
  i.e. per segment of the chain (segments are not contiguous), and the
  stream overlaps the decoding, which waits for it only where it is slower
  than the decoding (a roofline: max(decode, bytes / bandwidth)). Per
  query, over the blocks it decodes from the tier:

      stall_ns = segments * max(0, lat_seq(tier) - lat_seq(dram))
               + max(0, max(decode_ns, bytes / bw1(tier))
                        - max(decode_ns, bytes / bw1(dram)))

  lat_seq = read_latency_seq_ns, bw1 = read_bandwidth_1thread_bytes_per_s,
  decode_ns the decoding CPU time of those blocks (the cost table's decode
  timings, model/sim.py), bytes their compressed DID + freq bytes and
  segments their share of the term's chain: a query that decodes b of a
  term's B blocks is charged b/B of its bytes and of its segments
  (ceil((bytes + 8 * blocks) / segment_bytes), the cache's own count).
  The numbers (docs/tiers.md; Yang et al., FAST 2020):
  * Optane: 169.4 - 81.4 = 88 ns per segment; one thread streams one DIMM
    at 2.92 GB/s. The reference index's H terms have 157-byte blocks on
    average (71-305 bytes): while a DID + freq block takes longer to
    decode than its bytes take to stream (157 bytes / 2.92 GB/s = 54 ns),
    the stream keeps up and the stall is the stream starts, 88 ns per
    32 KiB segment (~210 H blocks). Larger blocks (M-class terms at the
    reference scale, ~400 bytes) or faster decoding make the decoding wait
    for the stream, and the max() above charges that wait.
  * DDR4-2666: docs/tiers.md has no single-thread read bandwidth, so bw1 falls
    back to read_bandwidth_bytes_per_s (105.6 GB/s, six channels). That
    overstates one thread's stream: DRAM's streaming time is a lower
    bound, so the tier-minus-DRAM difference is an upper bound. (It would
    bind only if a 157-byte block decoded in under 1.5 ns, its streaming
    time at 105.6 GB/s.) DRAM as the slow tier costs exactly 0 extra.
  * cxl-type3: +190 ns over DRAM per segment (the middle of the +140..+250
    ns Sun et al., MICRO 2023 measured); no single-thread figure either, so bw1 is
    its read_bandwidth_bytes_per_s (32 GB/s, one x8 link, an assumption).
    That overstates one thread's stream, so CXL's streaming cost here is
    a lower bound.
  Why not "decode time x latency ratio" (2.08 for Optane) or an additive
  byte term (bytes x (1/bw1(tier) - 1/bw1(dram)), every byte a stall on
  top of the decoding: 157 x 0.333 = 52 ns per H block): both treat the
  prefetched stream as if it did not overlap the decoding. The reference measured on real Optane that DRAM and PM are
  equal for the skip list and dictionary and that hybrid-prefetch reaches
  base's QPS: the real serving slowdown is small, as this rule has it.
  Sharing between cores: the tier's aggregate read bandwidth
  (read_bandwidth_bytes_per_s; Optane 6.52 GB/s for one DIMM read by 4
  threads) is shared by all cores' query threads, and is not modelled:
  a query thread reads the tier at most at its decoding rate while it
  decodes (bounded by bw1 by the rule above) and on average at its bytes
  / its query time, which is lower. The rule assumes that the cores
  together stay below the aggregate (cores x bytes per query x QPS per
  core < 6.52 GB/s for one DIMM, 37.6 GB/s for six interleaved); a run
  near it is outside what the model predicts.
  `tier_factor` (a run key) replaces this by the older multiplicative
  rule, an upper bound: the decoding CPU time of the blocks served from
  the tier x factor (Optane's latency ratio 169.4 / 81.4 = 2.08 counts all
  decoding as memory stall).
- copying a term into the segment cache: its chain bytes (postings plus 8
  bytes of offsets per block) / write_bandwidth_bytes_per_s of the tier, or
  / the rate the copying thread itself reaches when that is lower (the cost
  table's threads.copy_bytes_per_s, measured by `tierlab query costs`).
  The tier's write bandwidth is shared: copies of all cores' workers go one
  at a time (FIFO), since a PM DIMM's write bandwidth does not grow with
  writers (docs/tiers.md: one Optane DIMM, 2.22 GB/s with 1 thread, 0.80 GB/s
  with 24).

Units: ns, bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from tierlab.core.errors import TierlabError

REFERENCE_DRAM = "ddr4-2666"
BW1 = "read_bandwidth_1thread_bytes_per_s"
BW = "read_bandwidth_bytes_per_s"


def _bw1(spec) -> tuple[float, str]:
    """One thread's sequential read bandwidth of the tier and the key it came
    from: BW1, or the aggregate BW when the spec has no BW1 (a fallback that
    overstates a thread's stream; the module docstring says what it bounds)."""
    key = BW1 if spec.get(BW1) is not None else BW
    v = spec.get(key)
    if v is None or not v > 0:
        raise TierlabError(f"memory spec '{spec.name}': key '{key}' must be > 0 bytes/s "
                           f"(the slow tier's serving cost streams at it), got {v!r}")
    return float(v), key


def _num(spec, key: str) -> float:
    v = spec.get(key)
    if v is None:
        raise TierlabError(f"memory spec '{spec.name}' has no key '{key}': the model needs "
                           "it for the slow tier's serving cost")
    if not v >= 0:
        raise TierlabError(f"memory spec '{spec.name}': key '{key}' must be >= 0, got {v!r}")
    return float(v)


@dataclass(frozen=True)
class Tier:
    name: str
    factor: float | None           # the multiplicative rule when given (tier_factor)
    write_bytes_per_s: float
    factor_source: str
    segment_ns: float = 0.0        # exposed extra latency per segment read (stream start)
    byte_ns: float = 0.0           # ns per byte of the tier's single-thread stream
    dram_byte_ns: float = 0.0      # the same for DDR4-2666 (the stream DRAM would give)

    @classmethod
    def from_spec(cls, spec, factor: float | None = None) -> "Tier":
        from tierlab.core import specs

        wbw = spec.get("write_bandwidth_bytes_per_s")
        if wbw is None or not wbw > 0:
            raise TierlabError(f"slow tier '{spec.name}': key 'write_bandwidth_bytes_per_s' "
                               f"must be > 0 bytes/s (the model copies terms into the segment "
                               f"cache at it), got {wbw!r}")
        if factor is not None:
            if not factor > 0:
                raise TierlabError(f"tier_factor must be > 0, got {factor}")
            return cls(spec.name, float(factor), float(wbw),
                       "given (tier_factor): decoding time of the blocks served from the "
                       "tier x factor, an upper bound")
        dram = specs.load(REFERENCE_DRAM, kind="memory")
        lat, lat_d = _num(spec, "read_latency_seq_ns"), _num(dram, "read_latency_seq_ns")
        (bw, key), (bw_d, key_d) = _bw1(spec), _bw1(dram)
        seg = max(0.0, lat - lat_d)
        how = (f"access: {seg:g} ns per segment (read_latency_seq_ns {lat:g} - {REFERENCE_DRAM} "
               f"{lat_d:g}); stream at {bw / 1e9:g} GB/s ({key}) overlapping the decoding, "
               f"{REFERENCE_DRAM} {bw_d / 1e9:g} GB/s ({key_d})")
        return cls(spec.name, None, float(wbw), how, seg, 1e9 / bw, 1e9 / bw_d)

    def stall_ns(self, segments: float, nbytes: float, decode_ns: float) -> float:
        """Extra stall, over DDR4-2666, of a query that decodes `nbytes` in
        `segments` segments from the tier in decode_ns of CPU (the access
        rule of the module docstring; 0 under tier_factor)."""
        if self.factor is not None:
            return 0.0
        stream = max(decode_ns, nbytes * self.byte_ns) - max(decode_ns, nbytes * self.dram_byte_ns)
        return segments * self.segment_ns + max(0.0, stream)

    def copy_ns(self, nbytes: int, cpu_bytes_per_s: float | None = None) -> int:
        """A copy of nbytes into the tier: at its write bandwidth, or at the
        copying thread's own rate when that is slower."""
        rate = self.write_bytes_per_s if cpu_bytes_per_s is None else \
            min(self.write_bytes_per_s, cpu_bytes_per_s)
        return int(nbytes * 1e9 / rate + 0.5)


def roofline_ns(stream, cpu_ns, spec_name: str, structures=("did", "freq")):
    """Per query of a synthesised stream (tierlab.engine.memstream): the extra
    time this rule gives with `structures` (postings: did, freq) on memory
    spec `spec_name` over DDR4-2666: one stream start per term and the block
    bytes the query reads from them, its CPU time cpu_ns as the decoding it
    overlaps; the bytes are the query's distinct 64-byte lines of those regions.
    (None for dict or skip: the rule times postings only.)"""
    import numpy as np

    from tierlab.core import specs
    from tierlab.engine import memsim

    if not set(structures) <= {"did", "freq"}:
        return None
    tier = Tier.from_spec(specs.load(spec_name, kind="memory"))
    rec = stream.records
    regs = [memsim.region_id(s) for s in structures]
    m = np.isin(rec["region"], regs)
    n = len(cpu_ns)
    # the block bytes a query reads: its distinct 64-byte lines of the regions (a
    # recorded trace reads a line several times: checksum, decode)
    key = np.unique(np.stack([rec["query"][m].astype(np.uint64),
                              rec["addr"][m].astype(np.uint64) >> np.uint64(6)]), axis=1)
    nbytes = 64.0 * np.bincount(key[0].astype(np.int64), minlength=n)[:n]
    terms = np.where(stream.qtype == "and", 2.0, 1.0)
    return np.array([tier.stall_ns(t * (b > 0), b, c) for t, b, c in zip(terms, nbytes, cpu_ns)])
