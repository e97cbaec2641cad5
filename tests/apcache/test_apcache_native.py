"""The APCache runtime's C tests (kernels/tests/apcache.c: the device rule,
docs/apcache.md's worked examples through the step-driven harness, threaded runs
of every configuration) in the release build and under ThreadSanitizer.
The ASan/UBSan run is part of tests/kernels/test_native_builds.py's ctest.

The TSan build lives in $TIERLAB_BUILD_DIR/tsan (default <repo>/build/tsan),
is incremental, and builds only the library and this test binary, at -O0
(about 6 s from scratch on 2 cores, against 45 s optimised; the test runs
in about 3 s either way)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "kernels"))
from test_native_builds import BUILD, _build, _run, _tail  # noqa: E402

TSAN_ENV = {"TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1:history_size=4"}


def _check(r: subprocess.CompletedProcess, what: str) -> None:
    assert r.returncode == 0, f"{what} failed:\n{_tail(r.stdout)}\n{_tail(r.stderr, 12000)}"
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "apcache: 0 failed", r.stdout
    assert "worked examples" in r.stdout and "threaded runs: 0 failed" in r.stdout


def test_apcache_c_tests_release():
    build = _build(BUILD / "release", "-DCMAKE_BUILD_TYPE=Release", "-DTIERLAB_WERROR=ON",
                   targets=("tierlab-apcache-test",))
    _check(_run([str(build / "tierlab-apcache-test")], timeout=300), "tierlab-apcache-test")


def _tsan_missing() -> str | None:
    probe = subprocess.run(
        ["cc", "-fsanitize=thread", "-x", "c", "-", "-o", "/dev/null", "-pthread"],
        input="#include <pthread.h>\nstatic void *f(void *a) { return a; }\n"
              "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0); "
              "return pthread_join(t, 0); }\n",
        capture_output=True, text=True)
    if probe.returncode != 0:
        return ("the C compiler cannot build with -fsanitize=thread (Debian: gcc's libtsan, "
                f"package libtsan2):\n{_tail(probe.stderr, 1000)}")
    return None


def test_apcache_c_tests_under_tsan():
    reason = _tsan_missing()
    if reason:
        pytest.skip(reason)
    build = _build(BUILD / "tsan", "-DTIERLAB_TSAN=ON", "-DCMAKE_BUILD_TYPE=Debug",
                   "-DTIERLAB_WERROR=ON", targets=("tierlab-apcache-test",))
    r = _run([str(build / "tierlab-apcache-test")], env=TSAN_ENV, timeout=600)
    if r.returncode != 0 and "FATAL: ThreadSanitizer: unexpected memory mapping" in r.stderr:
        pytest.skip("ThreadSanitizer cannot run with this kernel's address-space layout "
                    "(ASLR entropy too high; `sysctl vm.mmap_rnd_bits=28` fixes it)")
    assert "WARNING: ThreadSanitizer" not in r.stderr, _tail(r.stderr, 12000)
    _check(r, "tierlab-apcache-test under ThreadSanitizer")
