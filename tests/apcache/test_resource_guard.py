"""Resource guards (issue 19, part 3; tierlab.h "Resource guards"): the
APCache runtime refuses, before it allocates, more cores than CPUs and a run
whose planned memory exceeds what the machine (or its memory cgroup) has,
naming the numbers; the model refuses a run that plans absurd memory; a huge
k costs no more than the index has documents."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tierlab.cli import main
from tiny_inputs import corpus_and_index, with_h_workload
from tierlab.core import native
from tierlab.traces.schema import read_table


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return with_h_workload(corpus_and_index(tmp_path_factory.mktemp("guard"), docs=800,
                                            doc_bytes=256))


def _refused(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_more_cores_than_cpus_is_refused_naming_the_cpus(data, tmp_path, capsys):
    cpus = len(os.sched_getaffinity(0))
    out = tmp_path / "new" / "run"
    err = _refused(capsys, ["apcache", "run", "--index", str(data / "idx"), "--workload",
                            str(data / "h.queries"), "--out", str(out), "--quiet",
                            "--cores", "1000"])
    assert f"cores 1000: this process may run on {cpus} CPU(s)" in err
    assert f"at most {cpus} here" in err
    assert not (tmp_path / "new").exists()  # all or nothing: the folders it made are gone


def test_a_plan_beyond_the_machine_is_refused_with_its_numbers(data, tmp_path, capsys):
    room, _ = native.memory_room()
    assert room > 0
    err = _refused(capsys, ["apcache", "run", "--index", str(data / "idx"), "--workload",
                            str(data / "h.queries"), "--out", str(tmp_path / "o"), "--quiet",
                            "--device", "nvme-p4800x", "--cache-bytes", "1TiB"])
    assert "the run (1 core) needs 1.0 TiB of memory" in err
    assert "segment-cache share 1.0 TiB" in err
    # the threads' stacks (set, so counted whole) and the timeline's first samples
    assert "thread stacks " in err and "sampler stack 256.0 KiB" in err, err
    assert "timeline (first samples) " in err, err
    assert native.bytes_text(room).split()[1] in err and "this machine has for it" in err
    assert not (tmp_path / "o").exists()
    assert not list(data.glob(".tierlab-shard-*"))


def test_a_run_records_its_plan(data, tmp_path):
    out = tmp_path / "o"
    assert main(["apcache", "run", "--index", str(data / "idx"), "--workload",
                 str(data / "h.queries"), "--out", str(out), "--quiet", "--device",
                 "nvme-p4800x", "--cache-bytes", "1MiB", "--segment-bytes", "4KiB"]) == 0
    _, run = read_table(out / "cache_run.parquet")
    params = json.loads(run["params"].iloc[0])
    assert params["planned_bytes"] >= 2**20  # the segment cache at least
    assert params["planned_bytes"] < 2**20 + 64 * 2**20


def _memory_cgroup() -> Path | None:
    """A writable v1 or v2 memory cgroup directory of this process, or None."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrl, path = line.split(":", 2)
        for root, want in (("/sys/fs/cgroup/memory", "memory" in ctrl.split(",")),
                           ("/sys/fs/cgroup", ctrl == "")):
            d = Path(root + (path if path != "/" else ""))
            limit = "memory.limit_in_bytes" if root.endswith("memory") else "memory.max"
            if want and (d / limit).exists() and os.access(d, os.W_OK):
                return d
    return None


def test_the_room_of_a_memory_cgroup_binds(data, tmp_path):
    """In a cgroup limited to 256 MiB, a run planning 1 GiB is refused by the
    C runtime itself, naming the cgroup's limit."""
    parent = _memory_cgroup()
    if parent is None:
        pytest.skip("no writable memory cgroup")
    cg = parent / f"tierlab-guard-test-{os.getpid()}"
    try:
        cg.mkdir()
        v1 = (cg / "memory.limit_in_bytes").exists()
        (cg / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(str(256 << 20))
    except OSError as e:
        pytest.skip(f"cannot create a limited memory cgroup: {e}")
    try:
        kernels = native.native_dir() / "tierlab-kernels"
        script = f'echo $$ > {cg}/cgroup.procs && exec "$@"'
        r = subprocess.run(["sh", "-c", script, "sh", str(kernels), "apcache",
                            str(data / "idx"), str(data / "h.queries"), str(tmp_path),
                            "--cache-bytes", str(1 << 30), "--memory-limit", "0",
                            "--device-read-bandwidth-bytes-per-s", "1e9"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert "needs 1.0 GiB of memory" in r.stderr
        assert f"of {cg}: limit 256.0 MiB" in r.stderr
    finally:
        cg.rmdir()


def test_k_beyond_the_documents_costs_no_more_and_answers_the_same(data, tmp_path):
    """k = 2^32 - 1 (the largest) sizes the buffers by the index's 800
    documents: `query run`, `query terms` and `apcache run` answer as with
    k = 800."""
    big, small = tmp_path / "big.tsv", tmp_path / "small.tsv"
    for k, hits in (("4294967295", big), ("800", small)):
        assert main(["query", "run", str(data / "idx"), str(data / "h.queries"), "--out",
                     str(tmp_path / f"q{k}.parquet"), "--k", k, "--results", str(hits),
                     "--passes", "1", "--quiet"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(big, sep="\t"), pd.read_csv(small, sep="\t"))
    ap = tmp_path / "ap.tsv"
    assert main(["apcache", "run", "--index", str(data / "idx"), "--workload",
                 str(data / "h.queries"), "--out", str(tmp_path / "ap"), "--quiet", "--k",
                 "4294967295", "--results", str(ap), "--device", "nvme-p4800x"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(ap, sep="\t"), pd.read_csv(small, sep="\t"))
    first = (data / "h.queries").read_text().split()[0]
    assert main(["query", "terms", str(data / "idx"), first, "--k", "4294967295"]) == 0


@pytest.mark.parametrize("keys, says", [
    (["--set", "workload={type: single, class: H, queries: 1000000000000}"],
     "generating the workload"),
    (["--set", "index={documents: 1000000000000, postings: 100000000000000, "
      "vocabulary: 1000000000, index_bytes: 10000000000000000}",
      "--set", "workload={type: single, class: H, queries: 10}"], "page-cache keys"),
])
def test_the_model_refuses_absurd_memory(tmp_path, capsys, keys, says):
    err = _refused(capsys, ["model", "run", *keys, "--costs",
                            "{single: {query_ns: 1000}, and: {query_ns: 1000}}",
                            "--out", str(tmp_path / "m")])
    assert "of memory" in err and says in err and "this machine has for it" in err
    assert not (tmp_path / "m").exists()
