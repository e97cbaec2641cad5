"""Argument types and help helpers shared by every command group (defined
once, like PISA's tools/app.hpp): a bad value becomes argparse's usage error
naming the option, never a traceback."""
from __future__ import annotations

import argparse
import textwrap


def positive_int(text: str) -> int:
    """'12', '1e6' -> a whole number >= 1."""
    try:
        v = int(float(text)) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: '{text}'") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: '{text}'")
    return v


def size(text: str) -> int:
    """'100MB', '1.5GiB', '4096' -> bytes."""
    from tierlab.core.values import parse_size
    from tierlab.core.errors import TierlabError

    try:
        return parse_size(text)
    except TierlabError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def paragraphs(*texts: str) -> str:
    """Help text in paragraphs, each wrapped (RawDescriptionHelpFormatter keeps
    the blank lines between them)."""
    return "\n\n".join(textwrap.fill(t, 79) for t in texts)
