"""`tierlab bench cache`: how fast the C cache policies (kernels/src/cache/,
through model/cache.py's access_many) simulate requests, against
libCacheSim's LRU, FIFO and S3FIFO on the same trace in the same run.

One Zipf trace per alpha (`requests` requests over `keys` keys, popular keys
scattered over the key space, unit sizes); cache sizes are fractions of the
footprint (distinct keys requested). Per (alpha, fraction, policy), each
contestant runs the whole trace `reps` times on a fresh cache, interleaved
(ours, then libCacheSim, rep by rep), so both see the same machine; the
median time is reported. Ours: one access_many call over a NumPy array
(BELADY also gets next_uses(), computed once, untimed). libCacheSim: its C
process_trace over the trace exported with write_oracle_general, so its time
includes reading the 24-byte records (its usual way to run).

JSON: {benchmark: "cache", machine{...}, config{...}, versions{libcachesim},
trace[{alpha, requests, footprint, generate_s, next_uses_s}],
records[{library, policy, params, alpha, fraction, capacity, requests,
seconds[], seconds_median, requests_per_s, miss_ratio}],
comparisons[{policy, alpha, fraction, speed_ratio (ours / libCacheSim
requests/s), miss_ratio_ours, miss_ratio_libcachesim, miss_ratio_diff,
must_agree}], agreement (LRU and FIFO miss ratios equal), targets[...],
errors[]}.
"""
from __future__ import annotations

import os
import platform
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from tierlab import __version__
from tierlab.core.errors import TierlabError
from tierlab.core.files import release, scratch_dir

DEFAULT_ALPHAS = (0.9, 1.0)
DEFAULT_FRACTIONS = (0.01, 0.1)
# libCacheSim classes that run the same algorithm as ours, and their
# parameters. s3-fifo: move-to-main threshold 1 as in kernels/src/cache/s3fifo.c
# (libCacheSim's default is 2); the two still differ in details, so only LRU
# and FIFO must give identical miss ratios.
PEERS = {"lru": ("LRU", {}), "fifo": ("FIFO", {}),
         "s3-fifo": ("S3FIFO", {"move_to_main_threshold": 1})}
MUST_AGREE = ("lru", "fifo")
TARGET_LRU_REQUESTS_PER_S = 5e6


@dataclass
class Config:
    requests: int = 10_000_000
    keys: int = 1_000_000
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    policies: tuple[str, ...] = field(default_factory=tuple)  # empty: all
    reps: int = 3
    seed: int = 0
    peers: bool = True
    work: Path | None = None
    progress: bool = True


def validate(cfg: Config) -> None:
    from tierlab.model.cache import POLICIES

    if cfg.requests < 1:
        raise TierlabError(f"--requests must be at least 1, got {cfg.requests}")
    if cfg.keys < 1 or cfg.keys > 0xFFFFFFF0:
        raise TierlabError(f"--keys must be in 1..{0xFFFFFFF0}, got {cfg.keys}")
    for a in cfg.alphas:
        if not 0 <= a <= 5:
            raise TierlabError(f"--alpha must be in 0..5, got {a}")
    for f in cfg.fractions:
        if not 0 < f <= 1:
            raise TierlabError(f"--fraction must be in (0, 1], got {f}")
    for p in cfg.policies:
        if p not in POLICIES:
            raise TierlabError(f"--policy: unknown policy {p!r}; known: {', '.join(POLICIES)}")
    if cfg.reps < 1:
        raise TierlabError(f"--reps must be at least 1, got {cfg.reps}")
    if cfg.seed < 0:
        raise TierlabError(f"--seed must be a non-negative integer, got {cfg.seed}")


def zipf_trace(n: int, nkeys: int, alpha: float, seed: int) -> np.ndarray:
    """n requests over keys 0..nkeys-1, P(rank r) ~ 1 / r^alpha, ranks mapped
    to keys by a random permutation (so popularity is not key order)."""
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, nkeys + 1, dtype=np.float64) ** alpha)
    cdf /= cdf[-1]
    ranks = np.searchsorted(cdf, rng.random(n), side="right")
    np.minimum(ranks, nkeys - 1, out=ranks)  # rounding at the top of the cdf
    return rng.permutation(nkeys).astype(np.uint64)[ranks]


def _machine() -> dict:
    from tierlab.experiments.bench.codecs import _cpu_model

    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "tierlab_version": __version__,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _libcachesim():
    """The libcachesim module and its version, or (None, reason)."""
    try:
        import libcachesim
    except ImportError as e:
        return None, f"libcachesim is not installed ({e}); pip install 'libcachesim>=0.3'"
    try:
        from importlib.metadata import version

        return libcachesim, version("libcachesim")
    except Exception:  # noqa: BLE001 - a version string is nice to have
        return libcachesim, getattr(libcachesim, "__version__", "unknown")


def _time_ours(policy: str, nkeys: int, capacity: int, keys, next_use):
    from tierlab.model.cache import Cache

    c = Cache(policy, nkeys, capacity)
    t0 = time.perf_counter()
    hit = c.access_many(keys, None, next_use if policy == "belady" else None)
    dt = time.perf_counter() - t0
    return dt, float(1.0 - hit.mean())


def _hashpower(capacity: int) -> int:
    """libCacheSim's hash table size (2^hashpower buckets) for a cache of
    `capacity` unit-size objects: about two buckets per object. Its default
    (24) is sized for much larger caches and slows small ones down."""
    return max(10, int(np.ceil(np.log2(max(capacity, 2)))) + 1)


def _time_peer(lcs, policy: str, capacity: int, trace_path: Path):
    cls, params = PEERS[policy]
    cache = getattr(lcs, cls)(capacity, hashpower=_hashpower(capacity), **params)
    reader = lcs.TraceReader(str(trace_path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    t0 = time.perf_counter()
    miss_ratio, _byte_miss_ratio = cache.process_trace(reader)
    dt = time.perf_counter() - t0
    return dt, float(miss_ratio)


def _record(library, policy, params, alpha, fraction, capacity, n, seconds, miss_ratio):
    med = float(np.median(seconds))
    return {"library": library, "policy": policy, "params": params, "alpha": alpha,
            "fraction": fraction, "capacity": capacity, "requests": n,
            "seconds": [round(s, 9) for s in seconds], "seconds_median": med,
            "requests_per_s": n / med, "miss_ratio": miss_ratio}


def run(cfg: Config, out: Path) -> dict:
    """Run the benchmark; returns the JSON document."""
    from tqdm import tqdm

    from tierlab.model.cache import POLICIES, next_uses, write_oracle_general

    validate(cfg)
    policies = cfg.policies or POLICIES
    lcs, lcs_version = _libcachesim() if cfg.peers else (None, "not run (--no-peers)")
    if cfg.peers and lcs is None:
        print(f"note: {lcs_version}; libCacheSim columns are left out", file=sys.stderr)
    peer_policies = [p for p in policies if p in PEERS] if lcs is not None else []
    runs = len(cfg.alphas) * len(cfg.fractions) * (len(policies) + len(peer_policies)) * cfg.reps
    bar = tqdm(total=runs, desc="bench cache", unit="run", file=sys.stderr,
               disable=not cfg.progress, leave=False)
    work = scratch_dir("bench-cache", cfg.work or Path(out).parent)
    records, comparisons, traces, errors = [], [], [], []
    try:
        for ai, alpha in enumerate(cfg.alphas):
            bar.set_postfix_str(f"alpha {alpha}: trace")
            t0 = time.perf_counter()
            keys = zipf_trace(cfg.requests, cfg.keys, alpha, cfg.seed + ai)
            gen_s = time.perf_counter() - t0
            footprint = int(np.unique(keys).size)
            nu, nu_s = None, None
            if "belady" in policies:
                t0 = time.perf_counter()
                nu = next_uses(keys)
                nu_s = time.perf_counter() - t0
            trace_path = None
            if peer_policies:
                trace_path = write_oracle_general(work / f"zipf{alpha}.oracleGeneral", keys)
            traces.append({"alpha": alpha, "requests": cfg.requests, "keys": cfg.keys,
                           "footprint": footprint, "generate_s": gen_s, "next_uses_s": nu_s})
            for fraction in cfg.fractions:
                capacity = max(1, int(round(fraction * footprint)))
                for policy in policies:
                    bar.set_postfix_str(f"alpha {alpha}, {fraction:g}, {policy}")
                    ours_s, peer_s = [], []
                    ours_mr = peer_mr = None
                    try:
                        for _ in range(cfg.reps):
                            dt, ours_mr = _time_ours(policy, cfg.keys, capacity, keys, nu)
                            ours_s.append(dt)
                            bar.update()
                            if policy in peer_policies:
                                dt, peer_mr = _time_peer(lcs, policy, capacity, trace_path)
                                peer_s.append(dt)
                                bar.update()
                    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                        errors.append({"policy": policy, "alpha": alpha, "fraction": fraction,
                                       "error": f"{type(e).__name__}: {e}"})
                        continue
                    ours = _record("tierlab", policy, {}, alpha, fraction, capacity,
                                   cfg.requests, ours_s, ours_mr)
                    records.append(ours)
                    if not peer_s:
                        continue
                    cls, params = PEERS[policy]
                    theirs = _record("libcachesim", policy,
                                     {"class": cls, "hashpower": _hashpower(capacity), **params},
                                     alpha, fraction, capacity, cfg.requests, peer_s, peer_mr)
                    records.append(theirs)
                    comparisons.append({
                        "policy": policy, "alpha": alpha, "fraction": fraction,
                        "capacity": capacity,
                        "speed_ratio": ours["requests_per_s"] / theirs["requests_per_s"],
                        "miss_ratio_ours": ours_mr, "miss_ratio_libcachesim": peer_mr,
                        "miss_ratio_diff": ours_mr - peer_mr,
                        "must_agree": policy in MUST_AGREE,
                    })
            del keys, nu
            if trace_path is not None:
                trace_path.unlink(missing_ok=True)
    finally:
        bar.close()
        release(work, "bench-cache")

    must = [c for c in comparisons if c["must_agree"]]
    agreement = None if not must else all(c["miss_ratio_diff"] == 0 for c in must)
    lru = [r for r in records if r["library"] == "tierlab" and r["policy"] == "lru"]
    targets = [{
        "name": "tierlab LRU simulated requests/s, every alpha and cache size",
        "target": TARGET_LRU_REQUESTS_PER_S,
        "value": min(r["requests_per_s"] for r in lru) if lru else None,
        "met": bool(lru) and all(r["requests_per_s"] >= TARGET_LRU_REQUESTS_PER_S for r in lru),
    }]
    return {
        "benchmark": "cache",
        "machine": _machine(),
        "config": {"requests": cfg.requests, "keys": cfg.keys, "alphas": list(cfg.alphas),
                   "fractions": list(cfg.fractions), "policies": list(policies),
                   "reps": cfg.reps, "seed": cfg.seed, "sizes": "unit",
                   "fraction_of": "footprint (distinct keys requested)",
                   "timing": "median of reps, ours and libCacheSim interleaved; ours = "
                             "access_many over a NumPy array; libCacheSim = process_trace "
                             "over an oracleGeneral file (reading included)"},
        "versions": {"libcachesim": lcs_version},
        "trace": traces,
        "records": records,
        "comparisons": comparisons,
        "agreement": agreement,
        "targets": targets,
        "errors": errors,
    }


def format_table(doc: dict) -> str:
    comp = {(c["policy"], c["alpha"], c["fraction"]): c for c in doc["comparisons"]}
    lines = [f"{'policy':<8}{'alpha':>6}{'size':>6}{'Mreq/s':>9}{'miss':>8}"
             f"{'lcs Mreq/s':>12}{'lcs miss':>10}{'speed x':>9}  miss ratios"]
    peer = {(r["policy"], r["alpha"], r["fraction"]): r for r in doc["records"]
            if r["library"] == "libcachesim"}
    for r in doc["records"]:
        if r["library"] != "tierlab":
            continue
        k = (r["policy"], r["alpha"], r["fraction"])
        p, c = peer.get(k), comp.get(k)
        same = "-" if c is None else (
            "equal" if c["miss_ratio_diff"] == 0 else
            f"{'DIFFER' if c['must_agree'] else 'differ'} by {c['miss_ratio_diff']:+.4f}")
        lines.append(
            f"{r['policy']:<8}{r['alpha']:>6g}{100 * r['fraction']:>5g}%"
            f"{r['requests_per_s'] / 1e6:>9.2f}{r['miss_ratio']:>8.4f}"
            + (f"{p['requests_per_s'] / 1e6:>12.2f}{p['miss_ratio']:>10.4f}"
               f"{c['speed_ratio']:>9.2f}" if p else f"{'-':>12}{'-':>10}{'-':>9}")
            + f"  {same}")
    t = doc["trace"][0] if doc["trace"] else None
    if t:
        lines.append(f"\n{t['requests']:,} requests over {t['keys']:,} keys per alpha; size = "
                     f"share of the footprint; median of {doc['config']['reps']} runs; "
                     f"libcachesim {doc['versions']['libcachesim']}")
    for tg in doc["targets"]:
        v = tg["value"]
        lines.append(f"target: {tg['name']} >= {tg['target'] / 1e6:g}M: "
                     + ("-" if v is None else f"{v / 1e6:.2f}M ")
                     + ("MET" if tg["met"] else "MISSED"))
    if doc["agreement"] is not None:
        lines.append("LRU and FIFO miss ratios equal libCacheSim's: "
                     + ("yes" if doc["agreement"] else "NO"))
    for e in doc["errors"]:
        lines.append(f"ERROR {e['policy']} alpha {e['alpha']} size {e['fraction']}: {e['error']}")
    return "\n".join(lines)
