"""The processes of this machine as /proc shows them, for the tests that
start, signal and wait for tierlab's processes (importable from any test:
tests/ is on sys.path through its conftest.py). One /proc reader:
tierlab.core.signals.proc_stat, the one the leftover sweeps use."""
from __future__ import annotations

from pathlib import Path

from tierlab.core.signals import proc_stat


def processes() -> dict[int, tuple[int, str, str]]:
    """pid -> (ppid, start time, comm) of every live process (zombies left out:
    this container's pid 1 does not reap them)."""
    out = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        st = proc_stat(p.name)
        if st is None or st[0] == "Z":
            continue
        out[int(p.name)] = st[1:]
    return out
