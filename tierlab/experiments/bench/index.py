"""The index benchmark (`tierlab bench index`): build throughput, index size
and query speed of every codec in the registry on one generated corpus, written
as one JSON document.

What is measured
----------------
One corpus is generated (`tierlab corpus generate`, seeded) and one workload
per (type, class), SINGLE/AND x H/M/L (`tierlab workload generate`, seeded,
RP 0.25). Then, for every codec of `native.codecs()` in registry order:
- the index is built (block size 256); build_mb_per_s = corpus bytes (10^6
  per MB) / (ingest + transform seconds, as the C build reports them);
- sizes: bytes of every index file and their total; did_ratio and
  freq_ratio = DID (freq) block bytes / (4 x postings), i.e. against `base`,
  which stores 4 bytes per posting (1.0 for base);
- every workload is run (`query.run`: passes 2, the warm last pass reported,
  page cache dropped with posix_fadvise(DONTNEED) before the first pass):
  qps, latency_mean_ns, latency_p50_ns, latency_p99_ns;
- a correctness check: the top-10 (DID, score) of the first 20 queries of
  every workload must equal those of the first codec (`base`). Any
  difference sets results_identical false and is listed in `errors`.

JSON layout
-----------
{benchmark: "index", machine{...}, config{size_bytes, seed, rp, queries{H,M,L},
block_size, passes, k, drop, check_queries, check_k, types, classes},
corpus{bytes, documents, tokens, vocabulary_terms, postings},
workloads[{type, class, queries, file}], results_identical, errors[{codec,
stage, error, ...}], codecs[{codec, freq_codec, error, build_mb_per_s,
ingest_seconds, transform_seconds, files{name: bytes}, index_bytes, postings,
did_block_bytes, freq_block_bytes, postings_bytes, did_ratio, freq_ratio,
results_identical, queries[{type, class, queries, qps, latency_mean_ns,
latency_p50_ns, latency_p99_ns, unknown_queries}]}]}.
"""
from __future__ import annotations

import math
import os
import platform
import shutil
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from tierlab import __version__
from tierlab.core import registry
from tierlab.core import native
from tierlab.core.errors import TierlabError
from tierlab.experiments.bench.codecs import _cpu_model

CLASSES = ("H", "M", "L")
DEFAULT_QUERIES = {"H": 1000, "M": 5000, "L": 20000}
DEFAULT_SIZE = 200_000_000
BLOCK_SIZE = 256
QUERY_KEYS = ("qps", "latency_mean_ns", "latency_p50_ns", "latency_p99_ns")


@dataclass(frozen=True)
class Inputs:
    """What every index benchmark (this one, bench/pisa.py) sets up the same
    way: the corpus (size_bytes, seed), one workload per SINGLE/AND x H/M/L
    (queries per class, rp; `make_inputs`), how many queries of each have
    their top-check_k checked, and the scratch folder (`make_work`)."""
    size_bytes: int = DEFAULT_SIZE
    queries: dict = field(default_factory=lambda: dict(DEFAULT_QUERIES))
    rp: float = 0.25
    seed: int = 0
    check_queries: int = 20
    check_k: int = 10
    work: Path | None = None  # parent of the scratch folder (default: the folder of out)
    keep: bool = False
    progress: bool = True


@dataclass(frozen=True)
class Config(Inputs):
    block_size: int = BLOCK_SIZE
    passes: int = 2
    k: int = 1024
    drop: str = "fadvise"


def _machine() -> dict:
    return {
        "cpu_model": _cpu_model(),
        "simd_features": native.cpu_features(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "tierlab_version": __version__,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def machine_loaded(load_start) -> dict:
    """_machine() with the load average at the start (os.getloadavg() then)
    and now: what a timing on a shared machine is reported with."""
    m = _machine()
    m["loadavg_start"] = [round(x, 2) for x in load_start]
    m["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return m


def load_line(machine: dict) -> str:
    """The closing line of a benchmark's table: the load it ran under."""
    return (f"load average {machine['loadavg_start'][0]} at the start, "
            f"{machine['loadavg_end'][0]} at the end ({os.cpu_count()} CPUs)")


@contextmanager
def pinned():
    """The block runs pinned to one CPU (tierlab.engine.query.pin: the last
    allowed); yields it (None where affinity is not supported) and restores
    the affinity after."""
    from tierlab.engine.query import pin

    old = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    try:
        yield pin(None)
    finally:
        if old is not None:
            os.sched_setaffinity(0, old)


@contextmanager
def scratch(cfg: Inputs, work: Path, name: str, bar):
    """The block's end, however it ends: the progress bar closed, the index
    and the scratch folder `work` of benchmark `name` removed, or kept with
    cfg.keep (remove_work). Yields a dict whose "work" is, after the block,
    where the folder is (its kept name)."""
    where = {"work": work}
    try:
        yield where
    finally:
        bar.close()
        if not cfg.keep:
            shutil.rmtree(work / "index", ignore_errors=True)
        where["work"] = remove_work(cfg, work, name)


def each_workload(workloads: list[dict], combos, measure_one, bar=None) -> tuple[list, list]:
    """(records, errors) of the workloads whose (type, class) is in combos:
    a record {type, class, queries} updated with measure_one(w, queries); a
    TierlabError it raises becomes the record's `error` and a row of errors,
    as does an `error` measure_one puts in its result."""
    from tierlab.engine.workload import read_queries

    records, errors = [], []
    for w in workloads:
        if (w["type"], w["class"]) not in combos:
            continue
        if bar is not None:
            bar.set_postfix_str(f"{w['type']} {w['class']}")
        queries = read_queries(w["path"])
        rec = {"type": w["type"], "class": w["class"], "queries": len(queries)}
        try:
            rec.update(measure_one(w, queries))
        except TierlabError as e:
            rec["error"] = str(e)
        if "error" in rec:
            errors.append({"type": w["type"], "class": w["class"], "error": rec["error"]})
        records.append(rec)
    return records, errors


def build_index(cpath: Path, ixpath: Path, codec: str, block_size: int, bar=None) -> dict:
    """Build one benchmark index; returns the `index` record of its JSON
    (bytes, files, blocks, postings). `bar` advances by one."""
    from tierlab.engine import index as index_mod

    if bar is not None:
        bar.set_postfix_str("build")
    m = index_mod.build(cpath, ixpath, codec=codec, block_size=block_size).manifest
    if bar is not None:
        bar.update()
    return {"bytes": sum(int(v) for v in m["files"].values()),
            "files": {k: int(v) for k, v in m["files"].items()},
            "blocks": int(m["blocks"]), "postings": int(m["postings"])}


def validate_inputs(cfg: Inputs) -> None:
    if cfg.size_bytes <= 0:
        raise TierlabError(f"--size must be positive, got {cfg.size_bytes}")
    for cls in CLASSES:
        n = cfg.queries.get(cls)
        if n is None or n < 1:
            raise TierlabError(f"queries for class {cls} must be at least 1, got {n}")
    if not 0 <= cfg.rp <= 1:
        raise TierlabError(f"--rp must be in [0, 1], got {cfg.rp}")
    if cfg.seed < 0:
        raise TierlabError(f"--seed must be a non-negative integer, got {cfg.seed}")
    if cfg.check_queries < 0:
        raise TierlabError(f"--check-queries must be >= 0, got {cfg.check_queries}")


def validate(cfg: Config) -> None:
    validate_inputs(cfg)
    if cfg.passes < 1:
        raise TierlabError(f"--passes must be at least 1, got {cfg.passes}")
    if cfg.k < 1:
        raise TierlabError(f"--k must be at least 1, got {cfg.k}")


def _top(ix, queries, k: int) -> list[list[tuple[int, float]]]:
    return [ix.query(list(q), k)[0] for q in queries]


def _same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return len(a) == len(b) and all(
        da == db and math.isclose(sa, sb, rel_tol=1e-12, abs_tol=1e-12)
        for (da, sa), (db, sb) in zip(a, b))


def make_work(cfg: Inputs, out: Path, name: str) -> Path:
    """A fresh scratch folder `tierlab-bench-<name>-<pid>-*` under cfg.work
    (default: the folder of out); those of killed runs there are removed
    (tierlab.core.files.scratch_dir)."""
    from tierlab.core.files import scratch_dir

    return scratch_dir(f"bench-{name}", Path(cfg.work) if cfg.work is not None else Path(out).parent)


def remove_work(cfg: Inputs, work: Path, name: str) -> Path:
    """Remove the scratch folder, or with cfg.keep rename it to
    `tierlab-bench-<name>-kept-*` (never taken for a leftover) and say where
    it is; returns where it is."""
    from tierlab.core.files import release

    kept = release(work, f"bench-{name}", cfg.keep)
    if kept is not None:
        print(f"kept the work folder {kept}", file=sys.stderr)
    return kept or work


def inputs_config(cfg: Inputs, work: Path) -> dict:
    """The `config` keys of the JSON that Inputs sets (work: when kept)."""
    return {"size_bytes": cfg.size_bytes, "seed": cfg.seed, "rp": cfg.rp,
            "queries": dict(cfg.queries), "check_queries": cfg.check_queries,
            "check_k": cfg.check_k, "work": str(work) if cfg.keep else None}


def corpus_record(cman: dict, postings: int | None) -> dict:
    """The `corpus` of the JSON: counts of the corpus manifest, the index's postings."""
    return {"bytes": cman["bytes"], "documents": cman["documents"], "tokens": cman["tokens"],
            "vocabulary_terms": cman.get("vocabulary_terms"), "postings": postings}


def make_inputs(work: Path, cfg: Inputs, bar=None) -> tuple[Path, dict, list[dict]]:
    """Generate the corpus (work/corpus.txt, seeded) and one workload per
    (type, class), SINGLE/AND x H/M/L (seed + its position), as every index
    benchmark does. Returns (corpus path, corpus manifest, workloads: dicts of
    type, class, queries, path and check, the first cfg.check_queries queries).
    `bar` (a tqdm bar or None) advances by one per file written."""
    from tierlab.engine import corpus as corpus_mod
    from tierlab.engine import workload as workload_mod

    def step(label):
        if bar is not None:
            bar.set_postfix_str(label)

    def done():
        if bar is not None:
            bar.update()

    step("generate corpus")
    cpath = work / "corpus.txt"
    cman = corpus_mod.generate(cpath, corpus_mod.GenerateParams(seed=cfg.seed,
                                                                size_bytes=cfg.size_bytes),
                               progress=False)
    done()
    workloads = []
    for i, (qtype, cls) in enumerate((t, c) for t in registry.query_types() for c in CLASSES):
        step(f"workload {qtype} {cls}")
        wpath = work / f"{qtype}-{cls}.queries"
        n = cfg.queries[cls]
        workload_mod.generate(wpath, corpus=cpath, cls=cls, qtype=qtype, queries=n,
                              rp=cfg.rp, seed=cfg.seed + i)
        workloads.append({"type": qtype, "class": cls, "queries": n, "path": wpath,
                          "check": workload_mod.read_queries(wpath)[:cfg.check_queries]})
        done()
    return cpath, cman, workloads


def run(cfg: Config, out: Path) -> dict:
    """Run the benchmark; returns the JSON document. Scratch files live in a
    fresh folder under cfg.work (default: out's folder), removed unless keep."""
    from tqdm import tqdm

    from tierlab.engine import index as index_mod
    from tierlab.engine import query as query_mod

    validate(cfg)
    codecs = [c.name for c in native.codecs()]
    if not codecs:
        raise TierlabError("the codec registry is empty")
    work = make_work(cfg, out, "index")

    combos = [(t, c) for t in registry.query_types() for c in CLASSES]
    bar = tqdm(total=1 + len(combos) + len(codecs) * (2 + len(combos)), desc="bench index",
               unit="step", file=sys.stderr, disable=not cfg.progress, leave=False)
    errors: list[dict] = []
    records: list[dict] = []
    try:
        cpath, cman, workloads = make_inputs(work, cfg, bar=bar)

        reference: dict | None = None  # (type, class) -> top-k lists of the first codec
        ref_codec = None
        postings = None
        for name in codecs:
            rec: dict = {"codec": name, "error": None, "results_identical": None, "queries": []}
            records.append(rec)
            ixpath = work / f"index-{name}"
            try:
                bar.set_postfix_str(f"{name}: build")
                br = index_mod.build(cpath, ixpath, codec=name, block_size=cfg.block_size)
                bar.update()
                m = br.manifest
                secs = float(m["ingest_seconds"]) + float(m["transform_seconds"])
                post = int(m["postings"])
                postings = post
                files = {f: int(m["files"][f]) for f in index_mod.FILES}
                rec.update(
                    freq_codec=m.get("freq_codec"),
                    build_seconds=secs,
                    ingest_seconds=float(m["ingest_seconds"]),
                    transform_seconds=float(m["transform_seconds"]),
                    build_mb_per_s=(cman["bytes"] / 1e6) / secs if secs > 0 else None,
                    files=files, index_bytes=sum(files.values()),
                    postings=post, blocks=int(m["blocks"]),
                    did_block_bytes=int(m["did_block_bytes"]),
                    freq_block_bytes=int(m["freq_block_bytes"]),
                    postings_bytes=int(m["did_block_bytes"]) + int(m["freq_block_bytes"]),
                    did_ratio=int(m["did_block_bytes"]) / (4 * post) if post else None,
                    freq_ratio=int(m["freq_block_bytes"]) / (4 * post) if post else None,
                )

                bar.set_postfix_str(f"{name}: check")
                with index_mod.Index(ixpath) as ix:
                    tops = {(w["type"], w["class"]): _top(ix, w["check"], cfg.check_k)
                            for w in workloads}
                bar.update()
                if reference is None:
                    reference, ref_codec = tops, name
                    rec["results_identical"] = True
                else:
                    bad = []
                    for w in workloads:
                        key = (w["type"], w["class"])
                        for qi, (a, b) in enumerate(zip(reference[key], tops[key])):
                            if not _same(a, b):
                                bad.append({
                                    "codec": name, "stage": "results", "type": key[0],
                                    "class": key[1], "query": qi,
                                    "terms": list(w["check"][qi]),
                                    "error": f"top-{cfg.check_k} differs from {ref_codec}",
                                    "expected_dids": [d for d, _ in a],
                                    "got_dids": [d for d, _ in b]})
                    rec["results_identical"] = not bad
                    errors.extend(bad)

                for w in workloads:
                    bar.set_postfix_str(f"{name}: {w['type']} {w['class']}")
                    s = query_mod.run(ixpath, w["path"],
                                      work / f"run-{name}-{w['type']}-{w['class']}.csv",
                                      k=cfg.k, passes=cfg.passes, drop=cfg.drop)
                    rec["queries"].append({
                        "type": w["type"], "class": w["class"], "queries": s["queries"],
                        **{key: s[key] for key in QUERY_KEYS},
                        "unknown_queries": s["unknown_queries"],
                        "cache_drop": s["cache_drop"].get("method"),
                    })
                    bar.update()
            except TierlabError as e:
                rec["error"] = str(e)
                errors.append({"codec": name, "stage": "build or query", "error": str(e)})
            finally:
                if not cfg.keep:
                    shutil.rmtree(ixpath, ignore_errors=True)
    finally:
        bar.close()
        work = remove_work(cfg, work, "index")

    identical = all(r["results_identical"] is True for r in records)
    return {
        "benchmark": "index",
        "machine": _machine(),
        "config": {
            **inputs_config(cfg, work), "block_size": cfg.block_size, "passes": cfg.passes,
            "reported_pass": "last (warm when passes >= 2)", "k": cfg.k, "drop": cfg.drop,
            "types": list(registry.query_types()), "classes": list(CLASSES),
        },
        "corpus": corpus_record(cman, postings),
        "workloads": [{"type": w["type"], "class": w["class"], "queries": w["queries"]}
                      for w in workloads],
        "reference_codec": ref_codec,
        "results_identical": identical,
        "errors": errors,
        "codecs": records,
    }


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(doc: dict) -> str:
    combos = [(t, c) for t in doc["config"]["types"] for c in doc["config"]["classes"]]
    head = (f"{'codec':<16}{'build MB/s':>11}{'total MiB':>10}{'did %':>8}{'freq %':>8}"
            + "".join(f"{(t[:3].upper() + ' ' + c + ' QPS'):>12}" for t, c in combos)
            + "  results")
    lines = [head]
    for r in doc["codecs"]:
        q = {(x["type"], x["class"]): x["qps"] for x in r.get("queries", [])}
        ok = ("ERROR" if r["error"] else
              {True: "same", False: "MISMATCH", None: "-"}[r["results_identical"]])
        pct = (lambda v: None if v is None else 100 * v)
        lines.append(
            f"{r['codec']:<16}{_fmt(r.get('build_mb_per_s'), '.1f'):>11}"
            f"{_fmt(r['index_bytes'] / 2**20 if r.get('index_bytes') is not None else None, '.1f'):>10}"
            f"{_fmt(pct(r.get('did_ratio')), '.1f'):>8}{_fmt(pct(r.get('freq_ratio')), '.1f'):>8}"
            + "".join(f"{_fmt(q.get(k), ',.0f'):>12}" for k in combos) + f"  {ok}")
    c = doc["corpus"]
    lines.append(f"\ncorpus {c['bytes'] / 1e6:.1f} MB, {c['documents']:,} documents, "
                 f"{c['postings'] or 0:,} postings; did %/freq % = block bytes / (4 x postings) "
                 f"(base = 100); QPS of the warm pass {doc['config']['passes']} "
                 f"(cache dropped by {doc['config']['drop']} before pass 1)")
    lines.append(f"results identical across codecs (top-{doc['config']['check_k']} of the first "
                 f"{doc['config']['check_queries']} queries per workload): "
                 + ("yes" if doc["results_identical"] else "NO"))
    if doc["errors"]:
        lines.append("\nERRORS:")
        for e in doc["errors"][:20]:
            where = f" {e['type']} {e['class']} query {e['query']}" if "query" in e else ""
            lines.append(f"  {e['codec']}{where}: {e['error']}")
        if len(doc["errors"]) > 20:
            lines.append(f"  ... and {len(doc['errors']) - 20} more (see the JSON)")
    return "\n".join(lines)
