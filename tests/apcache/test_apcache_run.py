"""`tierlab apcache run` end to end on a tiny generated corpus (pfor-delta256):
all four configurations on an emulated device and on the real one, answers
identical to `tierlab query run`'s, the cache_run/cache_query/cache_timeline
tables, the counting identities, errors, and Ctrl-C."""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tierlab.core.registry import configs
from tierlab.cli import main
from processes import processes
from tiny_inputs import corpus_and_index
from tierlab.traces.schema import read_table

REPO = Path(__file__).resolve().parents[2]
CONFIGS = configs()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = corpus_and_index(tmp_path_factory.mktemp("apc"), docs=3000)
    # H terms (many blocks) and M terms, SINGLE and AND, with repeats (rp 0.5)
    for name, cls, qtype in (("h", "H", "single"), ("m", "M", "single"), ("a", "H", "and")):
        assert main(["workload", "generate", "--corpus", str(d / "c.txt"), "--class", cls,
                     "--type", qtype, "--queries", "60", "--rp", "0.5", "--seed", "1", "--quiet",
                     "--out", str(d / f"{name}.queries")]) == 0
    lines = [(d / f"{n}.queries").read_text().splitlines() for n in ("h", "m", "a")]
    mixed = [x for trio in zip(*lines) for x in trio] + ["nosuchterm"]
    (d / "w.queries").write_text("\n".join(mixed) + "\n")
    ref = d / "ref.tsv"
    assert main(["query", "run", str(d / "idx"), str(d / "w.queries"), "--out",
                 str(d / "ref.parquet"), "--passes", "1", "--k", "100", "--results", str(ref),
                 "--quiet"]) == 0
    return d


def _hits(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, sep="\t").sort_values(["query_id", "rank"]).reset_index(drop=True)


def _run(d: Path, out: Path, *extra: str) -> int:
    return main(["apcache", "run", "--index", str(d / "idx"), "--workload", str(d / "w.queries"),
                 "--out", str(out),
                 "--k", "100", "--results", str(out / "hits.tsv"), "--quiet", *extra])


def _tables(out: Path):
    tabs = {}
    for name in ("cache_run", "cache_query", "cache_timeline"):
        got, df = read_table(out / f"{name}.parquet")
        assert got == name
        assert set(df["source"]) == {"measured"}
        tabs[name] = df
    return tabs


def _occurrences(d: Path) -> int:
    from tierlab.engine.index import Index
    from tierlab.engine.workload import read_queries

    with Index(d / "idx") as ix:
        return sum(len(q) for q in read_queries(d / "w.queries")
                   if all(ix.lookup(t) is not None for t in q))


@pytest.mark.parametrize("config", CONFIGS)
def test_every_config_emulated(setup, tmp_path, config):
    d = setup
    out = tmp_path / config
    # small caches: evictions; 2 cores: two shards share the emulated device
    size = "96KiB" if config.startswith("base") else "256KiB"
    assert _run(d, out, "--config", config, "--cache-bytes", size, "--segment-bytes", "8KiB",
                "--dram-budget-bytes", "128KiB", "--device", "nvme-p4800x", "--cores", "2",
                "--slow-tier-placement", f"pm:{tmp_path}") == 0
    pd.testing.assert_frame_equal(_hits(out / "hits.tsv"), _hits(d / "ref.tsv"))
    t = _tables(out)
    run = t["cache_run"].iloc[0]
    nq = len((d / "w.queries").read_text().splitlines())
    assert run["config"] == config and run["device"] == "nvme-p4800x"
    assert run["device_mode"] == "emulated" and run["cores"] == 2 and run["queries"] == 2 * nq
    assert run["qps"] > 0 and run["latency_p99_ns"] >= run["latency_p50_ns"] > 0
    assert run["storage_bytes_read"] > 0 and run["storage_reads"] > 0
    assert run["page_cache_misses"] > 0  # cold start
    assert run["memory_limit_enforced"].startswith("emulated")
    assert 0 < run["device_utilisation"] <= 1
    occ = _occurrences(d)
    q = t["cache_query"]
    assert len(q) == 2 * nq and set(q["core"]) == {0, 1}
    assert (q["latency_ns"] >= q["wait_ns"]).all()
    if config.startswith("hybrid"):
        assert run["segment_cache_hits"] + run["segment_cache_misses"] == 2 * occ
        if config == "hybrid-prefetch":  # hybrid's trailing copies depend on timing
            assert run["segment_cache_hits"] > 0  # the workload repeats terms
        assert q["segment_cache_misses"].sum() == run["segment_cache_misses"]
        assert run["segment_bytes"] == 8192 and run["peak_slow_tier_bytes"] > 0
    else:
        assert run["segment_cache_hits"] == run["segment_cache_misses"] == 0
        assert math.isnan(run["segment_cache_miss_rate"])
    if config.endswith("prefetch"):
        assert run["lookahead"] == ("adaptive" if config == "hybrid-prefetch" else "16")
        assert run["lookahead_mean"] >= 0
    tl = t["cache_timeline"]
    assert len(tl) >= 2 and tl["storage_bytes_read"].is_monotonic_increasing
    params = json.loads(run["params"])
    assert params["partial"] is False and params["device_spec"]["name"] == "nvme-p4800x"
    assert not list(tmp_path.glob("tierlab-segcache-*"))  # the pm file is gone
    assert not list(d.glob(".tierlab-shard-*"))


@pytest.mark.parametrize("config", ["base", "hybrid-prefetch"])
def test_real_device(setup, tmp_path, config):
    d = setup
    out = tmp_path / "real"
    assert _run(d, out, "--config", config, "--cache-bytes", "256KiB", "--segment-bytes", "8KiB",
                "--dram-budget-bytes", "4MB", "--cores", "2", "--device", "real") == 0
    pd.testing.assert_frame_equal(_hits(out / "hits.tsv"), _hits(d / "ref.tsv"))
    run = _tables(out)["cache_run"].iloc[0]
    assert run["device_mode"] == "real" and run["device"] == "real"
    assert "block_device" in json.loads(run["params"])
    how = run["memory_limit_enforced"]
    assert how.startswith("cgroup v") or how.startswith("no: "), how
    assert run["page_cache_misses"] > 0  # dropped before the run
    assert not list(d.glob(".tierlab-shard-*"))  # the second shard's copy is gone
    from tierlab.runtime.apcache import _cgroup_parents

    for parent in _cgroup_parents():
        assert not list(parent.glob("tierlab-*")), parent


@pytest.mark.parametrize("readahead,who", [("64KiB", "the runtime's: 64 KiB"),
                                            ("0", "the kernel's")])
def test_real_device_readahead(setup, tmp_path, readahead, who):
    """The run's readahead decides what a real-device miss reads (the kernel's
    read-around off), unless it is left to the kernel."""
    d = setup
    out = tmp_path / "ra"
    assert _run(d, out, "--config", "base", "--cache-bytes", "256KiB", "--device", "real",
                "--readahead-bytes", readahead) == 0
    pd.testing.assert_frame_equal(_hits(out / "hits.tsv"), _hits(d / "ref.tsv"))
    run = _tables(out)["cache_run"].iloc[0]
    params = json.loads(run["params"])
    assert params["readahead"].startswith(who), params["readahead"]
    assert params["readahead_bytes"] == (0 if readahead == "0" else 64 << 10)
    if readahead != "0" and run["memory_limit_enforced"].startswith("cgroup"):
        # the run's cap stands (no floor raise at 256 KiB with the runtime's readahead)
        assert "raised" not in run["memory_limit_enforced"], run["memory_limit_enforced"]
        assert run["cache_bytes"] == 256 << 10


def test_a_raised_real_page_cache_cap_is_the_runs_cache_bytes(setup, tmp_path):
    """Below 256 KiB the real device's cgroup cap is raised (the kernel
    OOM-kills smaller ones): the run's cache_bytes is the cap it ran with."""
    out = tmp_path / "raised"
    assert _run(setup, out, "--config", "base", "--cache-bytes", "64KiB", "--device", "real",
                "--readahead-bytes", "4KiB") == 0
    run = _tables(out)["cache_run"].iloc[0]
    how = run["memory_limit_enforced"]
    if not how.startswith("cgroup"):
        pytest.skip(f"no writable memory cgroup here: {how}")
    assert "raised from 65536" in how and run["cache_bytes"] == 256 << 10


def test_fixed_lookahead_and_policy(setup, tmp_path):
    d = setup
    out = tmp_path / "fixed"
    assert _run(d, out, "--config", "hybrid-prefetch", "--lookahead", "64", "--policy", "fifo",
                "--cache-bytes", "128KiB", "--segment-bytes", "4KiB", "--device", "nvme-p4800x") == 0
    pd.testing.assert_frame_equal(_hits(out / "hits.tsv"), _hits(d / "ref.tsv"))
    run = _tables(out)["cache_run"].iloc[0]
    assert run["lookahead"] == "64" and run["policy"] == "fifo"
    assert run["segment_cache_hits"] + run["segment_cache_misses"] == _occurrences(d)


@pytest.mark.parametrize("args,message", [
    (["--config", "hybird"], "config: unknown name 'hybird'"),
    (["--policy", "mru"], "policy: unknown name 'mru'"),
    (["--config", "base", "--lookahead", "4"], "only base-prefetch and hybrid-prefetch"),
    (["--config", "base-prefetch", "--lookahead", "adaptive"], "hybrid-prefetch's"),
    (["--segment-bytes", "100"], "multiple of 8"),
    (["--cache-bytes", "1KiB"], "less than one"),
    (["--device", "floppy"], "unknown device or tier spec 'floppy'"),
    (["--device", "ddr4-2666"], "a storage spec is needed"),
    (["--slow-tier-placement", "pm:/nonexistent/dir"], "needs an existing directory"),
    (["--slow-tier-placement", "optane"], "one of dram, pm:PATH, numa:N"),
    (["--slow-tier", "optane-dcpmm-g1"], "slow_tier_placement"),
    (["--readahead-bytes", "0", "--device", "nvme-p4800x"], "for the real device only"),
    (["--readahead-bytes", "2MiB"], "4 KiB .. 1 MiB"),
    (["--cache-bytes", "1MB", "--cache-fraction", "0.5"], "give one of them"),
    (["--index", "reference"], "the runtime runs an index folder"),
])
def test_errors_name_the_bad_value(setup, tmp_path, capsys, args, message):
    d = setup
    rc = main(["apcache", "run", "--index", str(d / "idx"), "--workload", str(d / "w.queries"),
               "--out", str(tmp_path / "o"), "--quiet", *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err, err


def test_missing_index_and_workload(setup, tmp_path, capsys):
    d = setup
    assert main(["apcache", "run", "--index", str(tmp_path / "nope"), "--workload",
                 str(d / "w.queries"), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "no such index directory" in capsys.readouterr().err
    (tmp_path / "bad.queries").write_text("Hello World\n")
    assert main(["apcache", "run", "--index", str(d / "idx"), "--workload",
                 str(tmp_path / "bad.queries"), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "is not a term" in capsys.readouterr().err


def _child_of(pid: int, name: str, timeout: float = 20.0) -> int:
    """The pid of `pid`'s child process called `name`."""
    end = time.time() + timeout
    while time.time() < end:
        for child, (ppid, _, comm) in processes().items():
            if ppid == pid and comm.startswith(name[:15]):
                return child
        time.sleep(0.05)
    raise AssertionError(f"no child {name} of {pid}")


@pytest.mark.parametrize("target", ["child", "parent"])
def test_ctrl_c_writes_partial_results_and_leaves_nothing(setup, tmp_path, target):
    d = setup
    out = tmp_path / "int"
    cmd = [sys.executable, "-m", "tierlab", "apcache", "run", "--index", str(d / "idx"),
           "--workload", str(d / "w.queries"), "--out", str(out), "--config", "hybrid-prefetch",
           "--cores", "2", "--device", "hdd-7200", "--cache-bytes", "256KiB", "--segment-bytes",
           "8KiB", "--dram-budget-bytes", "64KiB", "--readahead-bytes", "4KiB",
           "--slow-tier-placement", f"pm:{tmp_path}", "--quiet"]
    # SIGINT back to its default in the child: a test run started in the background by a
    # non-interactive shell inherits it ignored, and Python then never installs its handler
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    child = _child_of(proc.pid, "tierlab-kernels")
    time.sleep(1.0)  # ~100 HDD reads (4 ms each, one page each) in: well before the end
    os.kill(child if target == "child" else proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert not Path(f"/proc/{child}").exists()  # the runtime and all its threads are gone
    run = _tables(out)["cache_run"].iloc[0]
    assert json.loads(run["params"])["partial"] is True
    nq = len((d / "w.queries").read_text().splitlines())
    assert 0 < run["queries"] < 2 * nq
    assert not list(tmp_path.glob("tierlab-segcache-*"))
    assert not list(out.glob(".raw-*"))
    assert not list(d.glob(".tierlab-shard-*"))
    from tierlab.runtime.apcache import _cgroup_parents

    for parent in _cgroup_parents():
        assert not (parent / f"tierlab-{child}").exists()


# --- the emulated device's accuracy counters and spin policy (device.c) -------------------

@pytest.mark.parametrize("config, cores, threads", [("base", 1, 1), ("base-prefetch", 2, 4)])
def test_emulated_reads_spin_whole_delays_only_when_every_thread_has_a_cpu(
        setup, tmp_path, config, cores, threads):
    """A run reports how many reads returned later than the device timing rule
    planned and whether the pread itself overran; waits are spun (not slept)
    up to 200 us only when no thread shares a CPU."""
    out = tmp_path / config
    assert _run(setup, out, "--device", "nvme-p4800x", "--cache-bytes", "64KiB", "--config",
                config, "--cores", str(cores)) == 0
    run = _tables(out)["cache_run"].iloc[0]
    p = json.loads(run["params"])
    want = 200_000 if threads <= (os.cpu_count() or 1) else 15_000
    assert p["device_spin_ns"] == want
    # late reads are a subset of the reads; a late pread is a late read
    assert 0 <= p["device_late_preads"] <= p["device_late_reads"] <= run["storage_reads"]
    assert p["device_late_ns"] >= 2000 * p["device_late_reads"]


def test_one_spec_file_drives_the_runtime_and_the_model(setup, tmp_path):
    """`tierlab apcache run SPEC` and `tierlab model run SPEC` read one file
    and report the same run: configuration, device, slow tier, cache."""
    import yaml

    spec = tmp_path / "run.yaml"
    spec.write_text(yaml.safe_dump({
        "index": str(setup / "idx"), "workload": str(setup / "w.queries"),
        "config": "hybrid-prefetch", "device": "nvme-p4800x", "cache_bytes": "256KiB",
        "segment_bytes": "8KiB", "dram_budget_bytes": "128KiB", "k": 100,
        "costs": {t: {"query_ns": 1000, "block_ns": 300, "posting_ns": 5}
                  for t in ("single", "and")}}))
    assert main(["apcache", "run", str(spec), "--out", str(tmp_path / "m"), "--quiet"]) == 0
    assert main(["model", "run", str(spec), "--out", str(tmp_path / "p")]) == 0
    a = _tables(tmp_path / "m")["cache_run"].iloc[0]
    _, b = read_table(tmp_path / "p" / "cache_run.parquet")
    b = b.iloc[0]
    for col in ("config", "policy", "device", "slow_tier", "cores", "cache_bytes",
                "segment_bytes", "lookahead", "dram_budget_bytes", "query_type"):
        assert a[col] == b[col], col
    assert a["slow_tier"] == "ddr4-2666"
    spec_a, spec_b = (json.loads(r["params"])["spec"] for r in (a, b))
    assert spec_a.pop("out") != spec_b.pop("out") and spec_a == spec_b


@pytest.mark.parametrize("config, device", [("base", "nvme-p4800x"),
                                            ("hybrid-prefetch", "nvme-p4800x"),
                                            ("hybrid", "real")])
def test_damaged_index_fails_the_run(setup, tmp_path, capsys, config, device):
    """A flipped bit in a DID block of a term the workload asks for: the run
    stops with the query's message (its reads through the emulated page
    cache, the mapping or the segment cache are checked as a query's are),
    never with wrong answers."""
    import shutil

    from tierlab.engine.index import Index
    from tierlab.engine.workload import read_queries

    d = setup
    idx = tmp_path / "idx"
    shutil.copytree(d / "idx", idx)
    with Index(idx) as ix:
        ext = ix.extents()
        term = next(t for q in read_queries(d / "w.queries") for t in q
                    if ix.lookup(t) and ix.lookup(t) > 1000)
        r = ext.iloc[ix.find(term)]
    with open(idx / "dids.bin", "r+b") as f:
        at = int(r.did_offset) + int(r.did_bytes) // 2
        f.seek(at)
        b = f.read(1)[0]
        f.seek(at)
        f.write(bytes([b ^ 0x10]))
    rc = main(["apcache", "run", "--index", str(idx), "--workload", str(d / "w.queries"),
               "--out", str(tmp_path / "o"), "--quiet", "--config", config, "--device", device,
               "--cache-bytes", "256KiB", "--segment-bytes", "8KiB",
               "--dram-budget-bytes", "4MB"])
    err = capsys.readouterr().err
    assert rc == 2 and f"corrupt index: dids.bin: term '{term}'" in err, err
    assert "checksum mismatch" in err and "Traceback" not in err, err
