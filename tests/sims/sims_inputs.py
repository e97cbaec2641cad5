"""Shared inputs of the simulator back-end tests (tests/sims): a small memory-side stream
with every kind of request, gaps and regions, and the golden folder."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from tierlab.experiments.sims import stream as st

DATA = Path(__file__).parent / "data"
GOLDEN = Path(__file__).parent / "golden"


def mixed_stream() -> np.ndarray:
    """40 requests: 16 sequential reads (region did), 16 random reads (region
    dictionary) with gaps, 4 writebacks (region decode_buffer), 4 prefetches."""
    seq = st.synthetic("sequential", 16, base=1 << 20)
    seq["region"] = 3
    rnd = st.synthetic("random", 16, span_bytes=1 << 26, seed=7, gap=5)
    rnd["region"] = 1
    wb = st.synthetic("sequential", 4, base=1 << 24)
    wb["kind"], wb["region"] = st.WRITEBACK, 6
    pf = st.synthetic("sequential", 4, base=(1 << 20) + 16 * st.LINE)
    pf["kind"], pf["region"] = st.PREFETCH, 3
    recs = np.concatenate([seq[:8], wb[:2], rnd[:8], pf, seq[8:], wb[2:], rnd[8:]])
    recs["query"] = np.arange(len(recs)) // 10
    return recs


def write_mixed(folder: Path) -> Path:
    p = folder / "golden.memreq"
    st.write(p, mixed_stream())
    return p
