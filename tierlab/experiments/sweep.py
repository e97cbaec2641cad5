"""Sweeps: a grid of run configurations (`tierlab model sweep GRID.yaml`).

A grid file is a run configuration (model/README.md) in which any key may
hold a list, and so may the keys of a generated `workload` mapping; the
cells are the cartesian product of the lists, in file order. Two keys are
the sweep's own: `out` (the folder, default `model-sweep`) and `workers`
(processes, default 2).

Cells run in a process pool. Each finished cell writes its three tables to
OUT/cells/<cell id>/ (atomically) and appends its row to OUT/cache_run.csv,
so an interrupted sweep loses nothing but the cells in flight (SIGINT,
SIGTERM and SIGHUP are passed to the workers, which remove their cell's
temporary and exit; those of a sweep killed by SIGKILL get SIGTERM from the
kernel, and the next sweep into OUT removes what they left); a rerun
skips the cells whose folder holds a cache_run.parquet. When the sweep ends
(or is interrupted), OUT/cache_run.parquet and OUT/cache_run.csv are
rebuilt from all finished cells. All are the result schema's cache_run
table (traces/schema.yaml), the CSV too (`tierlab trace inspect OUT`). A
cell id is a digest of the cell's configuration (without `out`), so the
same cell always has the same id.
"""
from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from tierlab.core import runspec, signals, values
from tierlab.core.errors import TierlabError

from tierlab.model import config as cfgmod

SWEEP_KEYS = ("workers",)


def expand(doc: dict, where: str = "grid") -> list[dict]:
    """The cells of a grid document (each a run configuration mapping)."""
    if not isinstance(doc, dict):
        raise TierlabError(f"{where}: a grid is a YAML mapping of keys to values or lists")
    unknown = [k for k in doc if k not in runspec.keys() and k not in SWEEP_KEYS]
    if unknown:
        raise TierlabError(f"{where}: unknown key '{unknown[0]}'; known: the run spec's "
                           f"(`tierlab list keys`) and {', '.join(SWEEP_KEYS)}")
    axes: list[tuple] = []  # (path, values)
    for k, v in doc.items():
        if k in SWEEP_KEYS or k == "out":
            continue
        if isinstance(v, list):
            if not v:
                raise TierlabError(f"{where}: key '{k}' has an empty list")
            axes.append(((k,), v))
        elif k == "workload" and isinstance(v, dict):
            for wk, wv in v.items():
                if isinstance(wv, list):
                    if not wv:
                        raise TierlabError(f"{where}: key 'workload.{wk}' has an empty list")
                    axes.append((("workload", wk), wv))
    cells = []
    for combo in itertools.product(*[vals for _, vals in axes]):
        cell = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()
                if k not in SWEEP_KEYS and k != "out"}
        for (path, _), val in zip(axes, combo):
            if len(path) == 1:
                cell[path[0]] = val
            else:
                cell[path[0]][path[1]] = val
        cells.append(cell)
    return cells


def cell_id(cell: dict) -> str:
    text = json.dumps({k: v for k, v in cell.items() if k != "out"}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def load(path: str | os.PathLike) -> tuple[list, Path, int]:
    """(validated cells as (id, RunConfig), out folder, workers) of a grid file."""
    return prepare(values.read_yaml(path) or {}, str(path))


def prepare(doc: dict, where: str = "grid", out=None, workers=None):
    cells = expand(doc, where)
    checked = []
    for i, cell in enumerate(cells):
        try:
            checked.append((cell_id(cell), cfgmod.validate(cell, where)))
        except TierlabError as e:
            raise TierlabError(f"{where}: cell {i + 1} of {len(cells)}: {e}") from None
    out = Path(out if out is not None else doc.get("out", "model-sweep"))
    workers = workers if workers is not None else doc.get("workers", 2)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TierlabError(f"{where}: workers: a whole number >= 1, got {workers!r}")
    return checked, out, workers


# --- running ------------------------------------------------------------------------------

CELL_TMP = r"\.(?P<cid>[0-9a-f]+)\.tmp-(?P<pid>\d+)"  # OUT/cells/.<cell id>.tmp-<pid>


def _run_cell(cid: str, cfg, out: str, costs) -> dict:
    """In a worker process: run one cell (a RunConfig) and write its folder
    (under a temporary name that a signal removes: signals.worker_init)."""
    import shutil

    res = cfgmod.run(cfg, costs=costs)
    row = dict(res.run)
    row["params"] = json.dumps({**json.loads(row["params"]), "cell_id": cid}, sort_keys=True)
    res.run = row
    final = Path(out) / "cells" / cid
    with signals.temporary(Path(out) / "cells" / f".{cid}.tmp-{os.getpid()}") as tmp:
        try:
            cfgmod.write(res, tmp)
            if final.exists():  # a concurrent rerun finished it too
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return row


def _stop_pool(pool, sig: int) -> None:
    """Pass the signal that stops the sweep to the pool's workers (each removes its
    cell temporary and exits) and wait for them; the pool is shut down."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    signals.stop(procs, sig, timeout=10)
    # after the workers: the pool's own thread then fails the futures in flight
    pool.shutdown(wait=True, cancel_futures=True)


def done_ids(out: Path) -> set:
    d = out / "cells"
    if not d.is_dir():
        return set()
    # not the temporaries (.<cell id>.tmp-<pid>) of cells being written
    return {p.name for p in d.iterdir()
            if not p.name.startswith(".") and (p / "cache_run.parquet").exists()}


def collect(out: Path):
    """All finished cells' cache_run rows as one DataFrame (cells in id order)."""
    import pandas as pd

    from tierlab.traces.schema import read_table

    frames = []
    for cid in sorted(done_ids(out)):
        _, df = read_table(out / "cells" / cid / "cache_run.parquet")
        frames.append(df)
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True)


def write_merged(out: Path):
    """OUT/cache_run.parquet and .csv (the same table) from the finished
    cells; the DataFrame."""
    from tierlab.traces.schema import write_table

    df = collect(out)
    if df is None:
        return None
    write_table("cache_run", df, out / "cache_run.parquet")
    write_table("cache_run", df, out / "cache_run.csv")
    return df


def _append_csv(out: Path, row: dict) -> None:
    """Append a finished cell's row to OUT/cache_run.csv, spelled and ordered
    as write_table writes the table (a file in another column order is
    rebuilt from the cells instead, this one's included)."""
    from tierlab.traces.schema import columns, csv_row

    path = out / "cache_run.csv"
    new = not path.exists()
    if not new:
        with open(path, newline="") as f:
            if next(csv.reader(f), []) != columns("cache_run"):
                write_merged(out)
                return
    with open(path, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if new:
            w.writerow(columns("cache_run"))
        w.writerow(csv_row("cache_run", row))


def mp_fork() -> bool:
    import multiprocessing as mp

    return mp.get_start_method(allow_none=False) == "fork"


def run(cells: list, out: Path, workers: int = 2, progress: bool = True, costs=None):
    """Run the cells not yet finished in `out`; returns the merged DataFrame.
    costs: a cost object for every cell (else each cell's `costs` key; a
    `default` table is measured once here, before the pool starts)."""
    from tqdm import tqdm

    out = Path(out)
    try:
        (out / "cells").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TierlabError(f"out: cannot create {out} ({e.strerror})") from None
    # cell temporaries of sweeps killed by SIGKILL (their workers too, then)
    signals.report(signals.remove_stale(out / "cells", CELL_TMP), "a killed sweep")
    finished = done_ids(out)
    todo = [(cid, c) for cid, c in cells if cid not in finished]
    resolved = {}
    for _, c in todo:  # measure/load each cost table once, in this process
        key = json.dumps(c["costs"], sort_keys=True, default=str)
        if key not in resolved:
            resolved[key] = costs if costs is not None else cfgmod.load_costs(c["costs"])
    # cells sharing an index next to each other; each index is built here
    # once, before the pool forks, so the workers inherit it
    todo.sort(key=lambda x: json.dumps(x[1]["index"], sort_keys=True, default=str))
    if workers > 1 and len(todo) > 1 and mp_fork():
        for _, c in todo:
            cfgmod.build_index(c["index"], c["workload"], c["seed"])
    bar = tqdm(total=len(cells), initial=len(cells) - len(todo), unit="cell", desc="sweep",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    try:
        if workers == 1 or len(todo) <= 1:
            for cid, c in todo:
                key = json.dumps(c["costs"], sort_keys=True, default=str)
                _append_csv(out, _run_cell(cid, c, str(out), resolved[key]))
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=workers, initializer=signals.worker_init,
                                     initargs=(os.getpid(),)) as pool:
                pending = set()
                it = iter(todo)
                try:
                    for cid, c in itertools.islice(it, 2 * workers):
                        key = json.dumps(c["costs"], sort_keys=True, default=str)
                        pending.add(pool.submit(_run_cell, cid, c, str(out), resolved[key]))
                    while pending:
                        fin, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for f in fin:
                            _append_csv(out, f.result())
                            bar.update()
                        for cid, c in itertools.islice(it, len(fin)):
                            key = json.dumps(c["costs"], sort_keys=True, default=str)
                            pending.add(pool.submit(_run_cell, cid, c, str(out),
                                                    resolved[key]))
                except KeyboardInterrupt as e:  # SIGINT, SIGTERM, SIGHUP: to the workers too
                    with signals.held():
                        _stop_pool(pool, signals.signum(e))
                    raise
                except BaseException:
                    for f in pending:
                        f.cancel()
                    raise
    finally:
        with signals.held():
            bar.close()
            df = write_merged(out)
    return df
