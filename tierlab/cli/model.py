"""`tierlab model run|sweep|reference`: the SimPy model of APCache (model/,
package tierlab.model; keys of the configuration files in model/README.md)."""
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
    "(longer the first time: the cost table is measured once).",
    "--compare [DIR] runs instead the cells of the reference's measured p99 grids (Tables 8.1 "
    "HDD and 8.2 NVMe of the APCache thesis; DIR a folder of their CSV files, default the copy "
    "kept in tierlab/experiments/data/apcache-ch8): the CPU calibrated on the fully cached cells "
    "only (one scale per query type, printed), then all cells with it; prints the cell table "
    "with each curve's step from I/O-bound to CPU-bound [measured -> model], the error "
    "statistics against issue 21's targets and the trends; writes OUT/cells.csv, steps.csv, "
    "summary.json, trends.json and one figure per table. 384 runs: tens of minutes on 2 cores.")


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
    f.add_argument("--compare", nargs="?", const="", metavar="DIR",
                   help="compare with the reference's measured p99 tables instead (default: "
                        "the copy in the repository)")
    f.add_argument("--model-device", action="append", default=[], metavar="TABLE=SPEC",
                   help="with --compare: run the table device TABLE as spec SPEC (default: "
                        "hdd-7200=hdd-7200-readcache; hdd-7200=hdd-7200 leaves the drive "
                        "cache out)")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")
    f.set_defaults(func=reference_cmd)


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
    if args.compare is not None:
        return compare_cmd(args, out, progress)
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


def compare_cmd(args, out: Path, progress: bool) -> int:
    """`model reference --compare`: the experiment runs the cells, analysis
    makes the tables and figures."""
    from tierlab.analysis import reference_compare as ana
    from tierlab.core.values import output_dir
    from tierlab.experiments import reference, reference_compare as rc

    ref = rc.load_reference(args.compare or None)
    output_dir(out, "--out")
    devices = dict(rc.MODEL_DEVICES)
    for m in args.model_device:
        table_dev, _, spec = m.partition("=")
        if not table_dev or not spec:
            raise TierlabError(f"--model-device {m!r}: TABLE=SPEC, e.g. hdd-7200=hdd-7200")
        devices[table_dev] = spec
    cells, calibration, runs = rc.compare(ref, out, costs=args.costs, queries=args.queries,
                                          workers=args.workers, progress=progress,
                                          log=lambda m: print(m, file=sys.stderr),
                                          devices=devices)
    st = ana.steps(cells)
    stats = ana.statistics(cells, st)
    trends = {k: f(runs) for k, f in (("saturation", reference.saturation),
                                      ("prefetch_hides_nvme", reference.prefetch_hides_nvme),
                                      ("dram_saved", reference.dram_saved))}
    summary = {"reference": str(args.compare or rc.DEFAULT_DIR), "calibration": calibration,
               **stats}
    paths = ana.write_tables(out, cells, st, summary)
    (out / "trends.json").write_text(json.dumps(trends, indent=1, default=str) + "\n")
    paths += ana.plot_tables(cells, out)
    for qt, c in calibration["query_types"].items():
        print(f"CPU calibration: {qt.upper()} x {c['scale']:.4f} ({c['cells']} fully cached "
              f"cells)")
    print()
    print(ana.format_cells(cells, st))
    print()
    print(ana.format_statistics(stats))
    print()
    print(reference.format_trends(trends))
    print(f"wrote {', '.join(str(p) for p in paths)}, {out / 'trends.json'}")
    return 0
