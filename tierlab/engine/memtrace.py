"""Recording memory traces of the query kernels (traces/memtrace.md).

The tracing build of the kernels (kernels/CMakeLists.txt, TIERLAB_MEMTRACE:
clang's load/store instrumentation on the query, lookup and codec sources, and
the recorder kernels/src/memtrace/runtime.c) is a separate build directory,
$TIERLAB_BUILD_DIR/memtrace (default <repo>/build/memtrace), made on first use
by `build()` (or `make memtrace`) and brought up to date incrementally. Its
driver, tierlab-memtrace, runs a workload and writes the trace; `record` runs
it as a child process (progress, signals passed on, its output renamed into
place only when whole).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tierlab.core import signals
from tierlab.core.errors import TierlabError

REPO = Path(__file__).resolve().parents[2]
DRIVER = "tierlab-memtrace"
LIBRARY = "libtierlab-memtrace.so"
TRACE_FILE = "memtrace.bin"


def build_dir() -> Path:
    return Path(os.environ.get("TIERLAB_BUILD_DIR", REPO / "build")) / "memtrace"


def _run(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        tail = " ".join((r.stderr or r.stdout).strip().splitlines()[-3:])
        raise TierlabError(f"{what} failed (exit {r.returncode}): {tail}")


@lru_cache(maxsize=None)
def build(jobs: int = 2) -> Path:
    """The tracing build's driver, built or brought up to date now (once per
    process); a TierlabError saying what to install when clang or cmake is
    missing. TIERLAB_MEMTRACE_DRIVER names a driver to use instead."""
    given = os.environ.get("TIERLAB_MEMTRACE_DRIVER")
    if given:
        if not os.access(given, os.X_OK):
            raise TierlabError(f"TIERLAB_MEMTRACE_DRIVER={given}: not an executable")
        return Path(given)
    if not (REPO / "kernels" / "CMakeLists.txt").exists():
        raise TierlabError(f"the tracing build needs the kernels' sources ({REPO}/kernels): "
                           f"run from a checkout of the repository")
    for tool in ("cmake", "clang"):
        if shutil.which(tool) is None:
            raise TierlabError(f"the tracing build needs {tool}: run `make deps`")
    b = build_dir()
    if not (b / "CMakeCache.txt").exists():
        _run(["cmake", "-S", str(REPO / "kernels"), "-B", str(b), "-DCMAKE_C_COMPILER=clang",
              "-DCMAKE_BUILD_TYPE=Release", "-DTIERLAB_MEMTRACE=ON", "-DTIERLAB_ENABLE_TESTS=OFF",
              "-DTIERLAB_WERROR=ON"], "configuring the tracing build (cmake)")
    _run(["cmake", "--build", str(b), "-j", str(jobs), "--target", DRIVER],
         "the tracing build (cmake --build)")
    return b / DRIVER


@dataclass(frozen=True)
class Recorded:
    path: Path              # the trace file
    wall_ns: int            # time of the traced queries (the driver's clock)
    layout: dict            # with layout=True: marker and the recorder's code range


_PROGRESS = re.compile(r"progress (\d+) (\d+)")


def driver_command(index, workload, out, *, placement: str = "", k: int = 1024,
                   every: int = 1, max_bytes: int = 0, layout: bool = False) -> list[str]:
    """The driver's command line (traces/memtrace.md, "Recording")."""
    cmd = [str(build()), str(index), str(workload), str(out), "--k", str(k),
           "--every", str(every), "--max-bytes", str(max_bytes)]
    if placement:
        cmd += ["--placement", placement]
    if layout:
        cmd.append("--layout")
    return cmd


def parse_layout(line: str) -> dict:
    m = re.fullmatch(r"layout marker=0x([0-9a-f]+) text=0x([0-9a-f]+)-0x([0-9a-f]+)", line)
    if not m:
        raise TierlabError(f"{DRIVER}: unexpected layout line '{line}'")
    return {"marker": int(m[1], 16), "text_lo": int(m[2], 16), "text_hi": int(m[3], 16)}


def record(index, workload, out, *, placement: str = "", k: int = 1024, every: int = 1,
           max_bytes: int = 0, progress=None) -> Recorded:
    """Trace the workload's queries on the index into the file `out`: written
    as `.<name>.tmp-<pid>` next to it and renamed when whole; on an error or
    a signal nothing is left (the driver gets the signal, and dies with this
    process should it be killed). progress(done, total) after each report."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    cmd = driver_command(index, workload, tmp, placement=placement, k=k, every=every,
                         max_bytes=max_bytes)
    proc = None
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=signals.child_env())
        wall, layout = 0, {}
        for line in proc.stdout:
            line = line.strip()
            if m := _PROGRESS.fullmatch(line):
                if progress:
                    progress(int(m[1]), int(m[2]))
            elif line.startswith("done "):
                wall = int(re.search(r"wall_ns=(\d+)", line)[1])
            elif line.startswith("layout "):
                layout = parse_layout(line)
        err = proc.stderr.read().strip()
        if proc.wait():
            raise TierlabError(err.splitlines()[-1].removeprefix(f"{DRIVER}: ") if err else
                               f"{DRIVER} failed (exit {proc.returncode})")
        with signals.held():
            os.replace(tmp, out)
        return Recorded(out, wall, layout)
    except BaseException:
        if proc is not None and proc.poll() is None:
            signals.stop([proc])
        raise
    finally:
        tmp.unlink(missing_ok=True)


def stale_pattern(name: str = TRACE_FILE) -> str:
    """Temporaries of `record` that a killed run leaves (signals.remove_stale)."""
    return re.escape(f".{name}.tmp-") + r"(?P<pid>\d+)"
