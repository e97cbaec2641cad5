"""The registries of names users type are defined once, in C
(docs/architecture.md "Registries"), and the Python side reads them.

1. tierlab.core.registry agrees with the C tables it reads;
2. adding an eviction policy touches three files and no Python: a throwaway
   copy of kernels/ gets a new policy `fifo-copy` the three-file way (a renamed
   copy of fifo.c, its extern and table line in cache.c, its CMake line, all
   by plain text insertion), libtierlab is built from the copy, and a child
   Python pointed at that library (TIERLAB_NATIVE_DIR, the header next to it as
   `make build` puts it) lists the policy and runs a cache with it.
"""
from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab.core.errors import TierlabError

REPO = Path(__file__).resolve().parents[2]


def _tail(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def test_registry_reads_the_c_tables():
    from tierlab.core import native, registry

    try:
        ffi, lib = native.ffi_lib()
    except TierlabError as e:
        pytest.skip(f"needs the C kernels: {e}")
    assert registry.codecs() == tuple(c.name for c in native.codecs())
    for names, find in ((registry.configs(), lib.tierlab_apcache_config_find),
                        (registry.policies(), lib.tierlab_policy_find),
                        (registry.placement_tiers(), lib.tierlab_tier_find),
                        (registry.query_types(), lib.tierlab_query_type_find)):
        assert names and len(set(names)) == len(names), names
        assert [find(n.encode()) for n in names] == list(range(len(names))), names
    assert registry.query_types()[lib.TIERLAB_QUERY_SINGLE] == "single"
    assert registry.query_types()[lib.TIERLAB_QUERY_AND] == "and"
    with pytest.raises(TierlabError, match="unknown registry 'nonsense'"):
        native.registry_names("nonsense")


def _insert_after(path: Path, anchor: str, line: str) -> None:
    """Insert `line` after the one line of `path` that is exactly `anchor`."""
    lines = path.read_text().splitlines(keepends=True)
    at = [i for i, x in enumerate(lines) if x.rstrip("\n") == anchor]
    assert len(at) == 1, f"{path.name}: {anchor!r} found {len(at)} times"
    lines.insert(at[0] + 1, line + "\n")
    path.write_text("".join(lines))


def _insert_before(path: Path, anchor: str, line: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    at = [i for i, x in enumerate(lines) if x.rstrip("\n") == anchor]
    assert len(at) == 1, f"{path.name}: {anchor!r} found {len(at)} times"
    lines.insert(at[0], line + "\n")
    path.write_text("".join(lines))


def _changed_files(a: Path, b: Path) -> set[str]:
    """Paths (relative) that differ between trees a and b, or exist in one only."""
    out: set[str] = set()

    def walk(cmp: filecmp.dircmp, rel: Path) -> None:
        out.update(str(rel / n) for n in cmp.left_only + cmp.right_only + cmp.diff_files)
        for name, sub in cmp.subdirs.items():
            walk(sub, rel / name)

    walk(filecmp.dircmp(a, b), Path("."))
    return {p.removeprefix("./") for p in out}


@pytest.fixture(scope="module")
def copy_with_a_new_policy(tmp_path_factory) -> Path:
    """A native dir (libtierlab.so + tierlab.h) built from a copy of kernels/
    with the policy `fifo-copy` added the three-file way."""
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed (Debian package cmake; `make deps`)")
    root = tmp_path_factory.mktemp("registries")
    src = root / "kernels"
    shutil.copytree(REPO / "kernels", src)
    cache = src / "src" / "cache"
    # 1. the policy's own file: a renamed copy of fifo.c
    text = (cache / "fifo.c").read_text()
    assert text.count("const tlc_policy tlc_fifo = {") == 1 and text.count('.name = "fifo",') == 1
    (cache / "fifo_copy.c").write_text(
        text.replace("const tlc_policy tlc_fifo = {", "const tlc_policy tlc_fifo_copy = {")
            .replace('.name = "fifo",', '.name = "fifo-copy",'))
    # 2. its extern and its table line in cache.c (first in the table: nothing
    #    may depend on a policy's position)
    table = "static const tlc_policy *const tlc_policies[] = {"
    _insert_before(cache / "cache.c", table, "extern const tlc_policy tlc_fifo_copy;")
    _insert_after(cache / "cache.c", table, "    &tlc_fifo_copy,")
    # 3. its CMake line
    _insert_after(src / "CMakeLists.txt", "  src/cache/fifo.c", "  src/cache/fifo_copy.c")
    assert _changed_files(REPO / "kernels", src) == {
        "src/cache/fifo_copy.c", "src/cache/cache.c", "CMakeLists.txt"}

    build = root / "build"
    for cmd in (["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 "-DTIERLAB_ENABLE_TESTS=OFF", "-DTIERLAB_WERROR=ON"],
                ["cmake", "--build", str(build), "-j", "2", "--target", "tierlab"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{_tail(r.stdout + r.stderr)}"
    native = root / "native"
    native.mkdir()
    shutil.copy(build / "libtierlab.so", native / "libtierlab.so")
    shutil.copy(src / "include" / "tierlab.h", native / "tierlab.h")
    return native


def _python(native: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TIERLAB_NATIVE_DIR=str(native))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=REPO)


def test_a_policy_added_in_three_files_reaches_the_cli(copy_with_a_new_policy):
    r = _python(copy_with_a_new_policy, "-m", "tierlab", "list", "policies")
    assert r.returncode == 0, r.stderr
    names = r.stdout.split()
    assert names[0] == "policy" and names[1] == "fifo-copy", r.stdout
    assert {"lru", "fifo", "s3-fifo", "belady"} <= set(names[2:]), r.stdout


def test_a_policy_added_in_three_files_runs_in_the_model(copy_with_a_new_policy):
    code = (
        "from tierlab.model.cache import POLICIES, Cache\n"
        "assert 'fifo-copy' in POLICIES, POLICIES\n"
        "c = Cache('fifo-copy', 8, 3)\n"
        "hits = c.access_many([0, 1, 2, 0, 3]).tolist()\n"
        "print(hits, [c.contains(k) for k in range(4)])\n")
    r = _python(copy_with_a_new_policy, "-c", code)
    assert r.returncode == 0, r.stderr
    # FIFO's behaviour: the repeat of 0 hits, then 3 evicts 0 (the oldest insert)
    assert r.stdout.split("\n")[0] == "[False, False, False, True, False] [False, True, True, True]"
