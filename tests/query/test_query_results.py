"""SINGLE and AND results against the pure-Python reference, for every codec
of the registry, both block sizes and several placements (docs/engine.md's
oracle: results identical across codecs and placements), block skipping,
and placement reports."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "index"))
import reference as ref  # noqa: E402
from index_helpers import codec_names, random_corpus, write  # noqa: E402

from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.engine.index import Index, build  # noqa: E402


def _placements(tmp: Path) -> list[str]:
    out = ["storage", "dram", f"pm:{tmp}", f"dict=dram,skip=pm:{tmp},did=storage,freq=dram"]
    if Path("/sys/devices/system/node/node0").exists():
        out.append("numa:0")
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("q")
    corpus = write(d / "c.txt", random_corpus(seed=11, docs=3000, vocab=500))
    post, n = ref.postings(corpus.read_bytes())
    rng = random.Random(5)
    terms = sorted(post, key=lambda t: -len(post[t]))
    head, tail = terms[:8], terms[8:]
    singles = [[t] for t in head + rng.sample(tail, 25)] + [[b"rare"], [b"nosuchterm"]]
    ands = [[b"every", b"rare"], [b"rare", b"every"], [head[0], head[1]],
            [head[2], head[3], head[4]], [head[0], head[0]], [b"every", b"nosuchterm"]]
    ands += [rng.sample(terms[:60], 2) for _ in range(20)]
    ands += [rng.sample(terms[:30], 4) for _ in range(5)]
    queries = singles + ands
    return corpus, post, n, queries


_REF: dict = {}


def _check(ix, post, n, queries, k):
    results = []
    for q in queries:
        hits, st = ix.query(q, k=k)
        key = (tuple(q), k)
        if key not in _REF:
            _REF[key] = ref.query(post, n, q, k)
        want = _REF[key]
        assert [d for d, _ in hits] == [d for d, _ in want], q
        assert all(abs(s - w) <= 1e-9 * abs(w) for (_, s), (_, w) in zip(hits, want)), q
        assert st["results"] == len(hits)
        assert st["unknown_terms"] == sum(1 for t in q if t not in post)
        results.append(hits)
    return results


_SEEN: dict = {}


@pytest.mark.parametrize("block", [128, 256])
@pytest.mark.parametrize("codec", codec_names())
def test_matches_reference_everywhere(tmp_path, data, codec, block):
    corpus, post, n, queries = data
    build(corpus, tmp_path / "idx", codec=codec, block_size=block)
    for placement in _placements(tmp_path):
        with Index(tmp_path / "idx", placement) as ix:
            for k in (1024, 7):
                got = _check(ix, post, n, queries, k)
                # bit-identical across codecs, block sizes and placements
                prev = _SEEN.setdefault(k, got)
                assert got == prev, (codec, block, placement)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tierlab-")]  # pm copies


def test_batch_equals_single_calls(tmp_path, data):
    corpus, post, n, queries = data
    build(corpus, tmp_path / "idx")
    with Index(tmp_path / "idx") as ix:
        stats, wall, hits, nhits = ix.run_batch(queries, k=50, want_hits=True)
        assert wall > 0
        for i, q in enumerate(queries):
            one, st = ix.query(q, k=50)
            assert [(int(h["did"]), float(h["score"])) for h in hits[i][:nhits[i]]] == one
            for key in ("postings_scored", "blocks_total", "blocks_decoded", "results"):
                assert int(stats[key][i]) == st[key]


def test_and_skips_blocks(tmp_path, data):
    """`rare` sits in 5 consecutive documents: AND with `every` (in all of
    them) decodes one or two of every's blocks, not all."""
    corpus, post, n, _ = data
    build(corpus, tmp_path / "idx", block_size=128)
    with Index(tmp_path / "idx") as ix:
        hits, st = ix.query(["every", "rare"])
        assert len(hits) == 5
        every_blocks = -(-len(post[b"every"]) // 128)
        assert st["term_blocks_total"][:2] == [every_blocks, 1]
        assert st["blocks_total"] == every_blocks + 1
        assert st["blocks_decoded"] < st["blocks_total"]
        assert st["term_blocks_decoded"][0] <= 2
        assert st["bytes_read"][2] < st["bytes_read"][1] * 10
        # SINGLE reads everything
        _, s1 = ix.query("every")
        assert s1["blocks_decoded"] == s1["blocks_total"] == every_blocks
        assert s1["postings_scored"] == len(post[b"every"])


def test_stats_add_up(tmp_path, data):
    corpus, post, n, _ = data
    build(corpus, tmp_path / "idx")
    with Index(tmp_path / "idx") as ix:
        _, st = ix.query("t0")
        assert st["latency_ns"] > 0
        assert st["bytes_read"][0] >= 40  # at least one dictionary entry
        blocks = -(-len(post[b"t0"]) // 256)
        assert st["bytes_read"][1] == 8 + 32 * (blocks + 1)  # the whole skip record
        assert st["bytes_read"][2] == st["bytes_read"][3] == 4 * len(post[b"t0"])  # base
        _, st = ix.query("nosuchterm")
        assert st["unknown_terms"] == 1 and st["results"] == 0 and st["bytes_read"][2] == 0


def test_placement_reports(tmp_path, data):
    corpus = data[0]
    build(corpus, tmp_path / "idx")
    pm = tmp_path / "pm"
    pm.mkdir()
    with Index(tmp_path / "idx", f"dict=dram,skip=pm:{pm},did=storage,freq=numa:0") as ix:
        r = ix.placement()
        assert r["dict"]["tier"] == "dram" and r["dict"]["honoured"] == 1
        assert r["dict"]["resident_bytes"] == r["dict"]["bytes"]
        assert r["skip"]["tier"] == "pm" and "pm emulated on" in r["skip"]["detail"]
        assert r["did"]["tier"] == "storage" and "page cache" in r["did"]["detail"]
        assert r["freq"]["tier"] == "numa" and "move_pages" in r["freq"]["detail"]
        assert ix.query("t0")[0]
    assert list(pm.iterdir()) == []  # the pm copies are unlinked once mapped


@pytest.mark.parametrize("placement, match", [
    ("numa:999", "no such NUMA node"),
    ("numa:x", "must be a number"),
    ("pm:/nonexistent/dir", "not an existing directory"),
    ("flash", "unknown tier"),
    ("pm", "needs an argument"),
    ("dram:1", "takes no argument"),
    ("cache=dram", "unknown structure"),
])
def test_bad_placements(tmp_path, data, placement, match):
    build(data[0], tmp_path / "idx")
    with pytest.raises(TierlabError, match=match):
        Index(tmp_path / "idx", placement)


def test_query_shape_errors(tmp_path, data):
    build(data[0], tmp_path / "idx")
    with Index(tmp_path / "idx") as ix:
        with pytest.raises(TierlabError, match="AND query 2..16"):
            ix.query(["t0"] * 17)
