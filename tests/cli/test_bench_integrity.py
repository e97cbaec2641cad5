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


def test_scratch_folder_swept_and_kept(tmp_path, capsys):
    """The scratch folder is tierlab-bench-integrity-PID-*: one a killed run
    left in --work is removed (and reported) by the next run; --keep renames
    this run's to tierlab-bench-integrity-kept-PID-*, which the JSON names and
    no later run takes for a leftover."""
    import json
    import os
    import subprocess

    from tierlab.cli import main

    p = subprocess.Popen(["true"])
    p.wait()
    stale = tmp_path / f"tierlab-bench-integrity-{p.pid}-abcd1234"
    (stale / "index").mkdir(parents=True)
    args = ["bench", "integrity", "--out", str(tmp_path / "i.json"), "--no-progress",
            "--work", str(tmp_path), "--size", "1MB", "--queries-h", "5", "--reps", "3"]
    assert main([*args, "--keep"]) in (0, 1)
    err = capsys.readouterr().err
    assert f"tierlab: removed {stale}, left by a killed run" in err and not stale.exists()
    kept = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert [d.name.startswith(f"tierlab-bench-integrity-kept-{os.getpid()}-") for d in kept] == [
        True], kept
    assert json.loads((tmp_path / "i.json").read_text())["config"]["work"] == str(kept[0])
    assert main(args) in (0, 1)  # the kept folder stays; this run's own is removed
    assert [d for d in tmp_path.iterdir() if d.is_dir()] == kept
