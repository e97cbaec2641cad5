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

import numpy as np

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


def built() -> bool:
    """Whether the tracing build's driver exists (it may still be out of date)."""
    return bool(os.environ.get("TIERLAB_MEMTRACE_DRIVER")) or (build_dir() / DRIVER).exists()


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


def stale_pattern() -> str:
    """Temporaries a killed `tierlab trace memory` leaves in its folder
    (`.memtrace*.tmp-<pid>`, also nested: signals.remove_stale)."""
    return r"\.{1,2}memtrace[\w.-]*\.tmp-(?P<pid>\d+)"


# --- cross-check against valgrind's lackey ------------------------------------------------------

def _region_of(ranges: list[tuple[int, int, str]]):
    def region(a: int) -> str:
        for lo, n, name in ranges:
            if lo <= a < lo + n:
                return name
        return "other"
    return region


def lackey_check(index, workload, *, k: int = 10, placement: str = "", every: int = 1,
                 work=None) -> dict:
    """Record a trace of the workload while valgrind's lackey
    (`--tool=lackey --trace-mem=yes`, an independent tracer of every data
    access the machine code makes) watches the same run, and count both per
    region: {"ours": {region: [accesses, bytes]}, "lackey": {...}, "queries"}.

    Counted on both sides: data accesses between the driver's two marker
    stores around each traced query (so the program's start, the index's
    opening and the recorder's writes are out), not to the traced thread's
    stack (the instrumentation sees the program's own locals but not the
    compiler's spills, pushes and return addresses, which lackey does), and,
    on lackey's side, not made by the recorder's own code (its hooks and
    buffer). A lackey `M` (read-modify-write) is a load and a store, as the
    trace has it. Regions of lackey's addresses come from the ranges the
    kernels registered (the driver prints them). Lazy binding is off
    (LD_BIND_NOW), so the dynamic linker does no work inside a query.
    A TierlabError when valgrind is not installed."""
    import tempfile

    from tierlab.core.registry import memory_regions
    from tierlab.traces import memtrace

    vg = shutil.which("valgrind")
    if vg is None:
        raise TierlabError("valgrind is not installed: run `make deps`")
    with tempfile.TemporaryDirectory(dir=work, prefix="lackey-") as tmp:
        tmp = Path(tmp)
        log = tmp / "lackey.log"
        cmd = [vg, "--tool=lackey", "--trace-mem=yes", f"--log-file={log}",
               *driver_command(index, workload, tmp / "t.bin", placement=placement, k=k,
                               every=every, layout=True)]
        r = subprocess.run(cmd, capture_output=True, text=True,
                           env={**signals.child_env(), "LD_BIND_NOW": "1"})
        if r.returncode:
            raise TierlabError(f"valgrind lackey run failed (exit {r.returncode}): "
                               f"{r.stderr.strip().splitlines()[-1:]}")
        layout, ranges = {}, []
        for line in r.stdout.splitlines():
            if line.startswith("layout "):
                layout = parse_layout(line)
            elif line.startswith("range "):
                _, name, lo, n = line.split()
                ranges.append((int(lo, 16), int(n, 16), name))
        h, rec = memtrace.read(tmp / "t.bin")
        region = _region_of(ranges)
        names = dict(enumerate(memory_regions()))
        ours: dict[str, list[int]] = {}
        off = (rec["addr"] < h.stack_lo) | (rec["addr"] >= h.stack_hi)
        for g in np.unique(rec["region"][off]):
            sel = off & (rec["region"] == g)
            ours[names[int(g)]] = [int(sel.sum()), int(rec["size"][sel].sum())]
        with open(log, "rb") as f:
            theirs = _lackey_counts(f, layout, h.stack_lo, h.stack_hi, region)
    return {"ours": ours, "lackey": theirs, "queries": h.queries_traced, "records": h.records}


def _lackey_counts(lines, layout: dict, stack_lo: int, stack_hi: int, region) -> dict:
    """Per region [accesses, bytes] of lackey's log lines (an iterable of
    bytes, read as it goes) between each pair of marker stores (see
    lackey_check)."""
    marker = f" S {layout['marker']:08x},".encode()
    text_lo, text_hi = layout["text_lo"], layout["text_hi"]
    out: dict[str, list[int]] = {}
    inside, instr = False, 0
    for line in lines:
        if line.startswith(marker):
            inside = not inside
            continue
        if not inside:
            continue
        if line[:1] == b"I":
            instr = int(line[3:line.index(b",")], 16)
            continue
        if line[:1] != b" " or text_lo <= instr < text_hi:
            continue
        a, n = line[3:].split(b",")
        a, n = int(a, 16), int(n)
        if stack_lo <= a < stack_hi:
            continue
        c = out.setdefault(region(a), [0, 0])
        times = 2 if line[1:2] == b"M" else 1  # a modify: a load and a store
        c[0] += times
        c[1] += times * n
    return out
