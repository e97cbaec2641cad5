"""Drives the C side: the unit tests of the release build, the same tests in
an ASan + UBSan build, and a bounded libFuzzer run per codec.

Build directories live under $TIERLAB_BUILD_DIR (default <repo>/build) and are
built incrementally, once per session. A missing tool is a skip that says
what to install, never a silent pass.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TIERLAB_BUILD_DIR", REPO / "build"))
FUZZ_SECONDS = int(os.environ.get("TIERLAB_FUZZ_SECONDS", "4"))


def _cmake(build: Path, *options: str, env: dict | None = None) -> None:
    run_env = {**os.environ, **(env or {})}
    subprocess.run(["cmake", "-S", str(REPO / "kernels"), "-B", str(build), *options],
                   check=True, capture_output=True, env=run_env)
    r = subprocess.run(["cmake", "--build", str(build), "-j", "2"], capture_output=True,
                       text=True, env=run_env)
    assert r.returncode == 0, f"build in {build} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"


def _run_unit(binary: Path, env: dict | None = None) -> str:
    r = subprocess.run([str(binary)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, f"{binary} failed:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    return r.stdout


@pytest.fixture(scope="session")
def release_build() -> Path:
    build = BUILD / "release"
    _cmake(build, "-DCMAKE_BUILD_TYPE=Release", "-DTIERLAB_WERROR=ON")
    return build


@pytest.fixture(scope="session")
def asan_build() -> Path:
    build = BUILD / "asan"
    _cmake(build, "-DCMAKE_BUILD_TYPE=Debug", "-DTIERLAB_SANITIZE=ON", "-DTIERLAB_WERROR=ON")
    return build


def _fuzzer_available() -> str | None:
    if not shutil.which("clang"):
        return "clang is not installed (Debian: clang libclang-rt-14-dev; `make deps`)"
    probe = subprocess.run(["clang", "-fsanitize=fuzzer", "-x", "c", "-", "-o", os.devnull],
                           input="int LLVMFuzzerTestOneInput(const char *d, long n)"
                                 "{(void)d;(void)n;return 0;}", capture_output=True, text=True)
    if probe.returncode != 0:
        return "clang cannot link libFuzzer (Debian: libclang-rt-14-dev; `make deps`)"
    return None


@pytest.fixture(scope="session")
def fuzz_build() -> Path:
    reason = _fuzzer_available()
    if reason:
        pytest.skip(reason)
    build = BUILD / "fuzz"
    _cmake(build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DTIERLAB_FUZZ=ON",
           "-DTIERLAB_ENABLE_TESTS=OFF", "-DCMAKE_C_COMPILER=clang")
    return build


def _codec_names(build: Path) -> list[str]:
    """The registry and its freq codecs, from the CLI of the build itself."""
    out = subprocess.run([str(build / "tierlab-kernels"), "codecs"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    return [line.split()[0] for line in out[1:] if line and not line.startswith("cpu ")]


def test_unit_release(release_build):
    out = _run_unit(release_build / "tierlab-unit")
    assert "pfor-delta256" in out and out.strip().splitlines()[-1].endswith(" 0 failed")


def test_unit_sanitized(asan_build):
    env = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=1",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}
    _run_unit(asan_build / "tierlab-unit", env)
    for extra in asan_build.glob("tierlab-*-test"):
        _run_unit(extra, env)


def test_unit_catches_a_broken_codec(release_build, tmp_path):
    """The unit test can fail: a build whose pfor-delta256 decoder is off by one
    must be reported (guards against a test that passes whatever happens)."""
    src = tmp_path / "kernels"
    shutil.copytree(REPO / "kernels", src)
    f = src / "src" / "codecs" / "pfor_delta.c"
    text = f.read_text()
    needle = "out[i] = prev += out[i];"
    assert needle in text
    f.write_text(text.replace(needle, "out[i] = prev += out[i] + (i == 3);", 1))
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j", "2", "--target", "tierlab-unit"],
                   check=True, capture_output=True)
    r = subprocess.run([str(build / "tierlab-unit")], capture_output=True, text=True)
    assert r.returncode != 0 and "FAIL" in r.stderr


def test_fuzz_each_codec(fuzz_build, release_build):
    names = _codec_names(release_build)
    assert "pfor-delta256" in names
    for name in names:
        corpus = fuzz_build / "corpus" / name
        corpus.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            [str(fuzz_build / "tierlab-fuzz-codec"), f"-max_total_time={FUZZ_SECONDS}",
             "-rss_limit_mb=2048", "-print_final_stats=1", str(corpus)],
            capture_output=True, text=True, timeout=FUZZ_SECONDS + 120,
            env={**os.environ, "TIERLAB_FUZZ_CODEC": name})
        assert r.returncode == 0, f"fuzzing {name} found a failure:\n{r.stderr[-6000:]}"
        assert "Done" in r.stderr, r.stderr[-2000:]
