"""The inputs every row of a validation grid shares: the index (built from
a generated corpus, or the user's), the workload files, the cost table and
the CPU traces that calibrate the model."""
from __future__ import annotations

import json
import shutil
from pathlib import Path


from tierlab.core.errors import TierlabError
from tierlab.experiments.validate.grid import Grid, workload_name


def prepare_index(grid: Grid, log=print) -> Path:
    """The index folder: the given one, or generated once into OUT/index."""
    from tierlab.engine import corpus as corpus_mod
    from tierlab.engine import index as index_mod

    if "path" in grid.index:
        return Path(grid.index["path"])
    g = grid.index["generate"]
    idx = grid.out / "index"
    spec_file = grid.out / "index.json"
    if (idx / "manifest.json").exists():
        try:
            old = json.loads(spec_file.read_text())
        except (OSError, ValueError):
            old = None
        if old != g:
            raise TierlabError(f"{idx} was generated with {old}, the grid asks for {g}: give "
                               f"another out folder")
        return idx
    grid.out.mkdir(parents=True, exist_ok=True)
    cdir = grid.out / "corpus"
    cdir.mkdir(exist_ok=True)
    corpus = cdir / "corpus.txt"
    if not corpus.exists():
        log(f"generating a {g['size'] / 1e6:g} MB corpus (seed {g['seed']}) ...")
        corpus_mod.generate(corpus, corpus_mod.GenerateParams(size_bytes=g["size"],
                                                              seed=g["seed"]), progress=False)
    log(f"building the {g['codec']} index ...")
    if idx.exists():
        shutil.rmtree(idx)
    index_mod.build(corpus, idx, codec=g["codec"])
    spec_file.write_text(json.dumps(g) + "\n")
    return idx


def term_source(grid: Grid, index: Path, corpus: Path | None = None,
                folder: Path | None = None) -> tuple[dict, str]:
    """workload.generate's source: the generated corpus (OUT/corpus/corpus.txt,
    or `corpus`), or a term table written from the index's dictionary
    (postings; occurrences = postings) into OUT/workloads/ (or `folder`)."""
    if "generate" in grid.index:
        return {"corpus": corpus or grid.out / "corpus" / "corpus.txt"}, "corpus"
    from tierlab.engine.index import Index

    table = Path(folder or grid.out / "workloads") / "index-terms.tsv"
    with Index(index) as ix:
        docs = int(ix.info["docs"])
        if not table.exists():
            table.parent.mkdir(parents=True, exist_ok=True)
            t = ix.extents()[["term", "postings"]].copy()
            t["occurrences"] = t["postings"]
            t.to_csv(table, sep="\t", index=False)
    return {"terms": table, "documents": docs}, "index dictionary"


def prepare_workloads(grid: Grid, index: Path) -> dict:
    """One query file per workload of the grid (`workload_file`), read by the
    runtime and the model alike: {name: path}."""
    src, _ = term_source(grid, index)
    return {workload_name(w): workload_file(grid.out / "workloads", w, src)
            for w in grid.workloads()}


def workload_file(folder: Path, w: dict, src: dict) -> Path:
    """FOLDER/<workload_name>.queries of the workload w (type, class,
    queries, rp, seed) from src (`corpus=` a generated corpus, or `terms=`
    and `documents=`: tierlab.engine.workload.generate), unless it is there."""
    from tierlab.engine import workload as wl

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{workload_name(w)}.queries"
    if not path.exists() or not wl.stats_path(path).exists():
        wl.generate(path, cls=w["class"], qtype=w["type"], queries=w["queries"], rp=w["rp"],
                    seed=w["seed"], **src)
    return path


def cpu_trace(index: Path, workload: Path, k: int, out: Path) -> None:
    """A `tierlab query run` of the workload file with every structure in
    DRAM (2 passes, the warm one recorded) as a trace in the folder `out`."""
    from tierlab.engine import query

    out.mkdir(parents=True, exist_ok=True)
    query.run(index, workload, out / "query.parquet", k=k, placement="dram", passes=2,
              trace=out)


def _median_latency(table: Path, runs: list) -> None:
    """Rewrite the trace table's latency_ns as each query's median over the
    runs (same workload, same query order; the mean of two)."""
    import numpy as np

    from tierlab.traces.schema import read_table, write_table

    name, q = read_table(table)
    q["latency_ns"] = np.median(np.vstack(runs), axis=0).round().astype(q["latency_ns"].dtype)
    write_table(name, q, table)


def prepare_costs(grid: Grid, index: Path, log=print):
    """The cost table: the grid's file, or `tierlab query costs` on the index
    (measured once, OUT/costs.json)."""
    from tierlab.model import costs as costs_mod

    if grid.costs != "measure":
        return costs_mod.Costs.load(grid.costs), Path(grid.costs)
    path = grid.out / "costs.json"
    if path.exists():
        table = costs_mod.Costs.load(path)
        if table.missing():  # kept: the rows finished with it were calibrated by it
            log(f"note: {path}: {table.missing()}; the model charges nothing for what it lacks "
                f"(delete it to measure the table again)")
        return table, path
    log("calibrating: tierlab query costs on the index (CPU cost per query, block, posting) ...")
    table = costs_mod.measure(index)
    table.save(path)
    return table, path
