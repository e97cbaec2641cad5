"""`tierlab bench codecs`: the codec benchmark against real peers, as JSON
(tierlab/bench/codecs.py does the work; analysis/codec_pareto.py draws it)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import TierlabError

_CODECS_HELP = """\
Time every codec in the registry on two synthetic posting lists (uniform and
clustered gaps, plus frequencies), in two regimes: per-block (each 256-block
decoded into the same L1-resident buffer, as a query decodes) and whole-list
(decoded into RAM). Peers run in the same process and on the same data:
pyfastpfor (simdfastpfor256, simdbinarypacking, streamvbyte, each with its own
prefix sum for DIDs), Debian's libstreamvbyte, and memcpy as the physical
limit. Every decoded list is checked against its input before it is timed.
pyfastpfor can only be driven from Python: its per-call overhead is measured
(same loop with its `copy` codec) and subtracted; the raw time is kept too.

Writes one JSON record per (codec, dataset, list, regime) with bits_per_int,
decode_ns_per_int (median of --reps passes) and encode_ns_per_int, the
machine, and the targets with MET/MISSED; prints a short table. Takes about
40 s at the default size on 2 cores; `--n 65536` takes a few seconds.
"""

_INDEX_HELP = """\
Generate one corpus (--size, seeded) and one workload per SINGLE/AND x H/M/L,
then build the index with every codec in the registry (block size 256) and
run every workload on it (2 passes, the warm second one reported, page cache
dropped with posix_fadvise before the first). Records per codec: build
throughput (MB of corpus text per second of ingest + transform), the bytes of
every index file, the DID and freq block sizes against base (4 bytes per
posting), and QPS and latency mean/p50/p99 per workload. The top-10 results
of the first 20 queries of every workload must be the same for every codec
(results_identical). Scratch files go to a folder next to --out (or in
--work), removed at the end unless --keep. Takes a few minutes at 200MB.
"""


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks against real peers, written as JSON",
                       description="Benchmarks that compare tierlab with real peers in one run.")
    bsub = p.add_subparsers(dest="bench", metavar="BENCHMARK")
    bsub.required = True
    c = bsub.add_parser("codecs", help="codec speed and size vs pyfastpfor, libstreamvbyte, memcpy",
                        description=_CODECS_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--out", required=True, type=Path, metavar="FILE.json",
                   help="where to write the JSON results (written atomically; folders are created)")
    c.add_argument("--plot", type=Path, metavar="FILE.png",
                   help="also draw bits/int vs decode ns/int (Pareto) for DIDs to this PNG")
    c.add_argument("--n", type=int, default=1 << 20, metavar="N",
                   help="integers per list (default: %(default)s)")
    c.add_argument("--avg-gap", type=int, default=32, metavar="GAP",
                   help="average gap between consecutive DIDs (default: %(default)s)")
    c.add_argument("--reps", type=int, default=15, metavar="R",
                   help="timed passes per measurement; the median is reported, min too "
                        "(default: %(default)s; at least 10)")
    c.add_argument("--seed", type=int, default=None, metavar="S",
                   help="seed of the data generators (default: a fixed seed, so runs compare)")
    c.add_argument("--dataset", action="append", choices=["clustered", "uniform"],
                   help="run only this dataset; repeat for both (default: both)")
    c.add_argument("--no-peers", action="store_true",
                   help="skip pyfastpfor and libstreamvbyte (memcpy is always measured)")
    c.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    c.set_defaults(func=run_codecs)

    from .args import positive_int, size

    ix = bsub.add_parser("index", help="index build speed, size and QPS per codec",
                         description=_INDEX_HELP,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    ix.add_argument("--out", required=True, type=Path, metavar="FILE.json",
                    help="where to write the JSON results (written atomically; folders are created)")
    ix.add_argument("--plot", type=Path, metavar="FILE.png",
                    help="also draw QPS vs compressed postings size per codec to this PNG")
    ix.add_argument("--size", type=size, default="200MB", metavar="SIZE",
                    help="corpus size to generate, e.g. 50MB (default: 200MB)")
    ix.add_argument("--queries-h", type=positive_int, default=200, metavar="N",
                    help="queries per H workload (default: %(default)s)")
    ix.add_argument("--queries-m", type=positive_int, default=1000, metavar="N",
                    help="queries per M workload (default: %(default)s)")
    ix.add_argument("--queries-l", type=positive_int, default=2000, metavar="N",
                    help="queries per L workload (default: %(default)s)")
    ix.add_argument("--rp", type=float, default=0.25, metavar="P",
                    help="repeat probability of the workloads (default: %(default)s)")
    ix.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the corpus and workloads (default: %(default)s)")
    ix.add_argument("--work", type=Path, metavar="DIR",
                    help="make the scratch folder (corpus, workloads, indexes) in DIR "
                         "(default: the folder of --out)")
    ix.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ix.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    ix.set_defaults(func=run_index)


def run_codecs(args) -> int:
    from ..bench import codecs, data

    if args.n <= 0:
        raise TierlabError(f"--n must be a positive number of integers, got {args.n}")
    if args.avg_gap < 1:
        raise TierlabError(f"--avg-gap must be at least 1, got {args.avg_gap}")
    if args.reps < 1:
        raise TierlabError(f"--reps must be at least 1, got {args.reps}")
    if args.seed is not None and args.seed < 0:
        raise TierlabError(f"--seed must be a non-negative integer, got {args.seed}")
    data.check_dids_fit(args.n, args.avg_gap)
    if args.reps < codecs.MIN_REPS:
        print(f"tierlab: warning: --reps {args.reps} is below {codecs.MIN_REPS}; the medians "
              f"are not the 'median of >= {codecs.MIN_REPS} runs' the targets ask for",
              file=sys.stderr)
    codecs.check_writable(args.out)
    if args.plot is not None:
        codecs.check_writable(args.plot)
    datasets = tuple(dict.fromkeys(args.dataset)) if args.dataset else codecs.DATASETS
    cfg = codecs.Config(
        n=args.n, avg_gap=args.avg_gap, reps=args.reps,
        seed=data.DEFAULT_SEED if args.seed is None else args.seed,
        datasets=datasets, peers=not args.no_peers,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    doc = codecs.run(cfg)
    codecs.write_json(doc, args.out)
    if args.plot is not None:
        import pandas as pd

        from ..analysis.codec_pareto import plot_codec_pareto

        plot_codec_pareto(pd.DataFrame(doc["records"]), args.plot)
    print(codecs.format_table(doc))
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0


def run_index(args) -> int:
    from ..bench import index as bench_index
    from ..bench.codecs import check_writable, write_json

    cfg = bench_index.Config(
        size_bytes=args.size,
        queries={"H": args.queries_h, "M": args.queries_m, "L": args.queries_l},
        rp=args.rp, seed=args.seed, work=args.work, keep=args.keep,
        progress=not args.no_progress and sys.stderr.isatty(),
    )
    bench_index.validate(cfg)
    check_writable(args.out)
    if args.plot is not None:
        check_writable(args.plot)
    doc = bench_index.run(cfg, args.out)
    write_json(doc, args.out)
    if args.plot is not None:
        from ..analysis.index_qps_vs_size import plot_qps_vs_size

        plot_qps_vs_size(doc, args.plot)
    print(bench_index.format_table(doc))
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0 if doc["results_identical"] and not doc["errors"] else 1
