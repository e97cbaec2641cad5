"""`tierlab validate GRID.yaml`: the SimPy model against the native runtime
on a grid (tierlab.experiments.validate; analysis/validation.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tierlab.cli.args import paragraphs

_HELP = paragraphs(
    "Validate the SimPy model (model/) against the native APCache runtime (tierlab apcache "
    "run) on the same index, the same query files, devices and parameters: for every row of "
    "the grid (configuration x cache size x RP x device x query type ...) it runs the runtime "
    "(one cold pass), then the model (passes 1), and pairs their cache_run rows.",
    "The model is calibrated only from `tierlab query costs` on the index (OUT/costs.json, "
    "CPU cost per query, block and posting, thread hand-off), with cpu: measured (the "
    "default) from a `tierlab query run` of each workload file in DRAM (each query's "
    "measured CPU time, replayed), and the device specs of "
    "sim-configs/devices; the device `real` gets a spec measured on this machine by a small "
    "probe of the disk under the index (OUT/devices/real.yaml: random 4 KiB reads, "
    "sequential bandwidth and parallelism with O_DIRECT, then reads of 4 KiB and "
    "readahead-sized runs through the runtime's own read path in a cgroup capped as each "
    "real row's page cache is, whose line that row's model gets). Nothing is fitted to the runtime results. The "
    "runtime's segment cache lives in DRAM, which the model reads as ddr4-2666. With cpu: "
    "measured each row's model also runs in predictive mode (ROW/model-table: the workload "
    "file and the cost table's CPU, nothing of the run replayed), scored apart into "
    "OUT/predictive/ against median |QPS error| <= 10 % and p90 <= 25 %.",
    "GRID.yaml keys (any may be a list, and so may the keys of workload; rows = product): "
    "index (an index folder, or {generate: {size: 50MB, codec: pfor-delta256, seed: 0}} "
    "built once into OUT/index), workload ({type: [single, and], class: H, queries: 500, rp: "
    "0.25, seed: 0}, generated once into OUT/workloads/ and read by both), config, "
    "cache_fraction (of the index's DID + freq bytes) or cache_bytes, device (spec names of "
    "sim-configs/devices, or real), cores, segment_bytes, lookahead (default: each "
    "configuration's own; N or adaptive), dram_budget_bytes, policy, readahead_bytes, k, "
    "costs (measure, or a cost table file), cpu (measured or table), repeats, min_runs, out. An "
    "example: analysis/grids/validate.yaml.",
    "Noise: a runtime run shorter than 1 s is run `repeats` times (default 3), 2 more when "
    "their QPS lie more than 20 % of their median apart, and the run with the median QPS "
    "kept; every row runs at least min_runs times (default 2); an emulated run whose "
    "device was late for more than 2 % of its wall time (the host did not run the thread "
    "when a read was due) is run again, at most 2 more times. A prefetch row's model is "
    "also run with its worker started as far ahead as it may go: the rows with two steady "
    "states (a fixed lookahead on a small page cache thrashes or not depending on its first "
    "milliseconds) are counted, and the errors "
    "with the state the runtime settled in are printed apart from the targets. Noise floor: "
    "each row's kept run is also scored against another run of the same row, as the model "
    "is; a target the runtime misses against itself lies below the machine's run-to-run "
    "noise (summary.json noise_floor, validation.md).",
    "Each row is written at once to OUT/rows/<id>/{measured,model}/; a rerun skips finished "
    "rows and Ctrl-C keeps them. At the end: OUT/measured.parquet, OUT/model.parquet, "
    "OUT/validation.csv and OUT/validation.md (per row measured and predicted QPS, p99, miss "
    "rates and their errors, with the mechanism named where the model misses), "
    "OUT/parity.png, OUT/summary.json (each target: value, threshold, met). The targets: "
    "median |QPS error| <= 5 %, p90 <= 15 %, median |p99 error| <= 15 %, miss rates within "
    "2 percentage points, Kendall tau of the configurations' ranking >= 0.9, >= 48 rows. "
    "The exit status is 0 whether or not they are met (it is a report); 1 when a runtime run "
    "failed (the row is left out and listed; a rerun tries it again); 2 on errors.")


def register(sub) -> None:
    p = sub.add_parser("validate", help="the model against the native runtime on a grid",
                       description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example: nice -n 10 tierlab validate analysis/grids/validate.yaml "
                       "--out runs/validate")
    p.add_argument("grid", metavar="GRID.yaml")
    p.add_argument("--out", metavar="DIR", help="output folder (default: the grid's `out`)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=validate_cmd)


def validate_cmd(args) -> int:
    from tierlab.experiments import validate

    grid = validate.load(args.grid)
    if args.out:
        grid.out = Path(args.out)
    print(f"{len(grid.rows)} rows (runtime + model each) into {grid.out}", file=sys.stderr)
    from tierlab.analysis.validation_report import analyse

    def interrupted():
        print(f"tierlab: interrupted; finished rows are kept in {grid.out / 'rows'} (a rerun "
              f"continues)", file=sys.stderr)

    try:
        done = validate.run(grid, progress=not args.no_progress and sys.stderr.isatty())
    except KeyboardInterrupt:
        interrupted()
        raise
    if done is None:
        print("no finished rows")
        return 0
    res = analyse(done.out, done.measured, done.model, done.twins, done.notes)
    if done.interrupted:
        print(res["text"])
        interrupted()
        raise KeyboardInterrupt
    print(res["text"])
    for n in res["doc"]["notes"]:
        print(f"note: {n}")
    for n in res["doc"]["param_mismatches"]:
        print(f"parameter mismatch: {n}")
    print(f"wrote {grid.out}/measured.parquet, model.parquet, validation.csv, validation.md, "
          f"parity.png, summary.json")
    if done.model_table is not None and len(done.model_table):
        from tierlab.analysis.validation import PREDICTIVE

        ids = set(done.model_table["row_id"])
        pred = analyse(done.out / "predictive", done.measured[done.measured["row_id"].isin(ids)],
                       done.model_table, done.twins, targets=PREDICTIVE)
        print("\npredictive mode (the model with the cost table's CPU and the workload file, "
              "nothing of the run replayed; targets median |QPS error| <= 10 %, p90 <= 25 %):")
        print(pred["text"])
        print(f"wrote {grid.out}/predictive/ (the same tables for predictive mode)")
    if done.failed:
        print(f"{len(done.failed)} row(s) failed in the runtime and are left out (a rerun "
              f"tries them again)", file=sys.stderr)
        return 1
    return 0
