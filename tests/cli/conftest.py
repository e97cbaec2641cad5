"""Fixtures of the `tierlab bench` tests: run a benchmark in process as a user
would, and check that bad input is a usage error."""
from __future__ import annotations

import json

import pytest

from tierlab.cli import main


@pytest.fixture(scope="module")
def run_bench(tmp_path_factory):
    """run_bench(NAME, *ARGS) runs `tierlab bench NAME --out DIR/sub/NAME.json
    ARGS --no-progress` (DIR fresh; `sub` does not exist yet) and returns
    (exit status, the JSON document, its path)."""
    def run(name: str, *args: str):
        out = tmp_path_factory.mktemp(f"bench-{name}") / "sub" / f"{name}.json"
        rc = main(["bench", name, "--out", str(out), *args, "--no-progress"])
        return rc, json.loads(out.read_text()), out
    return run


@pytest.fixture
def bench_fails(tmp_path, capsys):
    """bench_fails(NAME, *ARGS) runs `tierlab bench NAME --out TMP/x.json
    --no-progress ARGS`, checks that it is a usage error (exit status 2, from
    tierlab or from argparse; no traceback; no output file) and returns stderr."""
    def run(name: str, *args: str) -> str:
        out = tmp_path / "x.json"
        try:
            rc = main(["bench", name, "--out", str(out), "--no-progress", *args])
        except SystemExit as e:
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2, err
        assert "Traceback" not in err
        assert not out.exists()
        return err
    return run
