"""`tierlab bench codecs` end to end on a tiny n, its generators, its
round-trip guard and its handling of bad input."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tierlab.core import native
from tierlab.experiments.bench import codecs as bench
from tierlab.experiments.bench import data
from tierlab.cli import main

N = 4096
DATASETS = ("clustered", "uniform")
REGIMES = ("per-block", "whole-list")
LISTS = ("dids", "freqs")
NUM = (int, float)
RECORD_TYPES = {
    "codec": str, "block_codec": str, "impl": str, "peer": bool, "library": str,
    "dataset": str, "list": str, "regime": str, "n": int, "bits_per_int": NUM,
    "encoded_bytes": int,
    "decode_ns_per_int": NUM, "decode_ns_per_int_min": NUM, "decode_ns_per_int_iqr": NUM,
    "decode_ns_per_int_raw": NUM, "decode_clamped_to_memcpy": bool,
    "python_overhead_ns_per_int": NUM,
    "encode_ns_per_int": NUM, "vs_memcpy": NUM,
}


@pytest.fixture(scope="module")
def run(run_bench, tmp_path_factory):
    """One full run (peers included) shared by the tests of this module."""
    png = tmp_path_factory.mktemp("plot") / "codecs.png"
    rc, doc, out = run_bench("codecs", "--plot", str(png), "--n", str(N), "--reps", "10")
    assert rc == 0
    return doc, out, png


def _ours(doc):
    return [r for r in doc["records"] if not r["peer"]]


def test_writes_json_and_png(run):
    doc, out, png = run
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]  # atomic write
    assert doc["benchmark"] == "codecs"
    m = doc["machine"]
    for key in ("cpu_model", "simd_features", "kernel", "tierlab_version", "peers", "date"):
        assert key in m
    assert doc["config"]["n"] == N and doc["config"]["reps"] == 10
    assert doc["config"]["datasets"] == list(DATASETS)


def test_record_fields_and_types(run):
    doc, _, _ = run
    assert doc["records"]
    for r in doc["records"]:
        assert r["dataset"] in DATASETS and r["regime"] in REGIMES and r["list"] in LISTS
        assert r["impl"] in ("simd", "scalar")
        assert r["n"] == N
        if r["error"] is not None:  # a failed contestant carries no numbers at all
            assert r["decode_ns_per_int"] is None and r["bits_per_int"] is None
            continue
        for key, typ in RECORD_TYPES.items():
            assert isinstance(r[key], typ), (r["codec"], key, r[key])
        assert r["decode_ns_per_int"] > 0 and r["encode_ns_per_int"] >= 0
        assert r["decode_ns_per_int_min"] <= r["decode_ns_per_int"] + 1e-12
        assert r["bits_per_int"] == pytest.approx(8 * r["encoded_bytes"] / N)


def test_every_registry_codec_has_records_for_both_datasets_and_regimes(run):
    doc, _, _ = run
    for c in native.codecs():
        for dataset in DATASETS:
            for regime in REGIMES:
                for lst in LISTS:
                    hits = [r for r in _ours(doc) if (r["codec"], r["dataset"], r["regime"],
                                                      r["list"]) == (c.name, dataset, regime, lst)]
                    assert len(hits) == 1, (c.name, dataset, regime, lst)


def test_every_registry_codec_round_trips_and_gets_a_speed(run):
    doc, _, _ = run
    failed = sorted({(r["codec"], r["error"]) for r in _ours(doc) if r["error"]})
    assert not failed, f"codecs that failed the benchmark's round trip: {failed}"


def test_base_is_exactly_32_bits(run):
    doc, _, _ = run
    base = [r for r in _ours(doc) if r["codec"] == "base"]
    assert len(base) == len(DATASETS) * len(REGIMES) * len(LISTS)
    assert all(r["bits_per_int"] == 32.0 for r in base)


def test_memcpy_and_peers_in_the_same_file(run):
    doc, _, _ = run
    peers = {r["codec"] for r in doc["records"] if r["peer"]}
    assert "memcpy" in peers
    for r in doc["records"]:
        if r["codec"] == "memcpy":
            assert r["vs_memcpy"] == 1.0 and r["bits_per_int"] == 32.0
    try:
        import pyfastpfor  # noqa: F401
    except ImportError:
        pytest.skip("pyfastpfor not installed")
    for name in bench.PYFASTPFOR_CODECS:
        recs = [r for r in doc["records"] if r["codec"] == f"pyfastpfor/{name}"]
        assert len(recs) == len(DATASETS) * len(REGIMES) * len(LISTS)
        for r in recs:
            assert r["peer"] is True and r["error"] is None
            assert r["python_overhead_ns_per_int"] >= 0 and r["overhead_method"]
            assert r["vs_memcpy"] >= 1.0  # never below the memcpy floor


def test_targets_and_memcpy_ratios(run):
    doc, _, _ = run
    assert [t["name"] for t in doc["targets"]] == [t["name"] for t in bench.TARGETS]
    for t in doc["targets"]:
        for key in ("name", "ours", "peer", "ratio", "required", "met", "evaluated"):
            assert key in t
        assert isinstance(t["met"], bool)
        if t["evaluated"]:
            assert t["ratio"] == pytest.approx(t["peer_value"] / t["ours_value"])
            assert t["met"] == (t["ratio"] >= t["required"])
    assert [r["codec"] for r in doc["vs_memcpy"]] == [c.name for c in native.codecs()]


def test_prints_table_and_targets(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main(["bench", "codecs", "--out", str(out), "--n", "512", "--reps", "3",
                 "--no-peers", "--dataset", "uniform", "--no-progress"]) == 0
    cap = capsys.readouterr()
    assert "reps 3 is below 10" in cap.err  # fewer runs are allowed, with a warning
    assert "bits/int" in cap.out and "x memcpy" in cap.out and "TARGETS" in cap.out
    assert "base" in cap.out
    doc = json.loads(out.read_text())
    assert {r["dataset"] for r in doc["records"]} == {"uniform"}
    assert not any(r["peer"] and r["codec"] != "memcpy" for r in doc["records"])
    assert all(not t["evaluated"] for t in doc["targets"])  # no clustered data, no peers


# ---- the generators --------------------------------------------------------

@pytest.mark.parametrize("gen", [data.uniform_dids, data.clustered_dids])
@pytest.mark.parametrize("n,gap", [(4096, 32), (10000, 8), (1 << 16, 32)])
def test_dids_sorted_distinct_with_mean_gap(gen, n, gap):
    v = gen(n, gap, 7)
    assert v.dtype == np.uint32 and len(v) == n
    d = np.diff(v.astype(np.int64))
    assert (d >= 1).all()  # strictly increasing: sorted and distinct
    assert d.mean() == pytest.approx(gap, rel=0.10)
    assert np.array_equal(v, gen(n, gap, 7))  # seeded
    assert not np.array_equal(v, gen(n, gap, 8))


def test_uniform_gaps_stay_in_range():
    d = np.diff(data.uniform_dids(1 << 16, 32, 1).astype(np.int64))
    assert d.min() >= 1 and d.max() <= 63


def test_clustered_is_clustered():
    # how fast it is (vectorised per level, ~0.2 s) is a measurement: tests/bench/
    v = data.clustered_dids(1 << 20, 32, 3)
    d = np.diff(v.astype(np.int64))
    assert v[0] == 0 and v[-1] == (1 << 20) * 32 - 1
    # Dense runs and long jumps: far more gaps of 1 and far larger gaps than uniform.
    assert (d == 1).mean() > 0.2 and d.max() > 10_000


def test_freqs_small_and_skewed():
    f = data.freqs(1 << 16, 5)
    assert f.dtype == np.uint32 and f.min() >= 1 and f.max() <= 512
    assert (f <= 3).mean() > 0.85 and f.max() > 20


def test_generators_reject_what_does_not_fit():
    from tierlab.core.errors import TierlabError

    with pytest.raises(TierlabError):
        data.uniform_dids(1 << 28, 64)
    with pytest.raises(TierlabError):
        data.clustered_dids(0, 32)


# ---- a wrong decoder never gets a speed ------------------------------------

@pytest.mark.parametrize("harm,message", [
    (lambda out, n: out.__setitem__(100, out[100] ^ 1), "value 100"),  # one wrong value
    (lambda out, n: out.__setitem__(n, 7), "past the end"),             # a write past n
])
def test_wrong_decode_gets_no_speed(monkeypatch, harm, message):
    real = bench._Native.decode_pass

    def harmful(self, ptr, enc, offsets, blocks, out, whole):
        t = real(self, ptr, enc, offsets, blocks, out, whole)
        if whole and self.ffi.string(ptr.name) == b"base":
            harm(out, blocks.n)
        return t

    monkeypatch.setattr(bench._Native, "decode_pass", harmful)
    doc = bench.run(bench.Config(n=1024, reps=2, datasets=("uniform",), peers=False,
                                 progress=False))
    base = [r for r in doc["records"] if r["codec"] == "base"]
    assert base and all(r["error"] and r["decode_ns_per_int"] is None for r in base)
    assert any(e["codec"] == "base" and message in e["error"] for e in doc["errors"])


def test_missing_pyfastpfor_is_a_note_not_a_failure(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pyfastpfor", None)  # `import pyfastpfor` now fails
    doc = bench.run(bench.Config(n=512, reps=2, datasets=("clustered",), progress=False))
    assert not [r for r in doc["records"] if r["library"] == "pyfastpfor"]
    assert any("pyfastpfor is not importable" in note for note in doc["notes"])
    assert "pyfastpfor is not importable" in capsys.readouterr().err
    target = doc["targets"][0]
    assert target["evaluated"] is False and target["met"] is False and target["note"]


def test_upstream_streamvbyte_is_timed_without_python(run):
    doc, _, _ = run
    if bench.find_upstream_streamvbyte() is None:
        pytest.skip("upstream StreamVByte not built (`make peers`)")
    recs = [r for r in doc["records"] if r["codec"] == bench.UPSTREAM_SVB]
    assert len(recs) == len(DATASETS) * len(REGIMES) * len(LISTS)
    for r in recs:
        assert r["impl"] == "simd" and r["error"] is None
        assert r["python_overhead_ns_per_int"] == 0.0  # the C loop calls it directly
        assert len(r["decode_rounds_ns_per_int"]) == 10
    # byte-compatible: the same stream sizes as svbyte-delta / svbyte
    for lst, ours in (("dids", "svbyte-delta"), ("freqs", "svbyte-delta")):
        a = next(r for r in doc["records"] if (r["codec"], r["list"], r["dataset"], r["regime"])
                 == (bench.UPSTREAM_SVB, lst, "clustered", "per-block"))
        b = next(r for r in doc["records"] if (r["codec"], r["list"], r["dataset"], r["regime"])
                 == (ours, lst, "clustered", "per-block"))
        assert a["encoded_bytes"] == b["encoded_bytes"]
    t = next(t for t in doc["targets"] if t["peer"] == bench.UPSTREAM_SVB)
    assert t["evaluated"] and t["ratio_rounds_q25"] <= t["ratio_rounds_q75"]


def test_turbopfor_targets_are_anchored(run):
    """TurboPFor's numbers are the issue's; times scale with upstream StreamVByte here."""
    doc, _, _ = run
    tt = {(t["list"], t["metric"]): t for t in doc["turbopfor_targets"]}
    size = tt["dids", "bits_per_int"]
    assert size["anchored_value"] == size["issue_value"] == 2.60 and size["evaluated"]
    up = bench._find(doc["records"], bench.UPSTREAM_SVB, "clustered", "per-block", "dids")
    for key in (("dids", "decode_ns_per_int"), ("freqs", "decode_ns_per_int")):
        t = tt[key]
        if up is None:
            assert not t["evaluated"] and "make peers" in t["note"]
            continue
        assert t["anchored_value"] == pytest.approx(
            t["issue_value"] * up["decode_ns_per_int"] / bench.ISSUE_UPSTREAM_NS)
        assert t["met"] == (t["ours_value"] <= t["anchored_value"])
    assert any("TurboPFor is on no registry" in n for n in doc["notes"])
    assert doc["run_to_run"]["median_relative_iqr"] >= 0


# ---- bad input: exit 2, one line, no traceback -----------------------------

@pytest.mark.parametrize("args,msg", [
    (["--n", "0"], "--n must be a positive"),
    (["--n", "-5"], "--n must be a positive"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--avg-gap", "0"], "--avg-gap must be at least 1"),
    (["--n", str(1 << 28), "--avg-gap", "64"], "do not fit in 32 bits"),
    (["--seed", "-1"], "--seed must be a non-negative"),
])
def test_bad_values_exit_2(bench_fails, args, msg):
    assert msg in bench_fails("codecs", *args)


def test_unwritable_out_exits_2(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc = main(["bench", "codecs", "--out", str(blocker / "x.json"), "--n", "256"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write" in err


def test_out_is_required_and_dataset_checked(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "codecs"])
    assert e.value.code == 2 and "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["bench", "codecs", "--out", str(tmp_path / "x.json"), "--dataset", "zipf"])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_no_traceback_from_the_installed_command(tmp_path):
    exe = Path(sys.executable).with_name("tierlab")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tierlab.cli"]
    r = subprocess.run([*cmd, "bench", "codecs", "--out", str(tmp_path / "x.json"), "--n", "0"],
                       capture_output=True, text=True, env=dict(os.environ), timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith("tierlab: error:") and "Traceback" not in r.stderr
