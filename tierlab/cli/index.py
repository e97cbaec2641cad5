"""`tierlab index build|info|check|export|import`: build an inverted index from a
corpus, describe one, check every byte of one, or move one to and from CIFF
(tierlab.engine.index, tierlab.engine.ciff; formats in kernels/formats/index.md)."""
from __future__ import annotations

import json

from tierlab.cli.args import size


def register(sub) -> None:
    p = sub.add_parser("index", help="build or describe an inverted index",
                       description="Inverted indexes (docs/engine.md): ingest a corpus into a hash "
                       "table, transform it into a skip list, DID blocks, freq blocks and a "
                       "dictionary, each file with a checked header, plus manifest.json.")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True

    b = cmds.add_parser(
        "build", help="build an index directory from a corpus",
        description="Build an index of CORPUS (one document per line; DIDs are line numbers) "
        "into directory --out. Everything is written into OUT.tmp-PID and renamed to OUT at the "
        "end, so an interrupted build leaves nothing that looks complete. With a --memory-budget "
        "smaller than the table, the table is spilled as sorted runs and merged (same bytes).",
        epilog="example: tierlab index build data/synth.txt --codec pfor-delta --out data/idx")
    b.add_argument("corpus", metavar="CORPUS", help="corpus file (one document per line)")
    b.add_argument("--out", required=True, metavar="DIR", help="index directory to create")
    b.add_argument("--codec", default="base",
                   help="codec configuration (`tierlab list codecs`; default base)")
    b.add_argument("--block-size", type=int, choices=[128, 256], default=256,
                   help="postings per block (default 256)")
    b.add_argument("--doc-bytes", type=int, default=1024, metavar="BYTES",
                   help="longest document; longer lines are cut (default 1024)")
    b.add_argument("--memory-budget", type=size, metavar="SIZE",
                   help="bound on the ingest table, e.g. 2GB (default: a quarter of RAM)")
    b.add_argument("--force", action="store_true", help="replace an existing index at --out")
    b.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    b.add_argument("--json", action="store_true", help="print the manifest as JSON")
    b.set_defaults(func=run_build)

    i = cmds.add_parser("info", help="describe and check an index directory",
                        description="Print an index's manifest, file sizes and compression "
                        "ratios, after opening it (which checks the manifest and every header).")
    i.add_argument("index", metavar="DIR")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")
    i.set_defaults(func=run_info)

    c = cmds.add_parser(
        "check", help="read every byte of an index and check it",
        description="Read the whole index in DIR and check it (kernels/formats/index.md, "
        "\"Checksums\"): the manifest against the file headers, every dictionary entry and "
        "term (checksums, byte order), every skip record (checksum, block counts, offsets), "
        "every DID and freq block (checksum, decoding, DIDs strictly increasing and below the "
        "document count, frequencies >= 1), the totals and each file's checksum. Prints OK or "
        "the first problem: the file, the offset of the bad byte (exact when a single bit is "
        "flipped, which the checksums locate; else the start of the region that failed), the "
        "term and block, and what is wrong.",
        epilog="exit status: 0 the index is sound; 1 it is damaged (the first problem is "
        "printed); 2 DIR is not a tierlab index of this format version, or cannot be read.")
    c.add_argument("index", metavar="DIR")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    c.set_defaults(func=run_check)

    e = cmds.add_parser("export", help="write an index as CIFF (Common Index File Format)",
                        description="Export INDEX as a CIFF file (github.com/osirrc/ciff): a "
                        "Header, one PostingsList per term in byte order (docids gap-coded), one "
                        "DocRecord per document (collection_docid = the DID, doclength = the sum of "
                        "its term frequencies). PISA, Anserini and others read it.",
                        epilog="example: tierlab index export data/idx --ciff data/idx.ciff")
    e.add_argument("index", metavar="INDEX")
    e.add_argument("--ciff", required=True, metavar="FILE", help="the CIFF file to write")
    e.add_argument("--quiet", action="store_true")
    e.set_defaults(func=run_export)

    m = cmds.add_parser("import", help="build an index from a CIFF file",
                        description="Build a tierlab index from a CIFF file written elsewhere "
                        "(Anserini, PISA, ...): CIFF docids become DIDs, total_docs is N, terms are "
                        "kept as they are (queries are lower-cased). Same files, checks and atomic "
                        "rename as `index build`.",
                        epilog="example: tierlab index import --ciff robust04.ciff --out data/r04")
    m.add_argument("--ciff", required=True, metavar="FILE", help="the CIFF file to read")
    m.add_argument("--out", required=True, metavar="DIR", help="index directory to create")
    m.add_argument("--codec", default="base", help="codec configuration (default base)")
    m.add_argument("--block-size", type=int, choices=[128, 256], default=256)
    m.add_argument("--force", action="store_true", help="replace an existing index at --out")
    m.add_argument("--quiet", action="store_true")
    m.set_defaults(func=run_import)


def _ratios(m: dict) -> dict:
    """Block bytes over `base`'s, and the structures a placement study puts
    in fast memory (skip list + dictionary files) over the postings (DID +
    freq blocks)."""
    base = 4 * m["postings"]  # `base` stores 4 bytes per DID and per freq
    post = m["did_block_bytes"] + m["freq_block_bytes"]
    structures = sum(int(m["files"].get(f, 0)) for f in ("skip.bin", "dict.bin"))
    return {"did_ratio": m["did_block_bytes"] / base if base else 0.0,
            "freq_ratio": m["freq_block_bytes"] / base if base else 0.0,
            "postings_bytes": post, "skip_dict_bytes": structures,
            "skip_dict_vs_postings": structures / post if post else None}


def _print(m: dict, path, build_seconds: float | None = None) -> None:
    r = _ratios(m)
    mb = m["corpus"]["bytes"] / 1e6
    print(f"index      {path}")
    print(f"codec      {m['codec']} (freq blocks: {m['freq_codec']}), block size {m['block_size']}")
    print(f"corpus     {m['corpus']['path']}  {mb:.1f} MB  {m['corpus']['digest']}")
    print(f"documents  {m['documents']:,}  (cut to {m['doc_bytes']} bytes: "
          f"{m['truncated_documents']:,})")
    print(f"terms      {m['terms']:,}   postings {m['postings']:,}   blocks {m['blocks']:,}")
    for f, nbytes in m["files"].items():
        print(f"  {f:<10} {nbytes:>15,} bytes")
    print(f"DID blocks  {m['did_block_bytes']:,} bytes = {100 * r['did_ratio']:.1f} % of base "
          f"(4 bytes per posting)")
    print(f"freq blocks {m['freq_block_bytes']:,} bytes = {100 * r['freq_ratio']:.1f} % of base")
    if r["skip_dict_vs_postings"] is not None:
        print(f"overhead   skip list + dictionary {r['skip_dict_bytes']:,} bytes = "
              f"{r['skip_dict_vs_postings']:.2f}x the postings ({r['postings_bytes']:,} bytes of "
              f"DID + freq blocks)")
    total = m["ingest_seconds"] + m["transform_seconds"]
    rate = mb / total if total else 0.0
    print(f"build      ingest {m['ingest_seconds']:.2f} s + transform "
          f"{m['transform_seconds']:.2f} s = {rate:.1f} MB/s; runs {m['runs']} "
          f"(budget {m['memory_budget_bytes'] / 1e6:.0f} MB, peak table "
          f"{m['peak_table_bytes'] / 1e6:.1f} MB)")
    if build_seconds is not None:
        print(f"wall       {build_seconds:.2f} s including fsync and rename")


def run_build(args) -> int:
    import os
    import time

    from tierlab.engine.index import build

    bar = None
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        total_bytes = os.path.getsize(args.corpus) if os.path.isfile(args.corpus) else None
        bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="ingest", leave=False)

        def progress(done, total):
            bar.update(done - bar.n)
            return False
    t0 = time.monotonic()
    try:
        res = build(args.corpus, args.out, codec=args.codec, block_size=args.block_size,
                    doc_bytes=args.doc_bytes, memory_budget=args.memory_budget,
                    overwrite=args.force, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps({**res.manifest, **_ratios(res.manifest)}, indent=2))
    elif not args.quiet:
        _print(res.manifest, args.out, time.monotonic() - t0)
    return 0


def run_info(args) -> int:
    from tierlab.engine.index import Index

    with Index(args.index) as ix:
        m = ix.manifest
        place = ix.placement()
    if args.json:
        print(json.dumps({**m, **_ratios(m)}, indent=2))
        return 0
    _print(m, args.index)
    print(f"checked    manifest against the headers, headers (magic, checksum, version "
          f"{m['format_version']}, codec, block size, build id {m['build_id']}, totals, sizes): "
          f"ok; `tierlab index check` reads every byte")
    for key, r in place.items():
        print(f"  {key:<5} {r['detail']}")
    return 0


def run_check(args) -> int:
    import dataclasses
    import sys

    from tierlab.engine.index import check

    bar = None
    progress = None
    if not args.quiet and not args.json and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit="B", unit_scale=True, desc="check", leave=False)

        def progress(done, total):
            bar.total = total
            bar.update(done - bar.n)
            return False
    try:
        r = check(args.index, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps({"index": str(args.index), **dataclasses.asdict(r)}, indent=2))
    elif r.ok:
        print(f"OK {args.index}: {r.terms:,} terms, {r.blocks:,} blocks, {r.postings:,} postings, "
              f"{r.bytes:,} bytes checked")
    else:
        where = (f" byte {r.offset:,}" + (f" bit {r.bit}" if r.bit is not None else "")
                 if r.exact else f" offset {r.offset:,}" + (f" ({r.length:,} bytes)"
                                                            if r.length else ""))
        if not (r.exact or r.offset or r.length):  # the whole file (a missing one)
            where = ""
        print(f"DAMAGED {args.index}: {r.file}{where}: {r.what}")
        if r.term is not None:
            print(f"  term #{r.term:,}" + (f", block {r.block}" if r.block is not None else ""))
        print(f"  checked before it: {r.terms:,} terms, {r.blocks:,} blocks")
    return 0 if r.ok else 1


def _bar(quiet: bool, desc: str):
    if quiet:
        return None, None
    from tqdm import tqdm

    bar = tqdm(unit="lists", desc=desc, leave=False)

    def progress(done, total):
        bar.total = total
        bar.update(done - bar.n)
    return bar, progress


def run_export(args) -> int:
    from tierlab.engine.ciff import export

    bar, progress = _bar(args.quiet, "export")
    try:
        r = export(args.index, args.ciff, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        print(f"wrote {args.ciff}: {r['postings_lists']:,} postings lists, "
              f"{r['doc_records']:,} doc records, {r['bytes']:,} bytes")
    return 0


def run_import(args) -> int:
    from tierlab.engine.ciff import import_

    bar, progress = _bar(args.quiet, "import")
    try:
        m = import_(args.ciff, args.out, codec=args.codec, block_size=args.block_size,
                    overwrite=args.force, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        print(f"index {args.out}: {m['documents']:,} documents, {m['terms']:,} terms, "
              f"{m['postings']:,} postings, codec {m['codec']}, block size {m['block_size']}")
    return 0
