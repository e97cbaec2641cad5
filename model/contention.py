"""Cores sharing the memory side, derived from a machine spec (issue 21,
"Cores"): how much longer a query's CPU work takes when `cores` query
threads run at once, each on its own copy of the index.

What the cores share is the memory system, not an execution unit: the
query threads stream compressed postings (DID and freq blocks) from DRAM
(the page cache) or from the slow tier (the segment cache) and decode them
in the core's own L1/L2. The rule is a bandwidth roofline:

    demand of one core = bytes it reads / its CPU time over the workload
                         (the compressed bytes of the blocks its queries
                         decode; model/sim.py)
    factor(cores)      = max(1, cores x demand / bandwidth)

with `bandwidth` the machine's: sockets x the memory spec's read bandwidth
of one socket's interleaved channels (ddr4-2666: 105.6 GB/s for six
channels, Yang et al., FAST 2020, i.e. 83 % of 6 x 21.3 GB/s peak), and for
the bytes served from the slow tier, the tier's: its read bandwidth per
DIMM x DIMMs per socket x sockets (the machine spec's pm_dimms_per_socket;
one DIMM when the spec has none). The larger of the two factors applies.
What the rule leaves out (each an assumption, stated in a run's params):
the last-level cache (a query streams lists far larger than it, so its
share of the LLC does not change what it reads from memory), the
decoded values' traffic (they stay in L1/L2: the runtime decodes into one
block-sized buffer), queueing below the roofline (latency rising before
bandwidth saturates) and NUMA: the reference ran with NUMA disabled
(interleaved), so both sockets' channels serve every core.

This host's own factor, the cost table's `cores` section measured on a few
shared vCPUs, is reported next to it (`cores_cpu_factor_host`) as what it
is: a measurement of this machine, not of the machine the spec describes.
"""
from __future__ import annotations

from tierlab.core import specs
from tierlab.core.errors import TierlabError


def _value(spec, key: str, default=None) -> float:
    v = spec.get(key, default)
    if v is None or not v > 0:
        raise TierlabError(f"machine spec '{spec.name}': key '{key}' must be > 0 (the model's "
                           f"core contention, model/contention.py), got {v!r}")
    return float(v)


def machine_bandwidth(machine) -> tuple[float, str]:
    """(bytes/s, how) the cores of `machine` read from DRAM together."""
    if not getattr(machine, "memory", None):
        raise TierlabError(f"machine spec '{machine.name}' names no 'memory' spec (its DRAM), "
                           f"which the model's core contention needs")
    mem = specs.load(machine.memory, kind="memory")
    sockets = _value(machine, "sockets", 1.0)
    bw = _value(mem, "read_bandwidth_bytes_per_s")
    return sockets * bw, (f"{sockets:g} socket(s) x {bw / 1e9:g} GB/s ({mem.name} "
                          f"read_bandwidth_bytes_per_s, one socket's channels)")


def tier_bandwidth(machine, tier) -> tuple[float, str]:
    """(bytes/s, how) the cores read the slow tier at together."""
    per_dimm = tier.get("read_bandwidth_per_dimm_bytes_per_s") or \
        tier.get("read_bandwidth_bytes_per_s")
    if per_dimm is None or not per_dimm > 0:
        raise TierlabError(f"memory spec '{tier.name}': no read bandwidth for the core "
                           f"contention (model/contention.py)")
    dimms = machine.get("pm_dimms_per_socket") or 1.0
    sockets = _value(machine, "sockets", 1.0)
    return (float(per_dimm) * float(dimms) * sockets,
            f"{sockets:g} socket(s) x {float(dimms):g} DIMM(s) x {float(per_dimm) / 1e9:g} GB/s "
            f"({tier.name})")


def cpu_factor(machine, cores: int, dram_bytes: float, tier_bytes: float, cpu_ns: float,
               tier=None) -> tuple[float, str]:
    """(factor, where it comes from) for `cores` cores, one core's workload
    reading dram_bytes from DRAM and tier_bytes from the slow tier in
    cpu_ns of CPU time (module docstring)."""
    if cores <= 1:
        return 1.0, "one core"
    if not cpu_ns > 0:
        return 1.0, f"derived from machine spec '{machine.name}': no CPU time, no traffic"
    bw, how = machine_bandwidth(machine)
    demand = dram_bytes / (cpu_ns / 1e9)
    f_dram = max(1.0, cores * demand / bw)
    text = (f"derived from machine spec '{machine.name}' (model/contention.py roofline): "
            f"{cores} cores x {demand / 1e9:.3g} GB/s each from DRAM against {how}")
    f = f_dram
    if tier is not None and tier_bytes > 0:
        tbw, thow = tier_bandwidth(machine, tier)
        tdemand = tier_bytes / (cpu_ns / 1e9)
        f = max(f, cores * tdemand / tbw)
        text += f"; {tdemand / 1e9:.3g} GB/s each from the slow tier against {thow}"
    return f, f"{text}: x {f:.3f}"


def load_machine(name: str):
    """The machine spec of a run's `machine` key."""
    try:
        spec = specs.load(name)
    except TierlabError as e:
        raise TierlabError(f"machine: {e}") from None
    if spec.kind != "machine":
        raise TierlabError(f"machine: '{name}' is a {spec.kind} spec, not a machine "
                           f"(`tierlab list machines`)")
    return spec
