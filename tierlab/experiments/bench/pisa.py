"""The PISA benchmark (`tierlab bench pisa`): tierlab's query speed against
PISA's on the identical index, in one run (issue 3, "Query speed against
PISA"). PISA comes from the `pyterrier-pisa` wheel (tierlab/experiments/bench/pisa_engine.py).

What is run
-----------
1. The inputs of `tierlab bench index` (bench/index.py `make_inputs`): one
   generated corpus (--size, seeded) and one workload per SINGLE/AND x H/M/L.
2. The tierlab index with --codec (default pfor-delta256, block size 256) and,
   for the time split (unless --no-split), the same corpus with `base`.
3. `tierlab index export --ciff` of the codec's index, converted to PISA's
   collection (pisa_engine.ciff_to_pisa: PISA docids = CIFF docids = tierlab
   DIDs), compressed by PISA with every --pisa-encoding (default block_simdbp,
   PISA's SIMD binary packing in 128-integer blocks, and block_optpfor, its
   PFor with exceptions; the first is the reference of the ratios), scorer
   BM25 with docs/engine.md's k1 = 1.2 and b = 0 (no length normalisation, as
   docs/engine.md's constant length term).
4. Agreement, on the first --check-queries queries of every workload at k =
   10: BM25 of the query's postings is recomputed in numpy from tierlab's own
   index, once with tierlab's formula and once with PISA's (float32, its IDF).
   Each engine's top-10 must match its own formula up to ties (tie-aware: the
   score at every rank matches, and every returned document really has that
   score). The overlap of the two engines' top-10 DIDs is reported raw and
   tie-aware (a PISA document also counts when tierlab scores it equal to its
   10th hit). The engines use different IDFs (pisa_engine's docstring), so an
   AND query can rank differently; SINGLE cannot, except for ties.
5. Timing, on one pinned CPU, for every workload and every k in --k (default
   1024 and 10): each engine runs the whole workload in batch calls (4096
   queries a call): tierlab's tierlab_query_batch (`Index.run_batch`), PISA's
   `retrieve` with --single-algorithm (default ranked_or, which scores every
   posting as tierlab's SINGLE does) or --and-algorithm (default ranked_and,
   PISA's exhaustive conjunction). A first pass over everything is discarded
   (warm caches; it also checks that both engines return the same number of
   hits for every query). Then --reps repetitions, each running every engine
   on every (workload, k) back to back, the engine order rotating. Reported:
   median ms/query per engine, the median of the per-repetition ratios
   tierlab / PISA, and the same after subtracting each engine's fixed
   per-query cost (measured the same way with queries of terms that are in
   neither lexicon: tierlab's lookup and setup; PISA's Python tuple and dict
   parsing, lexicon lookup, top-k setup).

On any index and query files
----------------------------
`--index IDX` replaces steps 1-2 with an existing index (its codec and block
size; no `base` split, there is no corpus to rebuild it from) and
`--workload F` (repeatable) replaces the generated workloads: each file's
SINGLE and AND queries are rows of their own, `class` = the file's name. Every
--single-algorithm / --and-algorithm given is timed (the first is the
reference `pisa:ENC`, a further one `pisa:ENC:ALG`, e.g. block_max_wand or
block_max_ranked_and, PISA's pruned engines). Every row gets `best_pisa`: the
fastest PISA engine of the row, tierlab's ratio to it and --target (default
0.9, issue 24: at most 0.9x PISA's best on every row).

What each timing includes
-------------------------
tierlab: the wall time of the C loop of tierlab_query_batch (per query:
dictionary lookup, skip-list walk, block decoding, BM25, top-k heap, final
sort, per-query stats); no Python. PISA: the wall time of one `retrieve`
call (perf_counter_ns), i.e. per query: taking the (index, {term: 1.0}) tuple
from Python, lexicon lookups, cursor setup, the algorithm (decoding,
scoring, heap), finalize, the wrapper's second sort of the hits, and a
cached one-character Python str per hit (document names are not needed to
time). Both read their index through mmap (tierlab placement `storage`,
PISA's mapped files), warm in the page cache after the first pass.

The split (where tierlab's time goes)
-------------------------------------
From the same run: `base` vs the codec gives the cost of decoding (base
copies uncompressed blocks); k = 10 vs 1024 the cost of the top-k heap and
sort (the hit counts differ too); tierlab_query_stats gives per query the
postings in the query's lists (and in its shortest list), postings scored and
blocks decoded, so ns per posting of each engine. decode_share can come out
slightly negative: base reads four times the bytes, and the noise of a
shared machine is of that order.

JSON layout
-----------
{benchmark: "pisa", machine{...}, config{...}, corpus{...}, pisa{version,
native_module, encodings{name: {prepare_seconds, index_bytes}}, conversion{...}},
tierlab{codec, index_bytes, postings_bytes, build_seconds, base_index_bytes},
ciff{bytes, export_seconds}, tierlab_native{path, bytes, mtime_utc, blake2b_64},
agreement[{type, class, queries, k,
overlap_mean, overlap_tie_aware_mean, tierlab_exact, pisa_exact,
pisa_encodings_identical}], calibration[{type, engine, ns_per_query}],
results[{type, class, k, queries, engines{name: {ms_per_query, ms_per_query_min,
reps_ms, ns_per_posting, topk_share_vs_k<min k>}}, ratio{pisa engine: {raw,
net}}, split{postings_in_lists_per_query, shortest_list_postings_per_query,
postings_scored_per_query, blocks_decoded_per_query,
freq_blocks_decoded_per_query, results_per_query, fixed_ns_per_query,
decode_share}, best_pisa{engine, ms_per_query, ratio_raw, ratio_net, target,
met}}], targets[{type, class, k, vs, ratio_net, ratio_raw, target, met}], errors[...]}.
"""
from __future__ import annotations

import gc
import math
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tierlab.core import registry
from tierlab.core.errors import TierlabError
from tierlab.experiments.bench import pisa_engine as pe
from tierlab.experiments.bench.index import (CLASSES, Inputs, _machine, corpus_record, inputs_config, make_inputs,
                    make_work, remove_work, validate_inputs)

K1 = 1.2   # docs/engine.md "Queries" (kernels/src/query/query.h TL_K1)
B = 0.0    # docs/engine.md: constant length term, i.e. no length normalisation
BATCH = 4096  # queries per native call, both engines
ABSENT = ("tierlab-absent-term-a", "tierlab-absent-term-b")  # '-' is never in a token
TARGETS = (("and", "H"), ("single", "H"))  # issue 3: within 1.0x of PISA at k = 1024
TARGET_RATIO = 1.0
ROW_TARGET = 0.9  # issue 24: at most 0.9x PISA's fastest engine on every row


@dataclass(frozen=True)
class Config(Inputs):
    codec: str = "pfor-delta256"
    block_size: int = 256
    ks: tuple = (1024, 10)
    reps: int = 9
    encodings: tuple = ("block_simdbp", "block_optpfor")
    single_algorithms: tuple = ("ranked_or",)
    and_algorithms: tuple = ("ranked_and",)
    split: bool = True
    calibration_queries: int = 2000
    index: str | None = None        # an existing index instead of the generated corpus's
    workload_files: tuple = ()      # query files instead of the generated workloads
    row_target: float = ROW_TARGET

    @property
    def single_algorithm(self) -> str:
        return self.single_algorithms[0]

    @property
    def and_algorithm(self) -> str:
        return self.and_algorithms[0]


def validate(cfg: Config) -> None:
    from tierlab.core import native

    validate_inputs(cfg)
    if not cfg.ks or any(k < 1 for k in cfg.ks):
        raise TierlabError(f"every --k must be at least 1, got {list(cfg.ks)}")
    if cfg.reps < 1:
        raise TierlabError(f"--reps must be at least 1, got {cfg.reps}")
    if cfg.index is None:
        native.codec(cfg.codec)  # a clear error naming the known codecs
    if not cfg.row_target > 0:
        raise TierlabError(f"--target must be positive, got {cfg.row_target}")
    if not cfg.encodings:
        raise TierlabError("give at least one --pisa-encoding")
    for e in cfg.encodings:
        if e not in pe.ENCODINGS:
            raise TierlabError(f"unknown PISA encoding '{e}'; known: {', '.join(pe.ENCODINGS)}")
    for name, algs in (("--single-algorithm", cfg.single_algorithms),
                       ("--and-algorithm", cfg.and_algorithms)):
        if not algs:
            raise TierlabError(f"give at least one {name}")
        for alg in algs:
            if alg not in pe.ALGORITHMS:
                raise TierlabError(f"{name}: unknown PISA algorithm '{alg}'; known: "
                                   f"{', '.join(pe.ALGORITHMS)}")


def pisa_engines(cfg: Config, qtype: str) -> dict[str, tuple[str, str]]:
    """The PISA engines timed on a query type: name -> (encoding, algorithm).
    The type's first algorithm is `pisa:ENC` (the ratios' reference, as
    before), every further one `pisa:ENC:ALG`."""
    algs = cfg.single_algorithms if qtype == "single" else cfg.and_algorithms
    return {(f"pisa:{enc}" if i == 0 else f"pisa:{enc}:{alg}"): (enc, alg)
            for enc in cfg.encodings for i, alg in enumerate(algs)}


def file_workloads(cfg: Config) -> list[dict]:
    """The --workload files as bench workloads: one per (file, query type)
    present, `class` = the file's name, queries read as `query run` reads them."""
    from tierlab.engine.workload import read_queries

    out, names = [], set()
    for f in cfg.workload_files:
        label = Path(f).name
        if label in names:
            raise TierlabError(f"two --workload files named {label}: give distinct names")
        names.add(label)
        qs = read_queries(f)
        for qtype in registry.query_types():
            part = [q for q in qs if (len(q) == 1) == (qtype == "single")]
            if part:
                out.append({"type": qtype, "class": label, "queries": len(part), "path": Path(f),
                            "list": part, "check": part[:cfg.check_queries]})
    return out


def _index_inputs(cfg: Config) -> tuple[Path, dict, dict]:
    """(index path, its manifest, the `corpus` record) of --index."""
    from tierlab.engine import index as index_mod

    ixpath = Path(cfg.index)
    m = index_mod.read_manifest(ixpath)
    return ixpath, m, {"bytes": None, "documents": int(m["documents"]),
                       "tokens": m.get("tokens"), "vocabulary_terms": int(m["terms"]),
                       "postings": int(m["postings"]), "index": str(ixpath)}


# --------------------------------------------------------------------------
# Recomputing BM25 from tierlab's postings (the agreement check)
# --------------------------------------------------------------------------

class _Postings:
    """Term -> (dids, freqs) read from an open tierlab index."""

    def __init__(self, ix):
        from tierlab.core.native import ffi_lib

        self.ffi, self.lib = ffi_lib()
        self.ix = ix
        self.n_terms = int(ix.info["terms"])
        self._p, self._len, self._post = (self.ffi.new("char **"), self.ffi.new("uint32_t *"),
                                          self.ffi.new("uint32_t *"))

    def _term(self, i: int) -> tuple[bytes, int]:
        if self.lib.tierlab_index_term_at(self.ix._ix, i, self.ffi.cast("const char **", self._p),
                                          self._len, self._post) != 0:
            raise TierlabError(f"{self.ix.path}: corrupt dictionary entry {i}")
        return self.ffi.buffer(self._p[0], self._len[0])[:], int(self._post[0])

    def get(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        want, lo, hi = term.encode(), 0, self.n_terms
        while lo < hi:  # the dictionary is in byte order
            mid = (lo + hi) // 2
            if self._term(mid)[0] < want:
                lo = mid + 1
            else:
                hi = mid
        if lo >= self.n_terms:
            return None
        t, p = self._term(lo)
        if t != want:
            return None
        dids, freqs = np.zeros(p, dtype=np.uint32), np.zeros(p, dtype=np.uint32)
        err = self.ffi.new("char[]", self.lib.TIERLAB_ERRMSG)
        got = self.lib.tierlab_index_postings(self.ix._ix, lo, self.ffi.from_buffer("uint32_t[]", dids),
                                              self.ffi.from_buffer("uint32_t[]", freqs), err,
                                              self.lib.TIERLAB_ERRMSG)
        if got < 0:
            raise TierlabError(self.ffi.string(err).decode(errors="replace"))
        return dids.astype(np.int64), freqs.astype(np.int64)


def _tierlab_scores(lists, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """tierlab's BM25 (docs/engine.md, kernels/src/query/query.h) of the
    conjunction, in float64: (dids, scores)."""
    common = None
    for d, _ in lists:
        common = d if common is None else np.intersect1d(common, d, assume_unique=True)
    total = np.zeros(len(common))
    for d, f in lists:
        n = len(d)
        idf = math.log(1.0 + (n_docs - n + 0.5) / (n + 0.5))
        x = f[np.searchsorted(d, common)].astype(np.float64)
        total = total + idf * (x * (K1 + 1.0)) / (x + K1)
    return common, total


def _matches(hits: list[tuple[int, float]], dids: np.ndarray, scores: np.ndarray, k: int,
             rel: float) -> bool:
    """Tie-aware: hits are a correct top-k of (dids, scores): as many as
    expected, the score at every rank equal to the expected one, and every
    hit's document scoring what it says."""
    order = np.lexsort((dids, -scores))[:k]
    exp = scores[order]
    if len(hits) != len(exp):
        return False
    pos = np.searchsorted(dids, [d for d, _ in hits])
    for r, (d, s) in enumerate(hits):
        tol = rel * max(1.0, abs(exp[r]))
        if abs(s - exp[r]) > tol:
            return False
        p = pos[r]
        if p >= len(dids) or dids[p] != d or abs(scores[p] - s) > tol:
            return False
    return True


def _agreement(ix, opened: dict, workloads, cfg: Config, algorithms: dict, errors: list) -> list:
    post = _Postings(ix)
    n_docs = int(ix.info["docs"])
    k = cfg.check_k
    out = []
    for w in workloads:
        qs = w["check"]
        if not qs:
            continue
        alg = algorithms[w["type"]]
        pisa_hits = {}
        for enc, o in opened.items():
            _, _, hits = pe.retrieve(o, alg, pe.pretokenised(qs), k, want_hits=True)
            pisa_hits[enc] = [[(int(name), s) for name, s in h] for h in hits]
        ref = pisa_hits[cfg.encodings[0]]
        same_enc = all(pisa_hits[e] == ref for e in pisa_hits)
        overlap, tie_overlap, tl_ok, pisa_ok = [], [], 0, 0
        for qi, q in enumerate(qs):
            tl = ix.query(list(q), k)[0]
            lists = [post.get(t) for t in q]
            if any(x is None for x in lists):
                exp_d = np.zeros(0, dtype=np.int64)
                exp_t = exp_p = np.zeros(0)
            else:
                exp_d, exp_t = _tierlab_scores(lists, n_docs)
                _, exp_p = pe.pisa_scores(lists, n_docs, K1)
            ok_t = _matches(tl, exp_d, exp_t, k, 1e-9)
            ok_p = _matches(ref[qi], exp_d, exp_p.astype(np.float64), k, 2e-6)
            tl_ok += ok_t
            pisa_ok += ok_p
            if not ok_t or not ok_p:
                errors.append({"stage": "agreement", "type": w["type"], "class": w["class"],
                               "query": qi, "terms": list(q),
                               "error": ("tierlab" if not ok_t else "PISA")
                               + f" top-{k} differs from its BM25 recomputed from the postings",
                               "tierlab_dids": [d for d, _ in tl],
                               "pisa_dids": [d for d, _ in ref[qi]]})
            a = {d for d, _ in tl}
            b = [d for d, _ in ref[qi]]
            denom = max(len(a), len(b))
            if not denom:  # both empty: full agreement
                overlap.append(1.0)
                tie_overlap.append(1.0)
                continue
            overlap.append(len(a & set(b)) / denom)
            if tl:
                cut = tl[-1][1]
                pos = np.searchsorted(exp_d, b)
                tied = sum(1 for d, p in zip(b, pos) if d not in a and p < len(exp_d)
                           and exp_d[p] == d and abs(exp_t[p] - cut) <= 1e-9 * max(1.0, cut))
                tie_overlap.append(min(1.0, (len(a & set(b)) + tied) / denom))
            else:
                tie_overlap.append(1.0 if not b else 0.0)
        out.append({"type": w["type"], "class": w["class"], "queries": len(qs), "k": k,
                    "overlap_mean": float(np.mean(overlap)),
                    "overlap_tie_aware_mean": float(np.mean(tie_overlap)),
                    "tierlab_exact": tl_ok / len(qs), "pisa_exact": pisa_ok / len(qs),
                    "pisa_encodings_identical": same_enc})
        if not same_enc:
            errors.append({"stage": "agreement", "type": w["type"], "class": w["class"],
                           "error": "PISA's encodings return different top-10s"})
    return out


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

def _chunks(items: list, size: int = BATCH) -> list[list]:
    return [items[a:a + size] for a in range(0, len(items), size)] or [[]]


class _Tierlab:
    def __init__(self, ix, queries):
        self.ix, self.chunks = ix, _chunks(queries)

    def run(self, k: int):
        """(ns of the C loops, stats rows)."""
        total, stats = 0, []
        for c in self.chunks:
            st, wall, _, _ = self.ix.run_batch(c, k=k)
            total += wall
            stats.append(st)
        return total, np.concatenate(stats)


class _Pisa:
    def __init__(self, opened, algorithm: str, queries):
        self.o, self.alg = opened, algorithm
        self.chunks = [pe.pretokenised(c) for c in _chunks(queries)]

    def run(self, k: int):
        """(ns of the retrieve calls, hits per query)."""
        total, counts = 0, []
        for c in self.chunks:
            ns, cnt, _ = pe.retrieve(self.o, self.alg, c, k)
            total += ns
            counts.append(cnt)
        return total, np.concatenate(counts)


def _median(xs):
    return statistics.median(xs) if xs else None


def run(cfg: Config, out: Path) -> dict:
    """Run the benchmark; returns the JSON document. Scratch files live in a
    fresh folder under cfg.work (default: out's folder), removed unless keep."""
    from tqdm import tqdm

    from tierlab.engine import ciff as ciff_mod
    from tierlab.engine import index as index_mod
    from tierlab.engine import workload as workload_mod
    from tierlab.engine.query import pin

    validate(cfg)
    native_id = _native_id()  # now: `make build` may replace the file during the run
    ok, version = pe.available()
    if not ok:
        raise TierlabError(version)
    work = make_work(cfg, out, "pisa")

    combos = [(t, c) for t in registry.query_types() for c in CLASSES]
    # corpus, workloads, index, base, export, convert, encodings, agreement, warm, reps
    steps = 1 + len(combos) + 1 + int(cfg.split) + 2 + len(cfg.encodings) + 2 + cfg.reps
    if cfg.index is not None:
        steps -= 1 + len(combos) + 1 + int(cfg.split)
    bar = tqdm(total=steps, desc="bench pisa", unit="step", file=sys.stderr,
               disable=not cfg.progress, leave=False)
    errors: list[dict] = []
    algorithms = {"single": cfg.single_algorithm, "and": cfg.and_algorithm}
    affinity = None
    try:
        if cfg.index is not None:
            ixpath, m, corpus_rec = _index_inputs(cfg)
            cfg = replace(cfg, codec=m["codec"], block_size=int(m["block_size"]), split=False)
            workloads = []
        else:
            cpath, cman, workloads = make_inputs(work, cfg, bar=bar)
            bar.set_postfix_str(f"index {cfg.codec}")
            ixpath = work / f"index-{cfg.codec}"
            m = index_mod.build(cpath, ixpath, codec=cfg.codec, block_size=cfg.block_size).manifest
        if cfg.workload_files:
            workloads = file_workloads(cfg)
        tl_info = {"codec": cfg.codec, "block_size": cfg.block_size,
                   "index_bytes": sum(int(v) for v in m["files"].values()),
                   "postings_bytes": int(m["did_block_bytes"]) + int(m["freq_block_bytes"]),
                   "build_seconds": float(m.get("ingest_seconds", 0)) + float(m.get("transform_seconds", 0)),
                   "postings": int(m["postings"]), "documents": int(m["documents"]),
                   "terms": int(m["terms"])}
        if cfg.index is None:
            corpus_rec = corpus_record(cman, tl_info["postings"])
            bar.update()
        basepath = None
        if cfg.split and cfg.codec != "base":
            bar.set_postfix_str("index base")
            basepath = work / "index-base"
            bb = index_mod.build(cpath, basepath, codec="base", block_size=cfg.block_size)
            tl_info["base_index_bytes"] = sum(int(v) for v in bb.manifest["files"].values())
            bar.update()

        bar.set_postfix_str("export CIFF")
        cf = work / "index.ciff"
        t0 = time.perf_counter()
        ciff_mod.export(ixpath, cf)
        ciff_info = {"bytes": cf.stat().st_size, "export_seconds": time.perf_counter() - t0}
        bar.update()
        bar.set_postfix_str("CIFF -> PISA")
        pdir = work / "pisa"
        conv = pe.ciff_to_pisa(cf, pdir)
        if conv["postings"] != tl_info["postings"] or conv["documents"] != tl_info["documents"]:
            raise TierlabError(f"the PISA collection has {conv['postings']} postings and "
                               f"{conv['documents']} documents, the index "
                               f"{tl_info['postings']} and {tl_info['documents']}")
        bar.update()
        named, timed, enc_info = {}, {}, {}
        for enc in cfg.encodings:
            bar.set_postfix_str(f"PISA compress {enc}")
            o = pe.open_index(pdir, enc, k1=K1, b=B, docnames=True, log=work / "pisa.log")
            named[enc] = o
            timed[enc] = pe.open_index(pdir, enc, k1=K1, b=B, docnames=False,
                                       log=work / "pisa.log")
            enc_info[enc] = {"prepare_seconds": o.prepare_seconds, "index_bytes": o.index_bytes}
            bar.update()
        enc_info[cfg.encodings[0]]["note"] = ("prepare_seconds of the first encoding includes "
                                              "building the block-max (wand) metadata")

        queries = {(w["type"], w["class"]): w["list"] if "list" in w
                   else workload_mod.read_queries(w["path"]) for w in workloads}
        with index_mod.Index(ixpath) as ix:
            bar.set_postfix_str("agreement")
            agreement = _agreement(ix, named, workloads, cfg, algorithms, errors)
            bar.update()
            base_ix = index_mod.Index(basepath) if basepath else None
            try:
                affinity = _pin(pin)
                timing = _time_all(cfg, ix, base_ix, timed, queries, algorithms, errors, bar)
            finally:
                if base_ix is not None:
                    base_ix.close()
    finally:
        bar.close()
        if affinity is not None:
            import os
            os.sched_setaffinity(0, affinity)
        work = remove_work(cfg, work, "pisa")

    results, calibration = timing
    for r in results:
        r["best_pisa"] = _best_pisa(r, f"tierlab:{cfg.codec}", cfg.row_target)
    targets = []
    ref = f"pisa:{cfg.encodings[0]}"
    for qtype, cls in TARGETS:
        r = next((x for x in results if x["type"] == qtype and x["class"] == cls
                  and x["k"] == 1024), None)
        if r is None:
            continue
        ratio = r["ratio"][ref]["net"]
        targets.append({"type": qtype, "class": cls, "k": 1024, "vs": ref, "ratio_net": ratio,
                        "ratio_raw": r["ratio"][ref]["raw"], "target": TARGET_RATIO,
                        "met": ratio is not None and ratio <= TARGET_RATIO})
    return {
        "benchmark": "pisa",
        "machine": _machine(),
        "config": {
            **inputs_config(cfg, work), "codec": cfg.codec, "block_size": cfg.block_size,
            "k": list(cfg.ks), "reps": cfg.reps, "batch_queries": BATCH,
            "pisa_encodings": list(cfg.encodings), "reference_encoding": cfg.encodings[0],
            "single_algorithm": cfg.single_algorithm, "and_algorithm": cfg.and_algorithm,
            "single_algorithms": list(cfg.single_algorithms),
            "and_algorithms": list(cfg.and_algorithms),
            "index": cfg.index, "workload_files": [str(f) for f in cfg.workload_files],
            "row_target": cfg.row_target,
            "bm25": {"k1": K1, "b": B, "tierlab_idf": "ln(1 + (N - df + 0.5) / (df + 0.5))",
                     "pisa_idf": "max(1e-6, ln((N - df + 0.5) / (df + 0.5))), float32"},
            "split": bool(basepath), "calibration_queries": cfg.calibration_queries,
            "tierlab_placement": "storage (mmap, page cache warm)",
            "tierlab_timing": "wall ns of the C loop of tierlab_query_batch",
            "pisa_timing": ("wall ns of _pisathon.retrieve (threads=1, pretokenised, "
                            "one-character document names)"),
        },
        "corpus": corpus_rec,
        "tierlab_native": native_id,
        "pisa": {"version": version, "native_module": str(pe.find()[0]),
                 "encodings": enc_info, "conversion": conv, "wand_block": pe.WAND_BLOCK},
        "tierlab": tl_info,
        "ciff": ciff_info,
        "agreement": agreement,
        "calibration": calibration,
        "results": results,
        "targets": targets,
        "errors": errors,
    }


def _best_pisa(r: dict, ours: str, target: float) -> dict:
    """The row's fastest PISA engine (median ms/query) and tierlab's ratio to
    it (median of the per-repetition ratios), against `target`."""
    name = min((n for n in r["engines"] if n.startswith("pisa:")),
               key=lambda n: r["engines"][n]["ms_per_query"])
    ratio = r["ratio"][name]
    return {"engine": name, "ms_per_query": r["engines"][name]["ms_per_query"],
            "ratio_raw": ratio["raw"], "ratio_net": ratio["net"], "target": target,
            "met": ratio["raw"] is not None and ratio["raw"] <= target}


def _native_id() -> dict:
    """Which libtierlab ran: its path, size, modification time and digest."""
    import hashlib

    from tierlab.core.native import native_dir

    so = native_dir() / "libtierlab.so"
    try:
        data = so.read_bytes()
        st = so.stat()
    except OSError:
        return {"path": str(so)}
    return {"path": str(so), "bytes": st.st_size,
            "mtime_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime)),
            "blake2b_64": hashlib.blake2b(data, digest_size=8).hexdigest()}


def _pin(pin):
    import os

    if not hasattr(os, "sched_getaffinity"):
        return None
    before = os.sched_getaffinity(0)
    pin(None)
    return before


def _time_all(cfg: Config, ix, base_ix, timed: dict, queries: dict, algorithms: dict,
              errors: list, bar) -> tuple[list, list]:
    """Warm pass, then cfg.reps interleaved repetitions (module docstring)."""
    engines_for = {}
    for key, qs in queries.items():
        e = {f"tierlab:{cfg.codec}": _Tierlab(ix, qs)}
        if base_ix is not None:
            e["tierlab:base"] = _Tierlab(base_ix, qs)
        for name, (enc, alg) in pisa_engines(cfg, key[0]).items():
            e[name] = _Pisa(timed[enc], alg, qs)
        engines_for[key] = e
    # Fixed per-query cost: queries whose terms are in neither lexicon.
    cal_q = {"single": [ABSENT[:1]] * cfg.calibration_queries,
             "and": [ABSENT] * cfg.calibration_queries}
    cal_engines = {}
    for qtype, qs in cal_q.items():
        e = {f"tierlab:{cfg.codec}": _Tierlab(ix, qs)}
        for enc, o in timed.items():
            e[f"pisa:{enc}"] = _Pisa(o, algorithms[qtype], qs)
        cal_engines[qtype] = e
    cells = [(key, k) for key in queries for k in cfg.ks]
    samples = {(key, k): {name: [] for name in engines_for[key]} for key, k in cells}
    cal = {(t, k): {name: [] for name in cal_engines[t]} for t in cal_q for k in cfg.ks}
    stats = {}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        bar.set_postfix_str("warm pass")
        for key, k in cells:  # warm, and the hit counts must agree
            counts = {}
            for name, eng in engines_for[key].items():
                _, got = eng.run(k)
                if name.startswith("tierlab:"):
                    if name == f"tierlab:{cfg.codec}":
                        stats[(key, k)] = got
                    counts[name] = got["results"].astype(np.int64)
                else:
                    counts[name] = got.astype(np.int64)
            ref = counts[f"tierlab:{cfg.codec}"]
            for name, c in counts.items():
                if not np.array_equal(c, ref):
                    bad = int(np.flatnonzero(c != ref)[0])
                    errors.append({"stage": "hit counts", "type": key[0], "class": key[1],
                                   "k": k, "engine": name, "query": bad,
                                   "terms": list(queries[key][bad]),
                                   "error": f"{name} returned {int(c[bad])} hits, "
                                            f"tierlab:{cfg.codec} {int(ref[bad])}"})
        for (t, k), e in cal.items():
            for name, eng in cal_engines[t].items():
                eng.run(k)
        bar.update()
        for rep in range(cfg.reps):
            bar.set_postfix_str(f"repetition {rep + 1}/{cfg.reps}")
            for key, k in cells:
                names = list(engines_for[key])
                names = names[rep % len(names):] + names[:rep % len(names)]
                for name in names:
                    ns, _ = engines_for[key][name].run(k)
                    samples[(key, k)][name].append(ns / max(1, len(queries[key])))
            for (t, k), e in cal.items():
                names = list(e)
                names = names[rep % len(names):] + names[:rep % len(names)]
                for name in names:
                    ns, _ = cal_engines[t][name].run(k)
                    e[name].append(ns / cfg.calibration_queries)
            bar.update()
    finally:
        if gc_was:
            gc.enable()

    calibration = []
    fixed = {}
    for (t, k), e in cal.items():
        for name, xs in e.items():
            fixed[(t, k, name)] = _median(xs)
            calibration.append({"type": t, "k": k, "engine": name,
                                "ns_per_query": _median(xs), "ns_per_query_min": min(xs)})
    results = []
    ours = f"tierlab:{cfg.codec}"
    for key, k in cells:
        qtype, cls = key
        s = samples[(key, k)]
        st = stats[(key, k)]
        nq = max(1, len(st))
        nterms = st["nterms"].astype(np.int64)
        tp = st["term_postings"].astype(np.int64)
        in_lists = float(sum(tp[i, :nterms[i]].sum() for i in range(len(st))) / nq)
        shortest = float(np.mean([tp[i, :nterms[i]].min() for i in range(len(st))])) \
            if len(st) else 0.0
        eng = {}
        for name, xs in s.items():
            eng[name] = {"ms_per_query": _median(xs) / 1e6, "ms_per_query_min": min(xs) / 1e6,
                         "reps_ms": [x / 1e6 for x in xs],
                         "ns_per_posting": _median(xs) / in_lists if in_lists else None}
        ratio = {}
        for name in s:
            if not name.startswith("pisa:"):
                continue
            raw = [a / b for a, b in zip(s[ours], s[name]) if b > 0]
            fo, fp = fixed.get((qtype, k, ours)), fixed.get((qtype, k, name))
            net = [(a - fo) / (b - fp) for a, b in zip(s[ours], s[name])
                   if fo is not None and fp is not None and b - fp > 0]
            ratio[name] = {"raw": _median(raw), "net": _median(net)}
        split = {
            "postings_in_lists_per_query": in_lists,
            "shortest_list_postings_per_query": shortest,
            "postings_scored_per_query": float(st["postings_scored"].mean()) if len(st) else 0.0,
            "blocks_decoded_per_query": float(st["blocks_decoded"].mean()) if len(st) else 0.0,
            "freq_blocks_decoded_per_query": (float(st["freq_blocks_decoded"].mean())
                                              if len(st) else 0.0),
            "results_per_query": float(st["results"].mean()) if len(st) else 0.0,
            "fixed_ns_per_query": fixed.get((qtype, k, ours)),
        }
        if "tierlab:base" in s:
            split["decode_share"] = 1 - _median(s["tierlab:base"]) / _median(s[ours])
        results.append({"type": qtype, "class": cls, "k": k, "queries": len(queries[key]),
                        "engines": eng, "ratio": ratio, "split": split})
    # k = 10 vs the largest k: the share of the top-k heap and sort.
    kmax, kmin = max(cfg.ks), min(cfg.ks)
    if kmax != kmin:
        by = {(r["type"], r["class"], r["k"]): r for r in results}
        for r in results:
            if r["k"] == kmax:
                lo = by[(r["type"], r["class"], kmin)]
                for name, e in r["engines"].items():
                    e[f"topk_share_vs_k{kmin}"] = 1 - lo["engines"][name]["ms_per_query"] / \
                        e["ms_per_query"]
    return results, calibration


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def format_table(doc: dict) -> str:
    c = doc["config"]
    ours = f"tierlab:{c['codec']}"
    pisas = [f"pisa:{e}" for e in c["pisa_encodings"]]
    head = f"{'type':<7}{'class':<6}{'k':>5}{ours + ' ms':>24}"
    for p in pisas:
        head += f"{p + ' ms':>22}{'ratio':>7}{'net':>7}"
    lines = [head]
    for r in doc["results"]:
        line = (f"{r['type']:<7}{r['class']:<6}{r['k']:>5}"
                f"{_fmt(r['engines'][ours]['ms_per_query'], '.4f'):>24}")
        for p in pisas:
            line += (f"{_fmt(r['engines'][p]['ms_per_query'], '.4f'):>22}"
                     f"{_fmt(r['ratio'][p]['raw'], '.2f'):>7}{_fmt(r['ratio'][p]['net'], '.2f'):>7}")
        lines.append(line)
    lines.append(f"\nratio = tierlab / PISA (median of {c['reps']} interleaved repetitions); net = "
                 f"after each engine's fixed per-query cost (queries of absent terms)")
    if doc["agreement"]:
        lines.append(f"\ntop-{c['check_k']} agreement ({c['check_queries']} queries per workload):")
        lines.append(f"{'type':<7}{'class':<6}{'overlap':>9}{'tie-aware':>11}"
                     f"{'tierlab ok':>12}{'PISA ok':>9}")
        for a in doc["agreement"]:
            lines.append(f"{a['type']:<7}{a['class']:<6}{a['overlap_mean']:>9.2f}"
                         f"{a['overlap_tie_aware_mean']:>11.2f}{a['tierlab_exact']:>12.2f}"
                         f"{a['pisa_exact']:>9.2f}")
    split = [r for r in doc["results"] if "decode_share" in r["split"]]
    if split:
        lines.append(f"\nwhere {ours}'s time goes (decode share = 1 - base / {c['codec']}; "
                     f"ns/posting over the postings of the query's lists):")
        for r in split:
            e = r["engines"][ours]
            pe_ = r["engines"][pisas[0]]
            topk = next((v for n, v in e.items() if n.startswith("topk_share")), None)
            lines.append(f"  {r['type']:<7}{r['class']:<3} k={r['k']:<5} decode "
                         f"{100 * r['split']['decode_share']:5.1f} %  "
                         f"top-k {_fmt(None if topk is None else 100 * topk, '5.1f')} %  "
                         f"tierlab {_fmt(e['ns_per_posting'], '.2f')} ns/posting, "
                         f"{pisas[0]} {_fmt(pe_['ns_per_posting'], '.2f')}")
    lines.append(f"\nbest PISA engine per row (target: tierlab / best <= {c.get('row_target')}):")
    wc = max([len(r["class"]) for r in doc["results"]] + [5]) + 1
    we = max([len(r["best_pisa"]["engine"]) for r in doc["results"] if r.get("best_pisa")]
             + [10]) + 1
    for r in doc["results"]:
        b = r.get("best_pisa")
        if b:
            lines.append(f"  {r['type']:<7}{r['class']:<{wc}} k={r['k']:<5} {b['engine']:<{we}}"
                         f"{_fmt(b['ms_per_query'], '.4f')} ms  ratio {_fmt(b['ratio_raw'], '.2f')}"
                         + ("  met" if b["met"] else "  MISSED"))
    for t in doc["targets"]:
        lines.append(f"target {t['type'].upper()} {t['class']} k={t['k']}: tierlab / {t['vs']} = "
                     f"{_fmt(t['ratio_net'], '.2f')} (net), <= {t['target']:.1f}: "
                     + ("MET" if t["met"] else "MISSED"))
    if doc["errors"]:
        lines.append("\nERRORS:")
        for e in doc["errors"][:20]:
            where = " ".join(str(e[x]) for x in ("type", "class", "query") if x in e)
            lines.append(f"  {e['stage']} {where}: {e['error']}")
        if len(doc["errors"]) > 20:
            lines.append(f"  ... and {len(doc['errors']) - 20} more (see the JSON)")
    return "\n".join(lines)
