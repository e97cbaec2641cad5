"""Argument types and help helpers shared by every command group (defined
once, like PISA's tools/app.hpp): a bad value becomes argparse's usage error
naming the option, never a traceback."""
from __future__ import annotations

import argparse
import textwrap

from tierlab.core import runspec


def positive_int(text: str) -> int:
    """'12', '1e6' -> a whole number >= 1."""
    try:
        v = int(float(text)) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: '{text}'") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: '{text}'")
    return v


def size(text: str) -> int:
    """'100MB', '1.5GiB', '4096' -> bytes."""
    from tierlab.core.values import parse_size
    from tierlab.core.errors import TierlabError

    try:
        return parse_size(text)
    except TierlabError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def paragraphs(*texts: str) -> str:
    """Help text in paragraphs, each wrapped (RawDescriptionHelpFormatter keeps
    the blank lines between them)."""
    return "\n\n".join(textwrap.fill(t, 79) for t in texts)


# --- the run specification ----------------------------------------------------------
# Every command that runs something (`apcache run`, `model run`, `query run`,
# `validate`) takes an optional SPEC.yaml, `--set KEY=VALUE` (repeatable) and a
# `--KEY VALUE` flag per key it reads: the key with dashes (tierlab.core.runspec,
# docs/architecture.md). Values are read as YAML, as in a spec file. Later wins:
# the file, then --set, then the flags, then the command's positionals.

def _help(key: str) -> str:
    info = runspec.info(key)
    default = info.get("default")
    shown = "none" if default in (None, "") else default
    text = " ".join(info["description"].split())
    return f"{text} (default {shown})".replace("%", "%%")


def _metavar(key: str) -> str:
    info = runspec.info(key)
    if info.get("x-unit") == "bytes":
        return "SIZE"
    if info.get("x-registry"):
        return "NAME"
    return {"integer": "N", "boolean": "true|false"}.get(info.get("type"), "VALUE")


def add_run_spec(parser, used_by: str, *, spec_file: bool = True, skip=()) -> None:
    """Add SPEC.yaml (optional), --set and the --KEY flags of `used_by`'s keys
    (less `skip`, which the command takes otherwise, e.g. as positionals)."""
    if spec_file:
        parser.add_argument("spec", nargs="?", metavar="SPEC.yaml",
                            help="run spec file: keys of `tierlab list keys` (all optional)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", dest="set_pairs",
                        help="set a key of the run spec (repeatable; VALUE is YAML)")
    group = parser.add_argument_group("run spec keys (each also KEY in SPEC.yaml or --set)")
    for key in runspec.keys(used_by):
        if key in skip:
            continue
        group.add_argument(runspec.flag(key), dest=f"key_{key}", metavar=_metavar(key),
                           help=_help(key))


def run_spec_overrides(args) -> dict:
    """--set pairs, then the --KEY flags given, as a mapping of keys."""
    out = runspec.parse_set(getattr(args, "set_pairs", None))
    for name, text in vars(args).items():
        if name.startswith("key_") and text is not None:
            key = name[4:]
            out[key] = runspec.parse_value(text, runspec.flag(key))
    return out


def run_spec(args, **fixed) -> "runspec.RunSpec":
    """The validated spec of a command line: SPEC.yaml, --set, flags, then
    `fixed` (the command's positionals, e.g. index and workload)."""
    doc = run_spec_overrides(args)
    doc.update({k: v for k, v in fixed.items() if v is not None})
    return runspec.load(getattr(args, "spec", None), doc)
