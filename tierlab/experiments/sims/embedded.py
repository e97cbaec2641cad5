"""The embedded back-end: the in-tree tier-timing model (kernels/src/memsim/
timing.c, tierlab.h "Tier-timing model") on the same stream and in the same
two modes as the simulators, so `tierlab sim run --backend embedded` writes
rows that compare one to one.

- unloaded: one fill buffer and one outstanding request at the tier (every
  read an epoch of its own: its idle latency), the core spending
  CORE_CYCLE_NS per access the caches served (the request's gap);
- saturated: no core time, the tier's max_outstanding media accesses (granules)
  in flight and fill buffers for all their lines (max_outstanding x the lines
  of a granule), the tier's whole read bandwidth.

Prefetch requests are timed as reads: the simulators' front ends cannot tell
them apart and make every request that is not a writeback a read the core
waits for (unloaded) or offers (saturated).

Mean read latency = latency_ns / reads of each region (unloaded only: in
saturated runs an epoch's latency covers several reads), total time = core
time + stall; one row per region that has reads, plus `all`.
"""
from __future__ import annotations

import math

import numpy as np

from tierlab.core import native
from tierlab.core.errors import TierlabError
from tierlab.engine.memsim import TierShare, regions
from tierlab.experiments.sims import stream as st
from tierlab.experiments.sims.ramulator2 import dimm_bandwidth

def available() -> bool:
    try:
        _, lib = native.ffi_lib()
        return hasattr(lib, "tierlab_timing_new")
    except TierlabError:
        return False


def model():
    """The embedded model as run.run wants it, or None when this build of
    the kernels has no tier-timing model."""
    return run if available() else None


def _config(ffi, spec, mode: str, cycle_ns: float):
    """The timing model's configuration: the tier's numbers as the model
    takes them (tierlab.engine.memsim.TierShare, one core), with one DIMM's
    whole read bandwidth (what the simulators model) and the mode's core."""
    share = TierShare.of(spec, cores=1)
    cfg = ffi.new("tierlab_timing_config *")
    cfg.tiers = 1
    cfg.line_bytes = st.LINE
    for r in range(len(cfg.region_tier)):
        cfg.region_tier[r] = 0
        cfg.region_serial[r] = 0
    outstanding = max(1, share.max_outstanding)
    granule = max(st.LINE, share.granule_bytes)
    cfg.fill_buffers = 1 if mode == "unloaded" else outstanding * (granule // st.LINE)
    cfg.window_ns = 1.0 if mode == "unloaded" else 1e12  # saturated: no reach limit
    cfg.cpu_ns_per_access = cycle_ns if mode == "unloaded" else 0.0
    t = cfg.tier[0]
    t.lat_seq_ns, t.lat_random_ns = share.lat_seq_ns, share.lat_random_ns
    t.read_bytes_per_s = dimm_bandwidth(spec)
    t.write_bytes_per_s = share.write_bytes_per_s
    t.granule_bytes = granule
    t.buffer_granules = share.buffer_granules
    t.max_outstanding = 1 if mode == "unloaded" else outstanding
    return cfg


def run(spec, recs: np.ndarray, mode: str, cycle_ns: float) -> dict:
    """{region name or 'all': {reads, writes, read_latency_mean_ns, total_ns}}."""
    ffi, lib = native.ffi_lib()
    cfg = _config(ffi, spec, mode, cycle_ns)
    handle = ffi.new("tierlab_timing **")
    rc = lib.tierlab_timing_new(cfg, handle)
    if rc != 0:
        raise TierlabError(f"the timing model rejected the configuration of '{spec.name}' "
                           f"(status {rc})")
    try:
        arr = np.array(recs, dtype=st.DTYPE)  # a copy: prefetches become reads
        arr["kind"][arr["kind"] == st.PREFETCH] = st.READ
        lib.tierlab_timing_run(handle[0], ffi.cast("tierlab_mem_request *", arr.ctypes.data),
                               len(arr), 1, ffi.NULL, 0)
        res = ffi.new("tierlab_timing_result *")
        lib.tierlab_timing_get(handle[0], res)
    finally:
        lib.tierlab_timing_free(handle[0])
    reads = list(res.reads)
    lat = list(res.latency_ns)
    total = res.cpu_ns + sum(res.stall_ns)
    names = _names(len(reads))
    def mean(lat_ns, n):  # an epoch's latency is one read's only when reads go one by one
        return lat_ns / n if n and mode == "unloaded" else math.nan

    out = {"all": {"reads": sum(reads), "writes": sum(res.writebacks), "total_ns": total,
                   "read_latency_mean_ns": mean(sum(lat), sum(reads))}}
    regions = [r for r in range(len(reads)) if reads[r]]
    if len(regions) > 1:
        for r in regions:
            out[names[r]] = {"reads": reads[r], "writes": res.writebacks[r], "total_ns": total,
                             "read_latency_mean_ns": mean(lat[r], reads[r])}
    return out


def _names(n: int) -> list[str]:
    return list(regions())[:n]
