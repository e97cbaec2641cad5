"""The index as the model sees it: per term its postings, blocks, and where its
DID and freq bytes lie in the two postings files (docs/apcache.md "The setting").
The model needs sizes, not postings, so an index is either read from a real
index directory (`from_index`, through tierlab.engine.index.Index.extents) or
synthesised from statistics (`synthesise`, `reference`) at any scale.

Units: bytes, postings, blocks of `block_postings` postings.

Synthesis (every choice here is the model's assumption, recorded in `stats`)
-----------------------------------------------------------------------------
- Document frequencies follow a Zipf law over the frequency rank r = 1..V:
  df(r) = min(documents, max(1, floor(C * r**-zipf))), with C solved (by
  bisection on log C) so that the sum of df over the whole vocabulary is the
  requested total of postings. The sum is exact without materialising V
  terms: ranks with df >= 100,000 are summed one by one, the rest are
  counted per df value k (the ranks with floor(C r^-s) = k form one range).
- Blocks of a term: ceil(df / block_postings) (the last block is partial).
- Bytes of a term: a DID costs log2(documents / df) + c bits (the gap-coding
  entropy of a list of density df/documents plus a codec overhead c) and a
  frequency `freq_bits` bits (default 2: most frequencies are 1 or 2). c is
  calibrated so that DID + freq bytes of the whole vocabulary are the
  requested `index_bytes`; it is reported as `did_overhead_bits`. So dense
  (frequent) terms are cheaper per posting than rare ones, as with real
  codecs.
- Dictionary order is random with respect to frequency (terms sort by their
  text), so a term's neighbours in the files are unrelated to it. Only the
  terms a workload can query are materialised (the `materialise_min_postings`
  and up); the bytes of all the others sit between them as filler, cut at
  uniform random points (uniform spacings, i.e. the gaps a random
  permutation of many small terms leaves). The DID file and the freq file
  share the order and the cut points.
- Names of synthetic terms are `t<rank>` (rank 1 is the most frequent), which
  are also valid query-file terms.

The `reference` preset is the APCache study's scale (docs/apcache.md, docs/workload.md):
Common Crawl, 160 GB of text, 160 M documents, 15.3 billion postings, a
20 GB pfor-delta256 index with ~178-byte blocks (DID + freq). The vocabulary
(58 M) is chosen so that the mean block is ~178 bytes (blocks = postings/256
plus about one partial block per term); the Zipf exponent 1.1 is an
assumption (it gives ~1,100 H terms holding about half of all postings).
`check_reference` compares the synthesised totals with these numbers.

The derived head (`{preset: reference, head: derived}`, the head of
REFERENCE_DERIVED_HEAD; `tierlab model reference --compare` uses it). The
Zipf head above has ~1,100 H terms (>= 1 M postings), ten of them in every
document (44 MB lists), and its H lists' p99/mean is ~19. The reference
states that AND H workloads touch ~56 % of the index's blocks and SINGLE H
~31 %. The RP generator cycles through the class's terms (docs/workload.md):
1,000 SINGLE queries at RP 0 draw min(1,000, K) distinct H terms and 1,000
AND queries (two halves of K/2 terms) min(2,000, K); a ratio of 56 / 31 =
1.8 then means K ~ 1,000 x 1.8 ~ 1,800 H terms (for K between 1,000 and
2,000), far more than 1,100, with a flatter head. So df follows
Zipf-Mandelbrot, min(N, floor(C (r + q)^-s)) (Mandelbrot's flattening of the
top ranks): with s = 1.3 the shift q = 90 gives K = 1,793 and no term in
every document (the largest list 51 M postings); the H lists' p99/mean is
~8 and they hold ~41 % of the index's bytes. s = 1.3 is an assumption, the
exponent of a scan (1.1-1.4) at which K ~ 1,800 keeps the mean block within
2.5 % of 178 bytes (174) and the totals exact; s = 1.1 needs no q (and has
no K of 1,800), and larger s push the mean block further off.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tierlab.core.errors import TierlabError

BLOCK_POSTINGS = 256
OFFSET_BYTES_PER_BLOCK = 8  # docs/apcache.md: in-cache block offsets in the segment chain
_EXACT_DF = 100_000          # ranks with df at least this are summed one by one

REFERENCE = {
    "documents": 160_000_000,
    "postings": 15_300_000_000,
    "vocabulary": 58_000_000,
    "zipf": 1.1,
    "index_bytes": 20_000_000_000,
    "freq_bits": 2.0,
    "block_postings": BLOCK_POSTINGS,
}
# The derived head (module docstring): Zipf-Mandelbrot exponent and shift
REFERENCE_DERIVED_HEAD = {"zipf": 1.3, "zipf_shift": 90.0}
HEADS = ("zipf", "derived")
# What the reference reports, to check the synthesis against (docs/apcache.md).
REFERENCE_TARGETS = {"postings": 15.3e9, "index_bytes": 20e9, "mean_block_bytes": 178.0}

SYNTHETIC_KEYS = ("documents", "postings", "vocabulary", "zipf", "index_bytes", "freq_bits",
                  "zipf_shift",
                  "block_postings", "materialise_min_postings", "seed")


@dataclass
class IndexMeta:
    """Per materialised term (arrays of equal length, one entry per term):
    postings, blocks, did/freq offsets and bytes. `names` are the terms'
    texts. Totals describe the whole index, filler included."""

    source: str                      # index directory, or `synthetic:<name>`
    names: list
    postings: np.ndarray
    blocks: np.ndarray
    did_offset: np.ndarray
    did_bytes: np.ndarray
    freq_offset: np.ndarray
    freq_bytes: np.ndarray
    did_file_bytes: int
    freq_file_bytes: int
    documents: int
    total_postings: int
    total_blocks: int
    vocabulary: int
    stats: dict = field(default_factory=dict)
    _lookup: dict | None = field(default=None, repr=False)

    @property
    def index_bytes(self) -> int:
        """DID + freq bytes of the whole index (cache_run.index_bytes)."""
        return int(self.did_file_bytes + self.freq_file_bytes)

    @property
    def term_bytes(self) -> np.ndarray:
        return self.did_bytes + self.freq_bytes

    def __len__(self) -> int:
        return len(self.names)

    def term_id(self, name: str) -> int | None:
        if self._lookup is None:
            self._lookup = {n: i for i, n in enumerate(self.names)}
        return self._lookup.get(name)

    def segments(self, segment_bytes: int) -> np.ndarray:
        """Segments each term occupies in the segment cache: its bytes plus 8
        bytes of in-cache offset per block, in whole segments (the formula of
        tierlab_segcache_segments)."""
        need = self.term_bytes + OFFSET_BYTES_PER_BLOCK * self.blocks
        return -(-need // int(segment_bytes))


# --- from a real index ------------------------------------------------------------

def from_index(path: str | os.PathLike) -> IndexMeta:
    """The metadata of an index built by `tierlab index build`."""
    from tierlab.engine.index import Index, read_manifest

    path = Path(path)
    manifest = read_manifest(path)
    with Index(path) as ix:
        ext = ix.extents()
    sizes = {}
    for f in ("dids.bin", "freqs.bin"):
        try:
            sizes[f] = (path / f).stat().st_size
        except OSError as e:
            raise TierlabError(f"index {path}: cannot stat {f} ({e.strerror})") from None
    col = {c: ext[c].to_numpy(dtype=np.int64) for c in
           ("postings", "blocks", "did_offset", "did_bytes", "freq_offset", "freq_bytes")}
    return IndexMeta(
        source=str(path), names=ext["term"].tolist(), **col,
        did_file_bytes=int(sizes["dids.bin"]), freq_file_bytes=int(sizes["freqs.bin"]),
        documents=int(manifest.get("documents") or 0),
        total_postings=int(col["postings"].sum()), total_blocks=int(col["blocks"].sum()),
        vocabulary=len(ext), stats={"from": "index", "codec": manifest.get("codec"),
                                    "block_size": manifest.get("block_size")})


# --- synthesis --------------------------------------------------------------------

class _Zipf:
    """df(r) = min(N, max(1, floor(C (r + q)^-s))) for r = 1..V, summed in
    groups; q = 0 is Zipf's law, q > 0 Mandelbrot's flattening of its head."""

    def __init__(self, documents: int, vocabulary: int, s: float, C: float, q: float = 0.0):
        self.N, self.V, self.s, self.C = float(documents), int(vocabulary), float(s), float(C)
        self.q = float(q)

    def ranks(self, k: float) -> int:
        """How many ranks have C (r + q)^-s >= k (before the cap at N)."""
        return max(0, int(math.floor((self.C / k) ** (1 / self.s) - self.q)))

    def head(self) -> np.ndarray:
        """df of the ranks with df >= _EXACT_DF, one entry per rank."""
        n = min(self.V, self.ranks(_EXACT_DF))
        if self.N < _EXACT_DF:  # counted in the tail, capped at N
            n = 0
        r = np.arange(1, n + 1, dtype=np.float64)
        return np.minimum(self.N, np.floor(self.C * (r + self.q) ** -self.s))

    def tail(self) -> tuple[np.ndarray, np.ndarray]:
        """(k, count of ranks with df = k) for k = 1.._EXACT_DF-1, or for
        k = 1..N when N < _EXACT_DF (then the last bucket holds every rank
        capped at N)."""
        n = int(self.N)
        top = min(_EXACT_DF, n + 1) if n < _EXACT_DF else _EXACT_DF
        k = np.arange(1, top + 1, dtype=np.float64)  # one past the last bucket
        upto = np.clip(np.floor((self.C / k) ** (1 / self.s) - self.q), 0.0, float(self.V))
        cnt = upto[:-1] - upto[1:]
        if n < _EXACT_DF:  # no term is in more than all documents
            cnt[-1] = upto[-2]
        # ranks whose C r^-s < 1 still hold one posting (every term occurs once)
        cnt[0] += max(0.0, self.V - upto[0])
        return k[:-1], cnt

    def head_sum(self) -> float:
        """head().sum() without materialising a long head: ranks capped at N
        are counted, and a range of more than a million ranks is integrated
        (midpoint rule; each df there is >= _EXACT_DF, so the error is tiny)."""
        if self.N < _EXACT_DF:
            return 0.0
        n = min(self.V, self.ranks(_EXACT_DF))
        cap = min(n, self.ranks(self.N))
        if n - cap <= 1_000_000:
            r = np.arange(cap + 1, n + 1, dtype=np.float64)
            return self.N * cap + float(np.floor(self.C * (r + self.q) ** -self.s).sum())
        a, b, s = cap + 0.5 + self.q, n + 0.5 + self.q, self.s
        integral = self.C * (b ** (1 - s) - a ** (1 - s)) / (1 - s) if s != 1 else \
            self.C * math.log(b / a)
        return self.N * cap + integral - 0.5 * (n - cap)

    def total(self) -> float:
        k, cnt = self.tail()
        return float(self.head_sum() + (k * cnt).sum())

    @classmethod
    def solve(cls, documents, vocabulary, s, postings, q: float = 0.0) -> "_Zipf":
        lo, hi = 0.0, math.log(float(postings)) + 40.0 + s * math.log1p(q)
        if cls(documents, vocabulary, s, 1.0, q).total() > postings:
            raise TierlabError(f"index: vocabulary {vocabulary} needs at least that many postings "
                               f"(every term occurs once); postings is {postings}")
        if cls(documents, vocabulary, s, math.exp(hi), q).total() < postings:
            raise TierlabError(f"index: {postings} postings do not fit in {vocabulary} terms of "
                               f"at most {documents} documents each: raise vocabulary or documents")
        for _ in range(80):
            mid = (lo + hi) / 2
            t = cls(documents, vocabulary, s, math.exp(mid), q).total()
            if abs(t - postings) <= 1e-7 * postings:
                return cls(documents, vocabulary, s, math.exp(mid), q)
            if t > postings:
                hi = mid
            else:
                lo = mid
        return cls(documents, vocabulary, s, math.exp(lo), q)


def _check_stats(st: dict) -> dict:
    out = dict(st)
    for key in ("documents", "postings", "vocabulary", "index_bytes"):
        if key not in out:
            raise TierlabError(f"index: synthetic statistics need key '{key}'")
    out.setdefault("zipf", REFERENCE["zipf"])
    out.setdefault("freq_bits", REFERENCE["freq_bits"])
    out.setdefault("zipf_shift", 0.0)
    out.setdefault("block_postings", BLOCK_POSTINGS)
    out.setdefault("seed", 0)
    unknown = sorted(set(out) - set(SYNTHETIC_KEYS))
    if unknown:
        raise TierlabError(f"index: unknown key '{unknown[0]}' in synthetic statistics; "
                           f"known: {', '.join(SYNTHETIC_KEYS)}")
    for key in ("documents", "postings", "vocabulary", "index_bytes", "block_postings"):
        v = out[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 1 \
                or v > 2**63 - 1:
            raise TierlabError(f"index: '{key}' must be a whole number 1 .. 2^63 - 1, got {v!r}")
        out[key] = int(v)
    q = out["zipf_shift"]
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not q >= 0:
        raise TierlabError(f"index: 'zipf_shift' must be a number >= 0, got {q!r}")
    out["zipf_shift"] = float(q)
    for key in ("zipf", "freq_bits"):
        v = out[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            raise TierlabError(f"index: '{key}' must be a number > 0, got {v!r}")
        out[key] = float(v)
    if out["vocabulary"] > out["postings"]:
        raise TierlabError(f"index: vocabulary {out['vocabulary']} exceeds postings "
                           f"{out['postings']} (every term has at least one posting)")
    mm = out.get("materialise_min_postings")
    if mm is not None and (isinstance(mm, bool) or not isinstance(mm, (int, float)) or mm < 1):
        raise TierlabError(f"index: 'materialise_min_postings' must be >= 1, got {mm!r}")
    return out


MAX_MATERIALISED = 5_000_000


def synthesise(stats: dict, name: str = "custom") -> IndexMeta:
    """An index synthesised from statistics (module docstring). Terms with at
    least `materialise_min_postings` postings (default 1: all) are
    materialised; at most MAX_MATERIALISED."""
    st = _check_stats(stats)
    N, V, s = st["documents"], st["vocabulary"], st["zipf"]
    B, fbits = st["block_postings"], st["freq_bits"]
    z = _Zipf.solve(N, V, s, st["postings"], st["zipf_shift"])
    head = z.head()
    k, cnt = z.tail()
    mmin = int(st.get("materialise_min_postings") or 1)

    # the DID overhead c: total bytes = index_bytes
    def entropy_bits(df, n=1.0):
        return n * df * np.log2(N / df)
    ent = float(entropy_bits(head).sum() + entropy_bits(k, cnt).sum())
    P = float(head.sum() + (k * cnt).sum())
    c = (8.0 * st["index_bytes"] - fbits * P - ent) / P
    if not c > 0:
        raise TierlabError(f"index: index_bytes {st['index_bytes']} is too small for "
                           f"{st['postings']} postings with freq_bits {fbits}: DIDs would need "
                           f"{ent / P:.2f} bits each at least")

    def did_b(df):
        return np.ceil(df * (np.log2(N / df) + c) / 8.0)

    def freq_b(df):
        return np.ceil(df * fbits / 8.0)

    tot_blocks = float(np.ceil(head / B).sum() + (np.ceil(k / B) * cnt).sum())
    tot_freq = float(freq_b(head).sum() + (freq_b(k) * cnt).sum())
    for _ in range(4):  # whole bytes per term: correct c for the rounding
        tot_did = float(did_b(head).sum() + (did_b(k) * cnt).sum())
        c -= 8.0 * (tot_did + tot_freq - st["index_bytes"]) / P
    tot_did = float(did_b(head).sum() + (did_b(k) * cnt).sum())
    if not c > 0:
        raise TierlabError(f"index: index_bytes {st['index_bytes']} is too small for "
                           f"{st['postings']} postings in {V} terms with freq_bits {fbits}")

    # materialised terms: the head ranks with df >= mmin, then tail values k >= mmin
    m_head = head[head >= mmin]
    kk = k[(k >= mmin)]
    cc = cnt[(k >= mmin)].astype(np.int64)
    n_mat = len(m_head) + int(cc.sum())
    if n_mat > MAX_MATERIALISED:
        raise TierlabError(
            f"index: {n_mat} terms have >= {mmin} postings; the model materialises at most "
            f"{MAX_MATERIALISED} (query a rarer class on a smaller index, or raise "
            f"materialise_min_postings)")
    df = np.concatenate([m_head, np.repeat(kk[::-1], cc[::-1])]).astype(np.int64)
    did = did_b(df).astype(np.int64)
    frq = freq_b(df).astype(np.int64)
    blocks = -(-df // B)
    fill_did = int(round(tot_did)) - int(did.sum())
    fill_freq = int(round(tot_freq)) - int(frq.sum())

    # dictionary order: random; filler cut at uniform spacings between terms
    rng = np.random.default_rng(int(st["seed"]))
    order = rng.permutation(n_mat)
    gaps = rng.dirichlet(np.ones(n_mat + 1)) if n_mat else np.ones(1)
    before = np.cumsum(gaps)[:-1] if n_mat else np.zeros(0)
    did_off = np.empty(n_mat, np.int64)
    frq_off = np.empty(n_mat, np.int64)
    did_off[order] = np.floor(before * fill_did).astype(np.int64) + \
        np.concatenate([[0], np.cumsum(did[order])[:-1]]).astype(np.int64)
    frq_off[order] = np.floor(before * fill_freq).astype(np.int64) + \
        np.concatenate([[0], np.cumsum(frq[order])[:-1]]).astype(np.int64)
    did_file = fill_did + int(did.sum())
    frq_file = fill_freq + int(frq.sum())
    n_h = int((head >= 1_000_000).sum())
    info = {
        "from": "synthetic", "preset": name, **{k_: st[k_] for k_ in st},
        "zipf_C": z.C, "did_overhead_bits": c, "materialised_terms": n_mat,
        "materialise_min_postings": mmin, "total_blocks": int(tot_blocks),
        "mean_block_bytes": (did_file + frq_file) / tot_blocks,
        "max_postings": int(head.max()) if len(head) else int(k[cnt > 0].max()),
        "terms_with_1m_postings": n_h,
    }
    return IndexMeta(
        source=f"synthetic:{name}", names=[f"t{i + 1}" for i in range(n_mat)],
        postings=df, blocks=blocks.astype(np.int64), did_offset=did_off, did_bytes=did,
        freq_offset=frq_off, freq_bytes=frq, did_file_bytes=did_file, freq_file_bytes=frq_file,
        documents=N, total_postings=int(round(P)), total_blocks=int(tot_blocks), vocabulary=V,
        stats=info)


def reference(materialise_min_postings: int | None = None, seed: int = 0,
              head: str = "zipf") -> IndexMeta:
    """The APCache reference scale (module docstring); head "derived": the
    derived head (REFERENCE_DERIVED_HEAD)."""
    st = dict(REFERENCE, seed=seed, **(REFERENCE_DERIVED_HEAD if head == "derived" else {}))
    if materialise_min_postings is not None:
        st["materialise_min_postings"] = materialise_min_postings
    return synthesise(st, name="reference")


def check_reference(meta: IndexMeta, tolerance: float = 0.02) -> dict:
    """The synthesised totals against the reference's numbers: {name:
    (synthesised, reference, within tolerance)}."""
    got = {"postings": meta.total_postings, "index_bytes": meta.index_bytes,
           "mean_block_bytes": meta.index_bytes / meta.total_blocks}
    return {k: (got[k], v, abs(got[k] / v - 1) <= tolerance) for k, v in REFERENCE_TARGETS.items()}
