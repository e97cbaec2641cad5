"""`tierlab model run|sweep|reference|tiers|chapter6`: the SimPy model of APCache
(model/, package tierlab.model; keys of the configuration files in model/README.md)
and the memory-tier predictions (tierlab.experiments.tiers)."""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from tierlab.core.errors import TierlabError
from tierlab.cli.args import add_run_spec, paragraphs, run_spec_overrides

_RUN_HELP = paragraphs(
    "Run one APCache configuration in the SimPy model (docs/apcache.md): base, base-prefetch, "
    "hybrid or hybrid-prefetch, on a storage device and a slow tier from sim-configs/devices, "
    "over an index read from `tierlab index build` or synthesised from statistics (the preset "
    "`reference` is the APCache study's 20 GB, 15.3 billion-posting Common Crawl index), with a "
    "workload file, a `tierlab query run --trace` replay or a generated RP workload.",
    "SPEC.yaml is a run spec: the keys of `tierlab list keys`, all optional, the same file "
    "`tierlab apcache run` takes; --set KEY=VALUE or --KEY VALUE sets one (a YAML value). Writes "
    "OUT/cache_run.parquet, cache_query.parquet and cache_timeline.parquet (the result schema, "
    "source model) and prints the run's metrics.")

_SWEEP_HELP = paragraphs(
    "Run a grid of configurations: GRID.yaml is a run configuration in which any key (and any "
    "key of a generated workload) may be a list; the cells are the cartesian product. Cells run "
    "in a pool of `workers` processes (default 2) with a progress bar. Each finished cell is "
    "written at once (OUT/cells/<id>/ and a row appended to OUT/cache_run.csv), so an "
    "interrupted sweep loses nothing and a rerun skips the finished cells; at the end "
    "OUT/cache_run.parquet and .csv hold every cell.",
    "--plot draws QPS vs cache size per configuration, one panel per device and query type.")

_REF_HELP = paragraphs(
    "Run the APCache reference grids in the model at the reference's scale and check the "
    "trends of docs/apcache.md: the main grid (4 configurations x 8 cache sizes 5-100 % x RP 0, "
    "0.25, 0.5 x HDD and NVMe x SINGLE and AND, 1,000 H queries each = 384 runs), fixed "
    "lookahead 16/64 vs adaptive at small caches, and 1-4 cores on HDD, SAS SSD and NVMe. "
    "Prints the numbers behind each trend and whether it holds (computed from the results), "
    "writes OUT/trends.json and the figures (qps_vs_cache.png, lookahead.png, dram.png, "
    "multicore.png). Finished cells are kept: a rerun continues. A few minutes on 2 cores "
    "(longer the first time: the cost table is measured once).")


def register(sub) -> None:
    p = sub.add_parser("model", help="the SimPy model of APCache: run, sweep, reference",
                       description="The SimPy model of APCache's four configurations "
                       "(model/README.md).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True
    r = cmds.add_parser("run", help="run one configuration, write cache_run/query/timeline",
                        description=_RUN_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example: tierlab model run cfg.yaml --set device=hdd-7200 "
                        "--set cache_fraction=0.2 --out runs/m1")
    r.add_argument("--json", action="store_true", help="print the cache_run row as JSON")
    add_run_spec(r, "model")
    r.set_defaults(func=run_cmd)

    s = cmds.add_parser("sweep", help="run a grid of configurations in parallel",
                        description=_SWEEP_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("grid", metavar="GRID.yaml")
    s.add_argument("--out", metavar="DIR", help="output folder (default: the grid's `out`)")
    s.add_argument("--workers", type=int, metavar="N",
                   help="processes (default: the grid's `workers`, else 2)")
    s.add_argument("--plot", metavar="FILE.png", nargs="?", const="",
                   help="draw QPS vs cache size (default OUT/qps_vs_cache.png)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=sweep_cmd)

    f = cmds.add_parser("reference", help="the reference grids and docs/apcache.md's trends",
                        description=_REF_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("--out", default="model-reference", metavar="DIR",
                   help="output folder (default: %(default)s)")
    f.add_argument("--workers", type=int, default=2, metavar="N",
                   help="processes (default: %(default)s)")
    f.add_argument("--queries", type=int, default=1000, metavar="N",
                   help="H queries per workload (default: %(default)s, the reference's)")
    f.add_argument("--costs", default="default", metavar="FILE|default",
                   help="cost table (default: this machine's, measured once and cached)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(func=reference_cmd)
    register_tiers(cmds)


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.4g}"
    return str(v)


SUMMARY = ("config", "device", "slow_tier", "index_bytes", "workload", "cores", "cache_bytes",
           "lookahead", "queries", "wall_ns", "qps", "latency_mean_ns", "latency_p50_ns",
           "latency_p99_ns", "latency_p999_ns", "page_cache_miss_rate",
           "segment_cache_miss_rate", "storage_reads", "storage_bytes_read", "worker_stall_ns",
           "query_wait_ns", "lookahead_mean", "peak_dram_bytes", "peak_slow_tier_bytes",
           "device_utilisation")


def run_cmd(args) -> int:
    from tierlab.model import config as cfgmod

    cfg = cfgmod.load(args.spec, run_spec_overrides(args))
    res = cfgmod.run(cfg)
    cfgmod.write(res, cfg["out"])
    if args.json:
        print(json.dumps(res.run, default=str))
    else:
        for k in SUMMARY:
            print(f"{k:<26}{_fmt(res.run[k])}")
        prm = json.loads(res.run["params"])
        if "bistable" in prm:  # check_bistable: the run with the worker started far ahead
            ahead = prm["head_start"]
            print(f"{'bistable':<26}{'yes' if prm['bistable'] else 'no'}: started with its "
                  f"worker as far ahead as it may go, QPS {_fmt(ahead['qps'])} (second half "
                  f"{_fmt(ahead['tail_qps'])} against {_fmt(prm['tail_qps'])}), page-cache miss "
                  f"rate {_fmt(ahead['page_cache_miss_rate'])}")
        print(f"wrote {Path(cfg['out']) / 'cache_run.parquet'} (+ cache_query, cache_timeline)")
    return 0


def sweep_cmd(args) -> int:
    from tierlab.experiments import sweep

    cells, out, workers = sweep.load(args.grid)
    if args.out:
        out = Path(args.out)
    if args.workers is not None:
        if args.workers < 1:
            raise TierlabError(f"--workers {args.workers}: at least 1")
        workers = args.workers
    df = sweep.run(cells, out, workers, progress=not args.no_progress and sys.stderr.isatty())
    print(f"{len(cells)} cells; results in {out / 'cache_run.parquet'} and "
          f"{out / 'cache_run.csv'}")
    if args.plot is not None and df is not None:
        from tierlab.analysis.model_qps_vs_cache import plot_qps_vs_cache

        path = plot_qps_vs_cache(df, args.plot or out / "qps_vs_cache.png")
        print(f"wrote {path}")
    return 0


def reference_cmd(args) -> int:
    from tierlab.experiments import reference, sweep

    if args.workers < 1:
        raise TierlabError(f"--workers {args.workers}: at least 1")
    if args.queries < 1:
        raise TierlabError(f"--queries {args.queries}: at least 1")
    out = Path(args.out)
    progress = not args.no_progress and sys.stderr.isatty()
    g = reference.grids(args.queries, args.costs)
    tables = {}
    for name in ("main", "lookahead", "multicore"):
        docs = g[name] if isinstance(g[name], list) else [g[name]]
        cells = []
        for d in docs:
            cells += sweep.prepare(d, f"reference grid '{name}'")[0]
        print(f"grid {name}: {len(cells)} runs", file=sys.stderr)
        df = sweep.run(cells, out / name, args.workers, progress=progress)
        ids = {cid for cid, _ in cells}
        tables[name] = df[df["params"].map(lambda p: json.loads(p).get("cell_id") in ids)]
    trends = reference.check_all(tables["main"], tables["lookahead"], tables["multicore"])
    (out / "trends.json").write_text(json.dumps(trends, indent=1, default=str) + "\n")
    from tierlab.analysis.model_reference import plot_all

    paths = plot_all(tables["main"], tables["lookahead"], tables["multicore"], out)
    print(reference.format_trends(trends))
    print(f"wrote {out / 'trends.json'}, " + ", ".join(str(p) for p in paths))
    return 0


_TIERS_HELP = paragraphs(
    "Predict the QPS of an index's workloads with each structure (dict, skip, did, freq) "
    "alone on each memory tier and the rest in DRAM (tierlab.experiments.tiers): the engine "
    "runs each workload here (index in DRAM, --reps warm runs, each query's median latency as "
    "its CPU time), each query's memory stream goes through the machine's caches and the "
    "tier-timing model (docs/tiers.md \"The memory-tier model\"), and a query costs its CPU "
    "time plus its stall on the placement minus its stall on the machine's DRAM; --cores cores "
    "share each tier's bandwidth. The roofline rule (model/tier.py) is shown beside it for DID "
    "and freq.",
    "Writes OUT/tiers.csv and OUT/placements.png and prints the table.")

_CH6_HELP = paragraphs(
    "The reference's chapter-6 comparison (Thai 2025, real Optane DC PM): QPS drop DRAM -> PM "
    "with DID and freq blocks all on PM (six interleaved DIMMs shared by the platform's 24 "
    "cores of a socket), skip list and dictionary in DRAM, per codec, for AND H, AND M and "
    "SINGLE H, and the backend-bound ratio's analogue. Generates a corpus (--size, seeded), "
    "builds one index per codec and one workload per (type, class) in a scratch folder (removed "
    "unless --keep), runs `model tiers`' prediction and writes OUT/chapter6.csv and "
    "OUT/chapter6.md with the reference's numbers and met/missed (within 5 percentage points).")


def register_tiers(cmds) -> None:
    from tierlab.cli.args import positive_int, size
    from tierlab.experiments import tiers

    t = cmds.add_parser("tiers", help="predicted QPS of each structure on each memory tier",
                        description=_TIERS_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example: tierlab model tiers idx --workload andH.queries "
                        "--out tiers/")
    t.add_argument("index", metavar="INDEX")
    t.add_argument("--workload", action="append", required=True, metavar="FILE",
                   help="query file (repeat for more)")
    t.add_argument("--trace", action="append", metavar="DIR",
                   help="a `tierlab trace memory` folder (or memtrace.bin) of each --workload, "
                   "in the same order: its recorded accesses instead of the synthesised stream")
    t.add_argument("--tier", action="append", metavar="SPEC",
                   help="memory spec (repeat; default: " + ", ".join(tiers.DEFAULT_TIERS) + ")")
    t.add_argument("--structure", action="append", choices=["dict", "skip", "did", "freq"],
                   help="structure to place (repeat; default: all four)")
    t.add_argument("--machine", default=tiers.DEFAULT_MACHINE, metavar="SPEC",
                   help="machine spec (default: %(default)s)")
    t.add_argument("--cores", type=positive_int, default=24, metavar="N",
                   help="cores sharing each tier (default: %(default)s, one socket)")
    t.add_argument("--k", type=positive_int, default=1024, metavar="K",
                   help="hits per query (default: %(default)s)")
    t.add_argument("--reps", type=positive_int, default=3, metavar="R",
                   help="warm runs per workload, the median per query (default: %(default)s)")
    t.add_argument("--out", required=True, metavar="DIR", help="output folder")
    t.set_defaults(func=tiers_cmd)

    c = cmds.add_parser("chapter6", help="the reference's DRAM -> Optane QPS drops per codec",
                        description=_CH6_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--size", type=size, default="200MB", metavar="SIZE",
                   help="corpus size (default: 200MB)")
    c.add_argument("--queries", type=positive_int, default=100, metavar="N",
                   help="queries per workload (default: %(default)s)")
    c.add_argument("--codec", action="append", metavar="CODEC",
                   help="codec (repeat; default: the reference's five)")
    c.add_argument("--machine", default=tiers.DEFAULT_MACHINE, metavar="SPEC",
                   help="machine spec (default: %(default)s)")
    c.add_argument("--cores", type=positive_int, default=24, metavar="N",
                   help="cores sharing the DIMMs (default: %(default)s)")
    c.add_argument("--reps", type=positive_int, default=3, metavar="R",
                   help="warm runs per workload (default: %(default)s)")
    c.add_argument("--stream", choices=["synthesised", "recorded"], default="synthesised",
                   help="the queries' memory accesses: synthesised from the index layout and "
                   "query counts, or recorded with the tracing build (`tierlab trace memory`; "
                   "made on first use, about a minute) (default: %(default)s)")
    c.add_argument("--m-class", choices=["relative", "reference"], default="relative",
                   help="AND M's terms: the class thresholds relative to this corpus's documents, "
                   "or the reference's absolute posting counts (1,000 to 1 M postings), whose "
                   "lists are as long as the reference's (default: %(default)s)")
    c.add_argument("--seed", type=int, default=0, metavar="S", help="seed (default: 0)")
    c.add_argument("--work", metavar="DIR", help="scratch folder's parent (default: OUT)")
    c.add_argument("--keep", action="store_true", help="keep the scratch folder")
    c.add_argument("--out", required=True, metavar="DIR", help="output folder")
    c.set_defaults(func=chapter6_cmd)


def tiers_cmd(args) -> int:
    from tierlab.analysis.placements import plot_placements
    from tierlab.core.values import output_dir
    from tierlab.experiments import tiers

    out = output_dir(args.out, "--out")
    for w in args.workload:
        if not Path(w).is_file():
            raise TierlabError(f"--workload {w}: no such file")
    df = tiers.structure_grid(args.index, args.workload,
                              tiers=tuple(dict.fromkeys(args.tier or tiers.DEFAULT_TIERS)),
                              structures=tuple(dict.fromkeys(args.structure or
                                                             ("dict", "skip", "did", "freq"))),
                              machine=args.machine, cores=args.cores, k=args.k, reps=args.reps,
                              traces=args.trace)
    tiers.write_csv(df, out / "tiers.csv")
    png = plot_placements(df, out / "placements.png")
    cols = ["workload", "structure", "tier", "qps", "drop_pct", "qps_roofline",
            "drop_pct_roofline"]
    print(df[cols].to_string(index=False, float_format=lambda v: f"{v:,.1f}"))
    print(f"wrote {out / 'tiers.csv'}, {png}")
    return 0


def chapter6_cmd(args) -> int:
    from tierlab.core import registry
    from tierlab.core.values import output_dir
    from tierlab.experiments import tiers

    out = output_dir(args.out, "--out")
    codecs = tuple(dict.fromkeys(args.codec or ("base", "pfor-delta", "pfor-delta256",
                                                 "vbyte-delta", "svbyte-delta")))
    for c in codecs:
        if c not in registry.codecs():
            raise TierlabError(f"--codec {c}: unknown (known: {', '.join(registry.codecs())})")
    df = tiers.run_chapter6(codecs, size=args.size, queries=args.queries, seed=args.seed,
                            work=Path(args.work) if args.work else out, keep=args.keep,
                            machine=args.machine, cores=args.cores, reps=args.reps,
                            stream=args.stream, m_class=args.m_class)
    tiers.write_csv(df, out / "chapter6.csv")
    md = tiers.chapter6_markdown(df, size=args.size, queries=args.queries, cores=args.cores,
                                 machine=args.machine, stream=args.stream, m_class=args.m_class)
    tmp = out / f".chapter6.md.tmp-{__import__('os').getpid()}"
    tmp.write_text(md)
    tmp.replace(out / "chapter6.md")
    print(md)
    print(f"wrote {out / 'chapter6.csv'}, {out / 'chapter6.md'}")
    return 0
