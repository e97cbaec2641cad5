"""`tierlab trace inspect`: summarise a trace directory or one result table
(traces/schema.yaml), checking it against the schema on the way."""
from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("trace", help="look at traces written in the result schema",
                       description="Traces: the run, query and term tables every measured run, "
                       "model run and simulator writes (traces/schema.yaml).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True
    i = cmds.add_parser("inspect", help="check a trace against the schema and summarise it",
                        description="Check each table of a trace directory (or one .parquet "
                        "table) against the schema and print rows, sources and the headline "
                        "numbers: QPS and latency percentiles per run, queries per type and class, "
                        "postings and blocks per term.",
                        epilog="example: tierlab trace inspect runs/and-h.trace")
    i.add_argument("path", metavar="PATH", help="a trace directory or one table file")
    i.set_defaults(func=run_inspect)


def run_inspect(args) -> int:
    from tierlab.traces import schema
    from tierlab.traces.runs import read_trace

    path = Path(args.path)
    if path.is_dir():
        tables = read_trace(path)
    else:
        name, df = schema.read_table(path)
        tables = {name: df}
    print(f"schema version {schema.version()}: {path}")
    for name, df in tables.items():
        sources = ", ".join(sorted(df["source"].unique())) if len(df) else "-"
        print(f"\n{name}: {len(df):,} rows (source: {sources})")
        if name == "run":
            for _, r in df.iterrows():
                print(f"  {r.run_id[:8]}  {r.codec or '-':<14} {r.queries:>8,} queries  "
                      f"{r.qps:>12,.0f} QPS  p50 {r.latency_p50_ns / 1e3:.1f} us  "
                      f"p99 {r.latency_p99_ns / 1e3:.1f} us  p99.9 {r.latency_p999_ns / 1e3:.1f} us")
        elif name == "query" and len(df):
            by = df.groupby(["query_type", "query_class"], dropna=False)["latency_ns"]
            for (qtype, qclass), lat in by:
                print(f"  {qtype:<7} {qclass or '-':<2} {len(lat):>8,} queries  "
                      f"mean {lat.mean() / 1e3:.1f} us  p99 {lat.quantile(0.99) / 1e3:.1f} us")
            print(f"  blocks decoded {df.blocks_decoded.sum():,} of {df.blocks_total.sum():,}; "
                  f"DID+freq bytes {int(df.did_bytes_read.sum() + df.freq_bytes_read.sum()):,}")
        elif name == "term" and len(df):
            print(f"  {df.term.nunique():,} distinct terms; postings per occurrence: "
                  f"median {df.postings.median():,.0f}, max {df.postings.max():,}")
    return 0
