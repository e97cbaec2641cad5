"""The processes of this machine as /proc shows them, for the tests that
start, signal and wait for tierlab's processes (importable from any test:
tests/ is on sys.path through its conftest.py)."""
from __future__ import annotations

from pathlib import Path


def processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, start time, comm) of every live process (zombies left out:
    this container's pid 1 does not reap them)."""
    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        if rest[0] == "Z":
            continue
        out[int(p.name)] = (int(rest[1]), rest[19], stat[stat.index("(") + 1:stat.rindex(")")])
    return out
