"""Workloads (tierlab.engine.workload): docs/workload.md's RP algorithm checked against a
straightforward re-implementation, classes and thresholds, AND pairing, query
files and statistics."""
from __future__ import annotations

import json
import random

import pandas as pd
import pytest

from tierlab.core.errors import TierlabError
from tierlab.engine.workload import (Thresholds, class_terms, generate, generate_queries, read_queries,
                              workload_stats)


def reference_single(terms, n, rp, R, rng):
    """docs/workload.md, step by step, written independently of the module."""
    queue = sorted(terms)  # byte order (ASCII terms)
    rng.shuffle(queue)
    repeat, out, draws, i = [], [], 0, 0
    for _ in range(n):
        if i >= len(queue):            # refill: reshuffle in place, start over
            rng.shuffle(queue)
            i = 0
        popped = queue[i]
        i += 1
        emitted = popped
        if len(repeat) > 0:
            coin = rng.random()
            if coin < rp:
                emitted = repeat[rng.randrange(len(repeat))]
                draws += 1
        out.append(emitted)
        repeat.append(popped)
        while len(repeat) > R:
            del repeat[0]
    return out, draws


def reference_and(terms, n, rp, R, rng):
    queue = sorted(terms)
    rng.shuffle(queue)
    h = len(queue) // 2
    a, da = reference_single(queue[:h], n, rp, R, rng)
    b, db = reference_single(queue[h:], n, rp, R, rng)
    return [(x, y) for x, y in zip(a, b)], da + db


TERMS = [f"t{i:03d}" for i in range(37)]


@pytest.mark.parametrize("n,rp,R,seed", [(10, 0.25, 100, 0), (200, 0.25, 5, 1), (500, 0.5, 100, 2),
                                         (100, 1.0, 3, 3), (80, 0.0, 100, 4), (1, 0.9, 1, 5)])
def test_single_is_exactly_the_reference_algorithm(n, rp, R, seed):
    shuffled = random.Random(99).sample(TERMS, len(TERMS))  # input order must not matter
    got, draws = generate_queries(shuffled, n=n, qtype="single", rp=rp, capacity=R, seed=seed)
    want, want_draws = reference_single(TERMS, n, rp, R, random.Random(seed))
    assert [q[0] for q in got] == want and draws == want_draws


@pytest.mark.parametrize("n,rp,R,seed", [(50, 0.25, 100, 0), (300, 0.5, 7, 1), (20, 0.0, 100, 2)])
def test_and_is_exactly_the_reference_algorithm(n, rp, R, seed):
    got, draws = generate_queries(TERMS, n=n, qtype="and", rp=rp, capacity=R, seed=seed)
    want, want_draws = reference_and(TERMS, n, rp, R, random.Random(seed))
    assert got == want and draws == want_draws


def test_and_pairs_come_from_disjoint_halves():
    qs, _ = generate_queries(TERMS, n=400, qtype="and", rp=0.5, capacity=10, seed=3)
    first, second = {a for a, _ in qs}, {b for _, b in qs}
    assert not first & second
    assert all(a != b for a, b in qs)
    assert len(first | second) == len(TERMS)  # with 400 queries every term shows up


def test_rp_zero_never_repeats_from_the_queue():
    qs, draws = generate_queries(TERMS, n=3 * len(TERMS), rp=0.0, seed=1)
    qs = [q[0] for q in qs]
    assert draws == 0
    for k in range(3):  # each pass over the queue is a permutation of the class
        assert sorted(qs[k * len(TERMS):(k + 1) * len(TERMS)]) == TERMS


def test_rp_one_repeats_recent_terms_only():
    qs, draws = generate_queries(TERMS, n=30, rp=1.0, capacity=4, seed=2)
    assert draws == 29
    # query i (i >= 1) is one of the <= 4 terms popped just before it; with
    # rp = 0 and the same seed the pops themselves are visible
    pops = [q[0] for q in generate_queries(TERMS, n=30, rp=0.0, capacity=4, seed=2)[0]]
    # (the coin is drawn in both runs, so the shuffles agree only for the first pass)
    for i in range(1, 30):
        assert qs[i][0] in pops[max(0, i - 4):i]


def test_generation_is_seeded():
    a = generate_queries(TERMS, n=100, seed=5)
    assert a == generate_queries(TERMS, n=100, seed=5)
    assert a != generate_queries(TERMS, n=100, seed=6)


# --- classes ------------------------------------------------------------------

def table(postings):
    return pd.DataFrame({"term": [f"w{i}" for i in range(len(postings))],
                         "postings": postings, "occurrences": [p * 2 for p in postings]})


def test_thresholds_fractions_counts_and_the_floor_of_l():
    t = Thresholds.resolve(0.00625, 0.00000625, 160_000_000)
    assert (t.h_min, t.l_below) == (1_000_000, 1_000)
    t = Thresholds.resolve(0.00625, 0.00000625, 10_000)   # L would be < 1 posting: floor 2
    assert (t.h_min, t.l_below) == (63, 2)
    assert Thresholds.resolve(500, 10) == Thresholds(500, 10)  # counts need no documents
    with pytest.raises(TierlabError, match="fraction of the documents"):
        Thresholds.resolve(0.1, 10)
    with pytest.raises(TierlabError, match="H must start above L"):
        Thresholds.resolve(10, 10)
    with pytest.raises(TierlabError, match="whole number"):
        Thresholds.resolve(10.5, 2)


def test_classes_split_the_table():
    df = table([1, 2, 5, 9, 10, 11, 100])
    t = Thresholds(10, 3)
    assert class_terms(df, "H", t) == ["w4", "w5", "w6"]
    assert class_terms(df, "m", t) == ["w2", "w3"]
    assert class_terms(df, "L", t) == ["w0", "w1"]


def test_an_empty_class_names_thresholds_and_postings(tmp_path):
    df = table([1, 1, 3])
    df.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    with pytest.raises(TierlabError) as e:
        generate(tmp_path / "w.txt", terms=tmp_path / "t.tsv", cls="H", h=100, l=2)
    msg = str(e.value)
    assert "class H is empty" in msg and ">= 100" in msg and "< 2" in msg and "1 to 3" in msg
    assert not (tmp_path / "w.txt").exists()


# --- query files and statistics --------------------------------------------------

def test_query_files_round_trip_and_accept_hand_written_ones(tmp_path):
    p = tmp_path / "q.txt"
    p.write_text("# a comment\nalpha\n\n  beta AND gamma  \ndelta epsilon\n007 AND x AND y\n")
    assert read_queries(p) == [("alpha",), ("beta", "gamma"), ("delta", "epsilon"),
                               ("007", "x", "y")]


@pytest.mark.parametrize("text,line,what", [
    ("ok\nAND b\n", 2, "'AND' must stand between two terms"),
    ("a AND AND b\n", 1, "'AND' must stand between"),
    ("a AND\n", 1, "'AND' must stand between"),
    ("ok\n\nHello\n", 3, "'Hello' is not a term"),
    ("a and-b\n", 1, "'and-b' is not a term"),
])
def test_bad_query_lines_are_named(tmp_path, text, line, what):
    p = tmp_path / "q.txt"
    p.write_text(text)
    with pytest.raises(TierlabError) as e:
        read_queries(p)
    assert f"q.txt:{line}: " in str(e.value) and what in str(e.value)


def test_bad_query_files(tmp_path):
    (tmp_path / "u.txt").write_bytes(b"ok\n\xff\n")
    with pytest.raises(TierlabError, match=r"u.txt:2: invalid UTF-8"):
        read_queries(tmp_path / "u.txt")
    (tmp_path / "e.txt").write_text("# nothing\n\n")
    with pytest.raises(TierlabError, match="no queries"):
        read_queries(tmp_path / "e.txt")


def test_statistics_by_hand():
    df = pd.DataFrame({"term": ["a", "b", "c", "d"], "postings": [1000, 256, 257, 1],
                       "occurrences": [2000, 300, 300, 1]})
    # blocks: a 4, b 1, c 2, d 1 -> index 8
    qs = [("a",), ("b", "c"), ("a",), ("c", "b"), ("zz",)]
    st = workload_stats(qs, df)
    assert st["queries"] == 5 and st["queries_by_terms"] == {"1": 3, "2": 2}
    assert st["unique_terms"] == 4 and st["term_slots"] == 7
    assert st["repeated_queries"] == 2 and st["repeated_terms"] == 3
    assert st["postings_touched"] == 1000 + 513 + 1000 + 513 + 0
    assert st["postings_touched_unique"] == 1513
    assert (st["blocks_touched"], st["index_blocks"]) == (7, 8)
    assert st["index_blocks_touched_share"] == pytest.approx(7 / 8)
    assert st["terms_not_in_table"] == 1 and st["terms_not_in_table_examples"] == ["zz"]
    # an index's dictionary may give the block counts itself
    st = workload_stats(qs, df.assign(blocks=[10, 1, 1, 8]))
    assert (st["blocks_touched"], st["index_blocks"], st["blocks_from"]) == (12, 20, "table")


def test_generate_writes_the_query_file_and_its_statistics(tmp_path):
    df = table(list(range(1, 301)))
    df.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    doc = generate(tmp_path / "w.txt", terms=tmp_path / "t.tsv", documents=10_000, cls="H",
                   qtype="and", queries=50, rp=0.25, seed=1, h=0.02, l=0.001)
    assert doc["generator"]["h_min_postings"] == 200 and doc["generator"]["l_below_postings"] == 10
    assert doc["generator"]["class_terms"] == 101
    qs = read_queries(tmp_path / "w.txt")
    assert len(qs) == 50 and all(len(q) == 2 for q in qs)
    assert all(" AND " in line for line in (tmp_path / "w.txt").read_text().splitlines())
    on_disk = json.loads((tmp_path / "w.txt.json").read_text())
    assert on_disk == doc and doc["stats"]["unique_terms_by_class"]["H"] == doc["stats"]["unique_terms"]
    again = generate(tmp_path / "w2.txt", terms=tmp_path / "t.tsv", documents=10_000, cls="H",
                     qtype="and", queries=50, rp=0.25, seed=1, h=0.02, l=0.001)
    assert again["digest"] == doc["digest"]
