"""`tierlab list` end to end, as a user runs it (a subprocess of the installed
command), against the registries of the built library and the specs of
sim-configs/."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab.core.errors import TierlabError

REPO = Path(__file__).resolve().parents[2]


def _tierlab(*args: str) -> subprocess.CompletedProcess:
    script = REPO / ".venv" / "bin" / "tierlab"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tierlab"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ), cwd=REPO)


@pytest.fixture(scope="module")
def registry():
    from tierlab.core import native

    try:
        return native.codecs()
    except TierlabError as e:
        pytest.skip(f"`tierlab list codecs` needs the C kernels: {e}")


def test_list_codecs_prints_every_registry_codec_with_its_impl(registry):
    r = _tierlab("list", "codecs")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[1:]
            if line and not line.startswith("cpu ")}
    assert r.stdout.split()[:3] == ["codec", "delta", "impl"]
    assert list(rows) == [c.name for c in registry]  # registry order, nothing else
    for c in registry:
        assert rows[c.name][1:] == ["yes" if c.delta else "no", c.impl], rows[c.name]
    assert "cpu simd features:" in r.stdout


@pytest.mark.parametrize("what, header, registry", [
    ("policies", "policy", "policies"),
    ("configs", "config", "configs"),
    ("placement-tiers", "placement_tier", "placement_tiers"),
    ("query-types", "query_type", "query_types"),
])
def test_list_prints_the_c_registry_in_order(what, header, registry):
    from tierlab.core import registry as registries

    try:
        names = getattr(registries, registry)()
    except TierlabError as e:
        pytest.skip(f"`tierlab list {what}` needs the C kernels: {e}")
    r = _tierlab("list", what)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [header, *names]


@pytest.mark.parametrize("what, kind", [("tiers", "memory"), ("devices", "storage")])
def test_list_specs_of_one_kind_with_numbers_and_file(what, kind):
    from tierlab.core import specs

    want = [s for s in (specs.load(n) for n in specs.names()) if s.kind == kind]
    assert want, f"sim-configs/ has no {kind} spec"
    r = _tierlab("list", what)
    assert r.returncode == 0, r.stderr
    head, *rows = [line.split() for line in r.stdout.splitlines()]
    assert head[-1] == "file"
    name_col = 1 if what == "tiers" else 0
    assert [row[name_col] for row in rows] == [s.name for s in want]
    for row, s in zip(rows, want):
        assert (REPO / row[-1]).resolve() == s.path  # the test runs from the repo root
        if what == "tiers":
            assert row[0] == s.tier and float(row[2].replace(",", "")) == s["read_latency_seq_ns"]
        else:
            assert float(row[1].replace(",", "")) == s["read_latency_ns"]


@pytest.mark.parametrize("args", [["list", "nonsense"], ["list"]])
def test_list_with_a_bad_registry_is_a_usage_error(args):
    r = _tierlab(*args)
    assert r.returncode == 2
    # one line (issue 19): the error, and where the usage is
    assert r.stderr.startswith("tierlab list: error: ") and r.stderr.count("\n") == 1
    assert "(see tierlab list --help)" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert r.stdout == ""


def test_list_keys_prints_every_run_spec_key_once():
    from tierlab.core import runspec

    r = _tierlab("list", "keys")
    assert r.returncode == 0, r.stderr
    rows = [line.split()[0] for line in r.stdout.splitlines()[1:] if line and
            not line.startswith("each key")]
    assert rows == runspec.keys()
