"""`tierlab validate GRID.yaml`: the SimPy model (model/) against the native
APCache runtime (kernels/src/apcache/, tierlab.runtime.apcache) on the same index,
workload files, devices and parameters, over a grid of cells; the errors,
rankings and diagnosis come from analysis/validation.py.

The grid file (every key may hold a list, except `index`, `workload` and
`out`; the keys of a generated `workload` may hold lists too; the rows are
the cartesian product, one runtime run and one model run each):

    index: {generate: {size: 50MB, codec: pfor-delta256, seed: 0}}  # or an index folder
    workload: {type: [single, and], class: H, queries: 500, rp: 0.25, seed: 1}
    config: [base, base-prefetch, hybrid, hybrid-prefetch]
    cache_fraction: [0.05, 0.2, 0.8]   # of the index's DID + freq bytes; or cache_bytes
    device: [hdd-7200, nvme-p4800x, real]
    cores: 1
    segment_bytes: 32KiB
    lookahead: default                 # each configuration's own; or N / adaptive
    dram_budget_bytes: 2MB
    policy: lru
    readahead_bytes: 128KiB
    k: 1024
    cpu: measured                      # or table
    repeats: 3                         # runs of a short row (median kept); 1 = once
    min_runs: 2                        # every row at least: a twin run for the noise floor
    out: validate-out

Calibration (never from the runtime results validated here): the cost
table of `tierlab query costs` measured once on the index
(OUT/costs.json); with `cpu: measured` (the default) each query's CPU time
as `tierlab query run` measured it on the same workload file with every
structure in DRAM, right before and right after the runtime run it is
compared with (ROW/measured/cpu.trace/, a trace the model replays, each
query's latency the mean of the two: no fit error, measured blocks per
term); the device specs of sim-configs/devices, and for the device `real`
a spec measured on this machine by a small probe (OUT/devices/real.yaml,
`probe_device`: the latency and bandwidth of reads through the runtime's
own read path, `runtime_reads`; one spec per page-cache cap the grid's real
rows plan, real-capN.yaml; and, since the disk's speed drifts, each real
row's own probe right before and after its run, ROW/measured/real.yaml,
which its model gets). Emulated rows are also charged the runtime's
page-cache hits, a base-prefetch worker's page copies and the bookkeeping of
a read (the table's page_hit_ns, page_touch_ns, page_miss_ns), and a waiting
thread spins as long as the runtime's did (handoff_spin_ns). On the real
device the base and hybrid rows' page cache is FIFO (page_cache_policy: the
kernel ignores accessed bits of the runtime's MADV_RANDOM mapping). Both
sides run the row's one run spec (runner.run_doc): the slow tier is the
spec's default ddr4-2666, placed in DRAM by the runtime. Both do one cold
pass.

Noise. The CPU speed of memory-bound code on a shared virtual machine can
drift by tens of percent over seconds while a pure ALU loop does not, so
the CPU trace is taken next to the run it calibrates rather than once per
workload. And a runtime run shorter than REPEAT_BELOW_S (an NVMe row: tens
of milliseconds) is run `repeats` times, the run with the median QPS kept
with its own CPU trace (all QPS in ROW/measured/repeats.json), and
SPREAD_EXTRA more times when their QPS lie more than SPREAD_RERUN of their
median apart (a noisy moment of the host); longer runs
average the noise themselves and run `min_runs` times (default 2). An
emulated run whose device was late for more than LATE_SHARE of its wall
time (its reads returned after their planned completion: the host did not
run the thread when due) did not emulate the spec's device and is run again,
at most LATE_RETRIES more times. Neither side sees the other's
results. The model resumes a woken thread after the cost table's median
wake-up: drawn wake-ups (model key wake_ups: drawn) reproduce the runtime's
occasional tipping into thrashing on a small cache, but how often the long
wake-ups come depends on the host's moment, not on the run.
Instead the model of each prefetch row is checked for a second steady state
(model key check_bistable: a second run with the worker started as far
ahead as it may go); the summary counts the bistable rows, names those whose
runtime settled in the other state, and shows the errors with that state's
prediction apart from the targets (which keep the prediction made).

Noise floor. Every row runs at least `min_runs` times, so each kept run has
a twin (`twin_run`: another run of the same row that kept its timing). The
twins are scored against the kept runs exactly as the model is (the same
targets, `noise_floor` in analysis/validation.py), beside the model's score
on the same rows: a target the runtime misses against itself lies below
this machine's run-to-run noise, and no prediction can be held to it here.

Layout of OUT: index/ (a generated index, with corpus/), workloads/,
costs.json, devices/real.yaml and real-capN.yaml (and probe-scratch.bin while it runs),
rows/<row id>/{measured,model}/ (the three
tables of each run, and measured/cpu.trace/; a row is finished when both
hold cache_run.parquet, and a rerun skips it), then measured.parquet, model.parquet, validation.csv,
validation.md, parity.png, summary.json.
"""
from tierlab.experiments.validate.device_probe import (
    host_caching_suspected, probe_device, runtime_line, runtime_reads, write_device_spec)
from tierlab.experiments.validate.grid import Grid, Row, load, parse
from tierlab.experiments.validate.inputs import term_source, workload_file
from tierlab.experiments.validate.runner import (
    Collected, collect, finish, measure_row, model_row, run, run_row)

__all__ = ["Grid", "Row", "parse", "load", "run", "run_row", "measure_row", "model_row",
           "workload_file", "term_source", "collect", "finish", "Collected",
           "probe_device", "runtime_reads", "runtime_line", "write_device_spec",
           "host_caching_suspected"]
