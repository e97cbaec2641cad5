"""The `tierlab` command: one module per command group (list, bench, corpus,
workload, ...).

Each group module exposes `register(subparsers)`; it adds its parser and sets
`func` to a function taking the parsed args and returning an exit status.
User mistakes raise TierlabError: printed as one line, exit status 2.
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
from tierlab.cli import (apcache, bench, corpus, index, list_, model, query, trace,  # noqa: E402
               validate, workload)

GROUPS = [list_, bench, corpus, workload, index, query, trace, apcache, model, validate]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
            print(f"tierlab: error: {e}", file=sys.stderr)
            return 2
        except BrokenPipeError:  # e.g. `tierlab list codecs | head`
            sys.stderr.close()
            return 0
        except KeyboardInterrupt as e:  # SIGINT, SIGTERM or SIGHUP
            signals.hold()  # stopping already: a second signal changes nothing
            by = "" if signals.signum(e) == signal.SIGINT else f" by {e}"
            print(f"tierlab: interrupted{by}", file=sys.stderr)
            return signals.exit_status(e)


if __name__ == "__main__":
    sys.exit(main())
