"""Device, tier and machine specs of sim-configs/ (one YAML file each), read by
the SimPy model, the native runtime's emulated devices, the memory-tier model
(cache filter and timing) and the simulator back-ends.

Storage devices and memory tiers live in sim-configs/devices/, machines (cache
geometry, prefetchers, cores, memory channels: kind `machine`) in
sim-configs/machines/; names are unique across both folders.

A spec is a mapping of numbers written as {value, source}; `extends: NAME`
inherits every key of NAME that it does not set. `load()` returns a `Spec`
whose numbers are plain floats (`spec["read_latency_ns"]`) and whose sources
stay reachable (`spec.source("read_latency_ns")`), so a result file can carry
both. Errors name the file and the key.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tierlab.core.errors import TierlabError
from tierlab.core.values import read_yaml

KINDS = ("storage", "memory", "machine")
# The device name of the index's own device: measured, not described by a spec
# (the runtime reads it; `tierlab validate` probes it and writes a spec).
REAL = "real"
# Keys every spec of a kind must have after `extends` is resolved, and the
# smallest value each accepts (a spec with a zero bandwidth is a typo).
REQUIRED = {
    "storage": {"read_bandwidth_bytes_per_s": 1.0, "read_latency_ns": 0.0, "queue_depth": 1.0},
    "memory": {"read_latency_seq_ns": 0.0, "read_latency_random_ns": 0.0,
               "read_bandwidth_bytes_per_s": 1.0, "access_granularity_bytes": 1.0},
    "machine": {"cores_per_socket": 1.0, "sockets": 1.0, "line_bytes": 8.0,
                "l1d_bytes": 1.0, "l1d_ways": 1.0, "l2_bytes": 0.0, "l2_ways": 0.0,
                "llc_bytes": 0.0, "llc_ways": 0.0, "fill_buffers": 1.0,
                "memory_channels_per_socket": 1.0, "channel_bandwidth_bytes_per_s": 1.0},
}
# `memory` (machines): the memory spec of the machine's local DRAM.
TEXT_KEYS = ("name", "kind", "tier", "extends", "description", "memory")


def specs_dir() -> Path:
    """sim-configs/devices of this checkout, or $TIERLAB_SIM_CONFIGS/devices."""
    root = os.environ.get("TIERLAB_SIM_CONFIGS")
    base = Path(root) if root else Path(__file__).resolve().parents[2] / "sim-configs"
    return base / "devices"


def machines_dir() -> Path:
    """sim-configs/machines next to specs_dir() (kind machine)."""
    return specs_dir().parent / "machines"


@dataclass(frozen=True)
class Spec:
    name: str
    kind: str
    path: Path
    values: dict = field(repr=False)   # key -> float
    sources: dict = field(repr=False)  # key -> source text
    tier: str | None = None
    memory: str | None = None  # machines: the memory spec of local DRAM

    def __getitem__(self, key: str) -> float:
        try:
            return self.values[key]
        except KeyError:
            raise TierlabError(f"{self.path}: spec '{self.name}' has no key '{key}'") from None

    def get(self, key: str, default=None):
        return self.values.get(key, default)

    def source(self, key: str) -> str:
        return self.sources.get(key, "")

    def as_dict(self) -> dict:
        """{key: {value, source}} plus name/kind/tier: what a result file records."""
        out = {"name": self.name, "kind": self.kind}
        if self.tier:
            out["tier"] = self.tier
        if self.memory:
            out["memory"] = self.memory
        out.update({k: {"value": v, "source": self.sources[k]} for k, v in self.values.items()})
        return out


def names() -> list[str]:
    """Every spec name: devices and tiers, then machines."""
    return sorted(p.stem for p in specs_dir().glob("*.yaml")) + \
        sorted(p.stem for p in machines_dir().glob("*.yaml"))


def _resolve(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    for folder in (specs_dir(), machines_dir()):
        cand = folder / f"{name_or_path}.yaml"
        if cand.exists():
            return cand
    known = ", ".join(names()) or "(none)"
    raise TierlabError(f"unknown device or tier spec '{name_or_path}'; known: {known} "
                       "(or give the path of a .yaml spec)")


def _raw(path: Path) -> dict:
    doc = read_yaml(path)
    if not isinstance(doc, dict):
        raise TierlabError(f"{path}: a spec is a YAML mapping of keys to {{value, source}}")
    return doc


@lru_cache(maxsize=None)
def _load(path: Path, chain: tuple = ()) -> Spec:
    if path in chain:
        raise TierlabError(f"{path}: `extends` loops: " + " -> ".join(p.stem for p in chain + (path,)))
    doc = _raw(path)
    values, sources = {}, {}
    parent = doc.get("extends")
    if parent is not None:
        base = _load(_resolve(str(parent)), chain + (path,))
        values.update(base.values)
        sources.update(base.sources)
    for key, entry in doc.items():
        if key in TEXT_KEYS:
            continue
        if not (isinstance(entry, dict) and set(entry) == {"value", "source"}):
            raise TierlabError(f"{path}: key '{key}' must be a mapping {{value, source}}, "
                               f"got {entry!r}")
        v, src = entry["value"], entry["source"]
        if isinstance(v, str):  # PyYAML reads 1.5e9 (no exponent sign) as a string
            try:
                v = float(v)
            except ValueError:
                pass
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TierlabError(f"{path}: key '{key}': value must be a number, got {v!r}")
        if not isinstance(src, str) or not src.strip():
            raise TierlabError(f"{path}: key '{key}': every number needs a source (a publication "
                               "or 'assumption: ...')")
        if v < 0:
            raise TierlabError(f"{path}: key '{key}': value must not be negative, got {v}")
        values[key], sources[key] = float(v), src
    kind = doc.get("kind")
    if kind not in KINDS:
        raise TierlabError(f"{path}: key 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    for key, lo in REQUIRED[kind].items():
        if key not in values:
            raise TierlabError(f"{path}: a {kind} spec needs key '{key}'")
        if values[key] < lo:
            raise TierlabError(f"{path}: key '{key}' must be at least {lo:g}, got {values[key]:g}")
    return Spec(name=str(doc.get("name", path.stem)), kind=kind, path=path, values=values,
                sources=sources, tier=doc.get("tier"),
                memory=doc.get("memory", base.memory if parent is not None else None))


def load(name_or_path: str, kind: str | None = None) -> Spec:
    """The spec called name (in sim-configs/devices) or at a .yaml path;
    `kind` ('storage', 'memory' or 'machine') is checked when given."""
    spec = _load(_resolve(str(name_or_path)).resolve())
    if kind is not None and spec.kind != kind:
        raise TierlabError(f"'{spec.name}' is a {spec.kind} spec; a {kind} spec is needed here")
    return spec
