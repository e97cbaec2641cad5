"""Checked values of the YAML files users write (model configurations and
grids, validation grids, specs): each error names the key, never a
traceback. `key` is the name the user sees, with any prefix ("grid: k")."""
from __future__ import annotations

import math
import os
from pathlib import Path

import yaml

from .errors import TierlabError


def read_yaml(path: str | os.PathLike):
    """The document of a YAML file (None for an empty one)."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise TierlabError(f"{path}: cannot read ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise TierlabError(f"{path}: not valid YAML ({e})") from None


def size(key: str, v, *, allow_zero: bool = False) -> int:
    """Bytes from an int or a size text ('4GB', '50MB', '32KiB')."""
    from .corpus import parse_size

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
