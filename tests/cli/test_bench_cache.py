"""`tierlab bench cache` end to end on a small trace, and its handling of bad
input."""
import numpy as np
import pytest

from tierlab.experiments.bench import cache as bench
from tierlab.model.cache import POLICIES


@pytest.fixture(scope="module")
def run(run_bench):
    return run_bench("cache", "--requests", "30000", "--keys", "3000", "--alpha", "0.9",
                     "--fraction", "0.01", "--fraction", "0.1", "--reps", "2")


def test_records_for_every_policy_and_size(run):
    rc, doc, out = run
    assert rc == 0 and doc["benchmark"] == "cache" and not doc["errors"]
    ours = [r for r in doc["records"] if r["library"] == "tierlab"]
    assert sorted((r["policy"], r["fraction"]) for r in ours) == sorted(
        (p, f) for p in POLICIES for f in (0.01, 0.1))
    for r in doc["records"]:
        assert len(r["seconds"]) == 2 and r["requests_per_s"] > 0
        assert r["requests_per_s"] == pytest.approx(30000 / np.median(r["seconds"]), rel=1e-3)
        assert 0 < r["miss_ratio"] < 1
    assert [p.name for p in out.parent.iterdir()] == ["cache.json"], "scratch folder removed"
    assert doc["targets"][0]["value"] == min(r["requests_per_s"] for r in ours
                                             if r["policy"] == "lru")


def test_belady_is_the_lower_bound(run):
    _, doc, _ = run
    for f in (0.01, 0.1):
        mr = {r["policy"]: r["miss_ratio"] for r in doc["records"]
              if r["library"] == "tierlab" and r["fraction"] == f}
        assert all(mr["belady"] <= m for m in mr.values()), mr


def test_libcachesim_side_by_side(run):
    pytest.importorskip("libcachesim")
    _, doc, _ = run
    comp = {(c["policy"], c["fraction"]): c for c in doc["comparisons"]}
    assert set(comp) == {(p, f) for p in bench.PEERS for f in (0.01, 0.1)}
    assert doc["agreement"] is True
    for (policy, _), c in comp.items():
        assert c["speed_ratio"] > 0
        if c["must_agree"]:
            assert c["miss_ratio_ours"] == c["miss_ratio_libcachesim"]
        else:
            assert abs(c["miss_ratio_diff"]) < 0.02, c


def test_zipf_trace_is_skewed_and_seeded():
    a = bench.zipf_trace(50_000, 1000, 1.0, 3)
    assert np.array_equal(a, bench.zipf_trace(50_000, 1000, 1.0, 3))
    assert a.dtype == np.uint64 and a.max() < 1000
    counts = np.sort(np.bincount(a.astype(np.int64), minlength=1000))[::-1]
    # Zipf(1): the top key takes about 1 / H(1000) = 13 % of the requests
    assert 0.11 < counts[0] / a.size < 0.15
    assert counts[0] > 5 * counts[9]


@pytest.mark.parametrize("argv, msg", [
    (["--policy", "arc"], "unknown policy 'arc'"),
    (["--fraction", "0"], "--fraction must be in"),
    (["--alpha", "-1"], "--alpha must be in"),
])
def test_bad_input_is_one_line(bench_fails, argv, msg):
    assert msg in bench_fails("cache", *argv)
