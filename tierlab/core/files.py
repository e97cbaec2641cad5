"""Output files and scratch folders of every tierlab command (issue 19;
docs/architecture.md "Stopping: signals, children, temporaries"). One rule:

- An output file is written under a temporary name next to it,
  `.<name>.tmp-<pid>`, and renamed into place when it is whole
  (`atomic_outputs`, `write_atomic`): a file named like the output is always
  complete. The renames run inside `signals.held()`: a SIGINT, SIGTERM or
  SIGHUP arriving there lets them all finish, and the command says so
  ("interrupted by SIGTERM (it came while outputs were being moved into
  place: those written are complete)"). Any other failure or signal
  removes the temporaries.
- SIGKILL leaves the temporary. The next writer of the same output removes
  the ones whose process is gone (`signals.stale`; never a live run's) and
  says so on stderr: "tierlab: removed PATH, left by a killed run".
- A scratch folder (benchmarks, cost measurement, reference tables) is
  `tierlab-<kind>-<pid>-XXXXXXXX` (`scratch`); the next run of that kind
  removes the stale ones in the same parent folder. A folder kept on request
  is renamed `tierlab-<kind>-kept-<pid>-XXXXXXXX`, which no sweep matches.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tierlab.core import signals
from tierlab.core.errors import TierlabError

MOVING = "outputs were being moved into place: those written are complete"


def temporary_name(path: str | os.PathLike, pid: int | None = None) -> Path:
    """The temporary of output `path` in process `pid` (this one by default)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid() if pid is None else pid}")


def sweep(*paths: str | os.PathLike, report: bool = True) -> list[str]:
    """Remove the temporaries of outputs `paths` that killed processes left;
    report each on stderr (unless `report` is false). Returns their paths."""
    removed = []
    for p in paths:
        p = Path(p)
        removed += signals.remove_stale(p.parent, rf"\.{re.escape(p.name)}\.tmp-(?P<pid>\d+)")
    if report:
        signals.report(removed)
    return removed


def check_writable(p: Path) -> None:
    """TierlabError now, not after the work, if output file `p` cannot be
    written: its folder cannot be created or written, or `p` is a folder."""
    try:
        p.parent.mkdir(parents=True, exist_ok=True)  # like the other outputs of tierlab
    except OSError as e:
        raise TierlabError(f"cannot write {p}: cannot create {p.parent} ({e.strerror})") from None
    if p.is_dir():
        raise TierlabError(f"cannot write {p}: it is a directory")
    if not os.access(p.parent, os.W_OK):
        raise TierlabError(f"cannot write {p}: directory {p.parent} is not writable")


@contextmanager
def atomic_outputs(*paths: str | os.PathLike):
    """Yield the temporaries of output files `paths` (temporary_name); when the
    block succeeds, rename them onto `paths`, in order, all of them even if a
    signal comes meanwhile (held(), note MOVING). Whatever else happens they
    are removed (in a pool worker too: signals.temporary). What killed
    writers of these outputs left is swept first (sweep). An OSError (disk
    full, ...) becomes a one-line TierlabError naming the output."""
    paths = tuple(Path(p) for p in paths)
    for p in paths:
        check_writable(p)
    sweep(*paths)
    tmps = tuple(temporary_name(p) for p in paths)
    try:
        with ExitStack() as stack:
            for t in tmps:
                stack.enter_context(signals.temporary(t))
            yield tmps
            with signals.held(MOVING):
                for t, p in zip(tmps, paths):
                    os.replace(t, p)
    except OSError as e:  # disk full and the like: one line, not a traceback
        name = paths[tmps.index(Path(e.filename))] if Path(e.filename or "") in tmps else (
            e.filename or paths[0])
        raise TierlabError(f"cannot write {name}: {e.strerror or e}") from None
    finally:
        for t in tmps:
            try:
                t.unlink()
            except FileNotFoundError:
                pass
            except IsADirectoryError:
                shutil.rmtree(t, ignore_errors=True)


def write_atomic(path: str | os.PathLike, data: str | bytes, fsync: bool = False) -> Path:
    """Write `data` (text as UTF-8) to `path` through atomic_outputs; with
    `fsync`, the bytes are on disk before the rename."""
    path = Path(path)
    with atomic_outputs(path) as (tmp,):
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    return path


# --- scratch folders ----------------------------------------------------------------------------

def _scratch_pattern(kind: str) -> str:
    return rf"tierlab-{re.escape(kind)}-(?P<pid>\d+)-.+"


def scratch_dir(kind: str, parent: str | os.PathLike | None = None) -> Path:
    """A new scratch folder `tierlab-<kind>-<pid>-*` in `parent` (the system's
    temporary folder by default, created if needed), after removing (and
    reporting) the stale ones of `kind` there."""
    parent = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    try:
        parent.mkdir(parents=True, exist_ok=True)
        signals.report(signals.remove_stale(parent, _scratch_pattern(kind)))
        return Path(tempfile.mkdtemp(prefix=f"tierlab-{kind}-{os.getpid()}-", dir=parent))
    except OSError as e:
        raise TierlabError(f"cannot create a scratch folder in {parent}: "
                           f"{e.strerror or e}") from None


def keep_name(folder: str | os.PathLike, kind: str) -> Path:
    """The name a kept scratch folder of `kind` takes (`-kept-` after the kind)."""
    folder = Path(folder)
    head = f"tierlab-{kind}-"
    if not folder.name.startswith(head):
        return folder
    return folder.with_name(f"{head}kept-{folder.name[len(head):]}")


def release(folder: str | os.PathLike, kind: str, keep: bool = False) -> Path | None:
    """End a scratch folder: removed, or with `keep` renamed to keep_name()
    (returned)."""
    folder = Path(folder)
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    kept = keep_name(folder, kind)
    os.replace(folder, kept)
    return kept


@contextmanager
def scratch(kind: str, parent: str | os.PathLike | None = None, keep: bool = False):
    """scratch_dir() for the block, release()d when it ends, however it ends."""
    folder = scratch_dir(kind, parent)
    try:
        yield folder
    finally:
        release(folder, kind, keep)


def save_figure(fig, path: str | os.PathLike, **savefig) -> Path:
    """fig.savefig() (a matplotlib Figure's) to `path` through atomic_outputs;
    the format is the suffix's (png when there is none) unless given."""
    path = Path(path)
    savefig.setdefault("format", path.suffix.lstrip(".").lower() or "png")
    with atomic_outputs(path) as (tmp,):
        fig.savefig(tmp, **savefig)
    return path
