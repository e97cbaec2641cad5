"""`tierlab corpus generate|ingest|stats`: make a corpus in tierlab's corpus
format (tierlab.engine.corpus) or look at one."""
from __future__ import annotations

import argparse
import json

from tierlab.cli.args import paragraphs, positive_int, size

FORMAT_HELP = ("Output: CORPUS (UTF-8, one document per line, each at most --doc-bytes bytes), "
               "CORPUS.terms.tsv (term, postings, occurrences) and CORPUS.json (the manifest), "
               "written atomically: nothing is left behind on error or Ctrl-C.")


def register(sub) -> None:
    p = sub.add_parser("corpus", help="generate, ingest or inspect a corpus",
                       description="Corpora (docs/workload.md): a seeded synthetic corpus or real "
                       "text (plain text, JSON Lines, Common Crawl WET) in tierlab's corpus format.")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True

    g = cmds.add_parser(
        "generate", help="write a seeded synthetic corpus (Zipf words, Heaps vocabulary)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraphs(
            "Generate fixed-size documents whose words follow a two-regime Zipf law: exponent "
            "--zipf-s over the first --knee ranks (the head of real text, s ~ 1) and --tail-s "
            "beyond it (~2 in real text, which makes the vocabulary grow like Heaps' law with "
            "exponent ~1/tail-s ~ 0.5). Same parameters and seed, same bytes. Streams through "
            "a small buffer; one core.", FORMAT_HELP),
        epilog="example: tierlab corpus generate --size 100MB --out data/synth.txt")
    g.add_argument("--out", required=True, metavar="CORPUS", help="the corpus file to write")
    scale = g.add_mutually_exclusive_group()
    scale.add_argument("--size", type=size, metavar="SIZE",
                       help="stop at this many bytes of text, e.g. 100MB, 2GiB (default 100MB)")
    scale.add_argument("--docs", type=positive_int, metavar="N", help="write exactly N documents")
    g.add_argument("--doc-bytes", type=positive_int, metavar="BYTES",
                   help="bytes per document line, at most; filled to within one word (default 1024)")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--zipf-s", type=float, metavar="S", help="Zipf exponent of the head (default 1.0)")
    g.add_argument("--tail-s", type=float, metavar="S",
                   help="exponent beyond the knee (default 2.0; equal to --zipf-s for one Zipf law)")
    g.add_argument("--knee", type=positive_int, metavar="RANK",
                   help="last rank of the head (default 10000)")
    g.add_argument("--vocab-max", type=positive_int, metavar="TERMS",
                   help="largest rank; costs 16 bytes of address space each (default 2^24)")
    g.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    g.set_defaults(func=run_generate)

    i = cmds.add_parser(
        "ingest", help="turn text, JSON Lines or Common Crawl WET files into a corpus",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraphs(
            "Ingest real text. Formats: text (one document per line), jsonl (one JSON object per "
            "line, the document in --text-field), wet (Common Crawl .warc.wet.gz: the bodies of "
            "conversion records). Any input may be gzip-compressed. Whitespace runs become one "
            "space; documents are truncated to --doc-bytes at a character boundary; empty ones "
            "are skipped.",
            "Bad input (unreadable file, invalid UTF-8, malformed JSON, missing field, broken "
            "WARC record, no documents) stops with FILE:LINE and leaves nothing behind.",
            FORMAT_HELP),
        epilog="example: tierlab corpus ingest CC-MAIN-*.warc.wet.gz --out data/cc.txt")
    i.add_argument("inputs", nargs="+", metavar="FILE", help="input files, read in order")
    i.add_argument("--out", required=True, metavar="CORPUS", help="the corpus file to write")
    i.add_argument("--format", choices=["auto", "text", "jsonl", "wet", "paragraphs"],
                   default="auto",
                   help="input format (default auto: *.jsonl/*.ndjson/*.json are jsonl, "
                   "*.wet/*.warc.wet[.gz] are wet, anything else is text; paragraphs: documents "
                   "separated by blank lines, e.g. a dictd .dict.dz, never auto-detected)")
    i.add_argument("--doc-bytes", type=positive_int, default=1024, metavar="BYTES",
                   help="truncate documents to this many bytes of UTF-8 (default 1024)")
    i.add_argument("--text-field", default="text", metavar="NAME",
                   help="the JSON Lines field holding the text (default text)")
    i.add_argument("--skip-bad", action="store_true",
                   help="skip (and count) bad documents instead of stopping at the first")
    i.add_argument("--max-docs", type=positive_int, metavar="N", help="stop after N documents")
    i.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    i.set_defaults(func=run_ingest)

    s = cmds.add_parser("stats", help="print a corpus's manifest; --verify checks the file",
                        description="Print the manifest of a corpus (CORPUS.json) in a few lines.")
    s.add_argument("corpus", metavar="CORPUS")
    s.add_argument("--verify", action="store_true",
                   help="read the corpus: check its digest, size and line rules against the "
                   "manifest, and recount its term table")
    s.add_argument("--json", action="store_true", help="print the manifest as JSON")
    s.set_defaults(func=run_stats)


def run_generate(args) -> int:
    from tierlab.engine.corpus import GenerateParams, generate, summary

    m = generate(args.out, GenerateParams(
        seed=args.seed, size_bytes=args.size, docs=args.docs, doc_bytes=args.doc_bytes,
        zipf_s=args.zipf_s, tail_s=args.tail_s, knee=args.knee, vocab_max=args.vocab_max),
        progress=not args.quiet)
    if not args.quiet:
        print(f"wrote {args.out}")
        print(summary(m))
    return 0


def run_ingest(args) -> int:
    from tierlab.engine.corpus import summary
    from tierlab.engine.ingest import ingest

    m = ingest(args.inputs, args.out, fmt=args.format, doc_bytes=args.doc_bytes,
               text_field=args.text_field, skip_bad=args.skip_bad, max_docs=args.max_docs,
               progress=not args.quiet)
    if not args.quiet:
        print(f"wrote {args.out}")
        print(summary(m))
        for f in m["source"]["files"]:
            print(f"  {f['path']}: {f['format']}, {f['documents']:,} documents, "
                  f"{f['truncated']:,} truncated, {f['skipped_empty']:,} empty and "
                  f"{f['skipped_bad']:,} bad skipped")
    return 0


def run_stats(args) -> int:
    from tierlab.engine.corpus import read_manifest, summary, verify
    from tierlab.core.errors import TierlabError

    m = read_manifest(args.corpus)
    print(json.dumps(m, indent=2) if args.json else summary(m))
    if args.verify:
        problems = verify(args.corpus)
        if problems:
            raise TierlabError(f"{args.corpus} does not match its manifest:\n  " + "\n  ".join(problems))
        if not args.json:
            print("verified         digest, size, lines and term table match")
    return 0
