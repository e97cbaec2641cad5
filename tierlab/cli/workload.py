"""`tierlab workload generate|stats|from-log`: query workloads over a corpus's
terms, or from a real query log (tierlab.engine.workload, tierlab.engine.querylog;
docs/workload.md)."""
from __future__ import annotations

import argparse
import json

from tierlab.cli.args import paragraphs, positive_int

SOURCE_HELP = ("--corpus CORPUS reads CORPUS.terms.tsv and the document count from CORPUS.json; "
               "--terms TABLE reads any table with columns term, postings (and occurrences; an "
               "index's `blocks` column is used when present).")


def _class(text: str) -> str:
    if text.upper() not in ("H", "M", "L"):
        raise argparse.ArgumentTypeError(f"unknown class '{text}': use H, M or L")
    return text.upper()


def _threshold(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: '{text}'") from None


def _source_args(p) -> None:
    p.add_argument("--corpus", metavar="CORPUS", help="a tierlab corpus (its sidecars are read)")
    p.add_argument("--terms", metavar="TABLE", help="a term table (.tsv or .parquet)")
    p.add_argument("--documents", type=positive_int, metavar="N",
                   help="documents in the collection, for fractional thresholds with --terms")
    _threshold_args(p)
    p.add_argument("--block-postings", type=positive_int, default=256, metavar="B",
                   help="postings per index block, for blocks touched (default 256)")


def _threshold_args(p) -> None:
    """--h and --l: the class thresholds (tierlab.engine.workload.Thresholds)."""
    p.add_argument("--h", type=_threshold, default=0.00625, metavar="X",
                   help="class H: postings >= X; X < 1 is a fraction of the documents "
                   "(default 0.00625, the reference's 1 M of 160 M)")
    p.add_argument("--l", type=_threshold, default=0.00000625, metavar="X",
                   help="class L: postings < X; X < 1 is a fraction of the documents, at least 2 "
                   "postings (default 0.00000625, the reference's 1,000 of 160 M)")


def register(sub) -> None:
    p = sub.add_parser("workload", help="generate query workloads, or measure one",
                       description="Query workloads (docs/workload.md): frequency classes H/M/L, "
                       "SINGLE and AND queries with a repetition probability (RP).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True

    g = cmds.add_parser(
        "generate", help="write a seeded query workload for one frequency class",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraphs(
            "Generate a workload (docs/workload.md): shuffle the class's terms into a queue; for "
            "each query pop a term and, with probability --rp, emit instead a random term of the "
            "repeat queue (the last --repeat-queue popped terms). AND queries pair two such "
            "streams over disjoint halves of the class. Seeded.", SOURCE_HELP,
            "Output: WORKLOAD (one query per line: `term` or `term AND term`) and WORKLOAD.json "
            "(parameters and statistics), written atomically."),
        epilog="example: tierlab workload generate --corpus data/synth.txt --class H --type and "
        "--queries 1000 --out data/and-h.txt")
    _source_args(g)
    g.add_argument("--class", dest="cls", type=_class, required=True, metavar="{H,M,L}",
                   help="frequency class of the terms")
    g.add_argument("--type", default="single", metavar="TYPE",
                   help="a query type of `tierlab list query-types`: single (one term) or and "
                   "(two terms) (default single)")
    g.add_argument("--queries", type=positive_int, metavar="N",
                   help="workload size (default by class, as the reference: H 1000, M 100000, "
                   "L 1000000)")
    g.add_argument("--rp", type=float, default=0.25, metavar="P",
                   help="repetition probability (default 0.25)")
    g.add_argument("--repeat-queue", type=positive_int, default=100, metavar="R",
                   help="repeat-queue capacity (default 100)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--out", required=True, metavar="WORKLOAD", help="the query file to write")
    g.add_argument("--quiet", action="store_true", help="print nothing")
    g.set_defaults(func=run_generate)

    s = cmds.add_parser(
        "stats", help="statistics of a query file (generated or hand-written)",
        description="Unique terms, repeats, postings touched and the share of index blocks "
        "touched, for any query file. " + SOURCE_HELP)
    s.add_argument("workload", metavar="WORKLOAD", help="a query file")
    _source_args(s)
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--out", metavar="JSON", help="also write the statistics to this file")
    s.set_defaults(func=run_stats)

    f = cmds.add_parser(
        "from-log", help="turn a real query log into a workload (types, classes, a report)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraphs(
            "Convert a query log (docs/workload.md \"Real query logs\") into a query file the "
            "engine runs. LOG is TREC `N:query` lines, TSV `qid<TAB>query` lines or plain lines "
            "(detected from the first lines, or --format), optionally gzip-compressed. Each query "
            "is tokenised with the index's own tokeniser (lower-case ASCII letters and digits; "
            "repeated terms dropped): one term is SINGLE, 2..16 an AND. Its class (H/M/L) is that "
            "of its rarest term known to the index, with the thresholds of `workload generate` "
            "(--h/--l) over the index's posting counts; unknown terms are counted per query.",
            "A query the engine cannot run (no terms, more than 16 terms, invalid UTF-8, a "
            "malformed line) stops the conversion with LOG:LINE; --max-terms N cuts long queries "
            "to their first N terms, --skip-bad drops bad ones and counts them by reason.",
            "Output, written atomically: WORKLOAD (`a AND b` lines), WORKLOAD.tsv (per query: "
            "log line, type, class, unknown terms, rarest posting count, terms) and WORKLOAD.json "
            "(counts, statistics, and the log's repetition rate and term popularity next to what "
            "the RP generator makes of the same terms); --plot draws the popularity curves."),
        epilog="example: tierlab workload from-log 05.efficiency_topics.gz --index data/idx "
        "--max-terms 16 --skip-bad --known-only --out data/tb05.queries --plot data/tb05.png")
    f.add_argument("log", metavar="LOG", help="the query log (gzip is detected from its first bytes)")
    f.add_argument("--index", required=True, metavar="IDX",
                   help="the index the queries will run on (terms, posting counts, documents)")
    f.add_argument("--out", required=True, metavar="WORKLOAD", help="the query file to write")
    f.add_argument("--format", default="auto", choices=("auto", "trec", "tsv", "plain"),
                   help="log format (default: auto, detected)")
    f.add_argument("--max-terms", type=positive_int, metavar="N",
                   help="cut queries longer than N terms to their first N (1..16; default: a "
                   "query over 16 terms is bad)")
    f.add_argument("--skip-bad", action="store_true",
                   help="drop queries the engine cannot run and count them by reason, instead "
                   "of stopping at the first")
    f.add_argument("--known-only", action="store_true",
                   help="keep only queries whose every term is in the index")
    f.add_argument("--type", choices=("single", "and"), help="keep only this query type")
    f.add_argument("--class", dest="cls", type=_class, action="append", metavar="{H,M,L}",
                   help="keep only queries of this class; repeat for several")
    _threshold_args(f)
    f.add_argument("--rp", type=float, default=0.25, metavar="P",
                   help="the RP of the generator the report compares with (default 0.25)")
    f.add_argument("--plot", metavar="FILE.png", help="also draw the popularity curves")
    f.add_argument("--quiet", action="store_true", help="no progress, no summary")
    f.set_defaults(func=run_from_log)


def _print_stats(st: dict) -> None:
    share = st["index_blocks_touched_share"]
    print(f"queries          {st['queries']:,} (by terms: "
          + ", ".join(f"{k}: {v:,}" for k, v in st["queries_by_terms"].items()) + ")")
    print(f"unique terms     {st['unique_terms']:,}")
    print(f"repeats          {st['repeated_queries']:,} queries, {st['repeated_terms']:,} term slots")
    print(f"postings         {st['postings_touched']:,} touched "
          f"({st['postings_touched_unique']:,} by unique terms)")
    print(f"index blocks     {st['blocks_touched']:,} of {st['index_blocks']:,} touched"
          + (f" ({100 * share:.2f} %)" if share is not None else ""))
    if "unique_terms_by_class" in st:
        print("classes          " + ", ".join(f"{k}: {v:,}" for k, v in st["unique_terms_by_class"].items())
              + " (unique terms)")
    if st["terms_not_in_table"]:
        print(f"not in table     {st['terms_not_in_table']:,} terms, e.g. "
              + ", ".join(st["terms_not_in_table_examples"]))


def run_generate(args) -> int:
    from tierlab.engine.workload import generate

    doc = generate(args.out, corpus=args.corpus, terms=args.terms, documents=args.documents,
                   cls=args.cls, qtype=args.type, queries=args.queries, rp=args.rp,
                   repeat_queue=args.repeat_queue, seed=args.seed, h=args.h, l=args.l,
                   block_postings=args.block_postings)
    if not args.quiet:
        gen = doc["generator"]
        h, l = f"{gen['h_min_postings']:,}", f"{gen['l_below_postings']:,}"
        rule = {"H": f"postings >= {h}", "M": f"{l} <= postings < {h}", "L": f"postings < {l}"}
        print(f"wrote {args.out}: {gen['queries']:,} {gen['type'].upper()} queries, class "
              f"{gen['class']} ({gen['class_terms']:,} terms, {rule[gen['class']]}), "
              f"RP {gen['rp']}, {gen['repeat_queue_draws']:,} repeat-queue draws")
        _print_stats(doc["stats"])
    return 0


def run_stats(args) -> int:
    from tierlab.engine.workload import stats

    doc = stats(args.workload, corpus=args.corpus, terms=args.terms, documents=args.documents,
                block_postings=args.block_postings, h=args.h, l=args.l)
    if args.out:
        from pathlib import Path

        from tierlab.core.files import atomic_outputs

        with atomic_outputs(Path(args.out)) as (tmp,):
            tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_stats(doc["stats"])
    return 0


def run_from_log(args) -> int:
    from tierlab.engine.querylog import from_log

    if args.plot:
        from tierlab.experiments.bench.codecs import check_writable

        check_writable(args.plot)
    bar = progress = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(unit=" lines", desc="log", leave=False)

        def progress(n):
            bar.update(n - bar.n)
    try:
        doc = from_log(args.log, args.index, args.out, fmt=args.format, max_terms=args.max_terms,
                       skip_bad=args.skip_bad, known_only=args.known_only, qtype=args.type,
                       classes=args.cls, h=args.h, l=args.l, rp=args.rp, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if args.plot:
        from tierlab.analysis.querylog_popularity import plot_popularity

        plot_popularity(doc["report"], args.plot, title=f"{args.log}")
    if not args.quiet:
        _print_from_log(doc, args)
    return 0


def _print_from_log(doc: dict, args) -> None:
    fl, rep = doc["from_log"], doc["report"]
    print(f"wrote {args.out}: {fl['kept']:,} of {fl['log_queries']:,} queries "
          f"({fl['log_format']} log; {fl['cut']:,} cut to --max-terms)")
    print("by type:class    " + ", ".join(f"{k} {v:,}" for k, v in fl["by_type_class"].items()))
    bad = {k: v for k, v in fl["bad"].items() if v}
    filt = {k: v for k, v in fl["filtered"].items() if v}
    if bad:
        print("skipped (bad)    " + ", ".join(f"{k} {v:,}" for k, v in bad.items()))
    if filt:
        print("filtered         " + ", ".join(f"{k} {v:,}" for k, v in filt.items()))
    print(f"unknown terms    in {fl['with_unknown_terms']:,} kept queries")
    for key, name in (("log", "log"), ("rp_generator", f"RP {rep['rp_generator']['rp']:g} gen")):
        side = rep[key]
        share = side["repeated_queries_share"]
        top = side["top_share"]
        print(f"{name:<16} {100 * share:.1f} % repeated queries; top 1 % of {side['terms']:,} "
              f"terms take {100 * top['0.01']:.1f} % of {side['slots']:,} term slots, top 10 % "
              f"{100 * top['0.1']:.1f} %")
    _print_stats(doc["stats"])
    print(f"details          {args.out}.json, {args.out}.tsv"
          + (f", plot {args.plot}" if args.plot else ""))
