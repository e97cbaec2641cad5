"""`tierlab apcache run`: the native APCache runtime on an index and a
workload (tierlab.runtime.apcache; kernels/src/apcache/)."""
from __future__ import annotations

import argparse

from tierlab.cli.args import add_run_spec, paragraphs, run_spec


def register(sub) -> None:
    p = sub.add_parser("apcache", help="run the native APCache runtime",
                       description="The four APCache configurations of docs/apcache.md as real "
                       "threads "
                       "over a real index (kernels/src/apcache/).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True
    r = cmds.add_parser(
        "run", help="run a workload under one configuration, write cache_run/query/timeline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraphs(
            "Run a run spec's workload (one query per line, as `tierlab query run` reads it) on "
            "its index under one APCache configuration (docs/apcache.md): base (postings "
            "through the index mmap and a page cache capped at cache_bytes), base-prefetch "
            "(plus a worker reading the next `lookahead` queries' terms), hybrid (a segment "
            "cache of cache_bytes on the slow tier, filled by a worker trailing the query "
            "thread) or hybrid-prefetch (a worker prefetching upcoming terms into the segment "
            "cache with adaptive lookahead; DRAM only the dram_budget_bytes path from storage).",
            "SPEC.yaml is a run spec (`tierlab list keys`): the same file `tierlab model run` "
            "takes, so the model predicts the run measured here; keys the runtime does not read "
            "are ignored. --set KEY=VALUE or --KEY VALUE sets one.",
            "Every core is a shard with its own copy of the index, a query thread and a worker, "
            "and runs the whole workload. The index files are dropped from the page cache first. "
            "device real reads the index's own device (page cache capped with a cgroup when "
            "one is writable; the result says whether it was); a storage spec of "
            "sim-configs/devices (e.g. nvme-p4800x, the default, or hdd-7200) emulates that "
            "device: every read is a pread plus the spec's latency, bandwidth and queueing, "
            "through the runtime's own capped page cache.",
            "Writes OUT/cache_run.parquet, cache_query.parquet and cache_timeline.parquet (the "
            "result schema, source measured) and prints a summary. Ctrl-C, SIGTERM or SIGHUP "
            "stops the run and writes what was measured (params.partial = true; exit status "
            "128 + the signal). What a killed run left (OUT/.raw-PID-*, shard copies next to "
            "the index, its cgroup, slow-tier files) is removed by the next run."),
        epilog="example: tierlab apcache run --index data/idx --workload data/h.queries "
        "--config hybrid-prefetch --cache-bytes 64MiB --device nvme-p4800x --out runs/hp")
    add_run_spec(r, "runtime")
    r.add_argument("--results", metavar="TSV", help="also write core 0's top-k: query_id rank "
                   "did score (as `tierlab query run --results`)")
    r.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    r.set_defaults(func=run_cmd)


def run_cmd(args) -> int:
    from tierlab.runtime.apcache import run

    spec = run_spec(args)
    bar = None
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=None, unit="query", desc=f"apcache {spec['config']}", leave=False)

        def progress(done, total):
            bar.total = total
            bar.n = done
            bar.refresh()
    try:
        row = run(spec, results=args.results, progress=progress)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"tierlab: interrupted; what was measured is in {spec['out']}")
        raise
    finally:
        if bar is not None:
            bar.close()
    partial = row["params"]["partial"]
    if not args.quiet:
        ms = 1e-6
        print(f"config     {row['config']} ({row['cores']} core(s), policy {row['policy']}, "
              f"lookahead {row['lookahead']})" + ("  PARTIAL: interrupted" if partial else ""))
        print(f"device     {row['device']} ({row['device_mode']}); slow tier {row['slow_tier']}")
        print(f"queries    {row['queries']:,} in {row['wall_ns'] / 1e9:.3f} s: "
              f"{row['qps']:,.1f} qps")
        print(f"latency    mean {row['latency_mean_ns'] * ms:.3f} ms, p50 "
              f"{row['latency_p50_ns'] * ms:.3f} ms, p99 {row['latency_p99_ns'] * ms:.3f} ms")
        if row["config"].startswith("hybrid"):
            print(f"segments   {row['segment_cache_hits']:,} hits, "
                  f"{row['segment_cache_misses']:,} misses "
                  f"(miss rate {row['segment_cache_miss_rate']:.3f})")
        print(f"pages      {row['page_cache_hits']:,} hits, {row['page_cache_misses']:,} misses; "
              f"{row['storage_bytes_read']:,} bytes in {row['storage_reads']:,} reads")
        print(f"waits      worker stalled {row['worker_stall_ns'] * ms:.1f} ms, queries waited "
              f"{row['query_wait_ns'] * ms:.1f} ms")
        print(f"memory     peak DRAM {row['peak_dram_bytes']:,} B, slow tier "
              f"{row['peak_slow_tier_bytes']:,} B; limit: {row['memory_limit_enforced']}")
        print(f"wrote      {spec['out']}/cache_run.parquet, cache_query.parquet, "
              f"cache_timeline.parquet" + (f", {args.results}" if args.results else ""))
    return 130 if partial else 0
