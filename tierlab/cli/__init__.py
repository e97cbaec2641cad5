"""The `tierlab` command: one module per command group (list, bench, corpus,
workload, ...).

Each group module exposes `register(subparsers)`; it adds its parser and sets
`func` to a function taking the parsed args and returning an exit status.
User mistakes are one line on stderr and exit status 2: argparse's (Parser)
and TierlabError, which the commands raise for everything a user can get
wrong. Any other exception is a bug in tierlab and shows its traceback.
SIGINT, SIGTERM and SIGHUP stop a command the same way (tierlab.core.signals):
its temporaries and children are removed, exit status 128 + the signal.
"""
from __future__ import annotations

import os

# numpy's OpenBLAS threads spin after use and steal a core from measured
# threads (benchmarks, query runs); tierlab needs none. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

from tierlab import __version__  # noqa: E402
from tierlab.core import signals  # noqa: E402
from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.cli import (apcache, bench, corpus, index, list_, model, query, sim,  # noqa: E402
               trace, validate, workload)

GROUPS = [list_, bench, corpus, workload, index, query, trace, apcache, model, validate, sim]


class Parser(argparse.ArgumentParser):
    """argparse's parser with a usage error as one line (the usage itself
    is one --help away); its subparsers are Parsers too."""

    def error(self, message):
        self.exit(2, one_line(f"{self.prog}: error: {message} (see {self.prog} --help)") + "\n")


def one_line(text: str) -> str:
    """A message as one line: its lines joined ("head: a; b"); bytes of a
    command line that is not UTF-8 (surrogates) escaped, so any stderr takes it."""
    text = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    return lines[0] + " " + "; ".join(lines[1:])


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="tierlab",
        description="Memory-tier placement for compressed inverted indexes: native kernels, "
        "traces, simulator configs, a SimPy model of APCache, and their validation.",
    )
    p.add_argument("--version", action="version", version=f"tierlab {__version__}")
    sub = p.add_subparsers(dest="group", metavar="COMMAND")
    sub.required = True
    for g in GROUPS:
        g.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with signals.handled():
        try:
            return int(args.func(args) or 0)
        except TierlabError as e:
            print(f"tierlab: error: {one_line(e)}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # e.g. `tierlab list codecs | head`
            sys.stderr.close()
            return 0
        except KeyboardInterrupt as e:  # SIGINT, SIGTERM or SIGHUP
            signals.hold()  # stopping already: a second signal changes nothing
            by = "" if signals.signum(e) == signal.SIGINT else f" by {e}"
            note = getattr(e, "note", None)  # what a held() block finished meanwhile
            why = f" (it came while {note})" if note else ""
            print(f"tierlab: interrupted{by}{why}", file=sys.stderr)
            return signals.exit_status(e)


if __name__ == "__main__":
    sys.exit(main())
