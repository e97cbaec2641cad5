"""`tierlab trace inspect PATH`: find the result tables (traces/schema.yaml)
of a file or a folder (tierlab.traces.read), check each against the schema
and print a summary per table kind. Exit status 0 when every table passed;
2 with one line per failing table on stderr (the others still summarised),
or with one line when PATH holds no table."""
from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

from tierlab.cli.args import paragraphs, positive_int, size
from tierlab.core.errors import TierlabError

MANY = 12  # more rows than this are summarised by group, not listed

_DESCRIPTION = paragraphs(
    "Check result tables against the schema (traces/schema.yaml) and summarise them. PATH is "
    "one table (.parquet, or .csv with a table's columns as its header) or a folder: every "
    "table below it is found, checked and summarised per kind; a row repeated in several "
    "files (a sweep's merged cache_run and its cells') is counted once.",
    "Tables the commands write: `tierlab query run --out` (query) and `--trace DIR` (run, "
    "query, term); `tierlab apcache run --out` and `tierlab model run --out` (cache_run, "
    "cache_query, cache_timeline); `tierlab model sweep` and `model reference` (the same per "
    "cell under cells/, merged as cache_run.parquet and cache_run.csv); `tierlab validate` "
    "(measured.parquet and model.parquet: cache_run; validation.csv: validation; under rows/ "
    "each row's runs and CPU trace).",
    "Printed per kind: runs with QPS and latency percentiles; APCache runs with configuration, "
    "device, cache size, QPS, p99 and miss rates (grouped when there are many); queries per "
    "type and class; terms; latency and prefetch waits per query; timelines; validation rows "
    "with the model's errors and diagnoses.",
    "A table that fails its check is named on stderr (the others are still summarised) and the "
    "exit status is 2; a PATH without tables is one line and exit status 2.")


_MEMORY = paragraphs(
    "Run the queries of WORKLOAD on INDEX with the tracing build of the kernels and record "
    "every load and store they make: address, size, load or store, the query, and the region "
    "(tierlab list memory-regions: dictionary, skip, did, freq, segment_cache, decode_buffer, "
    "topk_heap, other). Writes DIR/memtrace.bin (format: traces/memtrace.md; read it with "
    "tierlab.traces.memtrace) and DIR/memtrace_summary.parquet (one row per query x region: "
    "accesses, loads, stores, bytes, distinct 64-byte lines).",
    "The tracing build (clang's -fsanitize-coverage=trace-loads,trace-stores on the query and "
    "codec sources, with tierlab's recorder) is made on first use in build/memtrace (about a "
    "minute; `make memtrace` does the same). A trace takes 16 bytes per access, and tracing "
    "slows the queries down many times (`tierlab bench memtrace` measures both): sample a "
    "long workload with --every and cap the file with --max-bytes. The sampling is stated in "
    "the trace's header, in the summary and in the output.",
    "Errors are one line and exit status 2; an interrupted run leaves neither file (nor "
    "temporaries: a killed run's are removed by the next run).")


def _budget(text: str) -> int:
    return 0 if text.strip() == "0" else size(text)


def register(sub) -> None:
    p = sub.add_parser("trace", help="check and summarise result tables (traces/schema.yaml)",
                       description="Traces: the result tables every tierlab run writes "
                       "(traces/schema.yaml): query runs, APCache runs of the runtime and the "
                       "model, validation rows.")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True
    i = cmds.add_parser("inspect", help="check result tables against the schema and summarise "
                        "them", description=_DESCRIPTION,
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="examples:\n  tierlab trace inspect runs/and-h.parquet\n"
                        "  tierlab trace inspect runs/and-h.trace\n"
                        "  tierlab trace inspect model-sweep")
    i.add_argument("path", metavar="PATH", help="a table file (.parquet, .csv) or a folder")
    i.set_defaults(func=run_inspect)

    from tierlab.cli.query import PLACE_HELP

    mem = cmds.add_parser("memory", help="record the loads and stores of a query run (an "
                          "address trace per region)", description=_MEMORY,
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog="examples:\n"
                          "  tierlab trace memory data/idx data/and-h.queries --out traces/and-h\n"
                          "  tierlab trace memory data/idx data/h.queries --out t --every 10 "
                          "--max-bytes 2GB --place did=dram,freq=dram")
    mem.add_argument("index", metavar="INDEX", help="index directory")
    mem.add_argument("workload", metavar="WORKLOAD", help="query file (SINGLE and AND queries)")
    mem.add_argument("--out", required=True, metavar="DIR",
                     help="folder for memtrace.bin and memtrace_summary.parquet (created; the "
                     "two are replaced)")
    mem.add_argument("--place", metavar="PLACEMENT", default="", help=PLACE_HELP)
    mem.add_argument("--k", type=positive_int, default=1024,
                     help="results kept per query (default 1024)")
    mem.add_argument("--every", type=positive_int, default=1, metavar="N",
                     help="trace only the queries whose 0-based ordinal is a multiple of N; the "
                     "others are not run (default 1: all)")
    mem.add_argument("--max-bytes", type=_budget, default=0, metavar="SIZE",
                     help="byte budget of the trace file, e.g. 2GB: recording stops before the "
                     "first query that would cross it, whole queries only (default 0: none)")
    mem.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    mem.set_defaults(func=run_memory)


def run_inspect(args) -> int:
    from tierlab.traces import schema
    from tierlab.traces.read import find_tables, read_tables

    path = Path(args.path)
    skipped: list = []
    found = find_tables(path, skipped)
    errors: list | None = [] if path.is_dir() else None  # one file: its error is the answer
    kinds = read_tables(found, errors)
    what = f" ({len(found):,} table files)" if path.is_dir() else ""
    print(f"schema version {schema.version()}: {path}{what}")
    for t in kinds.values():
        _kind(path, t)
    if skipped:
        print(f"\nskipped {len(skipped):,} file(s) that hold no result table:")
        for p, why in skipped[:5]:
            print(f"  {_rel(path, p)}: {why}")
        if len(skipped) > 5:
            print(f"  ... and {len(skipped) - 5:,} more")
    for e in errors or []:
        print(f"tierlab: error: {e}", file=sys.stderr)
    return 2 if errors else 0


# --- per table kind --------------------------------------------------------------------------

def _kind(base: Path, t) -> None:
    df = t.df
    sources = ", ".join(sorted(df["source"].unique())) if "source" in df and len(df) else "-"
    print(f"\n{t.name}: {len(df):,} rows" + (f" (source: {sources})" if "source" in df else ""))
    if base.is_dir():
        print(f"  files: {_where(base, t.files)}")
        if t.rows_in_files != len(df):
            print(f"  ({t.rows_in_files:,} rows in the files; a row in several files counted "
                  f"once)")
    if len(df) and t.name in _SUMMARY:  # a table kind without a summary is only counted
        _SUMMARY[t.name](df)


def _run(df) -> None:
    if len(df) <= MANY:
        for _, r in df.sort_values(["started_at", "run_id"]).iterrows():
            print(f"  {r.run_id[:8]}  {r.codec or '-':<14} {r.queries:>8,} queries  "
                  f"{r.qps:>12,.0f} QPS  p50 {_ns(r.latency_p50_ns):>9}  p99 "
                  f"{_ns(r.latency_p99_ns):>9}  p99.9 {_ns(r.latency_p999_ns):>9}")
        return
    for codec, g in df.groupby("codec"):
        print(f"  {codec or '-':<14} {_n(len(g), 'run'):>10}  QPS {_range(g.qps)}  "
              f"p99 median {_ns(g.latency_p99_ns.median())}")


def _cache_run(df) -> None:
    if len(df) <= MANY:
        order = ["source", "config", "device", "query_type", "cores", "cache_bytes", "started_at"]
        for _, r in df.sort_values(order).iterrows():
            print(f"  {r.source:<8} {r.config:<15} {r.device:<14} {r.query_type:<6} "
                  f"{_n(r.cores, 'core'):>7}  "
                  f"cache {_bytes(r.cache_bytes):>10}  {r.qps:>10,.0f} QPS  p99 "
                  f"{_ns(r.latency_p99_ns):>9}  miss rate: page {_pct(r.page_cache_miss_rate)}, "
                  f"segment {_pct(r.segment_cache_miss_rate)}")
        return
    for (source, config, device, qtype), g in df.groupby(["source", "config", "device",
                                                         "query_type"]):
        print(f"  {source:<8} {config:<15} {device:<14} {qtype:<6} {_n(len(g), 'run'):>9}  cache "
              f"{_bytes(g.cache_bytes.min())}-{_bytes(g.cache_bytes.max())}  "
              f"QPS {_range(g.qps)}  p99 median {_ns(g.latency_p99_ns.median())}  "
              f"miss rate median: page {_pct(g.page_cache_miss_rate.median())}, "
              f"segment {_pct(g.segment_cache_miss_rate.median())}")


def _query(df) -> None:
    runs = df.run_id.nunique()
    if runs > 1:
        print(f"  {_n(runs, 'run')}")
    by = df.groupby(["query_type", "query_class"], dropna=False)["latency_ns"]
    for (qtype, qclass), lat in by:
        print(f"  {qtype:<7} {qclass or '-':<2} {len(lat):>8,} queries  "
              f"mean {_ns(lat.mean())}  p99 {_ns(lat.quantile(0.99))}")
    print(f"  blocks decoded {df.blocks_decoded.sum():,} of {df.blocks_total.sum():,}; "
          f"DID+freq bytes {int(df.did_bytes_read.sum() + df.freq_bytes_read.sum()):,}")


def _term(df) -> None:
    print(f"  {df.term.nunique():,} distinct terms; postings per occurrence: "
          f"median {df.postings.median():,.0f}, max {df.postings.max():,}")


def _cache_query(df) -> None:
    lat = df.latency_ns
    wait = df.wait_ns.sum() / lat.sum() if lat.sum() else math.nan
    terms = df.terms.sum()
    print(f"  {_n(df.run_id.nunique(), 'run')}, {len(df):,} queries: latency mean "
          f"{_ns(lat.mean())}, p99 {_ns(lat.quantile(0.99))}; waiting for prefetched terms "
          f"{_pct(wait)} of it")
    print(f"  segment-cache misses {df.segment_cache_misses.sum():,} of {terms:,} term "
          f"occurrences; page-cache misses {df.page_cache_misses.sum():,}")


def _cache_timeline(df) -> None:
    print(f"  {_n(df.run_id.nunique(), 'run')}, {len(df):,} samples over up to "
          f"{df.t_ns.max() / 1e9:,.3f} s: lookahead up to {df.lookahead_queries.max():,} queries "
          f"(mean {df.lookahead_queries.mean():,.1f}), cache used up to "
          f"{_bytes(df.cache_used_bytes.max())}, storage read up to "
          f"{_bytes(df.storage_bytes_read.max())} per core")


def _validation(df) -> None:
    qps, p99 = df.qps_rel_error.abs(), df.latency_p99_ns_rel_error.abs()
    miss = df[["page_cache_miss_rate_pp", "segment_cache_miss_rate_pp"]].abs().max().max()
    print(f"  {_n(len(df), 'row')} in {_n(df.cell.nunique(), 'cell')}: |QPS error| median "
          f"{_pct(qps.median())}, p90 {_pct(qps.quantile(0.9))}; |p99 error| median "
          f"{_pct(p99.median())}; miss rates off by at most "
          + ("-" if math.isnan(miss) else f"{miss:.1f} points"))
    print("  diagnosis: " + "; ".join(f"{d} {n}" for d, n in df.diagnosis.value_counts().items()))
    if len(df) <= MANY:
        for _, r in df.sort_values(["device", "query_type", "cache_bytes", "config"]).iterrows():
            print(f"  {r.config:<15} {r.device:<14} {r.query_type:<6} cache "
                  f"{_bytes(r.cache_bytes):>10}  QPS {r.qps_measured:>10,.0f} measured "
                  f"{r.qps_model:>10,.0f} model ({_signed(r.qps_rel_error)}), p99 "
                  f"{_signed(r.latency_p99_ns_rel_error)}: {r.diagnosis}")


def _sim_run(df) -> None:
    for _, r in df.head(MANY).iterrows():
        lat = "-" if _nan(r.read_latency_mean_ns) else f"{r.read_latency_mean_ns:,.1f} ns"
        bw = "-" if _nan(r.read_bandwidth_bytes_per_s) else \
            f"{r.read_bandwidth_bytes_per_s / 1e9:,.2f} GB/s"
        print(f"  {r['source']:<10} {r['spec']:<16} {r['mode']:<9} {r['region']:<8} "
              f"{r['reads']:>10,} reads  mean read latency {lat:>10}  {bw:>11}")
    if len(df) > MANY:
        print(f"  ... and {len(df) - MANY:,} more")


def _memtrace_summary(df) -> None:
    for tid, g in df.groupby("trace_id"):
        r = g.iloc[0]
        print(f"  trace {tid}: {r.codec}, placement {r.placement or 'storage'}, k {r.k:,}; "
              f"{r.sampling}")
        _region_table(g)


def _region_table(df) -> None:
    """Accesses, loads, stores, bytes and distinct lines per region of a
    memtrace_summary table (lines summed over queries), with the shares."""
    by = df.groupby("region")[["accesses", "loads", "stores", "bytes", "distinct_lines"]].sum()
    total = max(int(by.accesses.sum()), 1)
    print(f"  {'region':<14} {'accesses':>14} {'share':>7} {'loads':>14} {'stores':>14} "
          f"{'bytes':>12} {'lines':>12}")
    for region, r in by.sort_values("accesses", ascending=False).iterrows():
        print(f"  {region:<14} {r.accesses:>14,} {_pct(r.accesses / total):>7} {r.loads:>14,} "
              f"{r.stores:>14,} {_bytes(r.bytes):>12} {r.distinct_lines:>12,}")
    print(f"  {'all':<14} {total:>14,} {'':>7} {int(by.loads.sum()):>14,} "
          f"{int(by.stores.sum()):>14,} {_bytes(by.bytes.sum()):>12}")


_SUMMARY = {"run": _run, "query": _query, "term": _term, "cache_run": _cache_run,
            "cache_query": _cache_query, "cache_timeline": _cache_timeline,
            "validation": _validation, "memtrace_summary": _memtrace_summary,
            "sim_run": _sim_run}


# --- tierlab trace memory ----------------------------------------------------------------------

def run_memory(args) -> int:
    import pandas as pd

    from tierlab.core import signals
    from tierlab.core.values import check_free_space, output_dir
    from tierlab.engine import memtrace as engine
    from tierlab.engine.workload import read_queries
    from tierlab.traces import memtrace, schema

    if 0 < args.max_bytes < memtrace.HEADER_BYTES:
        raise TierlabError(f"--max-bytes {args.max_bytes}: below the trace header's "
                           f"{memtrace.HEADER_BYTES} bytes")
    out = output_dir(args.out, "--out")
    if not Path(args.index).is_dir():
        raise TierlabError(f"INDEX {args.index}: no such index directory")
    queries = read_queries(args.workload)  # a bad workload: its path:line, before any work
    if args.max_bytes:
        check_free_space(out / engine.TRACE_FILE, args.max_bytes, "--max-bytes")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TierlabError(f"--out {out}: cannot create the folder ({e.strerror or e})") \
            from None
    signals.report(signals.remove_stale(out, engine.stale_pattern()), "a killed trace run")
    if not args.quiet and not engine.built():
        print("building the tracing build of the kernels (first use, about a minute)",
              file=sys.stderr, flush=True)
    engine.build()
    pid = os.getpid()
    trace_tmp = out / f".{engine.TRACE_FILE}.tmp-{pid}"
    summary_tmp = out / f".{SUMMARY_FILE}.tmp-{pid}"
    bar = None
    try:
        if not args.quiet:
            from tqdm import tqdm

            bar = tqdm(total=-(-len(queries) // args.every), unit="query", desc="trace",
                       leave=False, disable=None)  # None: no bar when stderr is no terminal

            def progress(done, total):
                bar.total = total
                bar.update(done - bar.n)
        rec = engine.record(args.index, args.workload, trace_tmp, placement=args.place or "",
                            k=args.k, every=args.every, max_bytes=args.max_bytes,
                            progress=None if bar is None else progress)
        if bar is not None:
            bar.close()
            bar = None
        types = ["single" if len(q) == 1 else "and" for q in queries]
        rows = memtrace.summary_rows(trace_tmp, types)
        schema.write_table("memtrace_summary", rows, summary_tmp)
        with signals.held():
            os.replace(trace_tmp, out / engine.TRACE_FILE)
            os.replace(summary_tmp, out / SUMMARY_FILE)
    finally:
        if bar is not None:
            bar.close()
        trace_tmp.unlink(missing_ok=True)
        summary_tmp.unlink(missing_ok=True)
    h = memtrace.read_header(out / engine.TRACE_FILE)
    size_b = (out / engine.TRACE_FILE).stat().st_size
    print(f"wrote {out / engine.TRACE_FILE} ({_bytes(size_b)}, {h.records:,} records of "
          f"{memtrace.RECORD_BYTES} bytes, {size_b / max(h.records, 1):.2f} bytes per access with "
          f"the header) "
          f"and {out / SUMMARY_FILE}")
    print(f"sampling: {h.sampling()}")
    if not args.quiet:
        print(f"index {args.index}: {h.codec}, placement {h.placement or 'storage'}, k {h.k:,}; "
              f"the traced queries took {_ns(rec.wall_ns)}")
        _region_table(pd.DataFrame(rows))
    return 0


SUMMARY_FILE = "memtrace_summary.parquet"


# --- formatting --------------------------------------------------------------------------------

def _n(count, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _ns(x) -> str:
    if _nan(x):
        return "-"
    return f"{x / 1e6:,.1f} ms" if x >= 1e6 else f"{x / 1e3:,.1f} us"


def _pct(x) -> str:
    return "-" if _nan(x) else f"{100 * x:.1f} %"


def _signed(x) -> str:
    return "-" if _nan(x) else f"{100 * x:+.1f} %"


def _bytes(n) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return ""  # unreachable


def _range(s) -> str:
    return f"{s.min():,.0f}-{s.max():,.0f} (median {s.median():,.0f})"


def _rel(base: Path, p: Path) -> str:
    try:
        return str(p.relative_to(base))
    except ValueError:
        return str(p)


def _where(base: Path, files: list) -> str:
    """The files of one table kind, those in folders with more than two
    siblings (a sweep's cells/<id>/, validate's rows/<id>/) as one pattern
    with '*'; at most four patterns."""
    parts = [Path(_rel(base, p)).parts for p in files]
    siblings = defaultdict(set)
    for ps in parts:
        for i in range(len(ps) - 1):
            siblings[ps[:i]].add(ps[i])
    pats = Counter("/".join("*" if i < len(ps) - 1 and len(siblings[ps[:i]]) > 2 else x
                            for i, x in enumerate(ps)) for ps in parts)
    shown = [p if n == 1 else f"{p} ({n:,})" for p, n in pats.items()]
    return ", ".join(shown[:4]) + (f" and {len(shown) - 4:,} more" if len(shown) > 4 else "")
