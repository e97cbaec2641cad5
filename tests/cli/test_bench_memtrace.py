"""`tierlab bench memtrace` end to end on a tiny corpus: the JSON holds, for
SINGLE H and AND H, the uninstrumented and traced times, their ratio, the
accesses and the bytes on disk per access; bad input is a usage error."""
import shutil

import pytest

from tierlab.core.registry import memory_regions


@pytest.fixture(scope="module")
def run(run_bench):
    if shutil.which("clang") is None or shutil.which("cmake") is None:
        pytest.skip("the tracing build needs clang and cmake (make deps installs them)")
    lackey = ["--lackey-queries", "1"] if shutil.which("valgrind") else []
    return run_bench("memtrace", "--size", "1MB", "--queries-h", "5", "--reps", "2",
                     "--k", "100", *lackey)


def test_json(run):
    rc, doc, out = run
    assert rc == 0 and doc["benchmark"] == "memtrace" and doc["errors"] == []
    assert doc["config"]["k"] == 100 and doc["config"]["placement"] == "dram"
    assert {(w["type"], w["class"]) for w in doc["workloads"]} == {("single", "H"), ("and", "H")}
    for w in doc["workloads"]:
        assert w["queries"] == 5 and w["records"] > 0
        assert w["slowdown"] == pytest.approx(w["traced_ms"] / w["uninstrumented_ms"])
        assert w["ns_per_access"] == pytest.approx(w["traced_ms"] * 1e6 / w["records"])
        assert w["trace_bytes"] == 256 + 16 * w["records"]
        assert 16 < w["bytes_per_access"] < 16.5
        assert set(w["regions"]) == set(memory_regions())
        assert sum(w["regions"].values()) == w["records"]
        assert w["regions"]["did"] > 0 and w["regions"]["topk_heap"] > 0
        if doc["config"]["lackey_queries"]:  # the cross-check's plumbing (tests/traces/ checks
            lk = w["lackey"]                  # the agreement itself)
            assert lk["queries"] == 1 and lk["regions"]["skip"]["accesses_diff"] == 0
            assert lk["accesses"] == sum(g["accesses"] for g in lk["regions"].values())
    assert len(doc["machine"]["loadavg_end"]) == 3
    assert [p.name for p in out.parent.iterdir()] == ["memtrace.json"]  # no scratch left


@pytest.mark.parametrize("args, message", [
    (["--codec", "nosuch"], "nosuch"),
    (["--k", "0"], "at least 1"),
    (["--lackey-queries", "-1"], "--lackey-queries must be >= 0"),
])
def test_bad_input(bench_fails, args, message):
    assert message in bench_fails("memtrace", *args)
