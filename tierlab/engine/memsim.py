"""The memory-tier model from Python: the cache filter and the tier-timing
model of kernels/src/memsim/ (tierlab.h "Cache filter", "Tier-timing model";
docs/tiers.md "The memory-tier model").

- `Filter(machine)` builds the cache hierarchy of a machine spec
  (sim-configs/machines) and turns an array of RECORD (tierlab_memtrace_record)
  into an array of REQUEST (tierlab_mem_request), order preserved, with
  per-region counts.
- `Timing(placement, machine, cores=...)` times a REQUEST stream of one core on
  the memory specs its regions live on (`placement`: region name -> memory
  spec) and returns the stall per region (and per query).
- `regions()` is the region registry (tierlab.h TIERLAB_REGION_*), in number
  order.

Units: bytes, ns.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tierlab.core import specs
from tierlab.core.errors import TierlabError
from tierlab.core.native import ffi_lib

RECORD = np.dtype([("addr", "<u8"), ("query", "<u4"), ("size", "<u2"), ("kind", "u1"),
                   ("region", "u1")])
REQUEST = np.dtype([("addr", "<u8"), ("query", "<u4"), ("gap", "<u4"), ("kind", "u1"),
                    ("region", "u1"), ("pad", "<u2"), ("pad2", "<u4")])
LOAD, STORE = 0, 1
READ, WRITEBACK, PREFETCH = 0, 1, 2
CHUNK = 1 << 16  # records per call into the filter


def regions() -> tuple[str, ...]:
    """Region names by number: the region registry (tierlab.core.registry.
    memory_regions, kernels/src/memtrace/regions.c)."""
    from tierlab.core import registry

    return registry.memory_regions()


def region_id(name: str) -> int:
    try:
        return regions().index(name)
    except ValueError:
        raise TierlabError(f"unknown memory region '{name}' (known: {', '.join(regions())})") \
            from None


def _check(rc: int, what: str) -> None:
    if rc:
        raise TierlabError(f"{what}: the C kernels refused it (code {rc})")


def machine_spec(name_or_spec):
    return name_or_spec if hasattr(name_or_spec, "kind") else specs.load(name_or_spec,
                                                                          kind="machine")


def filter_config(machine, levels: int | None = None, prefetch: bool = True) -> dict:
    """The filter's geometry from a machine spec: its L1d, L2 and LLC (levels
    of 0 bytes left out; `levels` keeps the first ones), its prefetchers
    unless prefetch is False."""
    m = machine_spec(machine)
    sizes = [(m["l1d_bytes"], m["l1d_ways"]), (m["l2_bytes"], m["l2_ways"]),
             (m["llc_bytes"], m["llc_ways"])]
    sizes = [(int(b), int(w)) for b, w in sizes if b > 0]
    if levels is not None:
        sizes = sizes[:levels]
    on = prefetch
    return {"line_bytes": int(m["line_bytes"]), "levels": len(sizes),
            "level_bytes": [b for b, _ in sizes] + [0] * (3 - len(sizes)),
            "level_ways": [w for _, w in sizes] + [0] * (3 - len(sizes)),
            "inclusive": int(m.get("llc_inclusive", 0.0)),
            "prefetch_next_line": int(on and m.get("prefetch_next_line", 0.0)),
            "prefetch_stream": int(on and m.get("prefetch_stream", 0.0)),
            "stream_distance": int(m.get("prefetch_stream_distance_lines", 20)),
            "stream_degree": int(m.get("prefetch_stream_degree", 2)),
            "streams": int(m.get("prefetch_streams", 32))}


class Filter:
    """A cache hierarchy (see the module docstring); reusable with reset()."""

    def __init__(self, machine="this-vm", *, levels: int | None = None, prefetch: bool = True,
                 config: dict | None = None):
        ffi, lib = ffi_lib()
        self._ffi, self._lib = ffi, lib
        self.config = config or filter_config(machine, levels, prefetch)
        c = ffi.new("tierlab_filter_config *")
        for k, v in self.config.items():
            if isinstance(v, list):
                for i, x in enumerate(v):
                    getattr(c, k)[i] = x
            else:
                setattr(c, k, v)
        p = ffi.new("tierlab_filter **")
        _check(lib.tierlab_filter_new(c, p), f"cache filter {self.config}")
        self._f = ffi.gc(p[0], lib.tierlab_filter_free)
        self.line_bytes = self.config["line_bytes"]

    def reset(self) -> None:
        self._lib.tierlab_filter_reset(self._f)

    def run(self, records: np.ndarray) -> np.ndarray:
        """The requests records cause, in order (REQUEST array)."""
        ffi, lib = self._ffi, self._lib
        records = np.ascontiguousarray(records, dtype=RECORD)
        cap = max(int(lib.tierlab_filter_min_cap(self._f)), 4 * CHUNK)
        buf = np.empty(cap, dtype=REQUEST)
        outp = ffi.cast("tierlab_mem_request *", ffi.from_buffer(buf))
        used = ffi.new("size_t *")
        parts, done, n = [], 0, len(records)
        base = ffi.cast("tierlab_memtrace_record *", ffi.from_buffer(records)) if n else None
        while done < n:
            got = lib.tierlab_filter_run(self._f, base + done, n - done, used, outp, cap)
            _check(0 if got >= 0 else int(got), "cache filter run")
            parts.append(buf[:got].copy())
            done += int(used[0])
        return np.concatenate(parts) if parts else np.empty(0, dtype=REQUEST)

    def counts(self) -> dict:
        """Per-region counts: {name: {accesses, loads, l1_misses.., reads,
        prefetches, writebacks, useful_prefetches}} for regions with accesses."""
        k = self._ffi.new("tierlab_filter_counts *")
        self._lib.tierlab_filter_get_counts(self._f, k)
        out = {}
        for i, name in enumerate(regions()):
            row = {"accesses": int(k.accesses[i]), "loads": int(k.loads[i])}
            for lv in range(self.config["levels"]):
                row[f"l{lv + 1}_misses"] = int(k.misses[lv][i])
            for key in ("reads", "prefetches", "writebacks", "useful_prefetches"):
                row[key] = int(getattr(k, key)[i])
            if row["accesses"] or row["writebacks"]:
                out[name] = row
        return out


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class TierShare:
    """A memory spec as one core of `cores` sees it (what the timing model takes)."""

    spec: str
    lat_seq_ns: float
    lat_random_ns: float
    read_bytes_per_s: float
    write_bytes_per_s: float
    granule_bytes: int
    buffer_granules: int
    max_outstanding: int
    how: str

    @classmethod
    def of(cls, name_or_spec, cores: int = 1) -> "TierShare":
        """The spec's numbers for one of `cores` cores sharing it: its aggregate
        read (write) bandwidth / cores, capped by one thread's read bandwidth
        when the spec gives it."""
        s = name_or_spec if hasattr(name_or_spec, "kind") else specs.load(name_or_spec,
                                                                          kind="memory")
        if cores < 1:
            raise TierlabError(f"cores must be >= 1, got {cores}")
        rbw = s["read_bandwidth_bytes_per_s"] / cores
        wbw = s.get("write_bandwidth_bytes_per_s", s["read_bandwidth_bytes_per_s"]) / cores
        one = s.get("read_bandwidth_1thread_bytes_per_s")
        how = f"read {s['read_bandwidth_bytes_per_s'] / 1e9:g} GB/s / {cores} cores"
        if one is not None and one < rbw:
            rbw, how = one, f"read_bandwidth_1thread {one / 1e9:g} GB/s (below the share)"
        gran = int(s["access_granularity_bytes"])
        buf = int(s.get("device_buffer_bytes", 0.0)) // gran
        return cls(s.name, s["read_latency_seq_ns"], s["read_latency_random_ns"], rbw, wbw,
                   gran, buf, int(s.get("max_outstanding", 64.0)), how)


# Regions whose misses depend on each other (a search through them: binary
# search in the dictionary); the rest are streams or independent lookups.
SERIAL_REGIONS = ("dictionary",)


def core_limits(machine) -> dict:
    """fill_buffers and the epoch window of the machine's core: the time its
    reorder buffer takes to fill at full allocation width, rob_entries /
    (allocation_width x core_frequency_hz) (Skylake: 224 / (4 x 2.3 GHz) =
    24 ns); misses further apart cannot overlap."""
    m = machine_spec(machine)
    rob, width = m.get("rob_entries", 224.0), m.get("allocation_width", 4.0)
    hz = m.get("core_frequency_hz", 2.3e9)
    return {"fill_buffers": int(m["fill_buffers"]), "window_ns": 1e9 * rob / (width * hz)}


class Timing:
    """The tier-timing model for one core (see the module docstring).
    placement: {region name: memory spec}; regions not named live on
    `default` (the machine's local DRAM when None)."""

    def __init__(self, placement: dict | None = None, machine="xeon-gold-6252n", *,
                 cores: int = 1, cpu_ns_per_access: float = 1.0, default: str | None = None):
        ffi, lib = ffi_lib()
        self._ffi, self._lib = ffi, lib
        m = machine_spec(machine)
        default = default or m.memory or "ddr4-2666"
        names = regions()
        placement = dict(placement or {})
        for r in placement:
            region_id(r)
        tiers = [default] + sorted({v for v in placement.values() if v != default})
        if len(tiers) > int(lib.TIERLAB_TIMING_MAX_TIERS):
            raise TierlabError(f"at most {int(lib.TIERLAB_TIMING_MAX_TIERS)} tiers at once")
        self.tiers = [TierShare.of(t, cores) for t in tiers]
        self.placement = {r: placement.get(r, default) for r in names}
        c = ffi.new("tierlab_timing_config *")
        c.tiers = len(tiers)
        c.line_bytes = int(m["line_bytes"])
        lim = core_limits(m)
        c.fill_buffers, c.window_ns = lim["fill_buffers"], lim["window_ns"]
        if not (cpu_ns_per_access >= 0 and np.isfinite(cpu_ns_per_access)):
            raise TierlabError(f"cpu_ns_per_access must be >= 0, got {cpu_ns_per_access}")
        c.cpu_ns_per_access = float(cpu_ns_per_access)
        for i, name in enumerate(names):
            c.region_tier[i] = tiers.index(self.placement[name])
            c.region_serial[i] = int(name in SERIAL_REGIONS)
        for i, t in enumerate(self.tiers):
            p = c.tier[i]
            p.lat_seq_ns, p.lat_random_ns = t.lat_seq_ns, t.lat_random_ns
            p.read_bytes_per_s, p.write_bytes_per_s = t.read_bytes_per_s, t.write_bytes_per_s
            p.granule_bytes, p.buffer_granules = max(t.granule_bytes, c.line_bytes), \
                t.buffer_granules
            p.max_outstanding = t.max_outstanding
        p = ffi.new("tierlab_timing **")
        _check(lib.tierlab_timing_new(c, p), "tier-timing model")
        self._t = ffi.gc(p[0], lib.tierlab_timing_free)
        self.cores = cores

    def reset(self) -> None:
        self._lib.tierlab_timing_reset(self._t)

    def run(self, requests: np.ndarray, *, queries: int = 0, final: bool = True):
        """Time requests (REQUEST array) after the earlier calls; returns the
        per-query stall as a (queries x regions) float64 array when queries > 0."""
        ffi, lib = self._ffi, self._lib
        requests = np.ascontiguousarray(requests, dtype=REQUEST)
        pq = np.zeros((queries, len(regions())), dtype=np.float64) if queries else None
        rp = ffi.cast("tierlab_mem_request *", ffi.from_buffer(requests)) if len(requests) \
            else ffi.NULL
        qp = ffi.cast("double *", ffi.from_buffer(pq)) if pq is not None else ffi.NULL
        lib.tierlab_timing_run(self._t, rp, len(requests), int(final), qp, queries)
        return pq

    def result(self) -> dict:
        """{region: {stall_ns, latency_ns, bandwidth_ns, reads, prefetches,
        writebacks, buffer_hits, media_bytes, tier}} plus cpu_ns and epochs."""
        r = self._ffi.new("tierlab_timing_result *")
        self._lib.tierlab_timing_get(self._t, r)
        out = {"cpu_ns": float(r.cpu_ns), "epochs": int(r.epochs), "regions": {}}
        for i, name in enumerate(regions()):
            row = {k: float(getattr(r, k)[i]) for k in ("stall_ns", "latency_ns", "bandwidth_ns")}
            row.update({k: int(getattr(r, k)[i]) for k in ("reads", "prefetches", "writebacks",
                                                            "buffer_hits", "media_bytes")})
            row["tier"] = self.placement[name]
            out["regions"][name] = row
        return out
