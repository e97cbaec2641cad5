"""What a memory tier costs this engine's queries (issue 20): `tierlab model
tiers` and the chapter-6 comparison with the reference's Optane measurements.

For an index and query workloads the engine runs each workload on this
machine (index in DRAM, `reps` warm runs, each query's median latency: its
CPU time here), builds each query's memory stream (tierlab.engine.memstream)
and times it through the machine's caches on the placements asked
(tierlab.engine.memcosts): a structure (dict, skip, did, freq) on a memory
spec, the rest on the machine's DRAM. A query on a placement costs its CPU
time plus its memory stall there minus its stall on the machine's own DRAM
(the measured time already holds that). Each of `cores` cores runs queries
back to back (closed loop, no queueing) and shares each tier's bandwidth
with the others, so

    QPS = cores x queries / sum(cpu_ns + stall_ns(placement) - stall_ns(DRAM)) x 1e9.

The roofline rule (model/tier.py, the model's default `tier_rule`) is
computed beside it for DID and freq placements, where it applies: a stream
start per term at the tier's extra sequential latency plus what streaming
the query's block bytes at one thread's bandwidth adds over the decoding.

Chapter 6 (`chapter6`): the reference (Thai 2025, chapter 6, real Optane DC
PM) measured the QPS drop from DRAM to PM with the skip list and dictionary
in DRAM and the DID and freq blocks all in DRAM or all on PM, per codec, and
the backend-bound ratio PM/DRAM; REFERENCE holds those numbers. The
prediction here puts DID and freq on `optane-dcpmm-g1-x6` (six interleaved
DIMMs) shared by the platform's 24 cores of a socket. The backend-bound
analogue is (memory stall + the DRAM run's stall) PM / DRAM, counting only
memory stalls (the PMU's backend-bound share also counts core stalls that do
not change with the tier).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from tierlab.core.errors import TierlabError
from tierlab.engine import memcosts
from tierlab.model.tier import roofline_ns

DEFAULT_TIERS = ("ddr4-2666", "cxl-type3", "numa-remote-ddr4", "optane-dcpmm-g1-x6",
                 "rdma-remote")
DEFAULT_MACHINE = "apcache-2x-xeon-gold-6252n"
PM = "optane-dcpmm-g1-x6"
# Thai 2025, chapter 6: QPS drop DRAM -> PM (%), DID and freq on PM.
REFERENCE = {
    ("and", "H"): {"base": 21.0, "pfor-delta": 2.0, "pfor-delta256": 2.0, "vbyte-delta": 4.0,
                   "svbyte-delta": 2.2},
    ("and", "M"): {"base": 26.0, "pfor-delta": 5.0, "pfor-delta256": 10.0, "vbyte-delta": 4.0},
}
# backend-bound ratio PM / DRAM
REFERENCE_BACKEND = {("and", "H"): {"base": 1.76, "pfor-delta256": 1.11},
                     ("single", "H"): {"base": 2.28, "pfor-delta256": 1.37}}
TARGET_PP = 5.0
# The reference's class M in absolute postings (docs/workload.md: 6.25e-6 and
# 0.00625 of its 160 M documents), for `run_chapter6(m_class="reference")`.
M_REFERENCE = {"l": 1000.0, "h": 1_000_000.0}


def measured_cpu(index, workload, *, k: int = 1024, reps: int = 3, trace=None):
    """(stream, cpu_ns per query): the workload's memory stream (synthesised,
    or the records of `trace`, a `tierlab trace memory` file or folder) and
    each of its queries' median latency over `reps` warm runs on this machine
    (index in DRAM)."""
    from tierlab.engine import memstream
    from tierlab.engine.index import Index

    stream = memstream.recorded(index, workload, trace, k=k) if trace is not None else \
        memstream.workload_stream(index, workload, k=k)
    with Index(index, "dram") as ix:
        ix.run_batch(stream.queries, k=k)  # warm
        runs = [ix.run_batch(stream.queries, k=k)[0] for _ in range(max(1, reps))]
    lat = np.median(np.vstack([r["latency_ns"].astype(np.float64) for r in runs]), axis=0)
    return stream, lat


def record_trace(index, workload, folder, *, k: int = 1024) -> Path:
    """Trace the workload on the index (`tierlab trace memory`'s recorder, the
    tracing build made on first use) into folder/memtrace.bin."""
    from tierlab.engine import memtrace

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return memtrace.record(index, workload, folder / "memtrace.bin", k=k).path


def predict(stream, cpu_ns, placements: dict, *, machine=DEFAULT_MACHINE, cores: int = 1) -> dict:
    """{label: {qps, extra_ns_per_query, stall_ns_per_query}} with label 'base'
    the machine's DRAM (see the module docstring)."""
    res = memcosts.stalls(stream, cpu_ns, {"base": {}, **placements}, machine=machine,
                          cores=cores)
    base = res["base"].sum(axis=1)
    cpu = np.asarray(cpu_ns, dtype=np.float64)
    out = {}
    for label, st in res.items():
        extra = st.sum(axis=1) - base
        out[label] = {"qps": cores * 1e9 * len(cpu) / float((cpu + extra).sum()),
                      "extra_ns_per_query": float(extra.mean()),
                      "stall_ns_per_query": float(st.sum(axis=1).mean()),
                      "base_stall_ns_per_query": float(base.mean())}
    return out


def structure_grid(index, workloads, *, tiers=DEFAULT_TIERS, structures=tuple(memcosts.STRUCTURES),
                   machine=DEFAULT_MACHINE, cores: int = 24, k: int = 1024, reps: int = 3,
                   traces=None, progress=None) -> pd.DataFrame:
    """One row per (workload, structure, tier): the predicted QPS with that
    structure alone on the tier, the DRAM QPS, the drop, and the roofline
    rule's QPS where it applies."""
    from tierlab.core import specs

    m = specs.load(machine, kind="machine")
    for t in tiers:
        specs.load(t, kind="memory")
    for s in structures:
        if s not in memcosts.STRUCTURES:
            raise TierlabError(f"unknown structure '{s}' (known: {', '.join(memcosts.STRUCTURES)})")
    rows = []
    traces = list(traces) if traces else [None] * len(workloads)
    if len(traces) != len(workloads):
        raise TierlabError(f"{len(traces)} traces for {len(workloads)} workloads: give one "
                           "--trace per --workload, in the same order")
    for w, tr in zip(workloads, traces):
        stream, cpu = measured_cpu(index, w, k=k, reps=reps, trace=tr)
        places = {f"{t}|{s}": {memcosts.STRUCTURES[s]: t} for t in tiers for s in structures}
        pred = predict(stream, cpu, places, machine=m, cores=cores)
        q0 = pred["base"]["qps"]
        for t in tiers:
            for s in structures:
                p = pred[f"{t}|{s}"]
                roof = roofline_ns(stream, cpu, t, (s,))
                rq = (cores * 1e9 * len(cpu) / float((cpu + roof).sum())) if roof is not None \
                    else float("nan")
                rows.append({"workload": Path(w).name, "codec": stream.codec,
                             "stream": stream.source.split(":")[0], "structure": s,
                             "tier": t, "machine": m.name, "cores": cores,
                             "queries": len(cpu), "qps_dram": q0, "qps": p["qps"],
                             "drop_pct": 100.0 * (1.0 - p["qps"] / q0),
                             "extra_ns_per_query": p["extra_ns_per_query"],
                             "qps_roofline": rq,
                             "drop_pct_roofline": 100.0 * (1.0 - rq / q0) if roof is not None
                             else float("nan")})
        if progress:
            progress(w)
    return pd.DataFrame(rows)


def chapter6(indexes: dict, workloads: dict, *, machine=DEFAULT_MACHINE, cores: int = 24,
             k: int = 1024, reps: int = 3, tier: str = PM, stream: str = "synthesised",
             scratch=None, progress=None) -> pd.DataFrame:
    """indexes: {codec: index path}; workloads: {(qtype, class): query file}.
    One row per (codec, qtype, class): predicted drop DRAM -> PM with DID and
    freq on `tier`, the backend analogue, the reference's numbers, met/missed.
    stream: 'synthesised' or 'recorded' (each workload traced into `scratch`,
    the trace removed after use)."""
    import shutil
    import tempfile

    if stream not in ("synthesised", "recorded"):
        raise TierlabError(f"stream: synthesised or recorded, not {stream!r}")
    rows = []
    for codec, idx in indexes.items():
        for (qtype, cls), w in workloads.items():
            tdir = None
            if stream == "recorded":
                tdir = Path(tempfile.mkdtemp(prefix=f"tierlab-trace-{os.getpid()}-",
                                             dir=scratch))
                record_trace(idx, w, tdir, k=k)
            try:
                s_, cpu = measured_cpu(idx, w, k=k, reps=reps, trace=tdir)
            finally:
                if tdir is not None:
                    shutil.rmtree(tdir, ignore_errors=True)
            place = {"pm": {"did": tier, "freq": tier}}
            ref = REFERENCE.get((qtype, cls), {}).get(codec)
            ref_b = REFERENCE_BACKEND.get((qtype, cls), {}).get(codec)
            roof = roofline_ns(s_, cpu, tier, ("did", "freq"))
            row = {"codec": codec, "query_type": qtype, "class": cls, "queries": len(cpu),
                   "cpu_ns_per_query": float(cpu.mean()),
                   "blocks_per_query": float(s_.blocks.mean()),
                   "reference_drop_pct": ref, "reference_backend_ratio": ref_b}
            for tag, n in (("", cores), ("_one_core", 1)):
                pred = predict(s_, cpu, place, machine=machine, cores=n)
                q0, q1 = pred["base"]["qps"], pred["pm"]["qps"]
                drop = 100.0 * (1 - q1 / q0)
                base_st = pred["base"]["stall_ns_per_query"]
                row.update({f"qps_dram{tag}": q0, f"qps_pm{tag}": q1, f"drop_pct{tag}": drop,
                            f"met{tag}": None if ref is None else bool(abs(drop - ref) <= TARGET_PP),
                            f"backend_ratio{tag}": (base_st + pred["pm"]["extra_ns_per_query"])
                            / base_st if base_st else float("nan")})
            row["drop_pct_roofline"] = 100.0 * float(roof.sum() / (cpu + roof).sum())
            row["cores"] = cores
            row["stream"] = stream
            rows.append(row)
            if progress:
                progress(codec, qtype, cls)
    return pd.DataFrame(rows)


def ordering(df: pd.DataFrame, qtype: str, cls: str, col: str = "drop_pct") -> dict:
    """Codecs ordered by predicted (`col`) and by reference drop, largest first."""
    d = df[(df["query_type"] == qtype) & (df["class"] == cls) & df["reference_drop_pct"].notna()]
    return {"predicted": list(d.sort_values(col, ascending=False)["codec"]),
            "reference": list(d.sort_values("reference_drop_pct", ascending=False)["codec"])}


def write_csv(df: pd.DataFrame, path) -> Path:
    """Atomically: a temporary file next to path, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path


def chapter6_markdown(df: pd.DataFrame, **how) -> str:
    """The chapter-6 table: predicted (reference) drop per codec, met/missed,
    for `cores` cores sharing the DIMMs and for one core; ordering; backend
    analogue; each workload's size here."""
    rows = df.to_dict("records")
    codecs = list(dict.fromkeys(r["codec"] for r in rows))
    cores = rows[0]["cores"] if rows else 0
    lines = [f"Chapter 6: QPS drop DRAM -> PM (%), DID and freq on {PM}, skip list and dictionary "
             "in DRAM; " + ", ".join(f"{k} {v}" for k, v in how.items()), "",
             "| drop DRAM -> PM, predicted (reference) | " + " | ".join(codecs) + " |",
             "|---|" + "---|" * len(codecs)]
    groups = list(dict.fromkeys((r["query_type"], r["class"]) for r in rows))
    for tag, label in (("", f"{cores} cores share the DIMMs"), ("_one_core", "one core")):
        for qtype, cls in groups:
            cells = []
            for c in codecs:
                r = next((x for x in rows if x["codec"] == c and x["query_type"] == qtype
                          and x["class"] == cls), None)
                ref = None if r is None else r["reference_drop_pct"]
                if r is None:
                    cells.append("-")
                elif ref is None or ref != ref:
                    cells.append(f"{r['drop_pct' + tag]:.1f} (-)")
                else:
                    cells.append(f"{r['drop_pct' + tag]:.1f} ({ref:g}) "
                                 f"{'met' if r['met' + tag] else '**missed**'}")
            lines.append(f"| {qtype.upper()} {cls}, {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for tag, label in (("", f"{cores} cores"), ("_one_core", "one core")):
        for qtype, cls in (("and", "H"), ("and", "M")):
            o = ordering(df, qtype, cls, "drop_pct" + tag)
            if o["reference"]:
                lines.append(f"- ordering {qtype.upper()} {cls}, {label}: predicted "
                             f"{', '.join(o['predicted'])}; reference {', '.join(o['reference'])}")
    lines.append("- roofline rule (model/tier.py), one core: " + "; ".join(
        f"{r['query_type'].upper()} {r['class']} {r['codec']} {r['drop_pct_roofline']:.1f}"
        for r in rows))
    for tag, label in (("", f"{cores} cores"), ("_one_core", "one core")):
        lines.append(f"- backend-bound analogue PM/DRAM (memory stall only), {label} (reference): "
                     + "; ".join(f"{r['query_type'].upper()} {r['class']} {r['codec']} "
                                 f"{r['backend_ratio' + tag]:.2f}"
                                 + (f" ({r['reference_backend_ratio']:g})"
                                    if r["reference_backend_ratio"] == r["reference_backend_ratio"]
                                    and r["reference_backend_ratio"] is not None else "")
                                 for r in rows if r["codec"] in ("base", "pfor-delta256")))
    lines.append("- per query here (median of the warm runs): " + "; ".join(
        f"{r['query_type'].upper()} {r['class']} {r['codec']} {r['cpu_ns_per_query'] / 1e3:.2f} us, "
        f"{r['blocks_per_query']:.1f} blocks" for r in rows))
    return "\n".join(lines) + "\n"


def run_chapter6(codecs, *, size: int, queries: int, seed: int = 0, work: Path,
                 keep: bool = False, machine=DEFAULT_MACHINE, cores: int = 24,
                 reps: int = 3, stream: str = "synthesised",
                 m_class: str = "relative") -> pd.DataFrame:
    """Generate a corpus of `size` bytes, one index per codec and the AND H,
    AND M and SINGLE H workloads of `queries` queries in a scratch folder
    under `work` (removed unless keep), and run `chapter6` on them.
    m_class: M by the thresholds relative to the collection (docs/workload.md,
    the default) or 'reference': the reference's absolute posting counts
    (M_REFERENCE: 1,000 to 1 M postings, its 6.25e-6 and 0.00625 of 160 M
    documents), so that M lists are as long as the reference's, which a small
    corpus's relative M class cannot give."""
    import shutil
    import sys
    import tempfile

    from tierlab.engine import corpus as corpus_mod
    from tierlab.engine import workload as workload_mod
    from tierlab.engine.index import build as build_index

    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"tierlab-chapter6-{os.getpid()}-", dir=work))
    try:
        corpus = tmp / "c.txt"
        corpus_mod.generate(corpus, corpus_mod.GenerateParams(seed=seed, size_bytes=size),
                            progress=False)
        idx = {}
        for c in codecs:
            idx[c] = tmp / f"idx-{c}"
            build_index(corpus, idx[c], codec=c)
            print(f"built {c}", file=sys.stderr)
        wls = {}
        for qtype, cls in (("and", "H"), ("and", "M"), ("single", "H")):
            w = tmp / f"{qtype}-{cls}.queries"
            thr = M_REFERENCE if (cls == "M" and m_class == "reference") else {}
            workload_mod.generate(w, corpus=corpus, cls=cls, qtype=qtype, queries=queries,
                                  seed=seed, **thr)
            wls[(qtype, cls)] = w
        return chapter6(idx, wls, machine=machine, cores=cores, reps=reps, stream=stream,
                        scratch=tmp, progress=lambda *a: print("done", *a, file=sys.stderr))
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
