"""The result schema (traces/schema.yaml) as Arrow schemas, and checked I/O.

Every writer goes through `write_table`, every reader through `read_table`:
they refuse a table whose columns or version do not match the schema, naming
what differs, so a silently wrong number never reaches a figure. Parquet files
carry `tierlab.schema_version` and `tierlab.table` in their metadata.
"""
from __future__ import annotations

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
    bad = set(t.column("source").to_pylist()) - set(sources())
    if bad:
        raise TierlabError(f"table '{table}': unknown source {sorted(bad)}; known: {sources()}")
    return t


def write_table(table: str, data, path: str | os.PathLike) -> Path:
    """Write one result table as Parquet (atomically: temp file + rename)."""
    path = Path(path)
    t = to_arrow(table, data)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(t, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def read_table(path: str | os.PathLike):
    """Read a result table written by write_table; returns (table_name, DataFrame)."""
    path = Path(path)
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as e:
        raise TierlabError(f"{path}: not a readable Parquet file ({e})") from None
    found = meta.get(b"tierlab.schema_version")
    name = meta.get(b"tierlab.table", b"").decode()
    if found is None:
        raise TierlabError(f"{path}: not a tierlab result table (no tierlab.schema_version)")
    if int(found) != version():
        raise TierlabError(
            f"{path}: schema version {int(found)}, this tierlab knows version {version()}"
        )
    if name not in tables():
        raise TierlabError(f"{path}: unknown table '{name}'; known: {', '.join(tables())}")
    df = pq.read_table(path).to_pandas()
    if list(df.columns) != arrow_schema(name).names:
        raise TierlabError(f"{path}: columns differ from schema v{version()} table '{name}'")
    return name, df
