"""The import contracts of docs/architecture.md, checked by import-linter.

The package `tierlab` is spread over several top-level folders (pyproject's
package-dir: model/ is tierlab.model, traces/ tierlab.traces, analysis/
tierlab.analysis). import-linter finds modules by walking the package's
folder, so the tests lay the package out as an installed wheel would (a copy
of the .py files in a temporary folder) and run `lint-imports` there with the
contracts of pyproject.toml.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _package_dirs() -> dict[str, Path]:
    """Subpackage name -> folder, from pyproject's package-dir."""
    doc = tomllib.loads((REPO / "pyproject.toml").read_text())
    return {name: REPO / folder
            for name, folder in doc["tool"]["setuptools"]["package-dir"].items()}


def lay_out(dest: Path) -> Path:
    """Copy the package's .py files into dest/ as installed; return dest."""
    for name, folder in sorted(_package_dirs().items(), key=lambda kv: kv[0].count(".")):
        target = dest.joinpath(*name.split("."))
        for src in folder.rglob("*.py"):
            rel = src.relative_to(folder)
            if rel.parts[0] in ("_native", "__pycache__"):
                continue
            out = target / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
    shutil.copyfile(REPO / "pyproject.toml", dest / "pyproject.toml")
    return dest


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail("lint-imports is not installed: `make venv` installs import-linter")
    return subprocess.run([str(exe), str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


def test_every_layer_imports_only_the_layers_below(tmp_path):
    res = lint_imports(lay_out(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


@pytest.mark.parametrize("module, upward", [
    ("tierlab/core/errors.py", "from tierlab.engine import index"),
    ("tierlab/model/sim.py", "from tierlab.experiments import sweep"),
    ("tierlab/analysis/validation.py", "from tierlab.model import sim"),
])
def test_an_upward_import_breaks_a_contract(tmp_path, module, upward):
    root = lay_out(tmp_path)
    path = root / module
    path.write_text(path.read_text() + f"\n{upward}  # added by the test\n")
    res = lint_imports(root)
    assert res.returncode != 0
    assert "BROKEN" in res.stdout or "broken" in res.stdout
