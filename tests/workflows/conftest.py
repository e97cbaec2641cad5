"""The workflow's local run of config/tiny.yaml, shared by the tests that
read its results and its report."""
from __future__ import annotations

from pathlib import Path

import pytest

from workflow_run import WF, snakemake


@pytest.fixture(scope="session")
def tiny_local(tmp_path_factory) -> Path:
    """config/tiny.yaml run end to end through profiles/local; its folder."""
    d = tmp_path_factory.mktemp("wf-local")
    r = snakemake(d, "--profile", WF / "profiles" / "local",
                  "--configfile", WF / "config" / "tiny.yaml")
    assert r.returncode == 0, (d / "snakemake.out").read_text()[-6000:]
    return d
