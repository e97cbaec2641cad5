"""Running the rows of a validation grid: for each row the runtime (repeated
while its QPS spreads more than the noise allows, see the package
docstring) and then the model with the same parameters, each row kept in
OUT/rows/<row id>/ so a rerun resumes; then the finished rows collected."""
from __future__ import annotations

import gc
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from tierlab.core import runspec, signals
from tierlab.core.errors import TierlabError
from tierlab.engine.index import postings_bytes
from tierlab.experiments.validate.device_probe import (
    RealDevice, _scratch_file, prepare_real, real_page_cap, runtime_line, runtime_pair,
    write_device_spec)
from tierlab.experiments.validate.grid import (
    LATE_RETRIES, LATE_SHARE, REAL, REPEAT_BELOW_S,
    SETTLE_S, SPREAD_EXTRA, SPREAD_RERUN, Grid, Row, cache_bytes, workload_name)
from tierlab.experiments.validate.inputs import (
    _median_latency, cpu_trace, prepare_costs, prepare_index, prepare_workloads)


def run_doc(row: Row, cache: int, index: Path, workload: Path) -> dict:
    """The run spec of a row (tierlab.core.runspec) that the runtime runs and
    the model is given too: one document, so both run the same thing."""
    v = row.values
    doc = {"index": str(index), "workload": str(workload), "config": v["config"],
           "policy": v["policy"], "device": v["device"], "cache_bytes": cache,
           "readahead_bytes": v["readahead_bytes"], "cores": v["cores"], "k": v["k"],
           "lookahead": v["lookahead"], "name": f"validate {row.id}"}
    if v["config"].startswith("hybrid"):
        doc["segment_bytes"] = v["segment_bytes"]
        doc["dram_budget_bytes"] = v["dram_budget_bytes"]
    return doc


def _model_doc(row: Row, cache: int, index: Path, workload: Path, costs_path: Path,
               real: RealDevice | None, trace: Path | None = None,
               page_cap: int | None = None, spin_ns: int | None = None) -> dict:
    """The model's run spec of a row: the row's run spec (run_doc) with what
    only the model needs to time that run. page_cap: the page-cache cap the
    runtime ran with on the real device, when its cgroup floor raised the
    grid's; spin_ns: how long its waiting threads spun before blocking (0
    unless it pinned them). Parameters of that run, not results."""
    v = row.values
    hybrid = v["config"].startswith("hybrid")
    is_real = v["device"] == REAL
    doc = run_doc(row, cache, index, workload)
    doc.update({"passes": 1, "costs": str(costs_path)})
    if trace is not None:
        doc["workload"] = {"trace": str(trace), "cpu": "measured"}
    if is_real:  # the disk as the runtime's reads saw it (device_probe.py)
        doc["device"] = str(real.spec(real_page_cap(row, cache)))
    if is_real and page_cap:
        doc["dram_budget_bytes" if hybrid else "cache_bytes"] = page_cap
    if spin_ns is not None:
        doc["handoff_spin_ns"] = int(spin_ns)
    if is_real and v["config"] in ("base", "hybrid"):
        # every read of the index is through its MADV_RANDOM mapping, whose accessed bits
        # Linux (6.3 on: vma_has_recency) ignores: its page cache keeps these pages in FIFO
        # order; a prefetch worker's pread marks them accessed, as LRU assumes
        doc["page_cache_policy"] = "fifo"
    if not is_real:  # the runtime's emulated page cache: each block access costs a hit,
        doc["page_hit_ns"] = "table"  # each page a base-prefetch worker reads a touch,
        doc["page_touch_ns"] = "table"  # and each read its frames' bookkeeping
        doc["page_miss_ns"] = "table"
    if v["config"].endswith("prefetch"):  # which steady state a run settles in is chance
        doc["check_bistable"] = True
    return doc


# ROW/.measured.tmp-<pid>[.<run>[.cpu]] and ROW/.model.tmp-<pid>: a row's temporaries
TMP = r"\.(?:measured|model)\.tmp-(?P<pid>\d+)(?:\.\d+(?:\.cpu)?)?"


def _swap_in(tmp: Path, final: Path) -> None:
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def row_dir(out: Path, row: Row) -> Path:
    return out / "rows" / row.id


def is_done(out: Path, row: Row) -> bool:
    d = row_dir(out, row)
    return all((d / side / "cache_run.parquet").exists() for side in ("measured", "model"))


def _measure(row: Row, index: Path, workload: Path, tmp: Path, cache: int, repeats: int,
             progress=None, cpu: bool = True, device_probe=None, min_runs: int = 1) -> None:
    """The runtime run of a row into `tmp`: min_runs times, or, when the
    first took less than REPEAT_BELOW_S, max(repeats, min_runs) times,
    SPREAD_EXTRA more when the QPS of those lie further apart than
    SPREAD_RERUN of their median, with the run of the median QPS kept
    (`median_run`); an emulated run late for more than LATE_SHARE of its wall
    time does not count and is run again, at most LATE_RETRIES more times
    (module docstring, Noise). tmp/repeats.json lists every run's QPS,
    whether it kept its timing and its metrics, the kept run and its twin
    (`twin_run`: the noise floor compares the two). cpu:
    a CPU trace before and after each run (tmp/cpu.trace/, `cpu_trace`).
    device_probe (the real device): called before and after each run, its
    reads kept in tmp/device-probe.json."""
    from tierlab.runtime import apcache
    from tierlab.traces.schema import RUN_METRICS as METRICS
    from tierlab.traces.schema import read_table

    runs = []  # (qps, folder, kept timing)
    metrics = []  # per run: METRICS as measured
    try:
        # runs to keep the median of; a long run averages its noise itself and
        # runs min_runs times only
        want = base = max(repeats, min_runs)
        short = True
        i = 0
        while sum(ok for _, _, ok in runs) < want and i < want + LATE_RETRIES:
            rdir = tmp.with_name(f"{tmp.name}.{i}")
            shutil.rmtree(rdir, ignore_errors=True)
            runs.append((0.0, rdir, False))
            before = rdir.with_name(rdir.name + ".cpu")
            shutil.rmtree(before, ignore_errors=True)
            probed = {"before": device_probe()} if device_probe else None
            if cpu:
                cpu_trace(index, workload, row.values["k"], before)
                gc.collect()
                time.sleep(SETTLE_S)
            apcache.run(runspec.validate(run_doc(row, cache, index, workload)), rdir,
                        progress=progress)
            if probed is not None:
                probed["after"] = device_probe()
                (rdir / "device-probe.json").write_text(json.dumps(probed, indent=1) + "\n")
            if cpu:
                after = rdir / "cpu.trace"
                cpu_trace(index, workload, row.values["k"], after)
                _median_latency(after / "query.parquet",
                                [read_table(d / "query.parquet")[1]["latency_ns"].to_numpy()
                                 for d in (before, after)])
                shutil.rmtree(before)
            r = read_table(rdir / "cache_run.parquet")[1].iloc[0]
            runs[-1] = (float(r["qps"]), rdir, late_share(r) <= LATE_SHARE)
            metrics.append({k: _finite(r.get(k)) for k in METRICS})
            if i == 0 and float(r["wall_ns"]) >= REPEAT_BELOW_S * 1e9:
                want, short = min_runs, False
            kept = [q for q, _, ok in runs if ok]
            if short and 1 < want == base and len(kept) >= want and spread(kept) > SPREAD_RERUN:
                want += SPREAD_EXTRA  # a noisy moment: a median of more runs
            i += 1
        keep = median_run(runs)
        os.replace(keep[1], tmp)
        timed = [ok for _, _, ok in runs]
        (tmp / "repeats.json").write_text(json.dumps(
            {"qps": [q for q, _, _ in runs], "kept_timing": timed,
             "kept": runs.index(keep), "twin": twin_run(runs.index(keep), timed),
             "metrics": metrics,
             "rule": f"every row runs {min_runs} time(s) at least; runs shorter than "
                     f"{REPEAT_BELOW_S:g} s are repeated {base} times, "
                     f"{SPREAD_EXTRA} more when their QPS lie more than {SPREAD_RERUN:.0%} of "
                     f"their median apart; an emulated run whose device was late for more "
                     f"than {LATE_SHARE:.0%} of its wall time is run again (at most "
                     f"{LATE_RETRIES} more runs); the run with the median QPS among those that "
                     "kept their timing is kept"}) + "\n")
    finally:
        for _, rdir, _ in runs:
            shutil.rmtree(rdir, ignore_errors=True)
            shutil.rmtree(rdir.with_name(rdir.name + ".cpu"), ignore_errors=True)


def _finite(x) -> float | None:
    """A metric for JSON: a float, or None for what is missing or not finite."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def twin_run(kept: int, timed: list) -> int | None:
    """The run a row's kept run is compared with for the noise floor (the
    runtime against itself, scored like the model): another run that kept its
    timing (any other when none did), the nearest in order, the later of two;
    None for a row that ran once."""
    others = [i for i, ok in enumerate(timed) if i != kept and ok] or \
        [i for i in range(len(timed)) if i != kept]
    return min(others, key=lambda i: (abs(i - kept), i < kept)) if others else None


def spread(qps) -> float:
    """(max - min) / median of run QPS: the runtime's run-to-run noise."""
    import numpy as np

    m = float(np.median(qps))
    return (max(qps) - min(qps)) / m if m > 0 else 0.0


def median_run(runs: list):
    """The run (qps, folder, kept timing) to keep: among those that kept
    their timing (all when none did), the one nearest their median QPS; of
    an even number's two middle runs, the one nearer the median of all runs,
    late ones included (they still say where the row's QPS usually lies)."""
    import numpy as np

    clean = [x for x in runs if x[2]] or runs
    mid = float(np.median([q for q, _, _ in clean]))
    every = float(np.median([q for q, _, _ in runs]))
    return min(clean, key=lambda x: (abs(x[0] - mid), abs(x[0] - every)))


def run_row(row: Row, out: Path, *, index: Path, workload: Path, costs, costs_path: Path,
            real: RealDevice | None, index_bytes: int, progress=None, cpu: bool = True,
            repeats: int = 1, min_runs: int = 1) -> bool:
    """The runtime run (`measure_row`), then the model run (`model_row`), of
    one row, each written to its folder at once (a temporary name renamed
    into place). A runtime run that fails (TierlabError) leaves
    ROW/failed.json and returns False; a rerun tries it again. The workflow
    (workflows/) runs the two halves as separate jobs."""
    if not measure_row(row, out, index=index, workload=workload, real=real,
                       index_bytes=index_bytes, progress=progress, cpu=cpu, repeats=repeats,
                       min_runs=min_runs):
        return False
    model_row(row, out, index=index, workload=workload, costs=costs, costs_path=costs_path,
              real=real, index_bytes=index_bytes, cpu=cpu)
    return True


def _row_folder(row: Row, out: Path) -> Path:
    """ROW (row_dir) with its row.json, the temporaries of a killed run removed."""
    d = row_dir(out, row)
    d.mkdir(parents=True, exist_ok=True)
    (d / "row.json").write_text(json.dumps({"id": row.id, "cell": row.cell, **row.values,
                                            "workload": row.workload}, indent=1, default=str)
                                + "\n")
    # the temporaries of a validate killed by SIGKILL (tierlab.core.signals)
    signals.report(signals.remove_stale(d, TMP), "a killed validate")
    return d


def measure_row(row: Row, out: Path, *, index: Path, workload: Path,
                real: RealDevice | None, index_bytes: int, progress=None, cpu: bool = True,
                repeats: int = 1, min_runs: int = 1) -> bool:
    """The runtime side of a row (`_measure`) into ROW/measured/, unless
    already there; False (and ROW/failed.json) when the runtime failed.
    cpu: a CPU trace is taken with each run (ROW/measured/cpu.trace) for the
    model to replay."""
    d = _row_folder(row, out)
    cache = cache_bytes(row, index_bytes)
    if not (d / "measured" / "cache_run.parquet").exists():
        tmp = d / f".measured.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cap, ra = real_page_cap(row, cache), int(row.values["readahead_bytes"])

        def own_probe():  # the real device right before and after the run
            _scratch_file(real.scratch)
            return runtime_pair(real.scratch, ra, cap, ROW_PROBE_READS)
        try:
            _measure(row, index, workload, tmp, cache, repeats, progress, cpu,
                     own_probe if row.values["device"] == REAL and real else None,
                     min_runs=min_runs)
        except TierlabError as e:  # e.g. OOM-killed in its cgroup: a failed row, not the grid
            shutil.rmtree(tmp, ignore_errors=True)
            (d / "failed.json").write_text(json.dumps({"side": "measured", "error": str(e)})
                                           + "\n")
            return False
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        _swap_in(tmp, d / "measured")
        (d / "failed.json").unlink(missing_ok=True)
    return True


def model_row(row: Row, out: Path, *, index: Path, workload: Path, costs, costs_path: Path,
              real: RealDevice | None, index_bytes: int, cpu: bool = True) -> None:
    """The model side of a row, unless already there: the row's run spec with
    the parameters the runtime's kept run reported (ROW/measured/, which must
    exist). cpu: into ROW/model/ replaying the kept run's CPU trace, and
    beside it, in predictive mode, into ROW/model-table/ (TABLE_SIDE) from
    the workload file with the cost table's CPU; else ROW/model/ from the
    cost table."""
    from tierlab.model import config as cfgmod
    from tierlab.traces.schema import read_table

    d = _row_folder(row, out)
    cache = cache_bytes(row, index_bytes)
    sides = [("model", d / "measured" / "cpu.trace" if cpu else None)]
    if cpu:
        sides.append((TABLE_SIDE, None))
    for side, trace in sides:
        if (d / side / "cache_run.parquet").exists():
            continue
        run = read_table(d / "measured" / "cache_run.parquet")[1].iloc[0]
        page_cap = int(run["dram_budget_bytes"]) if row.values["device"] == REAL else None
        # whether the runtime's threads spun before blocking (only when it pinned them)
        spin = json.loads(run["params"]).get("handoff_spin_ns")
        if row.values["device"] == REAL and (d / "measured" / "device-probe.json").exists():
            own = _row_spec(d / "measured", real)
            real = replace(real, by_cap={**real.by_cap, real_page_cap(row, cache): own})
        cfg = cfgmod.validate(_model_doc(row, cache, index, workload, costs_path, real,
                                         trace, page_cap, spin),
                              f"row {row.id}")
        res = cfgmod.run(cfg, costs=costs)
        tmp = d / f".model.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cfgmod.write(res, tmp)
        _swap_in(tmp, d / side)


# a row's model run in predictive mode (the workload file, the cost table's CPU:
# nothing measured in the run is replayed), next to its replay `model`
TABLE_SIDE = "model-table"


ROW_PROBE_READS = 300  # reads of each size through the runtime's path, before and after a real run


def _row_spec(measured: Path, real: RealDevice) -> Path:
    """measured/real.yaml: the real device's line through the mean read times
    the row's own probes took right before and after its kept run (a virtual
    disk's speed can drift several-fold within a minute), else the grid's
    spec of its cap."""
    pr = json.loads((measured / "device-probe.json").read_text())
    small, big = ({**pr["before"][k], "mean_ns": (pr["before"][k]["mean_ns"]
                                                   + pr["after"][k]["mean_ns"]) / 2,
                   "reads": pr["before"][k]["reads"] + pr["after"][k]["reads"]}
                  for k in (0, 1))
    line = runtime_line(small, big)
    if not line:
        return real.default
    p = {**real.probe, "read_latency_ns": line[0], "read_bandwidth_bytes_per_s": line[1],
         "read_path": "runtime", "runtime_reads": [small, big]}
    return write_device_spec(p, measured / "real.yaml",
                             block_device=real.probe.get("block_device", ""))


def collect(grid: Grid) -> tuple:
    """(measured, model) cache_run DataFrames of the finished rows, with the
    columns row_id and cell (LABELS) added: both sides ran the row's run
    spec, so their parameter columns agree as written."""
    import pandas as pd

    from tierlab.traces.schema import read_table

    meas, mod = [], []
    for r in grid.rows:
        if not is_done(grid.out, r):
            continue
        d = row_dir(grid.out, r)
        for side, acc in (("measured", meas), ("model", mod)):
            _, df = read_table(d / side / "cache_run.parquet")
            df["row_id"] = r.id
            df["cell"] = r.cell
            if side == "model":  # its second steady state, when it was checked for one
                pj = json.loads(df["params"].iloc[0])
                df["bistable"] = bool(pj.get("bistable", False))
                for k, x in (pj.get("head_start") or {}).items():
                    df[f"{k}_head_start"] = x
            acc.append(df)
    if not meas:
        return None, None
    return pd.concat(meas, ignore_index=True), pd.concat(mod, ignore_index=True)


def collect_side(grid: Grid, side: str = TABLE_SIDE):
    """The cache_run rows of `side` (TABLE_SIDE: the predictive model runs)
    of the finished rows that have one, with row_id and cell; None if none."""
    import pandas as pd

    from tierlab.traces.schema import read_table

    acc = []
    for r in grid.rows:
        f = row_dir(grid.out, r) / side / "cache_run.parquet"
        if is_done(grid.out, r) and f.exists():
            df = read_table(f)[1]
            acc.append(df.assign(row_id=r.id, cell=r.cell))
    return pd.concat(acc, ignore_index=True) if acc else None


def read_repeats(grid: Grid, row: Row) -> dict | None:
    """ROW/measured/repeats.json (`_measure`), or None before the row ran."""
    f = row_dir(grid.out, row) / "measured" / "repeats.json"
    return json.loads(f.read_text()) if f.exists() else None


def collect_twins(grid: Grid, measured):
    """The runtime's side of the noise floor: each finished row that ran more
    than once (repeats.json `twin`) as its measured row with the metrics of
    its twin run instead of the kept one; None when no row has a twin."""
    import pandas as pd

    from tierlab.traces.schema import RUN_METRICS as METRICS

    out = []
    by_id = dict(tuple(measured.groupby("row_id")))
    for r in grid.rows:
        rep = read_repeats(grid, r) if r.id in by_id else None
        t, runs = (rep.get("twin"), rep.get("metrics")) if rep else (None, None)
        if t is None or not runs or len(by_id[r.id]) != 1:
            continue
        row = by_id[r.id].copy()
        for k in METRICS:
            v = runs[t].get(k)
            row[k] = math.nan if v is None else v
        out.append(row)
    return pd.concat(out, ignore_index=True) if out else None


def real_cap_notes(measured) -> list[str]:
    """How the runtime capped the page cache on the real device (a cgroup,
    raised below 4 MiB, or not at all), counted over the real-device runs."""
    import re

    lim = measured.loc[measured["device_mode"] == "real", "memory_limit_enforced"].astype(str)
    if not len(lim):
        return []
    # numbers -> N so runs group by how they were capped (not "v1" or "v2")
    kinds = lim.map(lambda t: re.sub(r"\(/.*\)$", "",
                                     re.sub(r"(?<![A-Za-z])[0-9]+", "N", t)).strip())
    out = []
    for k, n in kinds.value_counts().items():
        out.append(f"real device page-cache cap, {n} run(s): {k}")
    raised = lim.str.contains("raised from").sum()
    if raised:
        out.append(f"real device: {raised} run(s) had their page-cache cap raised by the runtime "
                   "(smaller cgroup caps get it OOM-killed); the model ran with the raised cap")
    return out


def late_share(run) -> float:
    """The share of a runtime run's wall time its emulated device was late
    (params.device_late_ns: reads returned after their planned completion);
    0 on the real device."""
    p = json.loads(run["params"]) if isinstance(run["params"], str) else {}
    return float(p.get("device_late_ns") or 0) / max(float(run["wall_ns"]), 1.0)


def emulation_notes(measured) -> list[str]:
    """How well the emulated devices kept their timing: a read that returns
    after its planned completion (device_late_ns in the run's params: the
    thread was not running when it was due, e.g. its vCPU preempted by the
    host) makes the run slower than the device of the spec would. Flags the
    runs late for more than LATE_SHARE of their wall time."""
    emu = measured[measured["device_mode"] == "emulated"]
    if not len(emu):
        return []
    share = [late_share(r) for _, r in emu.iterrows()]
    late = [x for x in share if x > LATE_SHARE]
    if not late:
        return [f"emulated devices kept their timing: no run was late for more than "
                f"{LATE_SHARE:.0%} of its wall time (max {max(share):.1%})"]
    return [f"emulated devices: {len(late)} of {len(share)} run(s) were late for more than "
            f"{LATE_SHARE:.0%} of their wall time (max {max(share):.1%}; reads returned after "
            f"their planned completion, the thread not running when due): those runs are "
            f"slower than the spec's device"]


def spread_notes(grid: Grid) -> list[str]:
    """The runtime's own run-to-run noise, per device: over the finished rows
    run more than once (REPEAT_BELOW_S), the spread (max - min) / median of
    the QPS of their runs that kept their timing (repeats.json). The model's
    errors cannot be told from noise below it."""
    import numpy as np

    by_dev: dict = {}
    for r in grid.rows:
        rep = read_repeats(grid, r)
        if rep is None:
            continue
        ok = rep.get("kept_timing") or [True] * len(rep["qps"])
        qps = [q for q, k in zip(rep["qps"], ok) if k]
        if len(qps) >= 2 and np.median(qps) > 0:
            by_dev.setdefault(r.values["device"], []).append(spread(qps))
    if not by_dev:
        return []
    parts = [f"{d} median {np.median(v):.1%}, p90 {np.percentile(v, 90):.1%} ({len(v)} rows)"
             for d, v in sorted(by_dev.items())]
    return ["run-to-run spread of the runtime's QPS, (max - min) / median over the runs of a "
            "row that kept their timing: " + "; ".join(parts)]


@dataclass
class Collected:
    """The finished rows of a grid as cache_run tables (with the grid's label
    columns, LABELS): what analysis/validation_report.py scores. twins: each
    row's second run (the noise floor), or None; notes: what the run
    observed (device probes, caps, late emulation, spread); interrupted: the
    run was stopped by Ctrl-C (the caller reports, then re-raises)."""

    out: Path
    measured: object
    model: object
    twins: object
    notes: list
    failed: list
    model_table: object = None  # the predictive runs (TABLE_SIDE), or None
    interrupted: bool = False


def run(grid: Grid, *, progress: bool = True, log=None) -> Collected | None:
    """Prepare the inputs, run every unfinished row (runtime then model) and
    collect all finished rows (None when there are none). Ctrl-C keeps the
    finished rows and returns them with interrupted=True; with none finished
    it re-raises."""
    from tqdm import tqdm

    log = log or (lambda msg: print(msg, file=sys.stderr))
    grid.out.mkdir(parents=True, exist_ok=True)
    (grid.out / "grid.yaml").write_text(yaml.safe_dump(grid.doc, sort_keys=False,
                                                       default_flow_style=None))
    index = prepare_index(grid, log)
    wfiles = prepare_workloads(grid, index)
    costs, costs_path = prepare_costs(grid, index, log)
    real = prepare_real(grid, index, log)
    probe = real.probe if real else {}
    notes = []
    if probe:
        notes.append(
            f"real device {probe.get('block_device', '')}: 4 KiB random read median "
            f"{probe['read_4k_median_ns'] / 1e3:.1f} us, sequential "
            f"{probe['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s, queue depth "
            f"{probe['queue_depth']} (O_DIRECT {probe['o_direct']}); spec {real.default}")
        if probe.get("read_path") == "runtime":
            small, big = probe["runtime_reads"]
            notes.append(
                f"real device: the runtime's read path ({small['how']}; rows under other "
                f"page-cache caps get the line under their own, below): "
                f"mean {small['mean_ns'] / 1e3:.1f} us for 4 KiB, {big['mean_ns'] / 1e3:.1f} us "
                f"for {big['run_bytes'] >> 10} KiB -> {probe['read_latency_ns'] / 1e3:.1f} us + "
                f"{probe['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s")
            for cap, at in (probe.get("runtime_lines") or {}).items():
                notes.append(f"real device under a {int(cap):,}-byte page-cache cap (the grid's "
                             f"real rows): {at['read_latency_ns'] / 1e3:.1f} us + "
                             f"{at['read_bandwidth_bytes_per_s'] / 1e6:.0f} MB/s")
        elif probe.get("runtime_reads_unused"):
            notes.append(f"real device: the O_DIRECT line is the model's "
                         f"({probe['runtime_reads_unused']})")
        ra = probe.get("read_ahead_kb")
        if ra:
            notes.append(f"real device: the disk's read_ahead_kb is {ra}; the runtime turns the "
                         f"kernel's read-around off for the index files and reads ahead "
                         f"readahead_bytes itself, as the model and the emulated devices do")
        if probe["host_caching_suspected"]:
            notes.append("real device: 4 KiB reads at about memory speed; the host caches the "
                         "disk, so the real device cannot be modelled as a disk honestly")
    ib = postings_bytes(index)
    load0 = os.getloadavg()
    t_start = time.time()
    todo = [r for r in grid.rows if not is_done(grid.out, r)]
    bar = tqdm(total=len(grid.rows), initial=len(grid.rows) - len(todo), unit="row",
               desc="validate", disable=not progress, file=sys.stderr, dynamic_ncols=True)
    interrupted = False
    failed = []
    try:
        for r in todo:
            bar.set_postfix_str(r.label(), refresh=True)
            ok = run_row(r, grid.out, index=index, workload=wfiles[workload_name(r.workload)],
                    costs=costs, costs_path=costs_path, real=real, index_bytes=ib,
                    cpu=grid.cpu == "measured", repeats=grid.repeats,
                    min_runs=grid.min_runs)
            if not ok:
                err = json.loads((row_dir(grid.out, r) / "failed.json").read_text())["error"]
                failed.append(f"{r.label()} (row {r.id}): {err}")
                log(f"row failed, continuing: {failed[-1]}")
            bar.update()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
        if real:
            real.scratch.unlink(missing_ok=True)
    if todo:
        notes.append(f"this run: {len(todo)} row(s) in {time.time() - t_start:.0f} s; load "
                     f"average before {load0[0]:.2f}, after {os.getloadavg()[0]:.2f} (the "
                     f"runtime's QPS is timing-sensitive: other work on the CPUs slows it)")
    done = finish(grid, notes, failed, interrupted)
    if done is None and interrupted:
        raise KeyboardInterrupt
    return done


def finish(grid: Grid, notes=(), failed=(), interrupted: bool = False) -> Collected | None:
    """The finished rows of the grid under grid.out (`collect`) with their
    noise floor's twins and the notes on how they ran (page-cache caps, late
    emulation, spread), ready for analysis/validation_report.py; None when
    no row has finished. The workflow's validation rule calls it too."""
    measured, model = collect(grid)
    if measured is None:
        return None
    notes = list(notes) + real_cap_notes(measured) + emulation_notes(measured)
    notes += spread_notes(grid)
    notes += [f"FAILED runtime run, row left out: {f}" for f in failed]
    return Collected(out=grid.out, measured=measured, model=model,
                     model_table=collect_side(grid, TABLE_SIDE) if grid.cpu == "measured"
                     else None,
                     twins=collect_twins(grid, measured), notes=notes, failed=list(failed),
                     interrupted=interrupted)
