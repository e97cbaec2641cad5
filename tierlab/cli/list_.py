"""`tierlab list codecs|configs|policies|placement-tiers|query-types|memory-regions|tiers|
devices|machines|keys`: print a registry (the names users type), read from where it is kept: the
codec, configuration, policy, placement-tier, query-type and memory-region registries of the C kernels
(tierlab.core.registry), the specs of sim-configs/ (tierlab.core.specs) for tiers
(memory specs), devices (storage specs) and machines, and the run spec's keys."""
from __future__ import annotations

import os
from pathlib import Path


def _table(header: list[str], rows: list[list]) -> None:
    """Print rows under header in aligned columns: text left, numbers right
    (grouped by thousands)."""
    cells = [[f"{v:,.10g}" if isinstance(v, (int, float)) else str(v) for v in row]
             for row in rows]
    right = [bool(rows) and all(isinstance(row[i], (int, float)) for row in rows)
             for i in range(len(header))]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    for line in [header, *cells]:
        print("  ".join(x.rjust(w) if r else x.ljust(w)
                        for x, w, r in zip(line, widths, right)).rstrip())


def _codecs() -> None:
    from tierlab.core import native

    _table(["codec", "delta", "impl"],
           [[c.name, "yes" if c.delta else "no", c.impl] for c in native.codecs()])
    print(f"cpu simd features: {native.cpu_features() or 'none'}")


def _configs() -> None:
    from tierlab.core import registry

    _table(["config"], [[name] for name in registry.configs()])


def _policies() -> None:
    from tierlab.core import registry

    _table(["policy"], [[name] for name in registry.policies()])


def _placement_tiers() -> None:
    """Where a structure can be placed (`place_dict`, `slow_tier_placement`, ...)."""
    from tierlab.core import registry

    _table(["placement_tier"], [[name] for name in registry.placement_tiers()])


def _query_types() -> None:
    from tierlab.core import registry

    _table(["query_type"], [[name] for name in registry.query_types()])


def _memory_regions() -> None:
    """The region tags of `tierlab trace memory` (traces/memtrace.md)."""
    from tierlab.core import registry

    _table(["number", "memory_region"], [[i, n] for i, n in enumerate(registry.memory_regions())])


def _specs(kind: str) -> list:
    from tierlab.core import specs

    return [s for s in (specs.load(n) for n in specs.names()) if s.kind == kind]


def _file(path: Path) -> str:
    """The spec's file, relative to the working folder when it lies below it."""
    try:
        return str(path.relative_to(Path(os.getcwd()).resolve()))
    except ValueError:
        return str(path)


def _tiers() -> None:
    _table(["tier", "spec", "read_latency_seq_ns", "read_latency_random_ns", "read_gb_per_s",
            "file"],
           [[s.tier or "-", s.name, s["read_latency_seq_ns"], s["read_latency_random_ns"],
             s["read_bandwidth_bytes_per_s"] / 1e9, _file(s.path)] for s in _specs("memory")])


def _devices() -> None:
    _table(["device", "read_latency_ns", "seek_ns", "read_mb_per_s", "queue_depth", "file"],
           [[s.name, s["read_latency_ns"], s.get("seek_ns", 0.0),
             s["read_bandwidth_bytes_per_s"] / 1e6, int(s["queue_depth"]), _file(s.path)]
            for s in _specs("storage")])


def _machines() -> None:
    """Machine specs (sim-configs/machines): what the cache filter and the
    memory-tier model read."""
    def kib(s, key):
        return s.get(key, 0.0) / 1024

    _table(["machine", "sockets", "cores_per_socket", "l1d_kib", "l2_kib", "llc_kib", "line",
            "channels", "memory", "file"],
           [[s.name, int(s["sockets"]), int(s["cores_per_socket"]), kib(s, "l1d_bytes"),
             kib(s, "l2_bytes"), kib(s, "llc_bytes"), int(s["line_bytes"]),
             int(s["memory_channels_per_socket"]), s.memory or "-", _file(s.path)]
            for s in _specs("machine")])


def _keys() -> None:
    from tierlab.core import runspec

    import yaml

    def shown(v):  # as it would be written in a spec file
        if v in (None, ""):
            return "-"
        return yaml.safe_dump(v, default_flow_style=True, sort_keys=False).strip().removesuffix("...").strip()

    _table(["key", "default", "takes", "read by"],
           [[k, shown(runspec.info(k).get("default")), runspec.expected(k),
             ",".join(runspec.info(k)["x-used-by"])] for k in runspec.keys()])
    print("each key: SPEC.yaml, --set KEY=VALUE or --KEY VALUE of apcache run, model run, "
          "query run; descriptions in `tierlab model run --help` and tierlab/core/run.schema.yaml")


REGISTRIES = {"codecs": _codecs, "configs": _configs, "tiers": _tiers, "devices": _devices,
              "machines": _machines,
              "policies": _policies, "placement-tiers": _placement_tiers,
              "query-types": _query_types, "memory-regions": _memory_regions, "keys": _keys}


def register(sub) -> None:
    p = sub.add_parser("list", help="print a registry: the names users type",
                       description="Print one of tierlab's registries: codecs, APCache "
                       "configurations, memory tiers, storage devices and machines (the "
                       "specs of sim-configs/, with their main numbers and file), cache policies, "
                       "placement tiers, query types, the region tags of memory traces, the "
                       "run spec's keys.")
    p.add_argument("what", choices=list(REGISTRIES), help="which registry")
    p.set_defaults(func=run)


def run(args) -> int:
    REGISTRIES[args.what]()
    return 0
