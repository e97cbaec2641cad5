"""The registries (docs/architecture.md "Registries"): each name a user types
is defined once, in C for what the kernels implement and on disk for device
and tier specs, and read from there. No other module keeps a list of them.

Each function returns the names in registry order. The C registries need the
built library; without it a TierlabError says to run `make build`.
"""
from __future__ import annotations

from tierlab.core.native import registry_names


def codecs() -> tuple[str, ...]:
    """Codecs (kernels/src/codecs/registry.c)."""
    return registry_names("codecs")


def configs() -> tuple[str, ...]:
    """APCache configurations (kernels/src/apcache/configs.c)."""
    return registry_names("configs")


def policies() -> tuple[str, ...]:
    """Eviction policies of the segment cache (kernels/src/cache/cache.c)."""
    return registry_names("policies")


def placement_tiers() -> tuple[str, ...]:
    """Tiers a structure can be placed on (kernels/src/tiers/tier.c)."""
    return registry_names("tiers")


def query_types() -> tuple[str, ...]:
    """Query types (kernels/src/query/query.c)."""
    return registry_names("query_types")


def memory_regions() -> tuple[str, ...]:
    """Regions of the memory traces, at their TIERLAB_REGION_* number
    (kernels/src/memtrace/regions.c)."""
    return registry_names("memory_regions")


def devices() -> tuple[str, ...]:
    """Storage device specs (sim-configs/devices, kind storage)."""
    from tierlab.core import specs

    return tuple(n for n in specs.names() if specs.load(n).kind == "storage")


def tiers() -> tuple[str, ...]:
    """Memory tier specs (sim-configs/devices, kind memory)."""
    from tierlab.core import specs

    return tuple(n for n in specs.names() if specs.load(n).kind == "memory")


def machines() -> tuple[str, ...]:
    """Machine specs: cache geometry, prefetchers, cores, memory channels
    (sim-configs/machines, kind machine)."""
    from tierlab.core import specs

    return tuple(n for n in specs.names() if specs.load(n).kind == "machine")
