"""`tierlab sim stream|generate|run` end to end on tiny inputs: a fake
simulator binary (a shell script replaying a captured VANS run) for the run
path, one-line errors, and integration runs of the real simulators when
TIERLAB_RAMULATOR2 / TIERLAB_VANS / TIERLAB_GEM5 name them (skipped with the
reason otherwise)."""
import math
import os
import stat

import pandas as pd
import pytest

from tierlab.cli import main
from tierlab.experiments.sims import embedded
from sims_inputs import DATA, write_mixed


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_stream_then_generate(tmp_path, capsys):
    s = tmp_path / "r.memreq"
    rc, out, _ = _run(capsys, "sim", "stream", "--pattern", "random", "--count", "100",
                      "--out", str(s))
    assert rc == 0 and s.stat().st_size == 2400
    rc, out, _ = _run(capsys, "sim", "generate", "--backend", "ramulator2", "cxl-type3", str(s),
                      "--out", str(tmp_path / "g"), "--mode", "unloaded")
    assert rc == 0 and (tmp_path / "g/unloaded/ramulator2.yaml").exists()
    assert not (tmp_path / "g/saturated").exists()


@pytest.mark.parametrize("backend,var", [("ramulator2", "TIERLAB_RAMULATOR2"),
                                         ("gem5", "TIERLAB_GEM5"), ("vans", "TIERLAB_VANS")])
def test_missing_binary_is_one_line(tmp_path, capsys, monkeypatch, backend, var):
    monkeypatch.delenv(var, raising=False)
    rc, _, err = _run(capsys, "sim", "run", "--backend", backend, "optane-dcpmm-g1",
                      str(write_mixed(tmp_path)), "--out", str(tmp_path / "o"))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and var in err
    monkeypatch.setenv(var, str(tmp_path / "nope"))
    rc, _, err = _run(capsys, "sim", "run", "--backend", backend, "optane-dcpmm-g1",
                      str(write_mixed(tmp_path)), "--out", str(tmp_path / "o"))
    assert rc == 2 and "not an executable file" in err and len(err.strip().splitlines()) == 1


def test_bad_stream_and_spec_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.memreq"
    bad.write_bytes(b"x" * 25)
    rc, _, err = _run(capsys, "sim", "generate", "--backend", "vans", "optane-dcpmm-g1",
                      str(bad), "--out", str(tmp_path / "o"))
    assert rc == 2 and "multiple of 24" in err
    rc, _, err = _run(capsys, "sim", "generate", "--backend", "vans", "hdd-7200",
                      str(write_mixed(tmp_path)), "--out", str(tmp_path / "o"))
    assert rc == 2 and "memory spec is needed" in err


def _fake_vans(tmp_path):
    """A stand-in for VANS: prints a captured run's stdout and writes its stats."""
    exe = tmp_path / "fake-vans"
    exe.write_text("#!/bin/sh\n"
                   f"cat '{DATA / 'vans-random200-unloaded.log'}'\n"
                   f"cp '{DATA / 'vans-random200-unloaded.stats'}' vans_dump/stats_0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_run_with_a_binary_writes_sim_run(tmp_path, capsys):
    out = tmp_path / "o"
    rc, text, _ = _run(capsys, "sim", "run", "--backend", "vans", "--binary",
                       str(_fake_vans(tmp_path)), "optane-dcpmm-g1", str(write_mixed(tmp_path)),
                       "--out", str(out), "--mode", "unloaded")
    assert rc == 0, text
    df = pd.read_csv(out / "sim_run.csv")
    assert list(df["source"]) == ["vans"] and list(df["mode"]) == ["unloaded"]
    row = df.iloc[0]
    assert row["reads"] == 200 and row["region"] == "all"
    assert (out / "unloaded/vans.log").read_text().startswith("Total clock")
    # the gaps of the mixed stream were injected as idle cycles and taken off
    assert row["read_latency_mean_ns"] < 86502.0 / 200


def test_failing_binary_names_its_log(tmp_path, capsys):
    exe = tmp_path / "fail"
    exe.write_text("#!/bin/sh\necho boom: bad config\nexit 3\n")
    exe.chmod(0o755)
    rc, _, err = _run(capsys, "sim", "run", "--backend", "ramulator2", "--binary", str(exe),
                      "ddr4-2666", str(write_mixed(tmp_path)), "--out", str(tmp_path / "o"))
    assert rc == 2 and "exit status 3" in err and "boom" in err and "ramulator2.log" in err


# --- integration: the real binaries ------------------------------------------------

def _binary(var):
    path = os.environ.get(var)
    if not path:
        pytest.skip(f"{var} is not set (build the simulator from its public source; "
                    "docs/simulators.md)")
    return path


@pytest.mark.parametrize("spec", ["ddr4-2666", "optane-dcpmm-g1"])
def test_ramulator2_real(tmp_path, capsys, spec):
    _binary("TIERLAB_RAMULATOR2")
    s = tmp_path / "r.memreq"
    _run(capsys, "sim", "stream", "--pattern", "random", "--count", "2000", "--out", str(s))
    rc, text, err = _run(capsys, "sim", "run", "--backend", "ramulator2", spec, str(s),
                         "--out", str(tmp_path / "o"))
    assert rc == 0, err
    df = pd.read_csv(tmp_path / "o/sim_run.csv").set_index("mode")
    from tierlab.core import specs

    want = specs.load(spec)["read_latency_random_ns"]
    assert df.loc["unloaded", "read_latency_mean_ns"] == pytest.approx(want, rel=0.05)
    # LoadStoreTrace ends when the last read is offered: the queued rest is not served
    assert 1900 < df.loc["saturated", "reads"] <= 2000


def test_vans_real(tmp_path, capsys):
    _binary("TIERLAB_VANS")
    s = tmp_path / "s.memreq"
    _run(capsys, "sim", "stream", "--pattern", "sequential", "--count", "2000", "--out", str(s))
    rc, text, err = _run(capsys, "sim", "run", "--backend", "vans", "optane-dcpmm-g1", str(s),
                         "--out", str(tmp_path / "o"))
    assert rc == 0, err
    df = pd.read_csv(tmp_path / "o/sim_run.csv").set_index("mode")
    assert 100 < df.loc["unloaded", "read_latency_mean_ns"] < 400
    assert df.loc["saturated", "read_bandwidth_bytes_per_s"] > 1e9


def test_gem5_real(tmp_path, capsys):
    _binary("TIERLAB_GEM5")
    s = tmp_path / "r.memreq"
    _run(capsys, "sim", "stream", "--pattern", "random", "--count", "500", "--out", str(s))
    rc, text, err = _run(capsys, "sim", "run", "--backend", "gem5", "optane-dcpmm-g1", str(s),
                         "--out", str(tmp_path / "o"), "--mode", "unloaded")
    assert rc == 0, err
    df = pd.read_csv(tmp_path / "o/sim_run.csv")
    assert df["reads"].iloc[0] == 500 and not math.isnan(df["read_latency_mean_ns"].iloc[0])


def test_embedded(tmp_path, capsys):
    if not embedded.available():
        pytest.skip("the tier-timing model (kernels/src/memsim/timing.c) is not in this build")
    s = tmp_path / "r.memreq"
    _run(capsys, "sim", "stream", "--pattern", "random", "--count", "2000", "--out", str(s))
    rc, text, err = _run(capsys, "sim", "run", "--backend", "embedded", "optane-dcpmm-g1",
                         str(s), "--out", str(tmp_path / "o"))
    assert rc == 0, err
    df = pd.read_csv(tmp_path / "o/sim_run.csv").set_index("mode")
    assert df.loc["unloaded", "read_latency_mean_ns"] == pytest.approx(305.0, rel=0.05)


def test_trace_inspect_summarises_sim_run(tmp_path, capsys):
    out = tmp_path / "o"
    assert _run(capsys, "sim", "run", "--backend", "vans", "--binary", str(_fake_vans(tmp_path)),
                "optane-dcpmm-g1", str(write_mixed(tmp_path)), "--out", str(out),
                "--mode", "unloaded")[0] == 0
    rc, text, err = _run(capsys, "trace", "inspect", str(out / "sim_run.csv"))
    assert rc == 0, err
    assert "sim_run: 1 rows (source: vans)" in text and "mean read latency" in text


def test_embedded_rows_per_region_and_for_a_selection(tmp_path, capsys):
    if not embedded.available():
        pytest.skip("the tier-timing model (kernels/src/memsim/timing.c) is not in this build")
    s = write_mixed(tmp_path)
    assert _run(capsys, "sim", "run", "--backend", "embedded", "optane-dcpmm-g1", str(s),
                "--out", str(tmp_path / "a"))[0] == 0
    df = pd.read_csv(tmp_path / "a/sim_run.csv")
    assert set(df["region"]) == {"all", "did", "dictionary"}  # regions with reads
    assert not df.duplicated(["run_id", "mode", "region"]).any()
    rc, _, err = _run(capsys, "sim", "run", "--backend", "embedded", "optane-dcpmm-g1", str(s),
                      "--out", str(tmp_path / "b"), "--region", "did,dictionary")
    assert rc == 0, err
    df = pd.read_csv(tmp_path / "b/sim_run.csv")
    assert list(df["region"]) == ["did,dictionary"] * 2
    assert df["reads"].iloc[0] == 36  # 16 + 4 prefetches (did) + 16 (dictionary)
    rc, _, err = _run(capsys, "sim", "run", "--backend", "embedded", "optane-dcpmm-g1", str(s),
                      "--out", str(tmp_path / "c"), "--region", "nowhere")
    assert rc == 2 and "unknown region 'nowhere'" in err


def test_stream_from_a_recorded_trace(tmp_path, capsys):
    """A memory trace (traces/memtrace.md) through the cache filter of a
    machine: a line read twice leaves the caches once; a fresh line each time
    leaves them every time."""
    import numpy as np

    from tierlab.experiments.sims import stream as st
    from tierlab.traces import memtrace

    rec = np.zeros(300, dtype=memtrace.RECORD)
    rec["addr"] = (1 << 30) + np.arange(300) * 4096 * 7  # scattered lines: no prefetch helps
    rec["addr"][150:] = rec["addr"][:150]              # the same lines again: cache hits
    rec["size"], rec["region"] = 8, 3
    trace = memtrace.write(tmp_path / "t.bin", rec)
    out = tmp_path / "s.memreq"
    rc, text, err = _run(capsys, "sim", "stream", "--from-trace", str(trace), "--no-prefetch",
                         "--out", str(out))
    assert rc == 0, err
    recs = st.read(out)
    assert (recs["kind"] == st.READ).sum() == 150 and set(recs["region"].tolist()) == {3}
    rc, _, err = _run(capsys, "sim", "stream", "--from-trace", str(out), "--out",
                      str(tmp_path / "x"))
    assert rc == 2 and "not a memory trace" in err
