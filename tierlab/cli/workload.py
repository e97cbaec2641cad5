"""`tierlab workload generate|stats`: query workloads over a corpus's terms
(tierlab.engine.workload; docs/workload.md)."""
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
    p.add_argument("--h", type=_threshold, default=0.00625, metavar="X",
                   help="class H: postings >= X; X < 1 is a fraction of the documents "
                   "(default 0.00625, the reference's 1 M of 160 M)")
    p.add_argument("--l", type=_threshold, default=0.00000625, metavar="X",
                   help="class L: postings < X; X < 1 is a fraction of the documents, at least 2 "
                   "postings (default 0.00000625, the reference's 1,000 of 160 M)")
    p.add_argument("--block-postings", type=positive_int, default=256, metavar="B",
                   help="postings per index block, for blocks touched (default 256)")


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
