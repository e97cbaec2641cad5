"""`tierlab query run|terms|costs`: run a query workload against an index with
the measurement protocol, run one query and print its hits (tierlab.engine.query), or
measure the per-block cost table the model charges queries with (tierlab.model.costs)."""
from __future__ import annotations

import sys

from tierlab.cli.args import add_run_spec, positive_int, run_spec

PLACE_HELP = ("where each file lives: dict=T,skip=T,did=T,freq=T or one T for all, T one of "
              "storage (mmap, page cache), dram (anonymous memory, mlock'd if allowed), "
              "pm:PATH (copied into PATH and mmap'd; real PM only on an fsdax mount), "
              "numa:N (bound to NUMA node N). Default: storage")


def register(sub) -> None:
    p = sub.add_parser("query", help="run queries against an index",
                       description="SINGLE and AND queries with BM25 top-k (docs/engine.md).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True

    r = cmds.add_parser(
        "run", help="run a workload file, write per-query measurements",
        description="Run WORKLOAD (one query per line: one term = SINGLE, terms joined by "
        "spaces or AND = AND) against INDEX: drop the index from the page cache (--drop-caches), "
        "open it with --place, pin to one CPU, run --passes passes and report the last. Writes "
        "the query table of the result schema (one row per query; traces/schema.yaml) to --out "
        "(.parquet or .csv) and a summary (qps, latency mean/p50/"
        "p99/p99.9, placement, cache drop, machine) to OUT-STEM.summary.json.",
        epilog="example: tierlab query run data/idx data/h.queries --out runs/h.parquet "
        "--drop-caches --place dict=dram,skip=dram")
    r.add_argument("index", metavar="INDEX")
    r.add_argument("workload", metavar="WORKLOAD")
    r.add_argument("--out", required=True, metavar="FILE",
                   help="the query table, .parquet or .csv")
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
    r.add_argument("--verify", action="store_true",
                   help="full checks: every index file's checksum when opening (reads the whole "
                   "index) and every posting of every block decoded. Without it each query "
                   "still checks the checksums of what it reads; a damaged index fails the run "
                   "(exit status 2), it never returns wrong hits")
    r.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    add_run_spec(r, "query", spec_file=False, skip=("index", "workload"))
    r.set_defaults(func=run_workload)

    t = cmds.add_parser("terms", help="run one query and print its hits",
                        description="Run one query (one term = SINGLE, several = AND; the word "
                        "AND between them is optional) and print the hits and the measurements.")
    t.add_argument("index", metavar="INDEX")
    t.add_argument("terms", nargs="+", metavar="TERM")
    t.add_argument("--k", type=positive_int, default=10, help="hits to print (default 10)")
    t.add_argument("--place", metavar="PLACEMENT", help=PLACE_HELP)
    t.add_argument("--verify", action="store_true",
                   help="full checks (as `query run --verify`)")
    t.set_defaults(func=run_terms)

    c = cmds.add_parser(
        "costs", help="measure the per-block cost table the model charges queries with",
        description="Measure the CPU cost of queries on INDEX as the SimPy model charges "
        "them: per query type (single, and) query_ns + block_ns * blocks_decoded + "
        "posting_ns * postings_scored (+ result_ns * hits kept + candidate_ns * postings of the "
        "shortest list, kept only when they cut the fit's error by 20 %). Runs the workloads "
        "(default: SINGLE and AND workloads "
        "of the H, M and L classes generated from the index's dictionary) --repeats times "
        "with --passes passes each, takes each query's median warm latency, and fits the "
        "coefficients per type by non-negative least squares (errors relative to the "
        "class's mean latency, every class weighted equally, block_ns at least the measured "
        "decode time of a block, the worst 1 % of queries left out of a refit). Also times "
        "decoding alone (ns per DID and freq block) as a cross-check and reports the fit "
        "quality per type and class; and what the model needs beyond a query: the APCache "
        "runtime's thread hand-off, segment-cache copy rate and page-cache hit (`threads`), "
        "and how much slower a query gets with n cores querying their own index copies at "
        "once (`cores`, n up to the allowed CPUs, at most 4). Writes JSON (format tierlab-costs, read by "
        "tierlab.model.costs.Costs.load). With --default: the "
        "per-machine default table of --codec, measured once on a small generated index and "
        "cached under $XDG_CACHE_HOME/tierlab/ (~/.cache/tierlab/).",
        epilog="examples: tierlab query costs data/idx --out costs.json; "
        "tierlab query costs --default --codec pfor-delta256 [--refresh]")
    c.add_argument("index", metavar="INDEX", nargs="?", help="index directory (not with --default)")
    c.add_argument("--out", metavar="FILE", help="write the table here (JSON)")
    c.add_argument("--workload", metavar="FILE", action="append",
                   help="a query file to measure with (repeatable); default: generated H, M, L "
                   "SINGLE and AND workloads")
    c.add_argument("--placement", "--place", dest="placement", metavar="PLACEMENT",
                   help=PLACE_HELP.replace("Default: storage", "Default: dram (CPU costs "
                                           "without page faults)"))
    c.add_argument("--passes", type=positive_int, default=2,
                   help="passes per run, the last (warm) one measured; >= 2 (default 2)")
    c.add_argument("--repeats", type=positive_int, default=3,
                   help="runs per workload; a query's latency is the median of its runs "
                   "(default 3)")
    c.add_argument("--queries", metavar="CLASS=N", action="append",
                   help="queries per class of the generated workloads, e.g. H=300 (repeatable; "
                   "defaults H=150, M=600, L=1000)")
    c.add_argument("--k", type=positive_int, default=1024, help="hits kept per query (default 1024)")
    c.add_argument("--default", action="store_true",
                   help="print (measuring it first if missing) this machine's default table "
                   "of --codec")
    c.add_argument("--codec", default=None, metavar="NAME",
                   help="with --default: the codec (default pfor-delta256)")
    c.add_argument("--refresh", action="store_true", help="with --default: measure again")
    c.add_argument("--tier", metavar="SPEC", action="append",
                   help="also time the index's queries on this memory spec (repeatable): the "
                   "table's `memory` section, per query type and structure (dict, skip, did, "
                   "freq, all), the stall over the machine's DRAM per query and per block "
                   "(cache filter + tier-timing model on synthesised streams, docs/tiers.md "
                   "\"The memory-tier model\"), with the roofline rule beside it; the model's "
                   "tier_rule: trace and place_* keys charge it")
    c.add_argument("--machine", default="xeon-gold-6252n", metavar="SPEC",
                   help="with --tier: the machine spec of the caches (default: %(default)s)")
    c.add_argument("--cores", type=positive_int, default=1, metavar="N",
                   help="with --tier: cores sharing each tier's bandwidth (default: 1)")
    c.add_argument("--quiet", action="store_true", help="no progress bar, no report")
    c.set_defaults(func=run_costs)


def placement(place: str | None, spec) -> str | None:
    """The placement of a query run: --place, with the spec's place_* keys on top."""
    keys = {f: spec[f"place_{f}"] for f in ("dict", "skip", "did", "freq") if spec[f"place_{f}"]}
    if not keys:
        return place
    base = place or "storage"
    parts = dict(p.split("=", 1) for p in base.split(",")) if "=" in base else {
        f: base for f in ("dict", "skip", "did", "freq")}
    parts.update(keys)
    return ",".join(f"{f}={t}" for f, t in parts.items())


def run_workload(args) -> int:
    from tierlab.engine.query import run, summary_path

    bar = None
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=args.passes, unit="pass", desc="queries", leave=False)

        def progress(p, done, total):
            if done == total:
                bar.update(1)
    spec = run_spec(args, index=args.index, workload=args.workload)
    try:
        s = run(args.index, args.workload, args.out, k=spec["k"], passes=args.passes,
                drop=args.drop_caches, placement=placement(args.place, spec),
                results=args.results, cpu=args.cpu, trace=args.trace, progress=progress,
                verify=args.verify)
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
    from tierlab.engine.index import Index

    terms = [t.lower() for t in args.terms if t != "AND"]
    with Index(args.index, args.place, verify=args.verify) as ix:
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


def _queries_per_class(items) -> dict:
    from tierlab.model.costs import CLASSES
    from tierlab.core.errors import TierlabError

    out = {}
    for item in items or []:
        cls, sep, n = item.partition("=")
        cls = cls.strip().upper()
        if not sep or cls not in CLASSES or not n.strip().isdigit() or int(n) < 1:
            raise TierlabError(f"--queries {item!r}: expected CLASS=N with CLASS one of "
                               f"{', '.join(CLASSES)} and N >= 1")
        out[cls] = int(n)
    return out


def run_costs(args) -> int:
    from tierlab.model import costs
    from tierlab.core.errors import TierlabError

    if args.tier:
        from tierlab.core import specs

        if args.default:
            raise TierlabError("--tier needs an INDEX (its queries are timed on the tier), "
                               "not --default")
        specs.load(args.machine, kind="machine")  # before the long measurement
        for t in args.tier:
            specs.load(t, kind="memory")
    if args.default:
        if args.index or args.workload or args.queries or args.placement:
            raise TierlabError("--default measures its own generated index: give no INDEX, "
                               "--workload, --queries or --placement with it")
        codec = args.codec or costs.DEFAULT_CODEC
        cached = costs.default_path(codec).exists() and not args.refresh
        table = costs.default(codec, refresh=args.refresh, progress=not args.quiet)
        if cached:  # a new table announces its path itself
            print(f"default table: {costs.default_path(codec)}", file=sys.stderr)
    else:
        if not args.index:
            raise TierlabError("give an INDEX to measure (or --default)")
        if args.codec or args.refresh:
            raise TierlabError("--codec and --refresh go with --default (an INDEX has its codec)")
        if not args.out:
            raise TierlabError("--out FILE is required (where to write the cost table)")
        bar = None
        if not args.quiet:
            from tqdm import tqdm

            bar = tqdm(total=None, unit="run", desc="costs", leave=False)

        def progress(done, total):
            bar.total = total
            bar.update(done - bar.n)
        try:
            table = costs.measure(args.index, workloads=args.workload,
                                  placement=args.placement or costs.DEFAULT_PLACEMENT,
                                  passes=args.passes, repeats=args.repeats,
                                  queries=_queries_per_class(args.queries), k=args.k,
                                  progress=progress if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
    if args.tier:
        table.extra["memory"] = costs.memory_section(
            table, args.index, list(dict.fromkeys(args.tier)), machine=args.machine,
            cores=args.cores, workloads=args.workload, k=args.k)
    if args.out:
        table.save(args.out)
    if not args.quiet:
        print(_costs_report(table))
        if args.out:
            print(f"wrote      {args.out}")
    return 0


def _costs_report(t) -> str:
    from tierlab.core import registry

    lines = [f"index      {t.index}", f"codec      {t.codec}, blocks of {t.block_size}, "
             f"placement {t.placement}"]
    for qtype in registry.query_types():
        c = t.coefficients(qtype)
        extra = "".join(f"  {k} {getattr(c, k):,.2f}" for k in ("result_ns", "candidate_ns")
                        if getattr(c, k) is not None)
        lines.append(f"{qtype:<10} query_ns {c.query_ns:,.0f}  block_ns {c.block_ns:,.1f}  "
                     f"posting_ns {c.posting_ns:,.2f}{extra}")
    d = t.decode
    if d.get("did_block_ns") is not None:
        lines.append(f"decode     {d['did_block_ns']:,.1f} ns per DID block, "
                     f"{d['freq_block_ns']:,.1f} ns per freq block (alone, {d['blocks_timed']:,} "
                     f"full blocks)")
    lines.append("fit        |relative error| median / p90, error of the total:")
    for qtype in registry.query_types():
        f = t.fit.get(qtype)
        if not f:
            continue
        rows = [("all", f)] + list(f.get("by_class", {}).items())
        for name, r in rows:
            lines.append(f"  {qtype:<6} {name:<4} {r['queries']:>7,} queries  "
                         f"{100 * r['median_abs_rel_error']:5.1f} % / "
                         f"{100 * r['p90_abs_rel_error']:5.1f} %  total "
                         f"{100 * r.get('total_rel_error', 0.0):+5.1f} %")
    mem = t.extra.get("memory")
    if mem:
        lines.append(f"memory     extra ns over {mem['baseline']} per block decoded (per query for "
                     f"dict), {mem['machine']}, {mem['cores']} core(s); roofline rule for DID + "
                     f"freq beside it:")
        for spec, per_type in mem["tiers"].items():
            for qtype, row in per_type.items():
                lines.append(f"  {spec:<20} {qtype:<6} dict {row['dict']['extra_ns_per_query']:>8,.0f}"
                             f"  skip {row['skip']['extra_ns_per_block']:>7,.1f}"
                             f"  did {row['did']['extra_ns_per_block']:>7,.1f}"
                             f"  freq {row['freq']['extra_ns_per_block']:>7,.1f}"
                             f"  all {row['all']['extra_ns_per_block']:>8,.1f}"
                             f"  | roofline did+freq "
                             f"{row.get('roofline_postings_ns_per_block', float('nan')):>7,.1f}")
    return "\n".join(lines)
