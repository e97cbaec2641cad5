"""`tierlab sim stream|generate|run`: a memory-side stream on Ramulator 2, gem5,
VANS or the embedded timing model (tierlab.experiments.sims,
docs/simulators.md)."""
from __future__ import annotations

import argparse
import math
import sys

from tierlab.cli.args import paragraphs, positive_int, size
from tierlab.experiments.sims import BACKENDS, GENERATORS, MODES

_BACKEND_HELP = ("ramulator2, gem5, vans (external binaries: --binary or TIERLAB_RAMULATOR2, "
                 "TIERLAB_GEM5, TIERLAB_VANS) or embedded (the in-tree timing model)")

_GEN_DESC = paragraphs(
    "Write what a simulator needs to replay a memory-side stream on the tier of SPEC, one "
    "folder per mode: OUT/unloaded/ (one read outstanding: idle latency) and OUT/saturated/ "
    "(requests offered as fast as the memory takes them: bandwidth).",
    "ramulator2: a Ramulator 2.0 YAML (a JEDEC DDR4-2666 device for a DRAM spec; for other "
    "tiers a DDR4 device with 256 B rows, 8 banks, refresh off and timings computed from the "
    "spec) plus a SimpleO3 (unloaded) or LoadStoreTrace (saturated) trace. vans: a VANS "
    "configuration and `0xADDR R|W|C` trace (pm specs only). gem5: run.py with a DDR4 and a "
    "separate NVM controller (NVMInterface retuned from the spec) fed by a TrafficGen replaying "
    "packets.trace (gem5's protobuf packet format, written by tierlab), and se.py for running "
    "the static tierlab-kernels in SE mode on a gem5 with an ISA.",
    "Every generated text file starts with a line naming the spec, the stream and the tierlab "
    "version (Ramulator's trace readers take no comment line: their configuration names them). "
    "docs/simulators.md has the derivations and the pitfalls.")

_RUN_DESC = paragraphs(
    "Generate the files (see `tierlab sim generate --help`), run the back-end in each mode "
    "with its log kept in OUT/<mode>/<backend>.log, read its statistics back and write "
    "OUT/sim_run.csv (traces/schema.yaml, source = the back-end): mean read latency (load to "
    "use), reads, writes, simulated time, bandwidth, wall time.",
    "The binary is --binary or the back-end's environment variable; a missing one is one line "
    "and exit status 2. --backend embedded runs the in-tree timing model instead.")


def register(sub) -> None:
    p = sub.add_parser("sim", help="memory streams on Ramulator 2, gem5, VANS or the embedded "
                       "timing model", description="Replay a memory-side stream (the cache "
                       "filter's output, tierlab_mem_request records) on external memory "
                       "simulators configured from a memory spec, or on the embedded model.")
    cmds = p.add_subparsers(dest="command", metavar="COMMAND")
    cmds.required = True

    s = cmds.add_parser("stream", help="write a memory stream: synthetic line reads, or a "
                        "recorded memory trace through the cache filter",
                        description="Write a memory-side stream file (tierlab_mem_request "
                        "records, tierlab.h). --pattern: COUNT line reads, sequential from "
                        "address 0 or random lines (seeded) in SPAN bytes, the reference streams "
                        "of the cross-validation (docs/simulators.md). --from-trace: the "
                        "accesses of a recorded memory trace (`tierlab trace memory`) through "
                        "the cache filter of a machine spec (tierlab list machines).",
                        epilog="examples:\n  tierlab sim stream --pattern random --count 50000 "
                        "--out random.memreq\n  tierlab sim stream --from-trace t/memtrace.bin "
                        "--machine xeon-gold-6252n --out and-h.memreq",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    src = s.add_mutually_exclusive_group(required=True)
    src.add_argument("--pattern", choices=("sequential", "random"))
    src.add_argument("--from-trace", metavar="TRACE", help="a recorded memory trace file")
    s.add_argument("--machine", default="xeon-gold-6252n",
                   help="machine spec whose caches filter --from-trace (default "
                   "xeon-gold-6252n)")
    s.add_argument("--no-prefetch", action="store_true",
                   help="--from-trace without the machine's hardware prefetchers")
    s.add_argument("--count", type=positive_int, default=50_000, help="requests (default 50000)")
    s.add_argument("--span", type=size, default=1 << 30,
                   help="bytes the random lines are drawn from (default 1GiB)")
    s.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    s.add_argument("--gap", type=int, default=0,
                   help="accesses served by the caches before each request (default 0)")
    s.add_argument("--out", required=True, metavar="FILE", help="stream file to write")
    s.set_defaults(func=run_stream)

    for name, desc, func in (("generate", _GEN_DESC, run_generate), ("run", _RUN_DESC, run_run)):
        c = cmds.add_parser(name, help=("write simulator configs and traces from a spec and a "
                                        "stream" if name == "generate" else
                                        "run a simulator back-end on a stream and read its "
                                        "stats into sim_run"),
                            description=desc, formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog=f"examples:\n  tierlab sim {name} --backend ramulator2 "
                            "optane-dcpmm-g1 random.memreq --out sims/r2-optane\n"
                            f"  TIERLAB_VANS=~/vans/bin/vans tierlab sim {name} --backend vans "
                            "optane-dcpmm-g1 seq.memreq --out sims/vans")
        c.add_argument("--backend", required=True,
                       choices=BACKENDS if name == "run" else GENERATORS, help=_BACKEND_HELP)
        c.add_argument("spec", metavar="SPEC", help="memory spec: a name in sim-configs/devices "
                       "(tierlab list tiers) or a .yaml path")
        c.add_argument("trace", metavar="TRACE", help="memory-side stream file "
                       "(tierlab_mem_request records; `tierlab sim stream` makes synthetic ones)")
        c.add_argument("--out", required=True, metavar="DIR", help="folder to write")
        c.add_argument("--mode", choices=MODES + ("both",), default="both",
                       help="unloaded (idle latency), saturated (bandwidth) or both (default)")
        c.add_argument("--region", action="append", default=[], metavar="NAME",
                       help="keep only the requests of these memory regions (repeatable or "
                       "comma-separated: did,freq); default all")
        c.add_argument("--reads-only", action="store_true",
                       help="drop writebacks (mean read latency of reads alone)")
        c.add_argument("--dram", default="ddr4-2666", metavar="SPEC",
                       help="the DRAM spec whose random latency fixes the uncore latency "
                       "(default ddr4-2666)")
        if name == "run":
            c.add_argument("--binary", metavar="PATH", help="the simulator binary (default: "
                           "$TIERLAB_RAMULATOR2, $TIERLAB_GEM5 or $TIERLAB_VANS)")
        c.set_defaults(func=func)

    k = cmds.add_parser("compare", help="cross-validate the embedded model against the "
                        "simulators at hand (JSON)", description=paragraphs(
                            "Run the same streams on the embedded timing model and on every "
                            "simulator whose binary is set (TIERLAB_RAMULATOR2, TIERLAB_VANS, "
                            "TIERLAB_GEM5), for each --spec, unloaded and saturated; compare the "
                            "embedded model's mean read latency, total time and bandwidth with "
                            "each simulator's, and its wall time (targets of issue 22: 10 % of "
                            "Ramulator 2, 15 % of VANS, 20x faster than Ramulator 2).",
                            "Streams: sequential and random line reads (--count each) plus every "
                            "--stream NAME=FILE (e.g. a filtered AND H query stream). Back-ends "
                            "that cannot run are named in the JSON with the reason."),
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        epilog="example:\n  tierlab sim compare --out bench/results/sims.json")
    k.add_argument("--spec", action="append", default=[], metavar="SPEC",
                   help="memory spec (repeatable; default ddr4-2666 and optane-dcpmm-g1)")
    k.add_argument("--stream", action="append", default=[], metavar="NAME=FILE",
                   help="another stream to run (repeatable)")
    k.add_argument("--count", type=positive_int, default=20_000,
                   help="requests of the synthetic streams (default 20000)")
    k.add_argument("--work", metavar="DIR", help="folder for the runs (default: next to --out)")
    k.add_argument("--out", required=True, metavar="FILE.json", help="JSON to write")
    k.set_defaults(func=run_compare)


def _modes(args):
    return MODES if args.mode == "both" else (args.mode,)


def _regions(args):
    from tierlab.experiments.sims.run import resolve_regions

    return resolve_regions([x for r in args.region for x in r.split(",") if x.strip()])


def run_stream(args) -> int:
    from tierlab.core.errors import TierlabError
    from tierlab.core.values import output_file
    from tierlab.engine.corpus import atomic_outputs
    from tierlab.experiments.sims import stream

    out = output_file(args.out, "--out")
    if args.from_trace:
        recs = stream.from_trace(args.from_trace, args.machine, prefetch=not args.no_prefetch)
        what = (f"requests of {args.from_trace} through the caches of {args.machine} "
                f"({int((recs['kind'] == stream.READ).sum())} reads, "
                f"{int((recs['kind'] == stream.PREFETCH).sum())} prefetches, "
                f"{int((recs['kind'] == stream.WRITEBACK).sum())} writebacks)")
    else:
        recs = stream.synthetic(args.pattern, args.count, span_bytes=args.span, seed=args.seed,
                                gap=args.gap)
        what = f"{args.pattern} line reads"
    if len(recs) == 0:
        raise TierlabError(f"{args.from_trace}: no request leaves the caches of {args.machine}")
    with atomic_outputs(out) as (tmp,):
        stream.write(tmp, recs)
    print(f"{out}: {len(recs)} {what}")
    return 0


def run_generate(args) -> int:
    from tierlab.core.values import output_dir
    from tierlab.experiments.sims import run

    out = output_dir(args.out, "--out")
    done = run.generate(args.backend, args.spec, args.trace, out, modes=_modes(args),
                        regions=_regions(args), reads_only=args.reads_only, dram_name=args.dram)
    for mode, paths in done.items():
        print(f"{mode}: " + " ".join(str(p) for p in paths))
    return 0


def run_run(args) -> int:
    from tierlab.core.values import output_dir
    from tierlab.experiments.sims import embedded, run

    out = output_dir(args.out, "--out")
    rows = run.run(args.backend, args.spec, args.trace, out, modes=_modes(args),
                   regions=_regions(args), reads_only=args.reads_only,
                   binary_path=getattr(args, "binary", None), dram_name=args.dram,
                   progress=run.progress_line, embedded=embedded.model())
    if sys.stderr.isatty():
        print(file=sys.stderr)
    for r in rows:
        lat, bw = r["read_latency_mean_ns"], r["read_bandwidth_bytes_per_s"]
        print(f"{r['source']} {r['spec']} {r['mode']} {r['region']}: {r['reads']} reads, "
              f"mean read latency {'n/a' if math.isnan(lat) else f'{lat:.1f} ns'}, "
              f"{r['total_ns'] / 1e3:.1f} us simulated, "
              f"{'n/a' if math.isnan(bw) else f'{bw / 1e9:.2f} GB/s'}, {r['wall_s']:.2f} s wall")
    print(f"{out / 'sim_run.csv'}")
    return 0


def run_compare(args) -> int:
    from pathlib import Path

    from tierlab.core.errors import TierlabError
    from tierlab.core.values import output_dir, output_file
    from tierlab.engine.corpus import atomic_outputs
    from tierlab.experiments.sims import compare, run

    out = output_file(args.out, "--out")
    work = output_dir(args.work or out.with_name(out.stem + "-runs"), "--work")
    streams = compare.default_streams(Path(work) / "streams", args.count)
    for s in args.stream:
        name, sep, path = s.partition("=")
        if not sep or not name or not Path(path).is_file():
            raise TierlabError(f"--stream: NAME=FILE with an existing file, got {s!r}")
        streams[name] = Path(path)
    doc = compare.compare(args.spec or ["ddr4-2666", "optane-dcpmm-g1"], streams, Path(work),
                          progress=run.progress_line)
    with atomic_outputs(out) as (tmp,):
        tmp.write_text(compare.dumps(doc))
    if sys.stderr.isatty():
        print(file=sys.stderr)
    for b, why in doc["config"]["not_run"].items():
        print(f"not run: {b}: {why}")
    for c in doc["comparisons"]:
        def pct(k):
            v = c.get(k)
            return "n/a" if v is None or math.isnan(v) else f"{100 * v:+.1f} %"
        sp = c.get("speedup")
        print(f"{c['spec']} {c['stream']} embedded vs {c['against']}: latency {pct('latency_rel_error')}, "
              f"total {pct('total_time_rel_error')}, bandwidth {pct('bandwidth_rel_error')}"
              + (f", {sp:.0f}x faster" if sp else ""))
    for e in doc["errors"]:
        print(f"error: {e}", file=sys.stderr)
    print(out)
    return 0
