"""tierlab.core.files in one process: outputs all or nothing under their
temporary names, the sweep of what killed writers left (never a live
writer's), scratch folders and kept ones, a signal during the renames, and
a zombie counting as ended (the end-to-end kills are
tests/cli/test_interrupt.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tierlab.core import files, signals
from tierlab.core.errors import TierlabError


@pytest.fixture
def dead():
    """The pid of a process that has ended and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture
def live():
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def test_outputs_appear_whole_or_not_at_all(tmp_path):
    a, b = tmp_path / "sub" / "a.txt", tmp_path / "sub" / "b.json"
    with files.atomic_outputs(a, b) as (ta, tb):
        assert (ta.name, tb.name) == (f".a.txt.tmp-{os.getpid()}", f".b.json.tmp-{os.getpid()}")
        ta.write_text("A")
        tb.write_text("B")
        assert not a.exists() and not b.exists()
    assert (a.read_text(), b.read_text()) == ("A", "B")
    with pytest.raises(RuntimeError):
        with files.atomic_outputs(a) as (ta,):
            ta.write_text("half")
            raise RuntimeError("stopped")
    assert a.read_text() == "A"
    assert sorted(p.name for p in a.parent.iterdir()) == ["a.txt", "b.json"]
    with pytest.raises(TierlabError, match="it is a directory"):
        with files.atomic_outputs(tmp_path / "sub"):
            pass


def test_disk_errors_are_one_line_naming_the_output(tmp_path):
    out = tmp_path / "x.bin"
    with pytest.raises(TierlabError, match=rf"cannot write {out}: "):
        with files.atomic_outputs(out) as (t,):
            t.mkdir()  # os.replace(folder, file path) fails like a full disk would
            (t / "f").write_text("x")
            out.mkdir()
            (out / "g").write_text("y")
    assert not files.temporary_name(out).exists()


def test_next_writer_sweeps_only_dead_writers_leftovers(tmp_path, dead, live, capsys):
    out = tmp_path / "table.parquet"
    for pid in (dead, live):
        files.temporary_name(out, pid).write_bytes(b"half")
    other = tmp_path / f".other.parquet.tmp-{dead}"  # another output's: not this writer's
    other.write_bytes(b"x")
    files.write_atomic(out, b"whole")
    err = capsys.readouterr().err
    assert err == f"tierlab: removed {files.temporary_name(out, dead)}, left by a killed run\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["table.parquet", files.temporary_name(out, live).name, other.name])


def test_scratch_folders_swept_by_kind_kept_ones_never(tmp_path, dead, live, capsys):
    stale = tmp_path / f"tierlab-bench-index-{dead}-abc"
    running = tmp_path / f"tierlab-bench-index-{live}-def"
    other_kind = tmp_path / f"tierlab-bench-index-x-{dead}-ghi"
    kept = tmp_path / f"tierlab-bench-index-kept-{dead}-jkl"
    for d in (stale, running, other_kind, kept):
        d.mkdir()
        (d / "f").write_text("x")
    with files.scratch("bench-index", tmp_path) as d:
        assert d.name.startswith(f"tierlab-bench-index-{os.getpid()}-")
        (d / "corpus.txt").write_text("x")
    assert not d.exists()
    assert capsys.readouterr().err == f"tierlab: removed {stale}, left by a killed run\n"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([running.name, other_kind.name, kept.name])

    d = files.scratch_dir("bench-index", tmp_path)
    k = files.release(d, "bench-index", keep=True)
    assert k.name == d.name.replace("tierlab-bench-index-", "tierlab-bench-index-kept-")
    assert k.is_dir() and not d.exists()
    with files.scratch("bench-index", tmp_path):  # the kept folder is not a leftover
        pass
    assert k.is_dir()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_the_renames_lets_them_all_finish(tmp_path, monkeypatch, sig):
    """The signal comes while the first output is renamed: every rename still
    happens, then Interrupted carries the note that says so."""
    outs = [tmp_path / f"o{i}" for i in range(3)]
    real = os.replace
    calls = []

    def replace(a, b):
        if not calls:
            os.kill(os.getpid(), sig)
            time.sleep(0.01)  # the handler runs now: inside held(), it only records
        calls.append(b)
        real(a, b)

    monkeypatch.setattr(os, "replace", replace)
    with signals.handled():
        with pytest.raises(signals.Interrupted) as e:
            with files.atomic_outputs(*outs) as tmps:
                for t in tmps:
                    t.write_text("whole")
    assert calls == outs and all(o.read_text() == "whole" for o in outs)
    assert e.value.signum == sig and e.value.note == files.MOVING


def test_the_cli_says_the_outputs_are_complete(tmp_path, monkeypatch, capsys):
    from tierlab.cli import main

    assert main(["corpus", "generate", "--size", "200KB", "--out", str(tmp_path / "c.txt"),
                 "--quiet"]) == 0
    real = os.replace

    def replace(a, b):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        real(a, b)

    monkeypatch.setattr(os, "replace", replace)
    rc = main(["workload", "generate", "--corpus", str(tmp_path / "c.txt"), "--class", "H",
               "--h", "50", "--l", "5", "--queries", "20", "--seed", "1",
               "--out", str(tmp_path / "w.queries"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == (
        "tierlab: interrupted by SIGTERM (it came while outputs were being moved into place: "
        "those written are complete)")
    assert (tmp_path / "w.queries").exists() and (tmp_path / "w.queries.json").exists()


def test_nested_holds_keep_the_inner_note():
    with signals.handled():
        with pytest.raises(signals.Interrupted) as e:
            with signals.held():
                with signals.held("the inner block finished"):
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(0.01)
        assert e.value.note == "the inner block finished"
        with pytest.raises(signals.Interrupted) as e:  # a block that did not finish: no note
            with signals.held("not this"):
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)
                raise ValueError("failed")
        assert e.value.note is None


def test_a_zombie_counts_as_ended(tmp_path):
    """os.kill(pid, 0) succeeds on a zombie (here: a child not yet waited for,
    as this container's pid 1 leaves its orphans); alive() says it ended, so
    its leftovers are swept."""
    p = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 10
        while (signals.proc_stat(p.pid) or ("?",))[0] != "Z":
            assert time.monotonic() < deadline, "never became a zombie"
            time.sleep(0.01)
        os.kill(p.pid, 0)  # the old check: it looks alive
        assert not signals.alive(p.pid)
        (tmp_path / f"out.tmp-{p.pid}").mkdir()
        assert signals.remove_stale(tmp_path, r"out\.tmp-(?P<pid>\d+)") == [
            str(tmp_path / f"out.tmp-{p.pid}")]
    finally:
        p.wait()
    assert signals.alive(os.getpid())
    st = signals.proc_stat(os.getpid())
    assert st[0] in "RS" and st[1] == os.getppid()
