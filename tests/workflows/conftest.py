"""The workflow's local run of config/tiny.yaml, shared by the tests that
read its results and its report."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from workflow_run import WF, snakemake


@pytest.fixture(scope="session")
def default_costs() -> None:
    """This machine's default cost table (config/tiny.yaml's `costs: default`),
    measured once before the first run that needs it (cached afterwards), so
    no workflow run under test pays for it."""
    subprocess.run([sys.executable, "-m", "tierlab", "query", "costs", "--default", "--quiet"],
                   check=True, capture_output=True, timeout=900)


@pytest.fixture(scope="session")
def tiny_local(tmp_path_factory, default_costs) -> Path:
    """config/tiny.yaml run end to end through profiles/local; its folder."""
    d = tmp_path_factory.mktemp("wf-local")
    r = snakemake(d, "--profile", WF / "profiles" / "local",
                  "--configfile", WF / "config" / "tiny.yaml")
    assert r.returncode == 0, (d / "snakemake.out").read_text()[-6000:]
    return d
