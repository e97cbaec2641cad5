"""Interrupted runs leave nothing behind (issue 19; tierlab.core.signals).

Real commands on tiny inputs are started as subprocesses (own session, the
three signals at their defaults), stopped at a seeded random moment of their
run, and checked: no process of the run remains, no cgroup, no temporary;
outputs are all or nothing; exit status 128 + the signal. SIGINT goes to the
process group (as a terminal's Ctrl-C), SIGTERM and SIGHUP to the command's
process (as `kill PID`). After SIGKILL, the next run of the same command
removes what the killed one left (and reports it), never what a live run
owns."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from processes import processes
from tierlab.cli import main
from tiny_inputs import SMALL_MODEL_SPEC, corpus_and_index

REPO = Path(__file__).resolve().parents[2]
INT, TERM, HUP, KILL = signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL
TABLES = ("cache_run", "cache_query", "cache_timeline")


# --- processes ---------------------------------------------------------------------------------

_procs = processes


RUNS: list["Run"] = []


@pytest.fixture(autouse=True)
def _no_strays():
    """Whatever a failing case left running is killed after the test."""
    yield
    procs = _procs()
    for run in RUNS:
        for pid, start in [(run.p.pid, None), *((k, v[0]) for k, v in run.seen.items())]:
            if pid in procs and (start is None or procs[pid][1] == start):
                try:
                    os.kill(pid, KILL)
                except OSError:
                    pass
        run.p.poll()
    RUNS.clear()


class Run:
    """A tierlab command started in its own session, its descendants recorded
    while it runs."""

    def __init__(self, *args: str):
        def defaults():  # a background job may have inherited them ignored
            for s in (INT, TERM, HUP):
                signal.signal(s, signal.SIG_DFL)

        self.args = args
        self.p = subprocess.Popen([sys.executable, "-m", "tierlab", *args],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, "PYTHONPATH": str(REPO)},
                                  start_new_session=True, preexec_fn=defaults)
        self.seen: dict[int, tuple[str, str]] = {}  # pid -> (start time, comm)
        RUNS.append(self)

    def look(self, procs=None) -> dict[int, tuple[str, str]]:
        procs = _procs() if procs is None else procs
        kids = {self.p.pid}
        grew = True
        while grew:
            new = {pid for pid, (pp, _, _) in procs.items() if pp in kids} - kids
            kids |= new
            grew = bool(new)
        for pid in kids:
            if pid in procs and pid != self.p.pid:
                self.seen[pid] = procs[pid][1:]
        return self.seen

    def child(self, comm: str) -> int | None:
        """A descendant seen so far whose name starts with comm."""
        return next((pid for pid, (_, c) in self.seen.items() if c.startswith(comm)), None)

    def send(self, sig: int) -> None:
        self.look()
        if sig == INT:  # a terminal's Ctrl-C: the foreground process group
            os.killpg(self.p.pid, sig)
        else:
            os.kill(self.p.pid, sig)

    def finish(self, timeout: float = 20.0) -> tuple[int, str]:
        _, err = self.p.communicate(timeout=timeout)
        return self.p.returncode, err

    def assert_gone(self, timeout: float = 10.0) -> None:
        """No process of the run remains: its process group and every
        descendant recorded while it ran."""
        deadline = time.monotonic() + timeout
        while True:
            procs = _procs()
            left = [f"{pid} {comm}" for pid, (start, comm) in self.seen.items()
                    if pid in procs and procs[pid][1] == start]
            group = [pid for pid in procs if _pgid(pid) == self.p.pid]
            if not left and not group:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"still running: {left} (process group: {group})")
            time.sleep(0.02)


def drive(plan, timeout: float = 60.0) -> dict:
    """Runs at once: plan = [(run, ready(run), delay, signal)]; once ready(run)
    holds, wait `delay` s more and send the signal (a callable: the signal it
    returns after doing its part). Returns {run: whether it was still running
    when its moment came}."""
    when: dict = {}
    sent: dict = {}
    todo = list(plan)
    deadline = time.monotonic() + timeout
    while todo:
        assert time.monotonic() < deadline, "timed out"
        procs = _procs()
        for item in list(todo):
            run, ready, delay, sig = item
            run.look(procs)
            if run not in when:
                if ready(run):
                    when[run] = time.monotonic() + delay
                elif run.p.poll() is not None:
                    sent[run] = False
                    todo.remove(item)
                continue
            if time.monotonic() >= when[run]:
                sent[run] = run.p.poll() is None
                if callable(sig) and sent[run]:
                    sig = sig(run)
                if sig is not None and sent[run]:
                    run.send(sig)
                todo.remove(item)
        time.sleep(0.005)
    return sent


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture(scope="module")
def live():
    """A process that lives through a test: its pid names a run still going."""
    p = subprocess.Popen(["sleep", "300"])
    yield p.pid
    p.kill()
    p.wait()


@pytest.fixture
def rng(request):
    """The moments of a test: seeded by its name, so a failure can be rerun."""
    return random.Random(f"issue-19 {request.node.name}")


class Checks:
    """Checks of several cases, each reported (`with check(name): ...`), all
    failures at the end (check.done())."""

    def __init__(self):
        self.failed: list[str] = []

    @contextmanager
    def __call__(self, name: str):
        try:
            yield
        except (AssertionError, subprocess.TimeoutExpired) as e:
            self.failed.append(f"{name}: {str(e).strip()}")

    def done(self) -> None:
        assert not self.failed, "\n".join(self.failed)


def _status(sig: int, rc: int, err: str) -> None:
    assert rc == 128 + sig, err
    assert "Traceback" not in err, err


# --- inputs ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A 20,000-document corpus and its index (a build of ~0.5 s), a workload
    that keeps the runtime busy for about a second, a short one, a sweep grid."""
    d = corpus_and_index(tmp_path_factory.mktemp("interrupt"), docs=20000)
    assert main(["workload", "generate", "--corpus", str(d / "c.txt"), "--class", "H",
                 "--type", "single", "--queries", "100", "--seed", "1", "--quiet",
                 "--out", str(d / "short.queries")]) == 0
    lines = (d / "short.queries").read_text().splitlines()
    (d / "long.queries").write_text("\n".join(lines * 40) + "\n")
    grid = dict(SMALL_MODEL_SPEC, cache_fraction=[0.05, 0.1, 0.2, 0.3], workers=2)
    (d / "grid.yaml").write_text(json.dumps(grid))  # JSON is YAML
    return d


# --- tierlab apcache run --device real -----------------------------------------------------------

def _apcache(d: Path, out: Path, workload: str, *extra: str) -> list[str]:
    return ["apcache", "run", "--index", str(d / "idx"), "--workload", str(d / workload),
            "--device", "real", "--config", "base", "--cache-bytes", "1MiB", "--cores", "2",
            "--out", str(out), "--quiet", *extra]


def _cgroups(pid: int) -> list[Path]:
    from tierlab.runtime.apcache import _cgroup_parents

    return [p / f"tierlab-{pid}" for p in _cgroup_parents() if (p / f"tierlab-{pid}").exists()]


def test_apcache_run_stopped_or_killed(inputs, tmp_path, rng, live):
    """Five runs at once, each stopped by one signal while its runtime runs.
    SIGINT, SIGTERM, SIGHUP: the runtime gets the signal, writes what it
    measured, and all three tables are written (params.partial) or none.
    SIGKILL of the command: its runtime stops (the kernel's parent-death
    signal) and removes its cgroup and shard copies; OUT/.raw-PID-* stays.
    SIGKILL of both (the OOM killer, `kill -9` of everything): the cgroup
    and the shard copies stay too. The next runs remove it all, never what
    a live run owns."""
    d, check = inputs, Checks()
    cases = {"SIGINT": INT, "SIGTERM": TERM, "SIGHUP": HUP, "SIGKILL": KILL,
             "SIGKILL+runtime": KILL}
    outs = {name: tmp_path / name for name in cases}
    runs = {name: Run(*_apcache(d, out, "long.queries")) for name, out in outs.items()}

    def kill_runtime_too(run):
        os.kill(run.child("tierlab-kernel"), KILL)
        return KILL

    def running(run):  # the runtime (~0.6 s alone) made its cgroup, then its shard copy
        runtime = run.child("tierlab-kernel")
        return runtime and list(d.glob(f".tierlab-shard-{runtime}-*"))

    sent = drive([(run, running, rng.uniform(0.0, 0.3),
                   kill_runtime_too if name == "SIGKILL+runtime" else cases[name])
                  for name, run in runs.items()])
    left = {}
    for name, run in runs.items():
        sig = cases[name]
        with check(name):
            rc, err = run.finish()
            assert sent[run], err
            if sig == KILL:
                assert rc == -KILL
            else:
                _status(sig, rc, err)
            run.assert_gone()
            runtime = run.child("tierlab-kernel")
            copies = list(d.glob(f".tierlab-shard-{runtime}-*")) + _cgroups(runtime)
            got = sorted(p.name for p in outs[name].iterdir()) if outs[name].exists() else []
            if sig != KILL:
                assert copies == []
                assert got in ([], sorted(f"{t}.parquet" for t in TABLES)), got  # all or none
                continue
            raw = [[".raw", str(run.p.pid)]]
            if name == "SIGKILL":
                assert [n.split("-")[:2] for n in got] == raw, got
                assert copies == []
            else:
                # the runtime killed while it ran: its shard copy and cgroup stay, unless
                # the command saw it die before its own SIGKILL came and got as far in
                # its clean-up (copies and cgroup, then OUT/.raw-PID, then OUT) as it did
                assert [n.split("-")[:2] for n in got] in (raw, []), got
                assert sorted(p.name.split("-")[0] for p in copies) in (
                    [".tierlab", "tierlab"], []), copies
                assert got or not copies, (got, copies)  # the clean-up's order
            left[name] = copies + (list(outs[name].iterdir()) if outs[name].exists() else [])

    with check("SIGKILL, next runs"):  # at once, a live run's folder in one of them
        alive = outs["SIGKILL"] / f".raw-{live}-0123abcd"
        alive.mkdir()
        nexts = {name: Run(*_apcache(d, outs[name], "short.queries")) for name in left}
        errs = ""
        for name, run in nexts.items():
            rc, err = run.finish()
            assert rc == 0, err
            errs += err
            assert sorted(p.name for p in outs[name].iterdir()) == sorted(
                [f"{t}.parquet" for t in TABLES] + ([alive.name] if name == "SIGKILL" else []))
        for p in [p for ps in left.values() for p in ps]:  # shard copies, cgroups: either run's
            assert not p.exists() and f"removed {p}" in errs, errs
    check.done()


# --- tierlab index build -----------------------------------------------------------------------

def _build(d: Path, out: Path) -> list[str]:
    return ["index", "build", str(d / "c.txt"), "--codec", "pfor-delta256", "--memory-budget",
            "1MB", "--quiet", "--out", str(out)]


def _tmp_dirs(out: Path) -> list[Path]:
    return sorted(out.parent.glob(f"{out.name}.*"))


def test_index_build_stopped_or_killed(inputs, tmp_path, rng, live):
    """SIGINT, SIGTERM, SIGHUP in the transform (dict.pool.tmp exists; it
    used to run on to the commit): cancelled, nothing committed, nothing
    left. SIGKILL: OUT.tmp-PID stays, and the next build removes it (not
    the one of a build still going)."""
    d, check = inputs, Checks()
    outs = {sig: tmp_path / signal.Signals(sig).name for sig in (INT, TERM, HUP, KILL)}
    runs = {sig: Run(*_build(d, out)) for sig, out in outs.items()}

    def transform(out):
        return lambda r: list(out.parent.glob(f"{out.name}.tmp-*/dict.pool.tmp"))

    def started(out):
        return lambda r: list(out.parent.glob(f"{out.name}.tmp-*"))

    sent = drive([(run, transform(outs[sig]), rng.uniform(0.0, 0.05), sig) if sig != KILL else
                  (run, started(outs[sig]), rng.uniform(0.0, 0.4), sig)
                  for sig, run in runs.items()])  # a transform takes ~0.3 s
    for sig, run in runs.items():
        with check(signal.Signals(sig).name):
            rc, err = run.finish()
            assert sent[run], err
            run.assert_gone()
            if sig == KILL:
                assert rc == -KILL
            else:
                _status(sig, rc, err)
                assert not outs[sig].exists(), "committed"
                assert _tmp_dirs(outs[sig]) == []
    with check("SIGKILL, next build"):
        out, pid = outs[KILL], runs[KILL].p.pid
        left = _tmp_dirs(out)
        assert [p.name for p in left] == [f"{out.name}.tmp-{pid}"] or out.exists()
        (tmp_path / f"{out.name}.tmp-{live}").mkdir()  # a build still going: never touched
        rc, err = Run(*_build(d, out), "--force").finish()
        assert rc == 0, err
        assert [p.name for p in _tmp_dirs(out)] == [f"{out.name}.tmp-{live}"]
        for p in left:
            assert f"removed {p}" in err, err
        assert (out / "manifest.json").exists()
    check.done()


# --- tierlab model sweep -----------------------------------------------------------------------

def _cells(out: Path) -> tuple[list[str], list[str]]:
    """(finished cells, temporaries) of a sweep folder."""
    cells = out / "cells"
    names = sorted(p.name for p in cells.iterdir()) if cells.is_dir() else []
    return [n for n in names if not n.startswith(".")], [n for n in names if n.startswith(".")]


def _sweep_ok(out: Path) -> list[str]:
    """Every finished cell is whole, and the merged table holds exactly them;
    returns the temporaries."""
    from tierlab.traces.schema import read_table

    done, tmps = _cells(out)
    for cid in done:
        assert {f"{t}.parquet" for t in TABLES} <= {p.name for p in (out / "cells" / cid).iterdir()}
    if (out / "cache_run.parquet").exists():
        ids = read_table(out / "cache_run.parquet")[1]["params"].map(
            lambda p: json.loads(p)["cell_id"])
        assert sorted(ids) == done
    return tmps


def test_model_sweep_stopped_or_killed(inputs, tmp_path, rng, live):
    """SIGINT, SIGTERM, SIGHUP: the pool's workers get the signal, remove
    their cell's temporary and exit; finished cells are kept and merged.
    SIGKILL of the sweep: its workers get SIGTERM from the kernel (not
    orphaned) and do the same; a worker killed too leaves
    `.<cell>.tmp-<pid>`, which the next sweep removes."""
    check = Checks()
    outs = {sig: tmp_path / signal.Signals(sig).name for sig in (INT, TERM, HUP, KILL)}

    def args(out):
        return ("model", "sweep", str(inputs / "grid.yaml"), "--out", str(out), "--no-progress")

    runs = {sig: Run(*args(out)) for sig, out in outs.items()}
    # the pool's workers run: 4 cells of ~0.7 s on 2 workers
    sent = drive([(run, lambda r: len(r.seen) >= 2, rng.uniform(0.1, 0.8), sig)
                  for sig, run in runs.items()])
    for sig, run in runs.items():
        with check(signal.Signals(sig).name):
            rc, err = run.finish()
            run.assert_gone()
            done = len(_cells(outs[sig])[0]) == 4
            if not sent[run] or (sig != KILL and rc in (0, -sig) and done):
                # it ended first (this machine was faster than expected), or the
                # signal came while the finished sweep's interpreter was exiting,
                # its handlers restored: all cells merged either way
                assert rc in (0, -sig) and done, err
            elif sig == KILL:
                assert rc == -KILL
            else:
                _status(sig, rc, err)
            assert _sweep_ok(outs[sig]) == []
    with check("SIGKILL, next sweep"):
        out = outs[KILL]
        dead = out / "cells" / f".00112233aabbccdd.tmp-{_dead_pid()}"  # as a killed worker leaves
        alive = out / "cells" / f".44556677aabbccdd.tmp-{live}"
        for p in (dead, alive):
            p.mkdir(parents=True, exist_ok=True)
            (p / "cache_run.parquet").write_bytes(b"half")
        rc, err = Run(*args(out)).finish()
        assert rc == 0, err
        assert _sweep_ok(out) == [alive.name]
        assert len(_cells(out)[0]) == 4
        assert f"removed {dead}" in err, err
    check.done()


def test_index_build_signal_at_the_commit_point(inputs, tmp_path, monkeypatch, capsys):
    """The C build runs inside signals.held() and its progress callback polls
    the pending signal; the last callback comes right before the commit point.
    A SIGINT arriving during that last callback (here: sent from it, after the
    poll) meets a commit already under way: the index is committed whole and
    the message says so. One arriving a callback earlier cancels at the last
    one: nothing committed, nothing left."""
    from tierlab.core import native

    real = native.progress_callback
    calls = {"n": 0, "at": None}

    def counting(update):
        def wrapped(done, total):
            calls["n"] += 1
            stop = update(done, total)  # the build's poll
            if calls["n"] == calls["at"]:
                os.kill(os.getpid(), INT)
                time.sleep(0.02)  # the handler runs here: recorded, not raised
            return stop
        return real(wrapped)

    monkeypatch.setattr(native, "progress_callback", counting)
    args = lambda out: ["index", "build", str(inputs / "c.txt"), "--codec", "pfor-delta256",
                        "--out", str(out)]  # noqa: E731 (the bar's callback is the one counted)
    assert main(args(tmp_path / "counted")) == 0
    last = calls["n"]
    assert last > 2
    capsys.readouterr()
    for at, committed in ((last, True), (last - 1, False)):
        out = tmp_path / f"at-{at}"
        calls.update(n=0, at=at)
        rc = main(args(out))
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 128 + INT, err
        assert "Traceback" not in "".join(err)
        if committed:
            assert err[-1] == (f"tierlab: interrupted (it came while {out} was being "
                               f"committed: the index is complete)"), err
            assert (out / "manifest.json").exists()
            from tierlab.engine.index import check
            assert check(out).ok
        else:
            assert err[-1] == "tierlab: interrupted", err
            assert not out.exists()
        assert _tmp_dirs(out) == []


# --- SIGKILL of the commands that write one output file (and its sidecars) ---------------------

WRITERS = {  # name -> (arguments, given inputs and the output; output name); sized to write a while
    "corpus generate": (lambda d, out: ["corpus", "generate", "--size", "30MB", "--seed", "3",
                                        "--quiet", "--out", str(out)], "c.txt"),
    "workload generate": (lambda d, out: ["workload", "generate", "--corpus", str(d / "c.txt"),
                                          "--class", "H", "--queries", "1000000", "--seed", "1",
                                          "--quiet", "--out", str(out)], "w.queries"),
    "index export": (lambda d, out: ["index", "export", str(d / "idx"), "--ciff", str(out),
                                     "--quiet"], "x.ciff"),
}


def _temporaries(out: Path) -> list[Path]:
    """The temporaries of `out` and its sidecars (`.<name>[.sidecar].tmp-<pid>`)."""
    return sorted(out.parent.glob(f".{out.name}*.tmp-*"))


def test_writers_killed_leave_what_the_next_run_removes(inputs, tmp_path, rng, live):
    """`corpus generate`, `workload generate`, `index export` killed by SIGKILL
    at a seeded random moment once their temporary exists leave
    `.OUT.tmp-PID` (and their sidecars'); the next run of the command removes
    them and says so, and never touches a live run's temporary."""
    check = Checks()
    outs = {name: tmp_path / name.replace(" ", "-") / out for name, (_, out) in WRITERS.items()}
    for out in outs.values():
        out.parent.mkdir()
    runs = {name: Run(*WRITERS[name][0](inputs, outs[name])) for name in WRITERS}

    def writing(out):
        return lambda r: _temporaries(out)

    sent = drive([(run, writing(outs[name]), rng.uniform(0.0, 0.05), KILL)
                  for name, run in runs.items()])
    left, again = {}, {}
    for name, run in runs.items():
        with check(name):
            rc, err = run.finish()
            assert sent[run], f"it ended before its moment: {err}"
            assert rc == -KILL
            out, pid = outs[name], run.p.pid
            left[name] = _temporaries(out)
            assert left[name] and all(p.name.endswith(f".tmp-{pid}") for p in left[name])
            assert not out.exists()
            (out.parent / f".{out.name}.tmp-{live}").write_bytes(b"half")  # a run still writing
            again[name] = Run(*WRITERS[name][0](inputs, out))  # the next runs, at once
    for name, run in again.items():
        with check(f"{name}, next run"):
            out = outs[name]
            rc, err = run.finish(timeout=60)
            assert rc == 0, err
            for p in left[name]:
                assert not p.exists() and f"tierlab: removed {p}, left by a killed run" in err, err
            assert _temporaries(out) == [out.parent / f".{out.name}.tmp-{live}"]
            assert out.exists()
    check.done()
