"""`tierlab query run|terms`: run a query workload against an index with the
measurement protocol, or run one query and print its hits (tierlab.query)."""
from __future__ import annotations


from .args import positive_int

PLACE_HELP = ("where each file lives: dict=T,skip=T,did=T,freq=T or one T for all, T one of "
              "storage (mmap, page cache), dram (anonymous memory, mlock'd if allowed), "
              "pm:PATH (copied into PATH and mmap'd; real PM only on an fsdax mount), "
              "numa:N (bound to NUMA node N). Default: storage")


def register(sub) -> None:
    p = sub.add_parser("query", help="run queries against an index",
                       description="SINGLE and AND queries with BM25 top-k (ENGINE.md).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True

    r = cmds.add_parser(
        "run", help="run a workload file, write per-query measurements",
        description="Run WORKLOAD (one query per line: one term = SINGLE, terms joined by "
        "spaces or AND = AND) against INDEX: drop the index from the page cache (--drop-caches), "
        "open it with --place, pin to one CPU, run --passes passes and report the last. Writes "
        "one row per query to --out (.parquet or .csv) and a summary (qps, latency mean/p50/"
        "p99/p99.9, placement, cache drop, machine) to OUT-STEM.summary.json.",
        epilog="example: tierlab query run data/idx data/h.queries --out runs/h.parquet "
        "--drop-caches --place dict=dram,skip=dram")
    r.add_argument("index", metavar="INDEX")
    r.add_argument("workload", metavar="WORKLOAD")
    r.add_argument("--out", required=True, metavar="FILE", help="results table, .parquet or .csv")
    r.add_argument("--k", type=positive_int, default=1024, help="hits kept per query (default 1024)")
    r.add_argument("--passes", type=positive_int, default=2,
                   help="passes over the workload; the last is reported (default 2: warm)")
    r.add_argument("--drop-caches", nargs="?", const="auto", metavar="METHOD",
                   choices=["auto", "drop-caches", "fadvise"],
                   help="drop the index files from the page cache first: auto (default: "
                   "drop_caches as root, else posix_fadvise DONTNEED per file), drop-caches "
                   "(global, root only), fadvise (per file, leaves other caches alone)")
    r.add_argument("--place", metavar="PLACEMENT", help=PLACE_HELP)
    r.add_argument("--results", metavar="TSV", help="also write the top-k: query_id rank did score")
    r.add_argument("--trace", metavar="DIR",
                   help="also write the run as a trace of the result schema (traces/schema.yaml): "
                   "DIR/run.parquet, query.parquet, term.parquet; see `tierlab trace inspect`")
    r.add_argument("--cpu", type=int, metavar="N", help="pin to CPU N (default: the last allowed)")
    r.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    r.set_defaults(func=run_workload)

    t = cmds.add_parser("terms", help="run one query and print its hits",
                        description="Run one query (one term = SINGLE, several = AND; the word "
                        "AND between them is optional) and print the hits and the measurements.")
    t.add_argument("index", metavar="INDEX")
    t.add_argument("terms", nargs="+", metavar="TERM")
    t.add_argument("--k", type=positive_int, default=10, help="hits to print (default 10)")
    t.add_argument("--place", metavar="PLACEMENT", help=PLACE_HELP)
    t.set_defaults(func=run_terms)


def run_workload(args) -> int:
    from ..query import run, summary_path

    bar = None
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=args.passes, unit="pass", desc="queries", leave=False)

        def progress(p, done, total):
            if done == total:
                bar.update(1)
    try:
        s = run(args.index, args.workload, args.out, k=args.k, passes=args.passes,
                drop=args.drop_caches, placement=args.place, results=args.results, cpu=args.cpu,
                trace=args.trace, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        print(f"queries    {s['queries']:,} ({s['single_queries']:,} single, "
              f"{s['and_queries']:,} and; {s['unknown_queries']:,} with unknown terms)")
        print(f"pass       {s['reported_pass']} of {s['passes']} reported; cache drop: "
              f"{s['cache_drop']['method']}"
              + (f" ({s['cache_drop']['drop_caches_error']})"
                 if "drop_caches_error" in s["cache_drop"] else ""))
        print(f"qps        {s['qps']:,.0f}")
        print(f"latency    mean {s['latency_mean_ns'] / 1e3:.1f} us, p50 "
              f"{s['latency_p50_ns'] / 1e3:.1f} us, p99 {s['latency_p99_ns'] / 1e3:.1f} us, "
              f"p99.9 {s['latency_p999_ns'] / 1e3:.1f} us")
        for key, r in s["placement"].items():
            print(f"  {key:<5} {r['detail']}")
        print(f"wrote      {args.out}, {summary_path(args.out)}"
              + (f", {args.results}" if args.results else ""))
    return 0


def run_terms(args) -> int:
    from ..index import Index

    terms = [t.lower() for t in args.terms if t != "AND"]
    with Index(args.index, args.place) as ix:
        hits, st = ix.query(terms, k=args.k)
    kind = "single" if len(terms) == 1 else "and"
    print(f"{kind} {' AND '.join(terms)}: {st['results']} hits, {st['latency_ns'] / 1e3:.1f} us, "
          f"{st['postings_scored']:,} postings scored, blocks {st['blocks_decoded']}/"
          f"{st['blocks_total']} decoded" + (", unknown terms" if st["unknown_terms"] else ""))
    for rank, (did, score) in enumerate(hits, 1):
        print(f"{rank:>5}  did {did:<10}  {score:.6f}")
    read = dict(zip(("dict", "skip", "did", "freq"), st["bytes_read"]))
    print("bytes read " + ", ".join(f"{k} {v:,}" for k, v in read.items()))
    return 0
