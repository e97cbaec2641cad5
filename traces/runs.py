"""A measured query run in the tables of the result schema (schema.yaml):
run (one row), query (one row per query), term (one row per term
occurrence), all with the summary's run_id. `tierlab query run` writes its
query table to --out (Parquet or CSV) and, with --trace DIR, the three as
DIR/run.parquet, query.parquet, term.parquet: a trace directory, read by
`read_trace` (the model's replay) and `tierlab trace inspect`."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError
from tierlab.traces import schema

TABLES = ("run", "query", "term")


def new_run_id() -> str:
    return uuid.uuid4().hex


def query_run_tables(*, summary: dict, queries: list[list[str]], stats: np.ndarray,
                     query_class: str = "", tables=TABLES) -> dict:
    """{table name: columns} of one measured run, for the names in `tables`
    (of run, query, term). `stats` is the per-query record array of the
    reported pass (tierlab.engine.index.Index.run_batch), `summary` the run
    summary (its run_id, else a new one)."""
    run_id = summary.get("run_id") or new_run_id()
    n = len(queries)
    man = summary.get("index_manifest", {})
    run = {
        "run_id": [run_id], "source": ["measured"], "started_at": [summary["created_utc"]],
        "tierlab_version": [summary.get("tierlab_version", "")],
        "index_path": [summary["index"]], "codec": [man.get("codec", "")],
        "block_size": [int(man.get("block_size", 0))], "workload": [summary["workload"]],
        "placement": [summary.get("placement_request") or "storage"],
        "placement_honoured": [json.dumps(summary.get("placement", {}))],
        "cache_config": ["none"], "passes": [summary["passes"]],
        "page_cache_drop": [summary.get("cache_drop", {}).get("method", "none")],
        **{k: [summary[k]] for k in ("queries", "wall_ns", "qps", "latency_mean_ns",
                                     "latency_p50_ns", "latency_p99_ns", "latency_p999_ns")},
        "machine": [json.dumps(summary.get("machine", {}))],
    }
    br = stats["bytes_read"].astype(np.int64) if n else np.zeros((0, 4), np.int64)
    col = (lambda name: stats[name].astype(np.int64)) if n else (lambda name: np.zeros(0, np.int64))
    query = {
        "run_id": [run_id] * n, "source": ["measured"] * n,
        "query_id": np.arange(n, dtype=np.int64),
        "query_type": ["single" if len(q) == 1 else "and" for q in queries],
        "query_class": [query_class] * n, "terms": [list(q) for q in queries],
        **{c: col(c) for c in ("latency_ns", "postings_scored", "blocks_total", "blocks_decoded",
                               "freq_blocks_decoded")},
        "dict_bytes_read": br[:, 0], "skip_bytes_read": br[:, 1],
        "did_bytes_read": br[:, 2], "freq_bytes_read": br[:, 3],
        "results": col("results"), "unknown_terms": col("unknown_terms"),
    }
    out = {"run": run, "query": query}
    if "term" not in tables:
        return {k: out[k] for k in tables}
    qid = [i for i, q in enumerate(queries) for _ in q]
    pos = [j for q in queries for j in range(len(q))]
    per_term = (lambda name: [int(stats[name][i][j]) for i, j in zip(qid, pos)])
    out["term"] = {
        "run_id": [run_id] * len(qid), "source": ["measured"] * len(qid),
        "query_id": qid, "term_pos": pos, "term": [queries[i][j] for i, j in zip(qid, pos)],
        "postings": per_term("term_postings"), "blocks_total": per_term("term_blocks_total"),
        "blocks_decoded": per_term("term_blocks_decoded"),
    }
    return {k: out[k] for k in tables}


def write_query_run(trace_dir: str | os.PathLike, *, summary: dict, queries: list[list[str]],
                    stats: np.ndarray, query_class: str = "") -> Path:
    """Write one measured run as a trace directory (query_run_tables)."""
    d = Path(trace_dir)
    d.mkdir(parents=True, exist_ok=True)
    tables = query_run_tables(summary=summary, queries=queries, stats=stats,
                              query_class=query_class)
    for name in TABLES:
        schema.write_table(name, tables[name], d / f"{name}.parquet")
    return d


def read_trace(trace_dir: str | os.PathLike) -> dict:
    """{table name: DataFrame} of a trace directory, each checked against the schema."""
    d = Path(trace_dir)
    if not d.is_dir():
        raise TierlabError(f"{d}: not a trace directory")
    found = {}
    for name in TABLES:
        p = d / f"{name}.parquet"
        if p.exists():
            table, df = schema.read_table(p)
            if table != name:
                raise TierlabError(f"{p}: holds table '{table}', expected '{name}'")
            found[name] = df
    if not found:
        raise TierlabError(f"{d}: no trace tables ({', '.join(t + '.parquet' for t in TABLES)})")
    return found
