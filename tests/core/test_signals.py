"""tierlab.core.signals in one process: SIGTERM and SIGHUP take SIGINT's path
inside handled(), held() runs a block whole, leftovers are stale only when
their process is gone (the end-to-end kills are tests/cli/test_interrupt.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tierlab.core import signals


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_every_stop_signal_is_a_keyboard_interrupt_with_its_status(sig):
    before = {s: signal.getsignal(s) for s in signals.STOP}
    with signals.handled():
        with pytest.raises(KeyboardInterrupt) as e:
            os.kill(os.getpid(), sig)
            time.sleep(0.01)  # the handler runs at once; a moment, whatever the platform
        assert signals.exit_status(e.value) == 128 + sig
    assert {s: signal.getsignal(s) for s in signals.STOP} == before
    assert signals.exit_status(KeyboardInterrupt()) == 130


def test_held_block_runs_whole_then_raises():
    done = []
    with signals.handled():
        with pytest.raises(signals.Interrupted) as e:
            with signals.held():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.01)
                assert signals.pending() == signal.SIGTERM
                done.append(1)
        assert e.value.signum == signal.SIGTERM and done == [1]
        assert signals.pending() is None


def test_an_ignored_signal_stays_ignored():
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with signals.handled():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, old)


def test_only_the_leftovers_of_dead_processes_are_stale(tmp_path):
    p = subprocess.Popen(["true"])
    p.wait()
    live = subprocess.Popen(["sleep", "30"])
    try:
        for pid in (p.pid, live.pid, os.getpid()):
            (tmp_path / f"out.tmp-{pid}").mkdir()
            (tmp_path / f"out.tmp-{pid}" / "f").write_text("x")
        (tmp_path / "other.tmp-1").write_text("x")  # not the pattern's
        pattern = r"out\.tmp-(?P<pid>\d+)"
        assert signals.stale(tmp_path, pattern) == [(tmp_path / f"out.tmp-{p.pid}", p.pid)]
        assert signals.remove_stale(tmp_path, pattern) == [str(tmp_path / f"out.tmp-{p.pid}")]
        assert sorted(x.name for x in tmp_path.iterdir()) == sorted(
            ["other.tmp-1", f"out.tmp-{live.pid}", f"out.tmp-{os.getpid()}"])
    finally:
        live.kill()
        live.wait()
    assert not signals.alive(p.pid) and signals.alive(os.getpid())
