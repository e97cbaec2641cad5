"""`tierlab trace memory` end to end (traces/memtrace.md): its outputs and
what it prints, its errors (one line, exit status 2) and an interrupted run
(nothing left: no output, no temporary, no child)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import processes
from tierlab.cli import main
from tierlab.engine import memtrace as engine
from tierlab.traces import memtrace, schema
from tiny_inputs import corpus_and_index, with_h_workload

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    if shutil.which("clang") is None or shutil.which("cmake") is None:
        pytest.skip("the tracing build needs clang and cmake (make deps installs them)")
    engine.build()
    return with_h_workload(corpus_and_index(tmp_path_factory.mktemp("tm"), 400), 12)


def test_writes_the_trace_and_its_summary(tiny, tmp_path, capsys):
    out = tmp_path / "t"
    assert main(["trace", "memory", str(tiny / "idx"), str(tiny / "h.queries"), "--out",
                 str(out), "--every", "3", "--k", "50", "--place", "dict=dram"]) == 0
    text = capsys.readouterr().out
    h, rec = memtrace.read(out / "memtrace.bin")
    assert (h.every, h.queries, h.queries_sampled, h.queries_traced) == (3, 12, 4, 4)
    assert h.k == 50 and h.placement == "dict=dram"
    assert f"sampling: {h.sampling()}" in text and "every 3rd query" in text
    assert "records of 16 bytes" in text and "dictionary" in text
    _, df = schema.read_table(out / "memtrace_summary.parquet")
    assert df.accesses.sum() == h.records == len(rec)
    assert set(df.query_id) == {0, 3, 6, 9} and set(df.query_type) == {"single"}
    assert (df.sampling == h.sampling()).all() and (df.every == 3).all()
    assert sorted(p.name for p in out.iterdir()) == ["memtrace.bin", "memtrace_summary.parquet"]


@pytest.mark.parametrize("args, message", [
    (["{d}/nope", "{d}/h.queries"], "no such index"),
    (["{d}/idx", "{d}/nope.queries"], "nope.queries"),
    (["{d}/idx", "{d}/c.txt", "--every", "1"], "c.txt"),
    (["{d}/idx", "{d}/h.queries", "--max-bytes", "100"], "below the trace header"),
    (["{d}/idx", "{d}/h.queries", "--place", "did=nowhere"], "nowhere"),
])
def test_errors_are_one_line(tiny, tmp_path, capsys, args, message):
    argv = ["trace", "memory", *[a.format(d=tiny) for a in args], "--out", str(tmp_path / "t")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tierlab: error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "t").exists() or not list((tmp_path / "t").iterdir())


def test_an_interrupted_run_leaves_nothing(tiny, tmp_path):
    """SIGINT (the process group, as Ctrl-C) once the trace is being written:
    exit status 130, no output, no temporary, no driver left running."""
    d = corpus_and_index(tmp_path / "big", 1500)
    (d / "w.queries").write_text("ra\n" * 2000)
    out = tmp_path / "t"
    p = subprocess.Popen([sys.executable, "-m", "tierlab", "trace", "memory", str(d / "idx"),
                          str(d / "w.queries"), "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(out.glob(".memtrace.bin.tmp-*")) and p.poll() is None:
        assert time.monotonic() < deadline, "the trace never started"
        time.sleep(0.01)
    driver = [pid for pid, (pp, _, comm) in processes().items()
              if pp == p.pid and comm.startswith("tierlab-memtr")]
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert list(out.iterdir()) == []
    assert not [pid for pid in driver if pid in processes()]


def test_a_killed_runs_temporaries_are_removed_by_the_next(tiny, tmp_path, capsys):
    out = tmp_path / "t"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = out / f".memtrace.bin.tmp-{dead.pid}"
    left.write_bytes(b"partial")
    assert main(["trace", "memory", str(tiny / "idx"), str(tiny / "h.queries"), "--out",
                 str(out), "--quiet", "--every", "6"]) == 0
    assert not left.exists() and f"removed {left}" in capsys.readouterr().err
