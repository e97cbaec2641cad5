"""`tierlab apcache run`: the native APCache runtime on an index and a
workload (tierlab.runtime.apcache; kernels/src/apcache/)."""
from __future__ import annotations

import argparse

from tierlab.cli.args import paragraphs, positive_int, size


class _Registry(str):
    """Help text naming a C registry's entries, looked up only when help is
    printed (loading the kernels costs ~0.2 s, too much for every command):
    argparse expands a help string with `help % params`, so the lookup
    happens in __mod__."""

    def __new__(cls, text: str, fn, fallback: str):
        self = super().__new__(cls, text)
        self.fn, self.fallback = fn, fallback
        return self

    def __mod__(self, params):
        from tierlab.core.errors import TierlabError

        try:
            names = ", ".join(self.fn())
        except TierlabError:
            names = self.fallback
        return str.__mod__(self.replace("{names}", names), params)


def _configs() -> list[str]:
    from tierlab.runtime.apcache import configs
    return configs()


def _policies() -> list[str]:
    from tierlab.runtime.apcache import policies
    return policies()


def _readahead(text: str) -> int:
    """A size, or 'kernel' (0: the kernel's own readahead, real device)."""
    return 0 if text.strip().lower() == "kernel" else size(text)


def register(sub) -> None:
    p = sub.add_parser("apcache", help="run the native APCache runtime",
                       description="The four APCache configurations of APCACHE.md as real threads "
                       "over a real index (kernels/src/apcache/).")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True
    r = cmds.add_parser(
        "run", help="run a workload under one configuration, write cache_run/query/timeline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=paragraphs(
            "Run WORKLOAD (one query per line, as `tierlab query run` reads it) on INDEX under "
            "one APCache configuration: base (postings through the index mmap and a page cache "
            "capped at --cache-size), base-prefetch (plus a worker reading the next --lookahead "
            "queries' terms), hybrid (a segment cache of --cache-size on --slow-tier, filled by "
            "a worker trailing the query thread) or hybrid-prefetch (a worker prefetching "
            "upcoming terms into the segment cache with adaptive lookahead; DRAM only the "
            "--dram-budget path from storage).",
            "Every core is a shard with its own copy of the index, a query thread and a worker, "
            "and runs the whole workload. The index files are dropped from the page cache first. "
            "--device real reads the index's own device (page cache capped with a cgroup when "
            "one is writable; the result says whether it was); a storage spec of "
            "sim-configs/devices (e.g. nvme-p4800x, hdd-7200) emulates that device: every read "
            "is a pread plus the spec's latency, bandwidth and queueing, through the runtime's "
            "own capped page cache.",
            "Writes OUT/cache_run.parquet, cache_query.parquet and cache_timeline.parquet (the "
            "result schema, source measured) and prints a summary. Ctrl-C stops the run and "
            "writes what was measured (params.partial = true)."),
        epilog="example: tierlab apcache run data/idx data/h.queries --config hybrid-prefetch "
        "--cache-size 64MiB --device nvme-p4800x --slow-tier pm:/mnt/pmem0 --out runs/hp")
    r.add_argument("index", metavar="INDEX")
    r.add_argument("workload", metavar="WORKLOAD")
    r.add_argument("--out", required=True, metavar="DIR", help="directory for the three tables")
    r.add_argument("--config", default="hybrid-prefetch", metavar="NAME",
                   help=_Registry("one of {names} (default hybrid-prefetch)", _configs,
                                  "the configurations of APCACHE.md"))
    r.add_argument("--cache-size", type=size, default="64MiB", metavar="SIZE",
                   help="page-cache cap (base configurations) or segment cache, split over the "
                   "cores (hybrid configurations); default 64MiB")
    r.add_argument("--segment-size", type=size, default="32KiB", metavar="SIZE",
                   help="segment size of the segment cache (default 32KiB)")
    r.add_argument("--lookahead", metavar="N|adaptive",
                   help="queries the prefetch worker may run ahead: a number (base-prefetch, "
                   "default 16; hybrid-prefetch with a fixed lookahead) or adaptive "
                   "(hybrid-prefetch's default)")
    r.add_argument("--dram-budget", type=size, default="50MB", metavar="SIZE",
                   help="page-cache cap of the hybrid configurations (default 50MB)")
    r.add_argument("--device", default="real", metavar="real|SPEC",
                   help="real (the index's own device, default) or a storage spec name or "
                   ".yaml path to emulate")
    r.add_argument("--slow-tier", default="dram", metavar="TIER",
                   help="where the segment cache lives: dram (default), pm:PATH (a temporary "
                   "file in PATH, mmap'd; an fsdax mount for real PM) or numa:N")
    r.add_argument("--cores", type=positive_int, default=1, help="shards / query threads "
                   "(default 1)")
    r.add_argument("--policy", default="lru", metavar="NAME",
                   help=_Registry("segment-cache eviction policy: {names} (default lru)",
                                  _policies, "see kernels/src/cache"))
    r.add_argument("--k", type=positive_int, default=1024, help="hits kept per query "
                   "(default 1024)")
    r.add_argument("--place-dict", metavar="TIER", help="tier of the dictionary (default: the "
                   "slow tier; any tier of `tierlab query run --place`)")
    r.add_argument("--place-skip", metavar="TIER", help="tier of the skip list (default: the "
                   "slow tier)")
    r.add_argument("--readahead", type=_readahead, default="128KiB", metavar="SIZE",
                   help="readahead window, 4KiB .. 1MiB (default 128KiB): a missing page reads "
                   "the run of missing pages from it up to this size, in the emulated page "
                   "cache and on the real device alike (there the kernel's read-around is "
                   "turned off for the index files); 'kernel' leaves the real device's to the "
                   "kernel (its read_ahead_kb)")
    r.add_argument("--sample-ms", type=positive_int, default=10,
                   help="timeline sampling period in ms (default 10)")
    r.add_argument("--no-memory-limit", action="store_true",
                   help="do not cap DRAM with a cgroup (real device)")
    r.add_argument("--results", metavar="TSV", help="also write core 0's top-k: query_id rank "
                   "did score (as `tierlab query run --results`)")
    r.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    r.set_defaults(func=run_cmd)


def run_cmd(args) -> int:
    from tierlab.runtime.apcache import run

    bar = None
    progress = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=None, unit="query", desc=f"apcache {args.config}", leave=False)

        def progress(done, total):
            bar.total = total
            bar.n = done
            bar.refresh()
    try:
        row = run(args.index, args.workload, args.out, config=args.config,
                  cache_size=args.cache_size, segment_size=args.segment_size,
                  lookahead=args.lookahead, dram_budget=args.dram_budget, device=args.device,
                  slow_tier=args.slow_tier, cores=args.cores, policy=args.policy, k=args.k,
                  place_dict=args.place_dict, place_skip=args.place_skip,
                  readahead=args.readahead, sample_ms=args.sample_ms,
                  memory_limit=not args.no_memory_limit, results=args.results,
                  progress=progress)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()
        print(f"tierlab: interrupted; what was measured is in {args.out}")
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
        print(f"wrote      {args.out}/cache_run.parquet, cache_query.parquet, "
              f"cache_timeline.parquet" + (f", {args.results}" if args.results else ""))
    return 130 if partial else 0
