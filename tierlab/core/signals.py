"""How a tierlab command stops (issue 19): one path for SIGINT, SIGTERM and
SIGHUP, and the removal of what SIGKILL leaves.

- `handled()` (around a command, in the CLI process's main thread): SIGTERM
  and SIGHUP raise what SIGINT raises, a KeyboardInterrupt (`Interrupted`,
  which remembers the signal). Every `finally`, `except BaseException` and
  context manager that removes a temporary thus runs for all three, and the
  CLI exits with `exit_status(e)` = 128 + the signal. A signal ignored when
  the process started (nohup, a background job) stays ignored.
- `held()`: a block that must run whole (removing temporaries, waiting for
  children, renaming outputs into place): a signal arriving inside it is
  raised when it ends.
- Children get the signal passed on (`stop()`), and must not outlive a
  parent killed by SIGKILL: `die_with_parent()` asks the kernel for SIGTERM
  when the parent dies (the C runtime does the same when TIERLAB_PARENT_PID
  is set, kernels/src/cli/main.c).
- `worker_init()`: a pool worker stops at once on any of the three signals,
  removing the temporaries `temporary()` registered, and exits 128 + signal.
- SIGKILL cannot be caught: every temporary name holds the pid of the process
  that made it (`OUT.tmp-<pid>`, `.raw-<pid>-*`, `tierlab-<pid>` ...), and the
  next run of the same kind removes those whose process is gone
  (`stale()`, `remove_stale()`; `alive()` is the check: a zombie has ended),
  never those of a run still going. Output files and scratch folders follow
  one rule for this: tierlab.core.files.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt raised for `signum` (SIGINT, SIGTERM or SIGHUP);
    `note`, when the signal came inside a held() block that then finished,
    says what that block completed (the CLI adds "(it came while NOTE)")."""

    def __init__(self, signum: int, note: str | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.note = note


def signum(exc: BaseException | None) -> int:
    """The signal behind an interruption (SIGINT for a plain KeyboardInterrupt)."""
    return int(getattr(exc, "signum", signal.SIGINT))


def exit_status(exc: BaseException | None) -> int:
    """128 + the signal: the exit status of a command stopped by it."""
    return 128 + signum(exc)


_held = 0
_pending: int | None = None
_note: str | None = None  # what the held() blocks completed while _pending waited


def _raise(sig, frame):
    global _pending
    if _held:
        if _pending is None:
            _pending = sig
        return
    raise Interrupted(sig)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install() -> None:
    """SIGINT, SIGTERM and SIGHUP raise Interrupted in the main thread (call
    it there, in the process of a command)."""
    if not _main_thread():
        return
    for s in STOP:
        if signal.getsignal(s) == signal.SIG_IGN:
            continue
        signal.signal(s, _raise)


def installed() -> bool:
    return signal.getsignal(signal.SIGTERM) is _raise


@contextmanager
def handled():
    """install() for the block (a command's run), the handlers of before it
    back afterwards."""
    global _held, _pending
    if not _main_thread():
        yield
        return
    old = {s: signal.getsignal(s) for s in STOP}
    install()
    try:
        yield
    finally:
        _held += 1  # the command is over: nothing to interrupt any more
        for s, h in old.items():
            if h is not None:
                signal.signal(s, h)
        _held, _pending = 0, None
        _set_note(None)


def _set_note(note: str | None) -> None:
    global _note
    _note = note


def hold() -> None:
    """From now on until handled() ends, signals are only recorded: for a
    command that is already stopping."""
    global _held
    _held += 1


def pending() -> int | None:
    """The signal that arrived inside held() and is not raised yet, or None."""
    return _pending


class Hold:
    """The handle of a held() block: `note` says what the block completes
    ("outputs were being moved into place: those written are complete");
    set it to None when the block turns out not to (a cancelled commit)."""

    def __init__(self, note: str | None):
        self.note = note


@contextmanager
def held(note: str | None = None):
    """Run the block whole: an interrupting signal (once install()ed) that
    arrives inside it is raised as Interrupted when the outermost held()
    ends. If the block ends normally with a signal pending, its `note`
    (the yielded Hold's, the first of nested blocks) rides on the Interrupted."""
    global _held, _pending
    h = Hold(note)
    if not _main_thread() or not installed():
        yield h
        return
    _held += 1
    finished = False
    try:
        yield h
        finished = True
    finally:
        _held -= 1
        if finished and _pending is not None and _note is None:
            _set_note(h.note)
        if not _held and _pending is not None:
            sig, _pending = _pending, None
            why = _note
            _set_note(None)
            raise Interrupted(sig, why)


# --- children ---------------------------------------------------------------------------------

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None, sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send `sig` to this process when its parent (the
    thread that forked it) dies; if the parent `parent` is gone already, send
    it now. False where the kernel cannot (not Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)
    return ok


def child_env(env: dict | None = None) -> dict:
    """The environment of a tierlab-kernels child: TIERLAB_PARENT_PID makes it
    stop when this process dies (kernels/src/cli/main.c)."""
    return {**(os.environ if env is None else env), "TIERLAB_PARENT_PID": str(os.getpid())}


def stop(procs, sig: int = signal.SIGTERM, timeout: float = 10.0) -> list[int]:
    """Pass `sig` to each process (a Popen, a multiprocessing Process or a
    pid that is our child) and wait up to `timeout` s for all of them; the
    ones still running then get SIGKILL. Returns the pids killed so."""
    procs = list(procs)

    def pid_of(p):
        return p if isinstance(p, int) else p.pid

    def done(p) -> bool:
        if isinstance(p, int):
            try:
                return os.waitpid(p, os.WNOHANG)[0] != 0
            except ChildProcessError:
                return True
        if hasattr(p, "poll"):
            return p.poll() is not None
        return not p.is_alive()

    for p in procs:
        if not done(p):
            try:
                os.kill(pid_of(p), sig)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while any(not done(p) for p in procs) and time.monotonic() < deadline:
        time.sleep(0.01)
    killed = []
    for p in procs:
        if not done(p):
            try:
                os.kill(pid_of(p), signal.SIGKILL)
                killed.append(pid_of(p))
            except ProcessLookupError:
                pass
    for p in procs:  # reap them
        if isinstance(p, int):
            try:
                os.waitpid(p, 0)
            except ChildProcessError:
                pass
        elif hasattr(p, "wait"):
            p.wait()
        else:
            p.join()
    return killed


# --- pool workers -----------------------------------------------------------------------------

_temporaries: list[Path] = []


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def _worker_exit(sig, frame):
    for p in list(_temporaries):
        _remove(p)
    os._exit(128 + sig)


def worker_init(parent: int | None = None) -> None:
    """Initializer of a pool worker: SIGINT, SIGTERM and SIGHUP remove the
    temporaries of temporary() and end the worker (128 + signal) at once,
    quietly; the worker gets SIGTERM when its parent dies."""
    for s in STOP:
        signal.signal(s, _worker_exit)
    die_with_parent(parent)


@contextmanager
def temporary(path: str | os.PathLike):
    """Register `path` (a file or folder being written) for removal should
    a worker_init()ed process be stopped by a signal inside the block."""
    path = Path(path)
    _temporaries.append(path)
    try:
        yield path
    finally:
        _temporaries.remove(path)


# --- leftovers of killed runs -----------------------------------------------------------------

def proc_stat(pid: int | str) -> tuple[str, int, str, str] | None:
    """(state, ppid, start time, comm) of process `pid` from /proc/PID/stat
    (proc(5): fields 3, 4, 22 and 2), or None when it cannot be read (no such
    process, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    head, _, tail = stat.rpartition(")")  # comm may hold spaces and ')'
    rest = tail.split()
    if len(rest) < 20:
        return None
    return rest[0], int(rest[1]), rest[19], head[head.find("(") + 1:]


def alive(pid: int) -> bool:
    """Whether a process `pid` runs: os.kill(pid, 0) finds it (one of another
    user counts) and /proc does not show it as a zombie, which has ended and
    only waits to be reaped (os.kill succeeds on it; this container's pid 1
    reaps nothing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    st = proc_stat(pid)
    return st is None or st[0] not in ("Z", "X")


def stale(folder: str | os.PathLike, pattern: str) -> list[tuple[Path, int]]:
    """Entries of `folder` whose name matches `pattern` (a regular expression
    with a group `pid`, matched whole) and whose process is gone: [(path, pid)].
    This process's own are never stale."""
    folder = Path(folder)
    rx = re.compile(pattern)
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        m = rx.fullmatch(name)
        if not m:
            continue
        pid = int(m.group("pid"))
        if pid != os.getpid() and not alive(pid):
            out.append((folder / name, pid))
    return out


def remove_stale(folder: str | os.PathLike, pattern: str) -> list[str]:
    """Remove stale() entries; returns their paths."""
    removed = []
    for path, _ in stale(folder, pattern):
        _remove(path)
        if not os.path.lexists(path):
            removed.append(str(path))
    return removed


def report(removed, what: str = "a killed run") -> None:
    """One line on stderr per leftover removed (or found: `what` says)."""
    for path in removed:
        print(f"tierlab: removed {path}, left by {what}", file=sys.stderr)
