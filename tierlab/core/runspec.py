"""The run specification (docs/architecture.md "One run specification").

Every parameter of a run of the native APCache runtime, the SimPy model and a
query run is a key of one schema, run.schema.yaml beside this file: its
default, unit, description and which runs read it (`x-used-by`). This module
is the only place that fills defaults and checks values; a mistake is one
TierlabError naming the key. Names that come from a registry (configurations,
policies, devices, memory tiers) are checked against the registry itself.

Contract of a validated spec (`RunSpec`): every key of the schema is present;
sizes are ints of bytes; `lookahead` is None (the configuration's default),
"adaptive" or an int, and None for configurations without prefetch;
`cache_fraction` is None or a number > 0 (then it, not `cache_bytes`, sets the
cache size of a run once the index's size is known: `cache_size`). A run
ignores the keys it does not read, so one spec drives the runtime and the
model alike; `explicit` lists the keys the user gave.
"""
from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import yaml

from tierlab.core import values
from tierlab.core.errors import TierlabError

SCHEMA_FILE = Path(__file__).with_name("run.schema.yaml")
USERS = ("runtime", "model", "query")
PREFETCH_CONFIGS = ("base-prefetch", "hybrid-prefetch")
DEFAULT_LOOKAHEAD = 16  # base-prefetch's queries ahead when none is given (docs/apcache.md)
MIN_SEGMENT_BYTES = 64
PAGE_BYTES = 4096
READAHEAD_RANGE = (4096, 2**20)
INT64_MAX = 2**63 - 1  # the result tables' integers


@lru_cache(maxsize=None)
def schema() -> dict:
    """The parsed run.schema.yaml."""
    return yaml.safe_load(SCHEMA_FILE.read_text())


def _props() -> dict:
    return schema()["properties"]


def keys(used_by: str | None = None) -> list[str]:
    """The keys of the schema in its order; with used_by, those that kind of
    run reads."""
    return [k for k, p in _props().items() if used_by is None or used_by in p["x-used-by"]]


def info(key: str) -> dict:
    """The schema entry of `key` (description, default, x-unit, x-used-by...)."""
    return _props()[key]


def default(key: str):
    """The default of one key, normalised as validate() normalises it (sizes
    in bytes), without the registry checks: for code that needs one default."""
    v = copy.deepcopy(info(key).get("default"))
    if info(key).get("x-unit") == "bytes":
        v = values.size(key, v, allow_zero=True)
    return v


def defaults() -> dict:
    return {k: copy.deepcopy(p.get("default")) for k, p in _props().items()}


def flag(key: str) -> str:
    """The command-line flag of a key: the key with dashes."""
    return "--" + key.replace("_", "-")


def _takes(p: dict) -> str:
    """A schema node in words."""
    if "x-takes" in p:
        return p["x-takes"]
    if "$ref" in p:
        return _takes(schema()["$defs"][p["$ref"].rsplit("/", 1)[1]])
    if "oneOf" in p:
        return " or ".join(_takes(q) for q in p["oneOf"])
    if "const" in p:
        return repr(p["const"])
    if "enum" in p:
        return "one of " + ", ".join(map(str, p["enum"]))
    kind = p.get("type")
    if kind == "integer":
        lo, hi = p.get("minimum"), p.get("maximum")
        if lo is not None and hi is not None:
            return f"a whole number {lo} .. {hi}"
        return "a whole number" + (f" >= {lo}" if lo is not None else "")
    if kind == "number":
        lo = p.get("exclusiveMinimum", p.get("minimum"))
        sign = ">" if "exclusiveMinimum" in p else ">="
        return "a number" + (f" {sign} {lo}" if lo is not None else "")
    return {"boolean": "true or false", "string": "text", "object": "a mapping",
            "null": "empty"}.get(kind, "a value")


def expected(key: str) -> str:
    """What the key takes, in words, for error messages and help."""
    p = info(key)
    if p.get("x-registry"):
        return f"a name of `tierlab list {p['x-registry']}`"
    return _takes(p)


class RunSpec(Mapping):
    """A validated run specification (module docstring)."""

    def __init__(self, v: dict, explicit: frozenset, where: str):
        self._v, self.explicit, self.where = v, explicit, where

    def __getitem__(self, key):
        return self._v[key]

    def __iter__(self):
        return iter(self._v)

    def __len__(self):
        return len(self._v)

    def as_dict(self, used_by: str | None = None) -> dict:
        """The values (of the keys `used_by` reads), JSON-ready."""
        return {k: copy.deepcopy(self._v[k]) for k in keys(used_by)}

    def replace(self, **changes) -> "RunSpec":
        """A copy with `changes` validated as if the user had given them too."""
        doc = {k: self._v[k] for k in self.explicit}
        doc.update(changes)
        return validate(doc, self.where)

    @property
    def hybrid(self) -> bool:
        return self._v["config"].startswith("hybrid")

    def lookahead_value(self):
        """'none', 'adaptive' or an int: the lookahead a run uses, as the
        result tables' `lookahead` column says it."""
        c, la = self._v["config"], self._v["lookahead"]
        if c not in PREFETCH_CONFIGS:
            return "none"
        if la is None:
            return "adaptive" if c == "hybrid-prefetch" else DEFAULT_LOOKAHEAD
        return la

    def cache_size(self, index_bytes: int) -> int:
        """The cache size of the run on an index of `index_bytes` (DID + freq
        bytes): cache_bytes, or cache_fraction of the index; checked against
        the segment size and the cores (an error names the key)."""
        v = self._v
        key = "cache_fraction" if v["cache_fraction"] is not None else "cache_bytes"
        cache = (int(v["cache_bytes"]) if key == "cache_bytes"
                 else max(int(round(v["cache_fraction"] * index_bytes)), PAGE_BYTES))
        if self.hybrid and cache // v["cores"] < v["segment_bytes"]:
            raise TierlabError(f"{key}: {cache} bytes is less than one {v['segment_bytes']}-byte "
                               f"segment per core ({v['cores']} core(s))")
        if not self.hybrid and cache < PAGE_BYTES:
            raise TierlabError(f"{key}: {cache} bytes; the page cache must hold one "
                               f"{PAGE_BYTES}-byte page")
        return cache


def run_columns(spec: RunSpec, cache_bytes: int) -> dict:
    """The columns of a cache_run row (traces/schema.yaml) that the spec
    decides, written alike by the runtime and the model: parameters a
    configuration does not use are 0 (or "none"), names are the specs'."""
    from tierlab.core import specs

    hybrid = spec.hybrid
    device = spec["device"]
    if device != specs.REAL:
        device = specs.load(device, kind="storage").name
    return {"config": spec["config"], "policy": spec["policy"], "device": device,
            "slow_tier": specs.load(spec["slow_tier"], kind="memory").name if hybrid else "none",
            "cores": spec["cores"], "cache_bytes": int(cache_bytes),
            "segment_bytes": spec["segment_bytes"] if hybrid else 0,
            "lookahead": str(spec.lookahead_value()),
            "dram_budget_bytes": spec["dram_budget_bytes"] if hybrid else 0}


def markdown_table() -> str:
    """The keys as a Markdown table (docs/run-spec.md holds it; a test keeps
    the two equal)."""
    rows = ["| key | default | takes | read by | meaning |", "|---|---|---|---|---|"]
    for k in keys():
        p = info(k)
        d = p.get("default")
        shown = "" if d in (None, "") else yaml.safe_dump(
            d, default_flow_style=True, sort_keys=False).strip().removesuffix("...").strip()
        rows.append(f"| `{k}` | {f'`{shown}`' if shown else '-'} | {expected(k)} | "
                    f"{', '.join(p['x-used-by'])} | {' '.join(p['description'].split())} |")
    return "\n".join(rows) + "\n"


def read(path: str | os.PathLike) -> dict:
    """The mapping of a run spec file (empty file: {})."""
    doc = values.read_yaml(path)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise TierlabError(f"{path}: a run spec is a YAML mapping of keys to values")
    return doc


def parse_set(pairs) -> dict:
    """`--set KEY=VALUE` pairs (VALUE is YAML) as a mapping; errors name the pair."""
    out = {}
    for text in pairs or []:
        key, sep, val = text.partition("=")
        if not sep or not key.strip():
            raise TierlabError(f"--set {text!r}: write KEY=VALUE")
        out[key.strip()] = parse_value(val, f"--set {text!r}")
    return out


def parse_value(text: str, where: str):
    """A value written on the command line, read as YAML ('64MiB' stays text,
    '3' is 3, 'true' is True, '{file: q.txt}' a mapping)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise TierlabError(f"{where}: the value is not YAML ({e})") from None


def _unknown(key: str, where: str):
    close = difflib.get_close_matches(key, keys(), n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    raise TierlabError(f"{where}: unknown key '{key}'{hint}; the keys are those of "
                       f"`tierlab list keys`")


def _check_types(doc: dict) -> None:
    """The schema's structural checks (JSON Schema), one error naming the key."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(e.path)):
        key = err.path[0] if err.path else None
        if key is None:
            raise TierlabError(f"run spec: {err.message}")
        raise TierlabError(f"{key}: {doc[key]!r} is not {expected(key)}")


def _registry(name: str) -> tuple:
    from tierlab.core import registry

    return tuple(getattr(registry, name.replace("-", "_"))())


def validate(doc: dict, where: str = "run spec") -> RunSpec:
    """Check every key given in `doc`, fill the defaults, normalise (module
    docstring). Raises TierlabError naming the first bad key."""
    from tierlab.core import specs

    if not isinstance(doc, Mapping):
        raise TierlabError(f"{where}: a run spec is a mapping of keys to values")
    for k in doc:
        if k not in _props():
            _unknown(str(k), where)
    given = {k: doc[k] for k in doc}
    _check_types(given)
    v = defaults()
    v.update(copy.deepcopy(given))
    for k in keys():
        if info(k).get("x-unit") == "bytes":
            v[k] = values.size(k, v[k], allow_zero=(k == "readahead_bytes"))
        if isinstance(v[k], int) and not isinstance(v[k], bool) and v[k] > INT64_MAX:
            raise TierlabError(f"{k}: at most 2^63 - 1 (the result tables' int64), got {v[k]}")
    for k in ("config", "policy"):
        known = _registry(info(k)["x-registry"])
        if v[k] not in known:
            raise TierlabError(f"{k}: unknown name '{v[k]}'; known: {', '.join(known)}")
    if v["device"] != specs.REAL:
        try:
            specs.load(v["device"], kind="storage")
        except TierlabError as e:
            raise TierlabError(f"device: {e}") from None
    try:
        tier = specs.load(v["slow_tier"], kind="memory")
    except TierlabError as e:
        raise TierlabError(f"slow_tier: {e}") from None
    _check_placement(v, tier)
    if "cache_bytes" in given and given.get("cache_fraction") is not None:
        raise TierlabError("cache_bytes and cache_fraction: give one of them, not both")
    seg = v["segment_bytes"]
    if seg < MIN_SEGMENT_BYTES or seg % 8:
        raise TierlabError(f"segment_bytes: a multiple of 8 bytes, at least {MIN_SEGMENT_BYTES}, "
                           f"got {seg}")
    ra = v["readahead_bytes"]
    if ra == 0 and v["device"] != specs.REAL:
        raise TierlabError("readahead_bytes: 0 (the kernel's readahead) is for the real device "
                           "only; an emulated device has no kernel readahead")
    if ra and not READAHEAD_RANGE[0] <= ra <= READAHEAD_RANGE[1]:
        raise TierlabError(f"readahead_bytes: 4 KiB .. 1 MiB (or 0 on the real device), got {ra}")
    _check_lookahead(v)
    return RunSpec(v, frozenset(given), where)


def _check_lookahead(v: dict) -> None:
    la, config = v["lookahead"], v["config"]
    if la == "none":
        la = v["lookahead"] = None
    if config not in PREFETCH_CONFIGS:
        if la is not None:
            raise TierlabError(f"lookahead: {la!r}, but only {' and '.join(PREFETCH_CONFIGS)} "
                               "look ahead")
    elif la == "adaptive" and config != "hybrid-prefetch":
        raise TierlabError("lookahead: adaptive lookahead is hybrid-prefetch's; give "
                           f"base-prefetch a number of queries (default {DEFAULT_LOOKAHEAD})")


def _check_placement(v: dict, tier) -> None:
    """The form of slow_tier_placement, and that it fits the slow tier's kind."""
    placement = v["slow_tier_placement"]
    if not placement:
        return
    head = placement.split(":", 1)[0]
    if head not in ("dram", "pm", "numa"):
        raise TierlabError(f"slow_tier_placement: '{placement}'; one of dram, pm:PATH, numa:N")
    if head == "pm" and not placement[3:]:
        raise TierlabError("slow_tier_placement: pm:PATH needs a directory")
    if head == "numa" and not placement[5:].isdigit():
        raise TierlabError(f"slow_tier_placement: '{placement}': numa:N needs a node number")


def placement(spec: RunSpec) -> str:
    """Where the runtime puts the segment cache: slow_tier_placement, or for
    a DRAM slow tier spec `dram`. A pm or numa spec without a placement is an
    error naming the key (the runtime cannot guess where that memory is)."""
    from tierlab.core import specs

    if spec["slow_tier_placement"]:
        return spec["slow_tier_placement"]
    tier = specs.load(spec["slow_tier"], kind="memory")
    kind = tier.tier or "dram"
    if kind != "dram":
        where = "pm:PATH (a directory on an fsdax mount)" if kind == "pm" else f"{kind}:N"
        raise TierlabError(f"slow_tier_placement: the slow tier {tier.name} is {kind} memory; "
                           f"give {where}, or a DRAM slow tier such as ddr4-2666")
    return "dram"


def load(path: str | os.PathLike | None = None, overrides: dict | None = None,
         where: str | None = None) -> RunSpec:
    """A spec file (or none) with `overrides` (flags, --set) on top, validated."""
    doc = read(path) if path is not None else {}
    doc.update(overrides or {})
    return validate(doc, where or (str(path) if path is not None else "run spec"))
