"""Finding the result tables (schema.yaml) a tierlab command wrote.

`find_tables(path)` -> [(table name, file)]: for one file, its table (a
TierlabError says why it is none); for a folder, every table below it,
recursively, sorted by path. A table is a Parquet file whose metadata names
a tierlab table (of any schema version: `schema.read_table` checks it) or a
CSV file whose header line is the columns of a table. A Parquet file that
cannot be read at all is listed too, with the name "" (a broken table,
maybe: reading it says why). Other files are skipped (JSON, TSV, figures;
Parquet and CSV files that are no tierlab table are handed to `skipped`
with the reason), and so are names starting with a dot (the temporary files
and folders of atomic writes). A folder without a table is a TierlabError.

`read_tables(found)` reads and checks them, one DataFrame per table kind
with the rows of all its files; a row repeated in several files (the same
`key`, e.g. a sweep's merged cache_run and its cells') is kept once.

Used by `tierlab trace inspect`; analysis and experiments may use the same
finder."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tierlab.core.errors import TierlabError
from tierlab.traces import schema

SUFFIXES = (".parquet", ".csv")


def table_of(path: str | os.PathLike) -> str:
    """The table a .parquet or .csv file claims to be (from its metadata or
    its header; nothing else is read); TierlabError if none."""
    path = Path(path)
    if path.suffix == ".csv":
        return schema.csv_table(path)
    if path.suffix == ".parquet":
        return schema.parquet_table(path)[0]
    raise TierlabError(f"{path}: not a result table (a .parquet or .csv file, or a folder "
                       f"holding them)")


def find_tables(path: str | os.PathLike, skipped: list | None = None) -> list[tuple[str, Path]]:
    """[(table name, file)] of a file or of every table below a folder (module
    docstring). skipped: a list to which (file, reason) is appended for each
    .parquet or .csv file below the folder that is no tierlab table."""
    path = Path(path)
    if not path.exists():
        raise TierlabError(f"{path}: no such file or folder")
    if not path.is_dir():
        return [(table_of(path), path)]
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            p = Path(root) / f
            if f.startswith(".") or p.suffix not in SUFFIXES:
                continue
            try:
                found.append((table_of(p), p))
            except TierlabError as e:
                if p.suffix == ".parquet" and not _readable_parquet(p):
                    found.append(("", p))
                elif skipped is not None:
                    skipped.append((p, str(e).removeprefix(f"{p}: ")))
    if not found:
        raise TierlabError(f"{path}: no result tables in this folder or below (.parquet or "
                           f".csv files of traces/schema.yaml)")
    return sorted(found, key=lambda x: x[1])


def _readable_parquet(path: Path) -> bool:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pq.read_schema(path)
        return True
    except (OSError, pa.ArrowException):
        return False


@dataclass
class Tables:
    """One table kind of `read_tables`: its rows over all files (a repeated
    key once), the files read and the rows they held together."""

    name: str
    df: object
    files: list = field(default_factory=list)
    rows_in_files: int = 0


def read_tables(found: list[tuple[str, Path]], errors: list | None = None) -> dict[str, Tables]:
    """{table name: Tables} of find_tables' result, in schema order. A file
    that fails its check raises its TierlabError, or with `errors` (a list)
    is left out and its message appended."""
    import pandas as pd

    frames: dict[str, list] = {}
    out: dict[str, Tables] = {}
    for _, p in found:
        try:
            name, df = schema.read_table(p)
        except TierlabError as e:
            if errors is None:
                raise
            errors.append(str(e))
            continue
        t = out.setdefault(name, Tables(name, None))
        t.files.append(p)
        t.rows_in_files += len(df)
        frames.setdefault(name, []).append(df)
    for name, t in out.items():
        dfs = frames[name]
        df = pd.concat(dfs, ignore_index=True) if len(dfs) > 1 else dfs[0]
        t.df = df[~df.duplicated(schema.key(name))].reset_index(drop=True) if len(dfs) > 1 \
            else df
    order = {n: i for i, n in enumerate(schema.tables())}
    return dict(sorted(out.items(), key=lambda kv: order[kv[0]]))
