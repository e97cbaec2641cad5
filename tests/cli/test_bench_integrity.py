"""`tierlab bench integrity` end to end on a tiny corpus: the JSON holds, per
workload and check level, the per-query timings as ratios to no checks, the
hits are the same at every level, and bad input is a usage error."""
import pytest

LEVELS = ("off", "default", "full")


@pytest.fixture(scope="module")
def run(run_bench):
    return run_bench("integrity", "--size", "2MB", "--queries-h", "20", "--queries-m", "20",
                     "--queries-l", "20", "--reps", "3", "--class", "H", "--class", "M")


def test_json(run):
    rc, doc, _ = run
    assert rc in (0, 1)  # 1: a target missed, which a tiny noisy run may
    assert doc["benchmark"] == "integrity" and doc["errors"] == []
    assert doc["config"]["codec"] == "pfor-delta256" and doc["config"]["levels"] == list(LEVELS)
    assert {(w["type"], w["class"]) for w in doc["workloads"]} == {
        (t, c) for t in ("single", "and") for c in ("H", "M")}
    for w in doc["workloads"]:
        assert w["results_identical"] is True and w["queries"] == 20
        for level in LEVELS:
            r = w["levels"][level]
            assert r["sum_of_min_ms"] > 0 and len(r["reps_ms"]) == 3
            assert r["sum_of_min_ms"] <= r["sum_of_median_ms"]
            assert r["ratio_min"] == pytest.approx(r["sum_of_min_ms"]
                                                   / w["levels"]["off"]["sum_of_min_ms"])
        assert w["levels"]["off"]["ratio_min"] == 1.0
    assert {(t["type"], t["class"]) for t in doc["targets"]} == {("single", "H"), ("and", "H")}
    for t in doc["targets"]:
        assert t["met"] == (t["overhead"] <= t["target"] == 0.03)
    assert len(doc["machine"]["loadavg_start"]) == 3


@pytest.mark.parametrize("args, message", [
    (["--reps", "2"], "--reps must be at least 3"),
    (["--codec", "nosuch"], "nosuch"),
    (["--class", "X"], "invalid choice"),
])
def test_bad_input(bench_fails, args, message):
    assert message in bench_fails("integrity", *args)
