"""The result schema (traces/schema.yaml) as Arrow schemas, and checked I/O.

Every writer goes through `write_table`, every reader through `read_table`:
they refuse a table whose columns, types or version do not match the
schema, naming what differs, so a silently wrong number never reaches a
figure. A table is a Parquet file, carrying `tierlab.schema_version` and
`tierlab.table` in its metadata, or a CSV file (by the suffix `.csv`), whose
header line names its table (schema.yaml says how cells are spelled). A
Parquet file of an older schema version is read when its table's columns
did not change since; otherwise the error names both versions.
"""
from __future__ import annotations

import math
import os
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from tierlab.core.errors import TierlabError

SCHEMA_FILE = Path(__file__).with_name("schema.yaml")

_ARROW_TYPES = {
    "string": pa.string(),
    "bool": pa.bool_(),
    "int64": pa.int64(),
    "uint64": pa.uint64(),
    "float64": pa.float64(),
    "list<string>": pa.list_(pa.string()),
}


@lru_cache(maxsize=None)
def spec() -> dict:
    """The parsed schema.yaml."""
    return yaml.safe_load(SCHEMA_FILE.read_text())


def version() -> int:
    return int(spec()["schema_version"])


def sources() -> list[str]:
    return list(spec()["sources"])


def tables() -> list[str]:
    return list(spec()["tables"])


# cache_run columns that say which run a row is (its parameters), and the
# metrics a comparison of two runs of the same parameters scores (the model
# against the runtime, the runtime against itself).
RUN_PARAMS = ("config", "policy", "device", "query_type", "query_class", "rp", "cores",
              "cache_bytes", "segment_bytes", "lookahead", "dram_budget_bytes")
RUN_METRICS = ("qps", "latency_p99_ns", "page_cache_miss_rate", "segment_cache_miss_rate",
               "storage_bytes_read", "worker_stall_ns", "query_wait_ns", "latency_mean_ns")


def columns(table: str) -> list[str]:
    """The column names of `table`, in schema order."""
    if table not in spec()["tables"]:
        raise TierlabError(f"unknown result table '{table}'; known: {', '.join(tables())}")
    return [c["name"] for c in spec()["tables"][table]["columns"]]


def key(table: str) -> list[str]:
    """The columns that identify a row of `table` (schema.yaml `key`)."""
    columns(table)  # a clear error for an unknown table
    return list(spec()["tables"][table]["key"])


def arrow_schema(table: str) -> pa.Schema:
    if table not in spec()["tables"]:
        raise TierlabError(f"unknown result table '{table}'; known: {', '.join(tables())}")
    cols = spec()["tables"][table]["columns"]
    meta = {b"tierlab.schema_version": str(version()).encode(), b"tierlab.table": table.encode()}
    return pa.schema([pa.field(c["name"], _ARROW_TYPES[c["type"]]) for c in cols], metadata=meta)


def to_arrow(table: str, data) -> pa.Table:
    """A pandas DataFrame or dict of columns as an Arrow table of `table`'s schema.
    Missing or extra columns, or a `source` outside `sources`, are errors."""
    schema = arrow_schema(table)
    cols = list(data.columns) if hasattr(data, "columns") else list(data)
    missing = [n for n in schema.names if n not in cols]
    extra = [n for n in cols if n not in schema.names]
    if missing or extra:
        raise TierlabError(
            f"table '{table}' does not match schema v{version()}: "
            f"missing {missing or 'none'}, unexpected {extra or 'none'}"
        )
    arrays = [pa.array(list(data[n]), type=schema.field(n).type) for n in schema.names]
    t = pa.Table.from_arrays(arrays, schema=schema)
    bad = set(t.column("source").to_pylist()) - set(sources()) if "source" in schema.names \
        else set()
    if bad:
        raise TierlabError(f"table '{table}': unknown source {sorted(bad)}; known: {sources()}")
    return t


def write_table(table: str, data, path: str | os.PathLike) -> Path:
    """Write one result table, Parquet or (suffix .csv) CSV, atomically: a
    temporary file renamed into place."""
    from tierlab.core.files import atomic_outputs

    path = Path(path)
    t = to_arrow(table, data)
    with atomic_outputs(path) as (tmp,):
        if path.suffix == ".csv":
            _csv_frame(table, t).to_csv(tmp, index=False)
        else:
            pq.write_table(t, tmp)
    return path


def csv_row(table: str, row: dict) -> list[str]:
    """One row (a dict of the table's columns) as CSV cells in column order,
    spelled as write_table spells them: for appending to a CSV table."""
    return _csv_frame(table, to_arrow(table, {k: [v] for k, v in row.items()})).iloc[0].tolist()


def _csv_frame(table: str, t: pa.Table):
    """The Arrow table as a DataFrame of CSV cells (str): list<string> as
    words joined by single spaces, a missing or NaN float as an empty cell."""
    import pandas as pd

    out = {}
    for field in arrow_schema(table):
        col = t.column(field.name).to_pylist()
        if pa.types.is_list(field.type):
            for v in col:
                if any(not w or any(c.isspace() for c in w) for w in (v or [])):
                    raise TierlabError(f"table '{table}': column {field.name} holds {v!r}; a "
                                       f"CSV cell of list<string> needs words without spaces")
            out[field.name] = [" ".join(v or []) for v in col]
        elif pa.types.is_floating(field.type):
            out[field.name] = ["" if v is None or math.isnan(v) else repr(float(v)) for v in col]
        else:
            out[field.name] = ["" if v is None else str(v) for v in col]
    return pd.DataFrame(out, columns=arrow_schema(table).names, dtype=object)


def parquet_table(path: str | os.PathLike) -> tuple[str, int]:
    """(table name, schema version) a Parquet file's metadata claims, without
    reading its rows; TierlabError if it is not a tierlab result table."""
    path = Path(path)
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as e:
        raise TierlabError(f"{path}: not a readable Parquet file ({e})") from None
    found = meta.get(b"tierlab.schema_version")
    if found is None:
        raise TierlabError(f"{path}: not a tierlab result table (no tierlab.schema_version)")
    return meta.get(b"tierlab.table", b"").decode(), int(found)


def csv_table(path: str | os.PathLike) -> str:
    """The table whose columns a CSV file's header line names (in any order);
    TierlabError naming the nearest table and what differs if none."""
    import csv

    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise TierlabError(f"{path}: not a readable CSV file ({e})") from None
    for name in tables():
        if sorted(header) == sorted(columns(name)):
            return name
    if not header:
        raise TierlabError(f"{path}: not a tierlab result table (empty file)")
    near = max(tables(), key=lambda n: len(set(header) & set(columns(n))))
    missing = [c for c in columns(near) if c not in header]
    extra = [c for c in header if c not in columns(near)]
    raise TierlabError(
        f"{path}: not a tierlab result table: its header is no table of schema v{version()} "
        f"(nearest '{near}': missing {_few(missing)}, unexpected {_few(extra)})")


def _few(names: list, n: int = 4) -> str:
    if not names:
        return "none"
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def read_table(path: str | os.PathLike):
    """Read a result table written by write_table (Parquet or CSV); returns
    (table_name, DataFrame) with the columns and types of the schema."""
    path = Path(path)
    if path.suffix == ".csv":
        return _read_csv(path)
    name, found = parquet_table(path)
    if found > version():
        raise TierlabError(
            f"{path}: schema version {found}, this tierlab knows version {version()}"
        )
    if name not in tables():
        raise TierlabError(f"{path}: unknown table '{name}'; known: {', '.join(tables())}")
    have = pq.read_schema(path)
    want = arrow_schema(name)
    if have.names != want.names or have.types != want.types:
        missing = [n for n in want.names if n not in have.names]
        extra = [n for n in have.names if n not in want.names]
        retyped = [n for n in want.names if n in have.names
                   and have.field(n).type != want.field(n).type]
        what = (f"missing {_few(missing)}, unexpected {_few(extra)}"
                + (f", other types {_few(retyped)}" if retyped else "")
                if missing or extra or retyped else "columns in another order")
        if found < version():
            raise TierlabError(
                f"{path}: table '{name}' of schema version {found} differs from version "
                f"{version()}, which this tierlab reads ({what}); read it with the tierlab "
                f"that wrote it, or write it again")
        raise TierlabError(f"{path}: columns differ from schema v{version()} table '{name}' "
                           f"({what})")
    return name, pq.read_table(path).to_pandas()


def _read_csv(path: Path):
    import pandas as pd

    name = csv_table(path)
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise TierlabError(f"{path}: not a readable CSV file ({e})") from None
    data = {}
    for field in arrow_schema(name):
        cells = raw[field.name].tolist()
        try:
            data[field.name] = [_cell(field.type, v) for v in cells]
        except ValueError:
            bad = next(i for i, v in enumerate(cells) if not _parses(field.type, v))
            raise TierlabError(
                f"{path}: line {bad + 2}: column {field.name} ({field.type}) holds "
                f"{cells[bad]!r}") from None
    try:
        return name, to_arrow(name, data).to_pandas()
    except (pa.ArrowException, OverflowError) as e:
        raise TierlabError(f"{path}: table '{name}': {e}") from None
    except TierlabError as e:
        raise TierlabError(f"{path}: {e}") from None


def _cell(typ: pa.DataType, v: str):
    if pa.types.is_string(typ):
        return v
    if pa.types.is_list(typ):
        return v.split()
    if pa.types.is_floating(typ):
        return math.nan if v == "" else float(v)
    if pa.types.is_boolean(typ):
        if v not in _BOOLS:
            raise ValueError(v)
        return _BOOLS[v]
    return int(v)


_BOOLS = {"True": True, "true": True, "1": True, "False": False, "false": False, "0": False}


def _parses(typ, v) -> bool:
    try:
        _cell(typ, v)
        return True
    except ValueError:
        return False
