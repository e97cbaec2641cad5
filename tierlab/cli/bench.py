"""`tierlab bench codecs`: the codec benchmark against real peers, as JSON
(tierlab/experiments/bench/codecs.py does the work; analysis/codec_pareto.py draws it)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tierlab.core.errors import TierlabError
from tierlab.cli.args import positive_int, size

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
a minute at the default size on 2 cores; `--n 65536` takes a few seconds.
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


def _benchmark(bsub, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    """The parser of `tierlab bench NAME` with the options every benchmark
    takes: --out (one JSON document) and --no-progress."""
    p = bsub.add_parser(name, help=summary, description=description,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, metavar="FILE.json",
                   help="where to write the JSON results (written atomically; folders are created)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def _progress(args) -> bool:
    return not args.no_progress and sys.stderr.isatty()


def _each_once(values, default: tuple) -> tuple:
    """A repeated option's values, each once and in order; default when none given."""
    return tuple(dict.fromkeys(values)) if values else default


def _add_inputs(p, queries: dict) -> None:
    """The options of bench/index.py's Inputs (corpus, workloads, scratch
    folder), shared by the index benchmarks; queries: default per class."""
    p.add_argument("--size", type=size, default="200MB", metavar="SIZE",
                   help="corpus size to generate, e.g. 50MB (default: 200MB)")
    for cls, n in queries.items():
        p.add_argument(f"--queries-{cls.lower()}", type=positive_int, default=n, metavar="N",
                       help=f"queries per {cls} workload (default: %(default)s)")
    p.add_argument("--rp", type=float, default=0.25, metavar="P",
                   help="repeat probability of the workloads (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the corpus and workloads (default: %(default)s)")
    p.add_argument("--work", type=Path, metavar="DIR",
                   help="make the scratch folder (corpus, workloads, indexes) in DIR "
                        "(default: the folder of --out)")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")


def _inputs(args) -> dict:
    """The Inputs fields from the options of _add_inputs, as Config keywords."""
    return dict(size_bytes=args.size,
                queries={"H": args.queries_h, "M": args.queries_m, "L": args.queries_l},
                rp=args.rp, seed=args.seed, work=args.work, keep=args.keep,
                progress=_progress(args))


def register(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks against real peers, written as JSON",
                       description="Benchmarks that compare tierlab with real peers in one run.")
    bsub = p.add_subparsers(dest="bench", metavar="BENCHMARK")
    bsub.required = True
    c = _benchmark(bsub, "codecs", "codec speed and size vs pyfastpfor, libstreamvbyte, memcpy",
                   _CODECS_HELP)
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
    c.set_defaults(func=run_codecs)

    ix = _benchmark(bsub, "index", "index build speed, size and QPS per codec", _INDEX_HELP)
    ix.add_argument("--plot", type=Path, metavar="FILE.png",
                    help="also draw QPS vs compressed postings size per codec to this PNG")
    _add_inputs(ix, {"H": 200, "M": 1000, "L": 2000})
    ix.set_defaults(func=run_index)

    register_pisa(bsub)
    register_integrity(bsub)
    register_model(bsub)
    register_cache(bsub)
    register_memsim(bsub)
    register_memtrace(bsub)


_PISA_HELP = """\
tierlab's query speed against PISA's on the identical index, in one run.
Generates one corpus (--size, seeded) and one workload per SINGLE/AND x H/M/L,
builds the tierlab index (--codec), exports it as CIFF and loads that into
PISA (the compiled PISA of the pyterrier-pisa wheel; no Java), compressed
with each --pisa-encoding, BM25 k1=1.2 b=0 on both sides. Checks the top-10
of the first --check-queries queries of every workload (each engine against
BM25 recomputed from the postings; overlap of the two engines' DIDs), then
times both engines on the same queries for every --k: batch calls (no
per-query Python on tierlab's side; PISA's wrapper parses one Python tuple
per query), one warm pass discarded, --reps interleaved repetitions, median
ms/query and the tierlab/PISA ratio; SINGLE uses PISA's --single-algorithm,
AND its --and-algorithm. Also times a `base` index (unless --no-split) to
show how much of tierlab's time is decoding. Scratch files go next to --out (or in
--work), removed unless --keep. Takes a few minutes at 200MB.
"""


def register_pisa(bsub) -> None:
    from tierlab.experiments.bench import pisa_engine  # light: no numpy until it runs

    p = _benchmark(bsub, "pisa", "query speed vs PISA (pyterrier-pisa) on the same index",
                   _PISA_HELP)
    _add_inputs(p, {"H": 1000, "M": 5000, "L": 20000})
    p.add_argument("--codec", default="pfor-delta256", metavar="CODEC",
                   help="tierlab codec of the index (default: %(default)s)")
    p.add_argument("--pisa-encoding", action="append", choices=pisa_engine.ENCODINGS,
                   metavar="ENC", help="PISA index encoding; repeat for several, the first is "
                   "the reference of the ratios (default: block_simdbp and block_optpfor)")
    p.add_argument("--single-algorithm", default="ranked_or", choices=pisa_engine.ALGORITHMS,
                   metavar="ALG", help="PISA algorithm for SINGLE queries (default: %(default)s)")
    p.add_argument("--and-algorithm", default="ranked_and", choices=pisa_engine.ALGORITHMS,
                   metavar="ALG", help="PISA algorithm for AND queries (default: %(default)s)")
    p.add_argument("--k", type=positive_int, action="append", metavar="K",
                   help="top-k to time; repeat for several (default: 1024 and 10)")
    p.add_argument("--reps", type=positive_int, default=9, metavar="R",
                   help="timed repetitions after the warm pass (default: %(default)s)")
    p.add_argument("--check-queries", type=int, default=20, metavar="N",
                   help="queries per workload whose top-10 is checked (default: %(default)s)")
    p.add_argument("--no-split", action="store_true",
                   help="do not build and time the `base` index (the decode-share split)")
    p.set_defaults(func=run_pisa)


_INTEGRITY_HELP = """\
What the checks of a query cost (kernels/formats/index.md, "Checksums"):
query time with and without them, in one run on one index. Generates one
corpus (--size, seeded) and one workload per SINGLE/AND x --class (default H),
builds the index with --codec (default pfor-delta256), opens it with
--placement (default dram) and, pinned to one CPU, runs every workload at the
three check levels: off (none: the baseline, never used to serve), default
(what every query checks: the checksums of what it reads, per-block
invariants) and full (`query run --verify`: every posting too). A warm pass
at every level must return identical hits; then --reps repetitions, each
running the whole workload once per level, the order rotating. Reports per
level the sum over queries of each query's fastest (and median) repetition
and the ratios to off; the target is at most 3 % for default on SINGLE H and
AND H (exit status 1 when missed). The load average is recorded: the ratios
are only as good as the machine is quiet. Takes a few minutes at 200MB.
"""


def register_integrity(bsub) -> None:
    from tierlab.experiments.bench import integrity

    p = _benchmark(bsub, "integrity", "query cost of the index checks (with vs without)",
                   _INTEGRITY_HELP)
    _add_inputs(p, {"H": 1000, "M": 2000, "L": 5000})
    p.add_argument("--codec", default="pfor-delta256", metavar="CODEC",
                   help="codec of the index (default: %(default)s)")
    p.add_argument("--placement", default="dram", metavar="PLACEMENT",
                   help="where the index files live while timed (default: %(default)s)")
    p.add_argument("--class", dest="classes", action="append", choices=["H", "M", "L"],
                   help="workload class to time; repeat for several (default: H)")
    p.add_argument("--k", type=positive_int, default=1024, metavar="K",
                   help="hits kept per query (default: %(default)s)")
    p.add_argument("--reps", type=positive_int, default=integrity.Config.reps, metavar="R",
                   help="interleaved repetitions per level (default: %(default)s; at least 3)")
    p.set_defaults(func=run_integrity)


def run_integrity(args) -> int:
    from tierlab.experiments.bench import integrity
    from tierlab.experiments.bench.codecs import check_writable, write_json

    cfg = integrity.Config(**_inputs(args), codec=args.codec, placement=args.placement,
                           classes=_each_once(args.classes, integrity.DEFAULT_CLASSES),
                           k=args.k, reps=args.reps)
    integrity.validate(cfg)
    check_writable(args.out)
    doc = integrity.run(cfg, args.out)
    write_json(doc, args.out)
    print(integrity.format_table(doc))
    print(f"\nwrote {args.out}")
    return 0 if not doc["errors"] and all(t["met"] for t in doc["targets"]) else 1


_MEMTRACE_HELP = """\
What recording a memory trace costs (tierlab trace memory, traces/memtrace.md).
Generates one corpus (--size, seeded) and its workloads, builds the index
(--codec), opens it with --placement, and for SINGLE H and AND H times the
queries with the release library (sum of each query's fastest of --reps
repetitions after a warm pass) and with the tracing build recording every
load and store (once, no sampling, on the same CPU). Reports the slowdown,
ns per traced access, bytes per access on disk and per query, and the
accesses per region. Builds the tracing build first if needed. Scratch files
(and the traces) go next to --out (or in --work), removed unless --keep.
Takes a few minutes at the default size.
"""


def register_memtrace(bsub) -> None:
    from tierlab.experiments.bench import memtrace

    p = _benchmark(bsub, "memtrace", "cost of recording memory traces (slowdown, bytes)",
                   _MEMTRACE_HELP)
    defaults = memtrace.Config()
    p.add_argument("--size", type=size, default=defaults.size_bytes, metavar="SIZE",
                   help="corpus size to generate, e.g. 50MB (default: 20MB)")
    p.add_argument("--queries-h", type=positive_int, default=defaults.queries["H"], metavar="N",
                   help="queries per H workload (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the corpus and workloads (default: %(default)s)")
    p.add_argument("--codec", default=defaults.codec, metavar="CODEC",
                   help="codec of the index (default: %(default)s)")
    p.add_argument("--placement", default=defaults.placement, metavar="PLACEMENT",
                   help="where the index files live in both runs (default: %(default)s)")
    p.add_argument("--k", type=positive_int, default=defaults.k, metavar="K",
                   help="hits kept per query (default: %(default)s)")
    p.add_argument("--reps", type=positive_int, default=defaults.reps, metavar="R",
                   help="repetitions of the uninstrumented runs (default: %(default)s)")
    p.add_argument("--lackey-queries", type=int, default=0, metavar="N",
                   help="also check the first N queries of each workload against valgrind's "
                   "lackey on the same run, per region (slow: about 100 lackey log lines per "
                   "access; default 0: no check)")
    p.add_argument("--work", type=Path, metavar="DIR",
                   help="make the scratch folder in DIR (default: the folder of --out)")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    p.set_defaults(func=run_memtrace)


def run_memtrace(args) -> int:
    from tierlab.experiments.bench import memtrace
    from tierlab.experiments.bench.codecs import check_writable, write_json

    cfg = memtrace.Config(size_bytes=args.size, queries={"H": args.queries_h, "M": 1, "L": 1},
                          seed=args.seed, work=args.work, keep=args.keep,
                          progress=_progress(args), codec=args.codec,
                          placement=args.placement, k=args.k, reps=args.reps,
                          lackey_queries=args.lackey_queries)
    memtrace.validate(cfg)
    check_writable(args.out)
    doc = memtrace.run(cfg, args.out)
    write_json(doc, args.out)
    print(memtrace.format_table(doc))
    print(f"\nwrote {args.out}")
    return 0 if not doc["errors"] else 1


def run_codecs(args) -> int:
    from tierlab.experiments.bench import codecs, data

    if args.n <= 0:
        raise TierlabError(f"--n must be a positive number of integers, got {args.n}")
    if args.avg_gap < 1:
        raise TierlabError(f"--avg-gap must be at least 1, got {args.avg_gap}")
    if args.reps < 1:
        raise TierlabError(f"--reps must be at least 1, got {args.reps}")
    if args.seed is not None and args.seed < 0:
        raise TierlabError(f"--seed must be a non-negative integer, got {args.seed}")
    data.check_dids_fit(args.n, args.avg_gap)
    codecs.check_writable(args.out)
    if args.plot is not None:
        codecs.check_writable(args.plot)
    # a warning only once the arguments are known good: a usage error stays one line
    if args.reps < codecs.MIN_REPS:
        print(f"tierlab: warning: --reps {args.reps} is below {codecs.MIN_REPS}; the medians "
              f"are not the 'median of >= {codecs.MIN_REPS} runs' the targets ask for",
              file=sys.stderr)
    datasets = _each_once(args.dataset, codecs.DATASETS)
    cfg = codecs.Config(
        n=args.n, avg_gap=args.avg_gap, reps=args.reps,
        seed=data.DEFAULT_SEED if args.seed is None else args.seed,
        datasets=datasets, peers=not args.no_peers, progress=_progress(args),
    )
    doc = codecs.run(cfg)
    codecs.write_json(doc, args.out)
    if args.plot is not None:
        import pandas as pd

        from tierlab.analysis.codec_pareto import plot_codec_pareto

        plot_codec_pareto(pd.DataFrame(doc["records"]), args.plot)
    print(codecs.format_table(doc))
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0


def run_index(args) -> int:
    from tierlab.experiments.bench import index as bench_index
    from tierlab.experiments.bench.codecs import check_writable, write_json

    cfg = bench_index.Config(**_inputs(args))
    bench_index.validate(cfg)
    check_writable(args.out)
    if args.plot is not None:
        check_writable(args.plot)
    doc = bench_index.run(cfg, args.out)
    write_json(doc, args.out)
    if args.plot is not None:
        from tierlab.analysis.index_qps_vs_size import plot_qps_vs_size

        plot_qps_vs_size(doc, args.plot)
    print(bench_index.format_table(doc))
    print(f"\nwrote {args.out}" + (f" and {args.plot}" if args.plot else ""))
    return 0 if doc["results_identical"] and not doc["errors"] else 1


def run_pisa(args) -> int:
    from tierlab.experiments.bench import pisa as bench_pisa
    from tierlab.experiments.bench.codecs import check_writable, write_json

    cfg = bench_pisa.Config(
        **_inputs(args), codec=args.codec, ks=_each_once(args.k, bench_pisa.Config.ks),
        reps=args.reps, encodings=_each_once(args.pisa_encoding, bench_pisa.Config.encodings),
        single_algorithm=args.single_algorithm, and_algorithm=args.and_algorithm,
        split=not args.no_split, check_queries=args.check_queries,
    )
    bench_pisa.validate(cfg)
    check_writable(args.out)
    doc = bench_pisa.run(cfg, args.out)
    write_json(doc, args.out)
    print(bench_pisa.format_table(doc))
    print(f"\nwrote {args.out}")
    return 0 if not doc["errors"] else 1


_CACHE_HELP = """\
Simulated requests per second of the C cache policies (kernels/src/cache/,
driven through model/cache.py's access_many) on Zipf traces (--requests
over --keys, one trace per --alpha, unit sizes) with cache sizes of --fraction
of the footprint, and, in the same run on the same trace, libCacheSim's LRU,
FIFO and S3FIFO (the libcachesim package; its process_trace over the trace
exported as oracleGeneral). Runs are interleaved rep by rep and the median
of --reps is reported, with the speed ratio and both miss ratios: LRU and
FIFO must agree exactly (exit status 1 otherwise). Target: >= 5 million
requests/s for tierlab's LRU. The oracleGeneral files (240 MB at 10M
requests) go to a scratch folder next to --out (or in --work), removed at
the end. Takes a few minutes at the defaults on 2 cores.
"""


def register_cache(bsub) -> None:
    from tierlab.experiments.bench import cache as bench_cache

    p = _benchmark(bsub, "cache", "cache policy simulation speed vs libCacheSim", _CACHE_HELP)
    p.add_argument("--requests", type=positive_int, default=10_000_000, metavar="N",
                   help="requests per trace (default: %(default)s)")
    p.add_argument("--keys", type=positive_int, default=1_000_000, metavar="N",
                   help="distinct keys the traces draw from (default: %(default)s)")
    p.add_argument("--alpha", type=float, action="append", metavar="A",
                   help="Zipf exponent; repeat for several (default: "
                        + " and ".join(map(str, bench_cache.DEFAULT_ALPHAS)) + ")")
    p.add_argument("--fraction", type=float, action="append", metavar="F",
                   help="cache size as a share of the footprint; repeat for several (default: "
                        + " and ".join(map(str, bench_cache.DEFAULT_FRACTIONS)) + ")")
    p.add_argument("--policy", action="append", metavar="POLICY",
                   help="time only this policy; repeat for several (default: all)")
    p.add_argument("--reps", type=positive_int, default=3, metavar="R",
                   help="timed runs per contestant; the median is reported (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the traces (default: %(default)s)")
    p.add_argument("--no-peers", action="store_true", help="skip libCacheSim")
    p.add_argument("--work", type=Path, metavar="DIR",
                   help="make the scratch folder in DIR (default: the folder of --out)")
    p.set_defaults(func=run_cache)


def run_cache(args) -> int:
    from tierlab.experiments.bench import cache as bench_cache
    from tierlab.experiments.bench.codecs import check_writable, write_json

    cfg = bench_cache.Config(
        requests=args.requests, keys=args.keys,
        alphas=_each_once(args.alpha, bench_cache.DEFAULT_ALPHAS),
        fractions=_each_once(args.fraction, bench_cache.DEFAULT_FRACTIONS),
        policies=_each_once(args.policy, ()),
        reps=args.reps, seed=args.seed, peers=not args.no_peers, work=args.work,
        progress=_progress(args),
    )
    bench_cache.validate(cfg)
    check_writable(args.out)
    doc = bench_cache.run(cfg, args.out)
    write_json(doc, args.out)
    print(bench_cache.format_table(doc))
    print(f"\nwrote {args.out}")
    return 0 if not doc["errors"] and doc["agreement"] is not False else 1


_MODEL_HELP = """\
How fast the SimPy model of APCache is (tierlab.experiments.bench.model). Runs a share
(--fraction, default 1/8: a seeded random sample of cells) of the grid of
`tierlab model reference` (4 configurations x 8 cache sizes x 3 RP x HDD and
NVMe x SINGLE and AND, 1,000 H queries and 2 passes each, at the reference
scale: 384 runs) in --workers processes and extrapolates the wall time to the
whole grid (--full runs all of it, a few minutes on 2 cores). Reports simulated block
and page requests per second, and the LRU bookkeeping rate of the model's C
cache side by side with libCacheSim's LRU on the same page-request trace.
Targets: the grid in <= 10 minutes, >= 5 M requests/s of LRU bookkeeping.
"""


def register_model(bsub) -> None:
    p = _benchmark(bsub, "model", "speed of the SimPy model: reference grid, requests/s",
                   _MODEL_HELP)
    p.add_argument("--fraction", type=float, default=0.125, metavar="F",
                   help="share of the grid's cells to run (default: %(default)s)")
    p.add_argument("--full", action="store_true", help="run the whole grid (384 runs)")
    p.add_argument("--workers", type=positive_int, default=2, metavar="N",
                   help="processes (default: %(default)s)")
    p.add_argument("--costs", default="default", metavar="FILE|default",
                   help="cost table (default: this machine's)")
    p.add_argument("--work", type=Path, metavar="DIR",
                   help="scratch folder's parent (default: the system's temp folder)")
    p.set_defaults(func=run_model)


def run_model(args) -> int:
    from tierlab.experiments.bench import model as bench_model
    from tierlab.experiments.bench.codecs import check_writable, write_json

    cfg = bench_model.Config(fraction=args.fraction, full=args.full, workers=args.workers,
                             costs=args.costs, work=args.work, progress=_progress(args))
    bench_model.validate(cfg)
    check_writable(args.out)
    doc = bench_model.run(cfg)
    write_json(doc, args.out)
    print(bench_model.format_table(doc))
    print(f"\nwrote {args.out}")
    return 0


def register_memsim(bsub) -> None:
    from tierlab.experiments.bench import memsim as bench_memsim

    p = _benchmark(bsub, "memsim", "accesses/s through the cache filter + tier-timing model",
                   bench_memsim.__doc__.split("\n", 1)[1])
    p.add_argument("--machine", default="xeon-gold-6252n", metavar="SPEC",
                   help="machine spec of the filter's geometry (default: %(default)s)")
    p.add_argument("--tier", default="optane-dcpmm-g1-x6", metavar="SPEC",
                   help="memory spec of the DID and freq regions (default: %(default)s)")
    p.add_argument("--accesses", type=positive_int, default=8_000_000, metavar="N",
                   help="accesses per synthetic stream (default: %(default)s)")
    p.add_argument("--reps", type=positive_int, default=3, metavar="R",
                   help="timed runs per stream, the median reported (default: %(default)s)")
    p.add_argument("--index", type=Path, metavar="IDX", help="with --workload: time the "
                   "synthesised stream of this index's queries as the 'query' stream")
    p.add_argument("--workload", type=Path, metavar="FILE", help="query file for --index")
    p.add_argument("--trace", type=Path, metavar="DIR", help="with --index and --workload: "
                   "the 'query' stream is this `tierlab trace memory` recording of them")
    p.set_defaults(func=run_memsim)


def run_memsim(args) -> int:
    import os

    from tierlab.core import specs
    from tierlab.experiments.bench import memsim as bench_memsim
    from tierlab.experiments.bench.codecs import check_writable, write_json

    specs.load(args.machine, kind="machine")
    specs.load(args.tier, kind="memory")
    if (args.index is None) != (args.workload is None):
        raise TierlabError("--index and --workload go together")
    if args.trace is not None and args.index is None:
        raise TierlabError("--trace needs --index and --workload (the traced queries)")
    check_writable(args.out)
    before = os.getloadavg()
    doc = bench_memsim.run(bench_memsim.Config(
        machine=args.machine, tier=args.tier, accesses=args.accesses, reps=args.reps,
        index=args.index, workload=args.workload, trace=args.trace))
    doc["machine"]["loadavg_before_after"] = [round(before[0], 2),
                                              round(os.getloadavg()[0], 2)]
    write_json(doc, args.out)
    print(bench_memsim.format_table(doc))
    print(f"\nwrote {args.out}")
    return 0
