"""Checked values of the YAML files users write (model configurations and
grids, validation grids, specs): each error names the key, never a
traceback. `key` is the name the user sees, with any prefix ("grid: k")."""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import yaml

from tierlab.core.errors import TierlabError


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
          "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12,
          "tib": 2**40}


def parse_size(text: str) -> int:
    """'100MB' -> 10^8, '1.5GiB' -> 1.5 * 2^30, '4096' -> 4096 (bytes)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise TierlabError(f"cannot read size '{text}': use e.g. 100MB, 1.5GB, 64MiB or 4096")
    n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise TierlabError(f"size '{text}' must be positive")
    return n



def read_yaml(path: str | os.PathLike):
    """The document of a YAML file (None for an empty one)."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise TierlabError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise TierlabError(f"{path}: not UTF-8 text (byte {e.start}); a YAML file is "
                           "text") from None
    except yaml.YAMLError as e:
        raise TierlabError(f"{path}: not valid YAML ({e})") from None


def size(key: str, v, *, allow_zero: bool = False) -> int:
    """Bytes from an int or a size text ('4GB', '50MB', '32KiB')."""
    if isinstance(v, bool) or v is None:
        raise TierlabError(f"{key}: a size in bytes (e.g. 4GB or 32768), got {v!r}")
    if isinstance(v, str):
        try:
            n = parse_size(v)
        except TierlabError as e:
            raise TierlabError(f"{key}: {e}") from None
    elif isinstance(v, (int, float)) and math.isfinite(v) and v == int(v):
        n = int(v)
    else:
        raise TierlabError(f"{key}: a whole number of bytes, got {v!r}")
    if n < 0 or (n == 0 and not allow_zero):
        raise TierlabError(f"{key}: must be {'>= 0' if allow_zero else 'positive'}, got {v!r}")
    return n


def whole(key: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < lo:
        raise TierlabError(f"{key}: a whole number >= {lo}, got {v!r}")
    return int(v)


def number(key: str, v, lo: float = 0.0, hi: float | None = None,
           open_lo: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise TierlabError(f"{key}: a number, got {v!r}")
    if (v <= lo if open_lo else v < lo) or (hi is not None and v > hi):
        rng = f"({lo:g}, " if open_lo else f"[{lo:g}, "
        raise TierlabError(f"{key}: must be in {rng}{'inf' if hi is None else f'{hi:g}'}], "
                           f"got {v!r}")
    return float(v)


# --- output paths -------------------------------------------------------------------
# A command checks every path it will write before it does any work, so a bad
# path is one error naming the option and no output is left half written.

def _writable_parent(path: Path, what: str) -> None:
    """The nearest existing ancestor of `path` is a folder we may write in."""
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise TierlabError(f"{what} {path}: {parent} is not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise TierlabError(f"{what} {path}: folder {parent} is not writable")
            return


def check_free_space(path: str | os.PathLike, planned: int, what: str) -> None:
    """A resource guard for files (tierlab.h "Resource guards" for memory): a
    TierlabError with the numbers when writing `planned` bytes at `path`
    would need more than its filesystem has free."""
    path = Path(path)
    folder = next((p for p in (path.parent, *path.parent.parents) if p.is_dir()), None)
    if folder is None:
        return
    try:
        st = os.statvfs(folder)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if planned > free:
        from tierlab.core.native import bytes_text

        raise TierlabError(f"{what}: {bytes_text(planned)} to write, more than the "
                           f"{bytes_text(free)} free in {folder}")


def output_file(path: str | os.PathLike, what: str) -> Path:
    """A file a command will write (replacing it if it exists): not a folder,
    in a folder that exists or can be created. `what` names the option."""
    if os.fspath(path).strip() == "":
        raise TierlabError(f"{what}: a file name is needed, got an empty one")
    path = Path(path)
    if path.name in ("", ".", ".."):
        raise TierlabError(f"{what} '{path}': a file name is needed")
    if path.is_dir():
        raise TierlabError(f"{what} {path}: is a folder; give a file name")
    if path.exists() and not path.is_file():
        raise TierlabError(f"{what} {path}: exists and is not a regular file")
    _writable_parent(path, what)
    return path


def output_dir(path: str | os.PathLike, what: str) -> Path:
    """A folder a command will create or write into: not an existing file,
    and creatable. `what` names the option."""
    if os.fspath(path).strip() == "":
        raise TierlabError(f"{what}: a folder is needed, got an empty name")
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise TierlabError(f"{what} {path}: exists and is not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise TierlabError(f"{what} {path}: folder is not writable")
        return path
    _writable_parent(path, what)
    return path
