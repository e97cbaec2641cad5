"""Tiny inputs shared by the end-to-end tests (importable from any test:
tests/ is on sys.path through its conftest.py): a generated corpus and its
index, and a model run spec on a synthesised index. Each builds in seconds."""
from __future__ import annotations

from pathlib import Path

from tierlab.cli import main

# A model run on a synthesised index: runs in well under a second.
SMALL_MODEL_SPEC = {
    "config": "base-prefetch", "device": "hdd-7200", "cache_fraction": 0.2,
    "index": {"documents": 5000, "postings": 400_000, "vocabulary": 20_000,
              "index_bytes": 600_000},
    "costs": {"single": {"query_ns": 1000, "block_ns": 300, "posting_ns": 5},
              "and": {"query_ns": 1000, "block_ns": 300, "posting_ns": 40}},
    "readahead_bytes": 8192, "workload": {"type": "and", "class": "H", "queries": 40}}


def corpus_and_index(d: Path, docs: int, doc_bytes: int = 512) -> Path:
    """d/c.txt, a seeded corpus of `docs` documents of `doc_bytes`, and its
    pfor-delta256 index d/idx; returns d."""
    assert main(["corpus", "generate", "--docs", str(docs), "--doc-bytes", str(doc_bytes),
                 "--quiet", "--out", str(d / "c.txt")]) == 0
    assert main(["index", "build", str(d / "c.txt"), "--codec", "pfor-delta256", "--quiet",
                 "--out", str(d / "idx")]) == 0
    return d


def with_h_workload(d: Path, queries: int = 20) -> Path:
    """d/h.queries: `queries` SINGLE H queries over d/c.txt; returns d."""
    assert main(["workload", "generate", "--corpus", str(d / "c.txt"), "--class", "H",
                 "--queries", str(queries), "--quiet", "--out", str(d / "h.queries")]) == 0
    return d
