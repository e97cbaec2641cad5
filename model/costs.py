"""The per-block cost table: the CPU side of a query, measured on this machine,
as the SimPy model (model/) charges it.

The model computes a query's CPU time as

    query_ns + block_ns * blocks_decoded + posting_ns * postings_scored
             + result_ns * results + candidate_ns * shortest_postings

with one set of coefficients per query type (single, and). results are the
hits kept, min(k, postings_scored): the top-k heap and the final sort grow
with them (~45 ns a hit at k = 1024, most of a SINGLE H query on a small
index). shortest_postings (AND only) is the postings of the shortest list,
the candidates each looked up in the other lists: with the scalar leapfrog
an AND H query scored a few postings yet cost ~25 ns per candidate, and
without these two terms the fit under-predicted H queries by 2-3x (median).
The two-term merge over windows of 4 DIDs (kernels/src/query/and.c) made
candidates cheap enough that a fit may leave the term out (the
EXTRA_TERMS_GAIN rule). Tables without them read as 0.
blocks_decoded counts DID blocks decoded (each with its freq block, when the
query needed it) and postings_scored the postings offered to the top-k heap,
both as tierlab_query_stats and the `query` table of traces/schema.yaml count
them. query_ns is what a query costs besides its blocks and postings
(dictionary lookups, cursor set-up, the part of the final sort that does not
grow with the hits).

How `measure` gets them
-----------------------
1. Workloads spanning the frequency classes: the files given, or by default
   SINGLE and AND workloads for H, M and L generated from the index's own
   dictionary (tierlab.engine.workload's generator and class thresholds; the index's
   dictionary holds the same terms and posting counts as its corpus's term
   table, so the corpus need not exist any more).
2. Each workload runs through tierlab.engine.query.run `repeats` times with
   `passes` passes each (the last, warm pass is reported); a query's latency
   is the median of its `repeats` reported latencies, which removes the
   one-off stalls a shared machine adds.
3. Per type, a non-negative least-squares fit (`nnls`, Lawson-Hanson active
   set) of the three coefficients to the median latencies, each query's
   error taken relative to its class's mean latency and every frequency
   class weighted the same (`fit_coefficients`): within a class plain least
   squares, so each class's total time comes out right; across classes
   neither the numerous cheap L queries nor the few costly H queries decide alone.
   (Relative error per query was tried and rejected: it biases every
   prediction low, most for L, because the latencies of queries doing the
   same work spread widely with the state of the caches.)
   block_ns is held at or above the decode time measured in step 4 (a DID
   block plus its freq block when the query decoded it): for SINGLE, blocks
   and postings grow together and the fit alone cannot split them.
   The fit runs twice: the 1 % of queries with the largest weighted errors
   in the first are left out of the second (`TRIM`).
   The table also keeps, for comparison, the older fit with only a result
   term and no candidate term (`with_results`).
4. For cross-checking, decode alone: ns per full DID block and per full freq
   block of the index's codec, with kernels/src/bench.c's timing loop on a
   seeded sample of the index's own blocks (per-block regime: each block into
   the same small buffer, as a query decodes), pinned; the fastest of 15
   passes, as the undisturbed time (the median is kept next to it).
5. Cores (`core_costs`, the table's `cores` section): the H SINGLE workload
   on n pinned threads at once, each on its own copy of the index, against
   one thread alone, for n up to the allowed CPUs (at most 4), the median
   of CORE_PROBE_ROUNDS rounds: on a shared machine the factor drifts
   between tables, and a factor below 1 (noise: sharing cannot make cores
   faster) counts as 1 (Costs.cpu_factor). What the cores share is the
   memory side (last-level cache, memory bandwidth), not an execution unit.
   The model multiplies a query's CPU time by cpu_factor(cores).
6. Fit quality: median and p90 of |predicted - measured| / measured, and the
   relative error of the summed time (what a workload's run time inherits),
   per type and per type and class.

`default(codec)` measures once per machine on a small generated index and
caches the table as JSON under $XDG_CACHE_HOME/tierlab/ (default
~/.cache/tierlab/), keyed by codec, tierlab version, CPU model and the build of
the C library; the path is
printed on stderr when it is created.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tierlab import __version__
from tierlab.core import registry
from tierlab.core.errors import TierlabError

FORMAT = "tierlab-costs"
VERSION = 1
COEFFICIENTS = ("query_ns", "block_ns", "posting_ns")
OPTIONAL = ("result_ns", "candidate_ns")  # optional terms of the formula (0 when absent)
CLASSES = ("H", "M", "L")
# Generated workloads: queries per class (more where each is cheaper). Small
# enough for a few seconds per repeat on a ~25 MB index, large enough that
# every class has a few hundred points.
DEFAULT_QUERIES = {"H": 150, "M": 600, "L": 1000}
DEFAULT_PLACEMENT = "dram"  # CPU costs: no page faults in the measured latencies
DEFAULT_CODEC = "pfor-delta256"
DEFAULT_CORPUS_BYTES = 24_000_000
EXTRA_TERMS_GAIN = 0.8  # result/candidate terms kept only if they cut the fit's error by 20 %
TRIM = 0.01  # share of the worst-fitting queries left out of the second fit
DECODE_SAMPLE_BLOCKS = 20_000
DECODE_REPS = 15


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Coefficients:
    """One query type's costs, in ns. The optional terms (None: not in the
    table): result_ns per hit kept in the top-k (heap and final sort) and
    candidate_ns per posting of the shortest list (AND: each candidate is
    looked up in the other lists, however few match)."""

    query_ns: float
    block_ns: float
    posting_ns: float
    result_ns: float | None = None
    candidate_ns: float | None = None

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in COEFFICIENTS}
        for k in OPTIONAL:
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d

    def predict(self, blocks, postings, results=None, candidates=None):
        out = self.query_ns + self.block_ns * blocks + self.posting_ns * postings
        if results is not None:
            out = out + (self.result_ns or 0.0) * results
        if candidates is not None:
            out = out + (self.candidate_ns or 0.0) * candidates
        return out


class CostModel(ABC):
    """What the model (model/sim.py, model/config.py) asks a cost table: the
    one interface of the measured table (Costs), costs given inline in a run
    spec (config.InlineCosts) and the tests' fakes. The model calls every
    method unconditionally, so a method renamed in one implementation fails
    loudly (the class cannot be instantiated, or the call raises) instead of
    silently charging nothing; tests/model/test_cost_model.py checks that
    Costs implements all of them. A table without a measurement returns the
    neutral value each method names (0, None, (1.0, why))."""

    @abstractmethod
    def query_cpu_ns(self, qtype, blocks_decoded, postings_scored):
        """query_ns + block_ns * blocks + posting_ns * postings of the type."""

    @abstractmethod
    def extra_cpu_ns(self, qtype, results, candidates):
        """result_ns * results + candidate_ns * candidates; 0 without them."""

    @abstractmethod
    def decode_block_ns(self) -> float | None:
        """Decode time of a DID block plus its freq block; None without it
        (then the whole per-block cost counts as decoding)."""

    @abstractmethod
    def handoff(self) -> tuple[float, float]:
        """(wake_ns, signal_ns) of a thread hand-off; (0.0, 0.0) without it."""

    @abstractmethod
    def wake_samples(self):
        """Every measured wake-up (ns, sorted array); None without them."""

    @abstractmethod
    def copy_rate(self) -> float | None:
        """Bytes/s of the worker's copy into the segment cache; None without it."""

    @abstractmethod
    def cpu_factor(self, cores: int) -> tuple[float, str]:
        """(factor, where it comes from) of `cores` cores querying at once;
        (1.0, why) without a measurement."""

    @abstractmethod
    def page_hit_ns(self) -> float:
        """ns per block read through the emulated page cache; 0.0 without it."""

    @abstractmethod
    def page_touch_ns(self) -> float:
        """ns per 4 KiB page a base-prefetch worker touches; 0.0 without it."""

    @abstractmethod
    def page_miss_ns(self) -> float:
        """ns per read's frame bookkeeping in the emulated page cache; 0.0 without it."""

    def memory_extra_ns(self, spec: str, qtype: str, structure: str, per: str) -> float | None:
        """ns that placing `structure` (dict, skip, did, freq) on memory spec
        `spec` adds over the machine's DRAM to a `qtype` query, per block
        decoded (per="block") or per query (per="query"): the table's `memory`
        section (`tierlab query costs INDEX --tier SPEC`, tierlab.engine.
        memcosts); None without it."""
        sec = (getattr(self, "extra", None) or {}).get("memory") or {}
        row = ((sec.get("tiers") or {}).get(spec) or {}).get(qtype, {}).get(structure)
        if not row:
            return None
        key = "extra_ns_per_block" if per == "block" else "extra_ns_per_query"
        v = row.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise TierlabError(f"memory.tiers.{spec}.{qtype}.{structure}.{key} must be a number")
        return float(v)

    @abstractmethod
    def describe(self) -> dict:
        """Where the costs come from, for a run's params (`from` and what matters)."""


@dataclass
class Costs(CostModel):
    """A cost table (see the module docstring); JSON layout in `to_dict`."""

    single: Coefficients
    and_: Coefficients
    codec: str
    block_size: int
    index: str | None = None
    placement: str | None = None
    machine: dict = field(default_factory=dict)
    created_at: str = ""
    decode: dict = field(default_factory=dict)
    fit: dict = field(default_factory=dict)
    method: str = ""
    extra: dict = field(default_factory=dict)  # other top-level keys, kept on a round trip

    def coefficients(self, qtype: str) -> Coefficients:
        if qtype == "single":
            return self.single
        if qtype == "and":
            return self.and_
        raise TierlabError(f"unknown query type '{qtype}' "
                           f"(known: {', '.join(registry.query_types())})")

    def with_results(self, qtype: str) -> Coefficients:
        """The optional fit with a result_ns term (see the module docstring)."""
        part = (self.extra.get("with_results") or {}).get(qtype)
        if not isinstance(part, dict):
            raise TierlabError(f"this cost table has no with_results.{qtype} fit (measure it "
                               f"again with `tierlab query costs`)")
        try:
            return Coefficients(**{k: float(part[k]) for k in (*COEFFICIENTS, "result_ns")})
        except (KeyError, TypeError, ValueError):
            raise TierlabError(f"with_results.{qtype}: needs {', '.join(COEFFICIENTS)} and "
                               f"result_ns") from None

    def query_cpu_ns(self, qtype, blocks_decoded, postings_scored, results=None):
        """query_ns + block_ns * blocks_decoded + posting_ns * postings_scored of
        the query type, element-wise. qtype is 'single'/'and' or an array of
        them (one per query); the counts are scalars or arrays. With results
        (hits returned), the with_results fit is used instead. Returns a
        float or a float64 array."""
        b = np.asarray(blocks_decoded, dtype=np.float64)
        p = np.asarray(postings_scored, dtype=np.float64)
        r = None if results is None else np.asarray(results, dtype=np.float64)
        pick = self.coefficients if r is None else self.with_results
        if isinstance(qtype, str):
            out = pick(qtype).predict(b, p, r)
        else:
            t = np.asarray(qtype)
            unknown = set(np.unique(t).tolist()) - set(registry.query_types())
            if unknown:
                raise TierlabError(f"unknown query type(s) {sorted(unknown)} (known: "
                                   f"{', '.join(registry.query_types())})")
            is_and = t == "and"
            out = np.where(is_and, pick("and").predict(b, p, r), pick("single").predict(b, p, r))
        return float(out) if np.ndim(out) == 0 else out

    def decode_block_ns(self) -> float | None:
        """The `decode` section's ns per DID block plus per freq block (the
        model charges the tier factor to this part of a block's cost); None
        for a table without it."""
        did, freq = self.decode.get("did_block_ns"), self.decode.get("freq_block_ns")
        if did is None:
            return None
        return float(did) + float(freq or 0.0)

    def handoff(self) -> tuple[float, float]:
        """(wake_ns, signal_ns) of the table's `threads` section (measured by
        tierlab_apcache_handoff_ns): a blocked runtime thread resumes wake_ns
        after it is signalled, and signalling a waiting thread costs the
        signaller signal_ns. (0, 0) for a table without it."""
        t = self.extra.get("threads") or {}
        try:
            return float(t.get("wake_ns") or 0.0), float(t.get("signal_ns") or 0.0)
        except (TypeError, ValueError):
            raise TierlabError("threads: wake_ns and signal_ns must be numbers") from None

    def wake_samples(self):
        """Every measured wake-up (ns, sorted) of the `threads` section, which
        the model draws its wake-ups from; None for a table without them (the
        model then uses wake_ns for every wake-up)."""
        v = (self.extra.get("threads") or {}).get("wake_ns_samples")
        if not v:
            return None
        a = np.asarray(v, dtype=np.float64)
        if a.ndim != 1 or not np.isfinite(a).all() or (a < 0).any():
            raise TierlabError("threads: wake_ns_samples must be a list of numbers >= 0")
        return a

    def copy_rate(self) -> float | None:
        """Bytes/s at which the runtime's worker copies a term into the segment
        cache (the table's threads.copy_bytes_per_s, measured by
        tierlab_apcache_copy_rate); None for a table without it."""
        v = (self.extra.get("threads") or {}).get("copy_bytes_per_s")
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise TierlabError(f"threads: copy_bytes_per_s must be a number > 0, not {v!r}")
        return float(v)

    def cpu_factor(self, cores: int) -> tuple[float, str]:
        """(factor, where it comes from): how much longer a query's CPU work
        takes with `cores` cores querying their own index copies at once (the
        table's `cores` section, core_costs). Beyond the cores measured, the
        last measured slowdown per extra core goes on linearly: an
        extrapolation, and the source says so. (1.0, why) for one core or a
        table without the section. A factor measured below 1 (cores faster
        together than alone, which sharing cannot do: the noise of a shared
        machine) counts as 1.0, and the source says that too."""
        if cores <= 1:
            return 1.0, "one core"
        sec = self.extra.get("cores")
        if not sec:
            return 1.0, ("none: the cost table has no 'cores' section (re-measure it with "
                         "`tierlab query costs`); cores do not slow each other down here")
        f = sec.get("cpu_factor") if isinstance(sec, dict) else None
        try:
            f = {int(n): float(v) for n, v in f.items()}
        except (AttributeError, TypeError, ValueError):
            raise TierlabError("cores.cpu_factor must map core counts to numbers") from None
        if any(n < 1 or not math.isfinite(v) or v <= 0 for n, v in f.items()):
            raise TierlabError("cores.cpu_factor: core counts >= 1 and factors > 0")
        noise = "below 1 (faster together than alone: noise), 1.0 used"
        if cores in f:
            if f[cores] < 1.0:
                return 1.0, f"measured on {cores} cores as {f[cores]:.3f}, {noise}"
            return f[cores], f"measured on {cores} cores"
        top = max(f)
        if top <= 1:
            return 1.0, "none: measured on one CPU only; cores do not slow each other down here"
        if cores < top:
            raise TierlabError(f"cores.cpu_factor has {top} cores but not {cores}")
        if f[top] < 1.0:
            return 1.0, f"measured up to {top} cores as {f[top]:.3f}, {noise}"
        per_core = (f[top] - 1.0) / (top - 1)
        return (1.0 + per_core * (cores - 1),
                f"extrapolated: measured up to {top} cores ({f[top]:.3f}), "
                f"+{per_core:.3f} per further core")

    def page_hit_ns(self) -> float:
        """ns per block read through the runtime's emulated page cache (the
        table's threads.page_hit_ns, tierlab_apcache_page_hit_ns); 0 for a
        table without it."""
        return self._thread_ns("page_hit_ns")

    def page_touch_ns(self) -> float:
        """ns per 4 KiB page a base-prefetch worker reads through the
        runtime's emulated page cache into its 4096-byte buffer (the table's
        threads.page_touch_ns); 0 for a table without it."""
        return self._thread_ns("page_touch_ns")

    def page_miss_ns(self) -> float:
        """ns per read through the runtime's emulated page cache outside the
        device's service time (reserving and releasing the run's frames; the
        table's threads.page_miss_ns); 0 for a table without it."""
        return self._thread_ns("page_miss_ns")

    def _thread_ns(self, key: str) -> float:
        v = (self.extra.get("threads") or {}).get(key)
        if v is None:
            return 0.0
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise TierlabError(f"threads: {key} must be a number >= 0, not {v!r}")
        return float(v)

    def extra_cpu_ns(self, qtype, results, candidates):
        """The optional terms of the table's own coefficients: result_ns *
        results + candidate_ns * candidates (0 for a table without them).
        The model adds this to query_cpu_ns. Scalars or arrays, like
        query_cpu_ns."""
        r = np.asarray(results, dtype=np.float64)
        c = np.asarray(candidates, dtype=np.float64)

        def part(t):
            k = self.coefficients(t)
            return (k.result_ns or 0.0) * r + (k.candidate_ns or 0.0) * c

        if isinstance(qtype, str):
            out = part(qtype)
        else:
            t = np.asarray(qtype)
            out = np.where(t == "and", part("and"), part("single"))
        return float(out) if np.ndim(out) == 0 else out

    def describe(self) -> dict:
        return {"from": self.index or "table", "codec": self.codec,
                "single": self.single.as_dict(), "and": self.and_.as_dict(),
                "created_at": self.created_at}

    def missing(self) -> str | None:
        """What a cached table of an older tierlab lacks that `measure` now
        writes (None: nothing); the per-machine caches measure again then."""
        gone = [f"{k!r} section" for k in ("threads", "cores") if k not in self.extra]
        for key in ("page_touch_ns", "page_miss_ns"):
            if "threads" in self.extra and key not in (self.extra["threads"] or {}):
                gone.append(f"threads.{key}")
        return f"no {' or '.join(gone)} (older tierlab)" if gone else None

    def to_dict(self) -> dict:
        d = {"format": FORMAT, "version": VERSION, "index": self.index, "codec": self.codec,
             "block_size": self.block_size, "placement": self.placement,
             "machine": self.machine, "created_at": self.created_at,
             "single": self.single.as_dict(), "and": self.and_.as_dict(),
             "decode": self.decode, "fit": self.fit, "method": self.method}
        d.update({k: v for k, v in self.extra.items() if k not in d})
        return d

    def save(self, path: str | os.PathLike) -> Path:
        """Write the JSON (atomically: a temporary file renamed into place)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
            os.replace(tmp, path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise TierlabError(f"cannot write {path}: {e.strerror or e}") from None
        return path

    @classmethod
    def from_dict(cls, d: dict, where: str = "cost table") -> "Costs":
        if not isinstance(d, dict):
            raise TierlabError(f"{where}: not a JSON object")
        if d.get("format") != FORMAT:
            raise TierlabError(f"{where}: 'format' is {d.get('format')!r}, expected '{FORMAT}' "
                               f"(write one with `tierlab query costs`)")
        if d.get("version") != VERSION:
            raise TierlabError(f"{where}: 'version' is {d.get('version')!r}; this tierlab reads "
                               f"version {VERSION}")
        coef = {}
        for t in registry.query_types():
            part = d.get(t)
            if not isinstance(part, dict):
                raise TierlabError(f"{where}: missing '{t}' (an object with "
                                   f"{', '.join(COEFFICIENTS)})")
            vals = {}
            for k in COEFFICIENTS:
                v = part.get(k)
                if v is None:
                    raise TierlabError(f"{where}: missing '{t}.{k}'")
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise TierlabError(f"{where}: '{t}.{k}' must be a finite number, not {v!r}")
                if v < 0:
                    raise TierlabError(f"{where}: '{t}.{k}' is negative ({v}); costs are >= 0")
                vals[k] = float(v)
            for k in OPTIONAL:
                v = part.get(k)
                if v is None:
                    continue
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                        or v < 0:
                    raise TierlabError(f"{where}: '{t}.{k}' must be a finite number >= 0, not "
                                       f"{v!r}")
                vals[k] = float(v)
            coef[t] = Coefficients(**vals)
        codec = d.get("codec")
        if not isinstance(codec, str) or not codec:
            raise TierlabError(f"{where}: 'codec' must be a codec name, not {codec!r}")
        bs = d.get("block_size")
        if isinstance(bs, bool) or not isinstance(bs, int) or bs < 1:
            raise TierlabError(f"{where}: 'block_size' must be a positive whole number, not "
                               f"{bs!r}")
        known = {"format", "version", "index", "codec", "block_size", "placement", "machine",
                 "created_at", "single", "and", "decode", "fit", "method"}
        return cls(single=coef["single"], and_=coef["and"], codec=codec, block_size=bs,
                   index=d.get("index"), placement=d.get("placement"),
                   machine=d.get("machine") or {}, created_at=d.get("created_at") or "",
                   decode=d.get("decode") or {}, fit=d.get("fit") or {},
                   method=d.get("method") or "",
                   extra={k: v for k, v in d.items() if k not in known})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Costs":
        """Read and check a cost table; TierlabError naming the bad key."""
        path = Path(path)
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise TierlabError(f"{path}: no such cost table (write one with `tierlab query "
                               f"costs INDEX --out {path}`)") from None
        except OSError as e:
            raise TierlabError(f"{path}: cannot read ({e.strerror or e})") from None
        try:
            d = json.loads(text)
        except ValueError as e:
            raise TierlabError(f"{path}: not JSON ({e})") from None
        return cls.from_dict(d, str(path))


def load(path: str | os.PathLike) -> Costs:
    return Costs.load(path)


# --------------------------------------------------------------------------
# Non-negative least squares
# --------------------------------------------------------------------------

def nnls(A, b, *, max_iter: int | None = None) -> np.ndarray:
    """argmin ||A x - b||_2 subject to x >= 0 (Lawson and Hanson's active-set
    method, 1974, ch. 23). Columns are scaled to unit norm first, so
    coefficients of very different magnitudes (ns per query vs per posting)
    are treated alike. Returns x (float64, every entry >= 0)."""
    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if A.ndim != 2 or b.ndim != 1 or A.shape[0] != b.shape[0]:
        raise ValueError(f"nnls: A must be m x n and b of length m (got {A.shape}, {b.shape})")
    if not (np.isfinite(A).all() and np.isfinite(b).all()):
        raise ValueError("nnls: A and b must be finite")
    m, n = A.shape
    norms = np.linalg.norm(A, axis=0)
    live = norms > 0  # an all-zero column gets coefficient 0
    scale = np.where(live, norms, 1.0)
    As = A / scale
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(m, n) * max(1.0, np.abs(As).sum(axis=0).max(initial=0))
    max_iter = max_iter or 30 * max(n, 1)

    def solve(mask):
        z = np.zeros(n)
        z[mask] = np.linalg.lstsq(As[:, mask], b, rcond=None)[0]
        return z

    for _ in range(max_iter):
        w = As.T @ (b - As @ x)  # the gradient: where the residual still pulls
        free = ~passive & live
        if not free.any() or w[free].max() <= tol:
            break
        j = int(np.argmax(np.where(free, w, -np.inf)))
        passive[j] = True
        for _ in range(max_iter):
            z = solve(passive)
            if (z[passive] > tol).all():
                x = z
                break
            # step from x towards z as far as feasibility allows, drop the
            # variables that hit zero from the passive set
            neg = passive & (z <= tol)
            alpha = np.min(x[neg] / np.maximum(x[neg] - z[neg], 1e-300))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
            if not passive.any():
                break
        else:
            break
    return np.maximum(x, 0.0) / scale


def fit_coefficients(blocks, postings, latency, classes=None, results=None,
                     block_floor: float = 0.0, trim: float = TRIM,
                     candidates=None) -> Coefficients:
    """Non-negative least-squares fit of latency ~ query_ns + block_ns * blocks
    + posting_ns * postings (+ result_ns * results when results are given).
    Each query's error is taken relative to the mean latency of its class and
    every class weighs the same, however many queries it has: within a class
    this is plain least squares (so the class's total time comes out right),
    across classes it keeps the cheap L queries from being ignored next to
    the costly H ones. classes: one label per query (None: all one class). block_floor:
    block_ns is at least this (the measured decode time of a block), so the
    split between per-block and per-posting cost stays physical where blocks
    and postings grow together (SINGLE). trim: after a first fit, this
    fraction of the queries with the largest weighted errors (stalls a shared
    machine adds even to a median of runs) is left out of a second fit."""
    y = np.asarray(latency, dtype=np.float64)
    cols = [np.ones_like(y), np.asarray(blocks, dtype=np.float64),
            np.asarray(postings, dtype=np.float64)]
    names = list(COEFFICIENTS)
    if results is not None:
        cols.append(np.asarray(results, dtype=np.float64))
        names.append("result_ns")
    if candidates is not None:
        cols.append(np.asarray(candidates, dtype=np.float64))
        names.append("candidate_ns")
    if not len(y):
        raise TierlabError("no queries to fit")
    if not (y > 0).all():
        raise TierlabError("latencies must be positive")
    labels = np.zeros(len(y), dtype=np.intp) if classes is None else \
        np.unique(np.asarray(classes, dtype=object).astype(str), return_inverse=True)[1]
    count = np.bincount(labels)
    mean = np.bincount(labels, weights=y) / count
    w = 1.0 / (mean[labels] * np.sqrt(count[labels]))
    A = np.column_stack(cols) * w[:, None]
    rhs = (y - block_floor * cols[1]) * w
    x = nnls(A, rhs)
    drop = int(trim * len(y))
    if drop:
        keep = np.argsort(np.abs(A @ x - rhs))[: len(y) - drop]
        x = nnls(A[keep], rhs[keep])
    x = [float(v) for v in x]
    x[1] += block_floor
    return Coefficients(**dict(zip(names, x)))


def _errors(pred: np.ndarray, y: np.ndarray) -> dict:
    """Per-query |relative error| (median, p90) and the error of the total,
    which is what a workload's predicted run time inherits."""
    e = np.abs(pred - y) / y
    return {"queries": int(len(y)),
            "median_abs_rel_error": float(np.median(e)) if len(e) else None,
            "p90_abs_rel_error": float(np.percentile(e, 90)) if len(e) else None,
            "total_rel_error": float(pred.sum() / y.sum() - 1) if len(y) else None,
            "median_latency_ns": float(np.median(y)) if len(y) else None}


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------

@dataclass
class _Workload:
    path: Path
    qclass: str | None  # H, M, L for generated workloads (else per query)
    label: str


def _generated_workloads(ext, documents: int, tmp: Path, queries: dict[str, int],
                         seed: int) -> list[_Workload]:
    from tierlab.engine.workload import Thresholds, class_terms, generate_queries, write_queries

    thr = Thresholds.resolve(documents=documents)
    out = []
    for cls in CLASSES:
        members = class_terms(ext, cls, thr)
        for qtype in registry.query_types():
            need = 2 if qtype == "and" else 1
            if len(members) < need:
                continue  # a tiny index may lack a class; the others still fit
            qs, _ = generate_queries(members, n=queries[cls], qtype=qtype, seed=seed)
            path = tmp / f"{qtype}-{cls}.queries"
            write_queries(path, qs)
            out.append(_Workload(path, cls, f"{qtype} {cls}"))
    return out


def _query_classes(table, postings: dict, thr) -> np.ndarray:
    """Class of each query of a user workload: of its most frequent term."""
    out = []
    for terms in table["terms"]:
        p = max((postings.get(t, 0) for t in terms), default=0)
        out.append(thr.classify(p) if p else "")
    return np.array(out, dtype=object)


def _workload_sidecar_class(path: Path) -> str | None:
    from tierlab.engine.workload import stats_path

    try:
        c = json.loads(stats_path(path).read_text()).get("generator", {}).get("class")
    except (OSError, ValueError, AttributeError):
        return None
    return c if c in CLASSES else None


def decode_costs(index, ext, *, sample: int = DECODE_SAMPLE_BLOCKS, reps: int = DECODE_REPS,
                 seed: int = 0) -> dict:
    """ns per full DID block and per full freq block of the index's codec:
    the timing loop of kernels/src/bench.c (tierlab_bench_decode_blocks,
    per-block regime) over a seeded sample of the index's own full blocks,
    copied back to back, pinned to one CPU. The fastest of `reps` passes
    (the undisturbed time: on a shared machine a pass of a few ms is easily
    preempted; the fit uses it as a lower bound) and their median."""
    from tierlab.engine.index import FILES, SKIP_ENTRY_BYTES
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    path = Path(index.path)
    B = int(index.info["block_size"])
    codec_name = index.info["codec"]
    dc = lib.tierlab_codec_find(codec_name.encode())
    if dc == ffi.NULL:
        raise TierlabError(f"{path}: codec '{codec_name}' is not in this library's registry")
    fc = lib.tierlab_codec_freq(dc)
    postings = ext["postings"].to_numpy(np.int64)
    nfull = postings // B  # a term's full blocks are its first p // B blocks
    total = int(nfull.sum())
    if total == 0:
        return {"did_block_ns": None, "freq_block_ns": None, "blocks_timed": 0,
                "note": f"no term has a full block of {B} postings"}
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(total, size=min(sample, total), replace=False))
    term = np.searchsorted(np.cumsum(nfull), pick, side="right")
    first = np.cumsum(nfull) - nfull
    block = pick - first[term]
    # skip entries: 32 bytes, 8-aligned; as u64 words: [first_did | prev << 32,
    # did_offset, freq_offset, CRCs], then the next entry's offsets
    words = np.fromfile(path / FILES[1], dtype="<u8")
    pos = (ext["skip_offset"].to_numpy(np.int64)[term] + 8 + SKIP_ENTRY_BYTES * block) // 8
    prevs = (words[pos] >> np.uint64(32)).astype(np.uint32)
    result = {"blocks_timed": int(len(pick)), "block_postings": B, "reps": reps,
              "regime": "per-block (each full block into one small buffer, as a query does)"}
    lens = np.full(len(pick), B, dtype=np.uint32)
    out = np.zeros(B + 64, dtype=np.uint32)
    for key, fname, ptr, col in (("did", FILES[2], dc, 1), ("freq", FILES[3], fc, 2)):
        result.update(_decode_pass(ffi, lib, path, key, fname, ptr, words[pos + col],
                                   words[pos + SKIP_ENTRY_BYTES // 8 + col], lens, prevs, out,
                                   reps))
    return result


HANDOFF_ROUNDS = 4001  # a tail of a few in a thousand needs thousands
COPY_PROBE_BYTES = 128 << 20  # copied into segments: well beyond the last-level cache
COPY_PROBE_REPS = 5
PAGE_HIT_PROBE_BYTES = 256  # about one compressed DID block
MISS_PROBE_RUN_PAGES = 32   # a miss's readahead run at the runtime's default 128 KiB
MISS_PROBE_PASSES = 15


def thread_costs(rounds: int = HANDOFF_ROUNDS) -> dict:
    """The table's `threads` section: the runtime's thread hand-off
    (tierlab_apcache_handoff_samples: ns from a broadcast to the woken thread
    running, median and every round, and the median of the broadcast itself
    with a waiter) and the rate
    of its worker's copy into the segment cache (tierlab_apcache_copy_rate).
    None of it is in a query's latency as `tierlab query run` measures it,
    yet every prefetched query the query thread waits for pays the hand-off
    and every cached term the copy."""
    from tierlab.core.native import ffi_lib

    ffi, lib = ffi_lib()
    wake, sig = ffi.new("double[]", rounds), ffi.new("double[]", rounds)
    rc = lib.tierlab_apcache_handoff_samples(rounds, wake, sig)
    if rc != 0:
        raise TierlabError(f"timing the thread hand-off failed (error {rc})")
    wakes = [int(round(wake[i])) for i in range(rounds)]
    rate = ffi.new("double *")
    rc = lib.tierlab_apcache_copy_rate(COPY_PROBE_BYTES, COPY_PROBE_REPS, rate)
    if rc != 0:
        raise TierlabError(f"timing the segment-cache copy failed (error {rc})")
    hit, touch, miss = ffi.new("double *"), ffi.new("double *"), ffi.new("double *")
    rc = lib.tierlab_apcache_page_hit_ns(PAGE_HIT_PROBE_BYTES, COPY_PROBE_REPS, hit)
    if rc == 0:  # a whole page at a time: a base-prefetch worker's read into its buffer
        rc = lib.tierlab_apcache_page_hit_ns(4096, COPY_PROBE_REPS, touch)
    if rc != 0:
        raise TierlabError(f"timing a page-cache hit failed (error {rc})")
    rc = lib.tierlab_apcache_page_miss_ns(MISS_PROBE_RUN_PAGES, MISS_PROBE_PASSES, miss)
    if rc != 0:
        raise TierlabError(f"timing a page-cache miss failed (error {rc})")
    return {"wake_ns": float(wake[rounds // 2]), "signal_ns": float(sig[rounds // 2]),
            "rounds": rounds, "wake_ns_samples": wakes,
            "copy_bytes_per_s": float(rate[0]),
            "page_hit_ns": float(hit[0]), "page_touch_ns": float(touch[0]),
            "page_miss_ns": float(miss[0]),
            "page_hit_how": f"tierlab_apcache_page_hit_ns: {PAGE_HIT_PROBE_BYTES}-byte blocks "
                            f"(page_touch_ns: 4096-byte pages) read one after another through the "
                            f"runtime's emulated page cache, 16 MiB resident, median of "
                            f"{COPY_PROBE_REPS} passes; page_miss_ns: "
                            f"tierlab_apcache_page_miss_ns, a read of {MISS_PROBE_RUN_PAGES} pages "
                            f"through it on a device that takes no time (frames reserved, "
                            f"evicting, and released) less the "
                            f"preadv alone, median of {MISS_PROBE_PASSES} passes",
            "copy_how": f"tierlab_apcache_copy_rate: {COPY_PROBE_BYTES >> 20} MiB copied page by "
                        f"page (lock, LRU touch, chain write) into cold 32 KiB segments, median "
                        f"of {COPY_PROBE_REPS}",
            "how": "tierlab_apcache_handoff_samples: pthread_cond_broadcast under the mutex "
                   "to a thread blocked in pthread_cond_wait for 50 us, the two pinned to two "
                   "CPUs; medians, and every wake-up (sorted) in wake_ns_samples"}


CORE_PROBE_MAX = 4           # cores the `cores` section measures at most
# alone / together rounds per core count (median kept). On a shared machine
# single rounds spread widely, and the median of a few rounds still moves
# enough to flip the multicore trend (model/README.md)
CORE_PROBE_ROUNDS = 41
CORE_PROBE_MIN_NS = 150_000_000  # each timed run repeats the workload to at least this


def _run_on_cores(ixs, queries, cpus, reps: int, k: int) -> list[float]:
    """Run `queries` `reps` times on each index of ixs at once, index i in a
    thread pinned to cpus[i], started together; each thread's summed query
    latency (ns, as the engine timed it in C, without the Python around it)."""
    import threading

    start = threading.Barrier(len(ixs))
    sums = [0.0] * len(ixs)
    failed = []

    from tierlab.engine.query import pin

    def work(i):
        try:
            pin(cpus[i])  # this thread only
            start.wait()
            for _ in range(reps):
                st, _, _, _ = ixs[i].run_batch(queries, k=k)  # the GIL is released in C
                sums[i] += float(st["latency_ns"].sum())
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            start.abort()
            failed.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(ixs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]
    return sums


def core_costs(index, workload, *, k: int = 1024, placement: str | None = DEFAULT_PLACEMENT,
               max_cores: int = CORE_PROBE_MAX, rounds: int | None = None) -> dict:
    """The table's `cores` section: how much longer a query's CPU work takes
    when n cores run queries at once, each on its own copy of the index (the
    reference's duplicated shards, one per core): they share the last-level
    cache and the memory bandwidth. For n = 1 .. min(allowed CPUs, max_cores),
    `rounds` rounds of the workload run alone on the first CPU and then on n
    CPUs together, alternating (the speed of memory-bound code can drift
    over seconds, so each together run is compared with the alone run next to
    it); cpu_factor[n] = median over rounds of (mean summed latency together) /
    (summed latency alone). The model multiplies a query's CPU time by it
    (Costs.cpu_factor)."""
    from tierlab.engine.index import Index
    from tierlab.engine.workload import read_queries

    rounds = rounds or CORE_PROBE_ROUNDS
    cpus = sorted(os.sched_getaffinity(0))[:max_cores] if hasattr(os, "sched_getaffinity") \
        else []
    queries = read_queries(workload)
    if not queries:
        raise TierlabError(f"{workload}: no queries to time on several cores")
    factors, samples, reps = {"1": 1.0}, {}, 0
    if len(cpus) < 2:  # nothing shares anything: no index copies to load
        return {"cpu_factor": factors, "measured_cores": 1, "ratios": samples,
                "workload": Path(workload).name, "repeats_per_run": reps,
                "how": "not measured: fewer than two CPUs to pin threads to"}
    ixs = [Index(index, placement) for _ in cpus]
    try:
        for ix in ixs:  # touch every structure once: no first-use page faults below
            ix.run_batch(queries, k=k)
        one = _run_on_cores(ixs[:1], queries, cpus[:1], 1, k)[0]
        reps = max(1, math.ceil(CORE_PROBE_MIN_NS / max(one, 1.0)))
        for n in range(2, len(cpus) + 1):
            ratios = []
            for _ in range(rounds):
                alone = _run_on_cores(ixs[:1], queries, cpus[:1], reps, k)[0]
                together = _run_on_cores(ixs[:n], queries, cpus[:n], reps, k)
                ratios.append(float(np.mean(together)) / alone)
            factors[str(n)] = float(np.median(ratios))
            samples[str(n)] = [round(r, 4) for r in ratios]
    finally:
        for ix in ixs:
            ix.close()
    return {"cpu_factor": factors, "measured_cores": len(cpus), "ratios": samples,
            "workload": Path(workload).name, "repeats_per_run": reps,
            "how": f"tierlab_query_batch on n pinned threads at once, each on its own copy of "
                   f"the index placed '{placement or 'storage'}', against one thread alone, "
                   f"alternating, {rounds} rounds; median ratio of summed query latencies"}


def _decode_pass(ffi, lib, path, key, fname, ptr, start, end, lens, prevs, out, reps) -> dict:
    """Gather the sampled blocks of one file back to back and time decoding them."""
    from tierlab.engine.query import pin

    start, end = start.astype(np.int64), end.astype(np.int64)
    data = np.fromfile(path / fname, dtype=np.uint8)
    sizes = end - start
    if (start < 128).any() or (end > len(data)).any() or (sizes <= 0).any():
        raise TierlabError(f"{path}: corrupt skip list (block offsets outside {fname})")
    offsets = np.zeros(len(lens) + 1, dtype=np.uint64)
    offsets[1:] = np.cumsum(sizes)
    gather = np.repeat(start - offsets[:-1].astype(np.int64), sizes) + np.arange(
        int(offsets[-1]))
    enc = np.concatenate([data[gather], np.zeros(64, np.uint8)])
    pass_ns = np.zeros(reps, dtype=np.uint64)
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    pin(None)
    try:
        rc = lib.tierlab_bench_decode_blocks(
            ptr, ffi.cast("uint8_t *", ffi.from_buffer(enc)),
            ffi.cast("uint64_t *", ffi.from_buffer(offsets)),
            ffi.cast("uint32_t *", ffi.from_buffer(lens)),
            ffi.cast("uint32_t *", ffi.from_buffer(prevs)), len(lens),
            ffi.cast("uint32_t *", ffi.from_buffer(out)), 0, reps,
            ffi.cast("uint64_t *", ffi.from_buffer(pass_ns)))
    finally:
        if affinity is not None:
            os.sched_setaffinity(0, affinity)
    if rc != 0:
        raise TierlabError(f"{path}: a sampled {key} block does not decode (error {rc})")
    return {f"{key}_block_ns": float(pass_ns.min()) / len(lens),
            f"{key}_block_ns_median": float(np.median(pass_ns)) / len(lens),
            f"{key}_block_bytes_mean": float(sizes.mean())}


def fit_table(table, decode: dict | None = None) -> tuple[dict, dict, dict]:
    """Fit both query types from a query table with columns query_type,
    query_class, blocks_decoded, postings_scored, freq_blocks_decoded,
    results, latency_ns. decode (decode_costs' result) gives block_ns its
    floor: a DID block's decode time plus a freq block's times the share of
    decoded DID blocks whose freq block was decoded too. The fit has
    result_ns (both types) and, for AND when the table has a
    shortest_postings column, candidate_ns. Returns
    (coefficients per type, fit quality per type with by_class and the floor,
    the optional `with_results` section: the same fit with a result_ns term)."""
    coef, fit, extended = {}, {}, {}
    for qtype in registry.query_types():
        t = table[table["query_type"] == qtype]
        if not len(t):
            raise TierlabError(f"no {qtype} queries to fit (no workload has any); give a "
                               f"--workload with {qtype.upper()} queries")
        cls = t["query_class"].to_numpy(dtype=object).astype(str)
        y = t["latency_ns"].to_numpy(np.float64)
        b = t["blocks_decoded"].to_numpy(np.float64)
        p = t["postings_scored"].to_numpy(np.float64)
        r = t["results"].to_numpy(np.float64)
        floor = 0.0
        if decode and decode.get("did_block_ns") is not None and b.sum() > 0:
            share = float(t["freq_blocks_decoded"].sum()) / float(b.sum())
            floor = decode["did_block_ns"] + share * decode["freq_block_ns"]
        # AND: the candidates (shortest list's postings) when the table has them
        c = t["shortest_postings"].to_numpy(np.float64) \
            if qtype == "and" and "shortest_postings" in t.columns else None
        plain = fit_coefficients(b, p, y, cls, block_floor=floor)
        full = fit_coefficients(b, p, y, cls, results=r, block_floor=floor, candidates=c)
        # the extra terms only where they explain the latencies: where they do
        # not, results ~ postings makes them steal from block_ns and posting_ns
        if _weighted_sse(full.predict(b, p, r, c), y, cls) < \
                EXTRA_TERMS_GAIN * _weighted_sse(plain.predict(b, p), y, cls):
            coef[qtype] = full
        else:
            coef[qtype] = plain
        fit[qtype] = _quality(coef[qtype].predict(b, p, r, c), y, cls)
        fit[qtype]["block_ns_floor"] = floor
        ext = fit_coefficients(b, p, y, cls, results=r, block_floor=floor)
        extended[qtype] = ext.as_dict()
        extended.setdefault("fit", {})[qtype] = _quality(ext.predict(b, p, r), y, cls)
    extended["note"] = ("the same fit with a result_ns term per hit returned (the top-k heap "
                        "and the final sort grow with the results); not part of the model's "
                        "formula, for comparison")
    return coef, fit, extended


def _weighted_sse(pred: np.ndarray, y: np.ndarray, cls: np.ndarray) -> float:
    """fit_coefficients' objective: squared errors relative to the class mean,
    every class weighted the same."""
    total = 0.0
    for c in np.unique(cls):
        m = cls == c
        total += float(np.mean(((pred[m] - y[m]) / y[m].mean()) ** 2))
    return total


def _quality(pred: np.ndarray, y: np.ndarray, cls: np.ndarray) -> dict:
    q = _errors(pred, y)
    q["by_class"] = {c: _errors(pred[cls == c], y[cls == c]) for c in CLASSES if (cls == c).any()}
    other = sorted(set(cls.tolist()) - set(CLASSES))
    for c in other:
        q["by_class"][c or "unclassified"] = _errors(pred[cls == c], y[cls == c])
    return q


def measure(index: str | os.PathLike, *, workloads=None, placement: str | None = DEFAULT_PLACEMENT,
            passes: int = 2, repeats: int = 3, queries: dict[str, int] | None = None,
            k: int = 1024, seed: int = 0, progress=None) -> Costs:
    """Measure the cost table of an index (the module docstring says how).

    workloads: query files (None: generate SINGLE and AND for H, M, L from
    the index's dictionary, `queries` per class). placement as
    tierlab.engine.query.run takes it (default dram). progress(done, total) is
    called after each run of a workload."""
    import pandas as pd

    from tierlab.engine.index import Index
    from tierlab.engine.query import machine, run
    from tierlab.engine.workload import Thresholds
    from tierlab.traces.schema import read_table

    if passes < 2:
        raise TierlabError(f"passes must be >= 2 (the last, warm pass is measured), not {passes}")
    if repeats < 1:
        raise TierlabError(f"repeats must be >= 1, not {repeats}")
    queries = {**DEFAULT_QUERIES, **(queries or {})}
    for c, n in queries.items():
        if c not in CLASSES or not isinstance(n, int) or n < 1:
            raise TierlabError(f"queries per class: {c}={n!r} (classes {', '.join(CLASSES)}, "
                               f"counts >= 1)")
    for w in workloads or []:
        if not Path(w).is_file():
            raise TierlabError(f"--workload {w}: no such file")
    index = Path(index)
    with Index(index) as ix:  # only read here; the runs place it
        ext = ix.extents()
        info = dict(ix.info)
        decode = decode_costs(ix, ext, seed=seed)
    threads = thread_costs()
    documents = int(info["docs"])
    thr = Thresholds.resolve(documents=documents)
    postings = dict(zip(ext["term"], ext["postings"].astype(np.int64)))
    with tempfile.TemporaryDirectory(prefix="tierlab-costs-") as tmp:
        tmp = Path(tmp)
        if workloads:
            wls = [_Workload(Path(w), _workload_sidecar_class(Path(w)), Path(w).name)
                   for w in workloads]
            how = "the given workloads"
        else:
            wls = _generated_workloads(ext, documents, tmp, queries, seed)
            how = ("generated SINGLE and AND workloads of the H, M and L classes ("
                   + ", ".join(f"{c} {queries[c]}" for c in CLASSES) + " queries each)")
        if not wls:
            raise TierlabError(f"{index}: no class has terms to query; give --workload")
        tables = []
        runs = iter(range(1, len(wls) * repeats + 1))
        for w in wls:
            lat = []
            for r in range(repeats):
                out = tmp / f"run-{len(tables)}-{r}.parquet"
                run(index, w.path, out, k=k, passes=passes, placement=placement)
                t = read_table(out)[1]
                lat.append(t["latency_ns"].to_numpy(np.float64))
                if progress:
                    progress(next(runs), len(wls) * repeats)
            t["latency_ns"] = np.median(np.vstack(lat), axis=0)  # same queries, same order
            t["workload"] = w.label
            t["query_class"] = w.qclass or _query_classes(t, postings, thr)
            tables.append(t)
        # the cores probe times the H SINGLE workload when generated (the reference's
        # multicore runs are H SINGLE), else the costliest workload given
        probe = next((w for w in wls if w.label == "single H"), None) or \
            wls[max(range(len(wls)), key=lambda i: float(tables[i]["latency_ns"].mean()))]
        cores = core_costs(index, probe.path, k=k, placement=placement)
    table = pd.concat(tables, ignore_index=True)
    known = table["unknown_terms"] == 0
    for qtype in registry.query_types():
        mine = table["query_type"] == qtype
        if mine.any() and not (mine & known).any():
            raise TierlabError(f"every {qtype} query of the workloads has a term that is not in "
                               f"{index}: nothing to fit")
    table = table[known & (table["latency_ns"] > 0)].copy()
    table["shortest_postings"] = [min((int(postings.get(x, 0)) for x in terms), default=0)
                                  for terms in table["terms"]]
    coef, fit, with_results = fit_table(table, decode)
    method = (f"tierlab.engine.query.run over {how}, {repeats} runs of {passes} passes "
              f"(last pass each) with the index placed '{placement or 'storage'}'; per-query "
              f"median latency of the runs; per type a non-negative least-squares fit of "
              f"latency ~ query_ns + block_ns * blocks_decoded + posting_ns * postings_scored "
              f"+ result_ns * results (+ candidate_ns * postings of the shortest list, AND) "
              f"with errors relative to the class's mean latency and every class weighted "
              f"equally, block_ns at least the decode time of its blocks, refitted without the "
              f"worst-fitting {TRIM:.0%} of queries; decode alone "
              f"timed with tierlab_bench_decode_blocks on the index's own full blocks.")
    return Costs(single=coef["single"], and_=coef["and"], codec=info["codec"],
                 block_size=int(info["block_size"]), index=str(index.resolve()),
                 placement=placement or "storage", machine=machine(),
                 created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), decode=decode,
                 fit=fit, method=method,
                 extra={"with_results": with_results, "threads": threads, "cores": cores,
                        "passes": passes, "repeats": repeats, "k": k,
                        "workloads": [w.label for w in wls],
                        "index_documents": documents, "index_build_id": info.get("build_id")})


# --------------------------------------------------------------------------
# The per-machine default
# --------------------------------------------------------------------------

def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tierlab"


def default_path(codec: str = DEFAULT_CODEC) -> Path:
    """Where the default table of this codec, tierlab version, CPU and build of
    the C kernels lives (a rebuilt engine gets a table of its own: its queries
    may cost differently)."""
    from tierlab.core.native import library_digest
    from tierlab.engine.query import machine

    cpu = machine().get("cpu", "unknown-cpu")
    slug = re.sub(r"[^a-z0-9]+", "-", cpu.lower()).strip("-")[:40]
    digest = hashlib.blake2b(f"{cpu} {library_digest()}".encode(), digest_size=4).hexdigest()
    return cache_dir() / f"costs-{codec}-v{__version__}-{slug}-{digest}.json"


def default(codec: str = DEFAULT_CODEC, *, refresh: bool = False, progress: bool = False,
            log=None) -> Costs:
    """The cost table of `codec` on this machine: the cached one, or measured
    now on a small generated index (~24 MB corpus, a few seconds) and cached
    (see default_path). refresh=True measures again. The path is printed on
    stderr (or passed to log) whenever a table is created."""
    from tierlab.core.native import codec as find_codec

    find_codec(codec)  # a clear error listing the known codecs
    log = log or (lambda msg: print(msg, file=sys.stderr))
    path = default_path(codec)
    if path.exists() and not refresh:
        try:
            cached = Costs.load(path)
            if not cached.missing():
                return cached
            log(f"tierlab: {path}: {cached.missing()}; measuring it again")
        except TierlabError as e:
            log(f"tierlab: {e}; measuring it again")
    from tierlab.engine import corpus as corpus_mod
    from tierlab.engine import index as index_mod

    with tempfile.TemporaryDirectory(prefix="tierlab-costs-default-") as tmp:
        tmp = Path(tmp)
        corpus_mod.generate(tmp / "corpus.txt",
                            corpus_mod.GenerateParams(size_bytes=DEFAULT_CORPUS_BYTES),
                            progress=progress)
        index_mod.build(tmp / "corpus.txt", tmp / "idx", codec=codec)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=None, unit="run", desc=f"costs {codec}", leave=False)
        try:
            costs = measure(tmp / "idx",
                            progress=None if bar is None else (lambda d, t: _tick(bar, d, t)))
        finally:
            if bar is not None:
                bar.close()
    costs.index = f"generated: {DEFAULT_CORPUS_BYTES // 1_000_000} MB corpus (seed 0), {codec}"
    costs.extra["default_cache_key"] = path.name
    costs.save(path)
    log(f"tierlab: measured the default cost table for {codec} on this machine: {path}")
    return costs


def _tick(bar, done: int, total: int) -> None:
    bar.total = total
    bar.update(done - bar.n)


__all__ = ["Coefficients", "Costs", "load", "nnls", "fit_coefficients", "measure",
           "decode_costs", "thread_costs", "default", "default_path", "cache_dir"]


# --------------------------------------------------------------------------
# Memory costs on tiers (the `memory` section)
# --------------------------------------------------------------------------

MEMORY_QUERIES = {"H": 30, "M": 60, "L": 60}


def memory_section(table: "Costs", index, tiers, *, machine: str = "xeon-gold-6252n",
                   cores: int = 1, workloads=None, queries: dict | None = None,
                   k: int = 1024, seed: int = 0) -> dict:
    """The cost table's `memory` section for memory specs `tiers` (tierlab.
    engine.memcosts.section): the index's workloads (given, or SINGLE and AND
    of H, M, L generated from its dictionary, MEMORY_QUERIES per class) as
    synthesised memory streams through `machine`'s caches and the tier-timing
    model, `cores` cores sharing each tier; each query's core time is the
    table's prediction for it."""
    from tierlab.engine import memcosts, memstream
    from tierlab.engine.index import Index
    from tierlab.engine.workload import read_queries

    index = Path(index)
    queries = {**MEMORY_QUERIES, **(queries or {})}
    with Index(index) as ix:
        ext = ix.extents()
        documents = int(ix.info["docs"])
    postings = dict(zip(ext["term"], ext["postings"].astype(np.int64)))
    with tempfile.TemporaryDirectory(prefix="tierlab-memcosts-") as tmp:
        paths = [Path(w) for w in workloads] if workloads else \
            [w.path for w in _generated_workloads(ext, documents, Path(tmp), queries, seed)]
        qs = [q for p in paths for q in read_queries(p)]
    if not qs:
        raise TierlabError(f"{index}: no queries to time the memory tiers with")
    stream = memstream.workload_stream(index, qs, k=k)
    cpu = np.asarray(table.query_cpu_ns(stream.qtype, stream.blocks, stream.postings),
                     dtype=np.float64)
    cand = np.array([min((int(postings.get(t, 0)) for t in q), default=0) for q in qs])
    cpu = cpu + np.asarray(table.extra_cpu_ns(stream.qtype, stream.results, cand), np.float64)
    sec = memcosts.section(stream, cpu, list(tiers), machine=machine, cores=cores,
                           what=f"synthesised (tierlab.engine.memstream) from {len(qs)} queries "
                                f"of {', '.join(p.name for p in paths)}")
    # the roofline rule beside it: DID + freq per block (model/tier.py)
    from tierlab.model.tier import roofline_ns

    for spec in tiers:
        for t in np.unique(stream.qtype):
            m = stream.qtype == t
            r = roofline_ns(stream, cpu, spec, ("did", "freq"))
            sec["tiers"][spec][str(t)]["roofline_postings_ns_per_block"] = \
                float(r[m].sum() / max(float(stream.blocks[m].sum()), 1.0))
    return sec
