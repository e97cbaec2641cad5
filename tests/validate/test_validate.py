"""`tierlab validate`: grid parsing and its errors, a tiny grid end to end
(runtime + model on a 3 MB generated index, emulated NVMe), resume, and the
real-device probe and its spec."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tierlab.core import specs
from tierlab.analysis import validation_report as R
from tierlab.experiments.validate import device_probe as VD
from tierlab.experiments.validate import grid as VG
from tierlab.experiments.validate import runner as V
from tierlab.cli import main
from tierlab.core.errors import TierlabError
from tierlab.traces.schema import read_table

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "analysis" / "grids" / "validate-tiny.yaml"
GEN = {"generate": {"size": "3MB", "codec": "pfor-delta256", "seed": 0}}


def _grid(**over):
    doc = {"index": GEN, "workload": {"type": "single", "class": "H", "queries": 10, "rp": 0.5},
           "config": ["base", "hybrid-prefetch"], "cache_fraction": 0.3, "device": "nvme-p4800x"}
    doc.update(over)
    return doc


# --- parsing ----------------------------------------------------------------------------

def test_rows_are_the_product_without_repeats():
    g = VG.parse(_grid(config=["base", "base-prefetch", "hybrid", "hybrid-prefetch"],
                      workload={"type": ["single", "and"], "rp": [0.0, 0.5], "queries": 10},
                      cache_fraction=[0.1, 0.5], device=["hdd-7200", "nvme-p4800x", "real"]))
    assert len(g.rows) == 4 * 2 * 2 * 2 * 3
    assert len({r.id for r in g.rows}) == len(g.rows)
    # a cell holds the four configurations of one parameter combination
    cells = pd.Series([r.cell for r in g.rows]).value_counts()
    assert set(cells) == {4} and len(cells) == 24


def test_the_model_gets_the_page_cache_cap_the_real_runtime_ran_with(tmp_path):
    g = VG.parse(_grid(config=["base", "hybrid", "base-prefetch"], device=["real", "nvme-p4800x"]))
    docs = {(r.values["config"], r.values["device"]):
            V._model_doc(r, 100_000, tmp_path, tmp_path / "w", tmp_path / "c.json",
                         V.RealDevice(tmp_path / "real.yaml",
                                      {100_000: tmp_path / "real-cap100000.yaml"}, {},
                                      tmp_path / "scratch.bin"),
                         None, 4 << 20)
            for r in g.rows}
    assert docs["base", "real"]["cache_bytes"] == 4 << 20
    # the real device's line measured under the row's planned page-cache cap, else the default
    assert docs["base", "real"]["device"] == str(tmp_path / "real-cap100000.yaml")
    assert docs["hybrid", "real"]["device"] == str(tmp_path / "real.yaml")
    assert docs["hybrid", "real"]["dram_budget_bytes"] == 4 << 20
    assert docs["hybrid", "real"]["cache_bytes"] == 100_000  # the segment cache stays
    # an emulated device has no cgroup floor: the grid's sizes
    assert docs["base", "nvme-p4800x"]["cache_bytes"] == 100_000
    # an emulated device's blocks are read through the runtime's own page cache: its hits cost
    # (the real device's pages are read through the mapping, as the model's default)
    for key in ("page_hit_ns", "page_miss_ns"):  # and so do its reads' bookkeeping
        assert docs["base", "nvme-p4800x"][key] == "table" and key not in docs["base", "real"]
    # the kernel keeps pages read only through the MADV_RANDOM mapping in FIFO order; a
    # prefetch worker's pread marks them accessed (LRU, the default); the emulated cache is LRU
    assert docs["base", "real"]["page_cache_policy"] == "fifo"
    assert docs["hybrid", "real"]["page_cache_policy"] == "fifo"
    assert "page_cache_policy" not in docs["base-prefetch", "real"]
    assert "page_cache_policy" not in docs["base", "nvme-p4800x"]


def test_parameters_a_configuration_does_not_use_make_no_extra_rows():
    g = VG.parse(_grid(config=["base", "base-prefetch", "hybrid-prefetch"],
                      segment_bytes=["16KiB", "32KiB"], lookahead=[8, "adaptive"]))
    by = pd.Series([r.values["config"] for r in g.rows]).value_counts().to_dict()
    # base: one row; base-prefetch: lookahead 8 only (no adaptive); hybrid-prefetch: 2 x 2
    assert by == {"base": 1, "base-prefetch": 1, "hybrid-prefetch": 4}


@pytest.mark.parametrize("over, key", [
    ({"colour": 1}, "'colour'"),
    ({"device": "floppy"}, "device"),
    ({"device": ["nvme-p4800x", 3]}, "device"),
    ({"config": "turbo"}, "config"),
    ({"workload": {"type": "or"}}, "workload.type"),
    ({"workload": {"rp": 2}}, "workload.rp"),
    ({"workload": {"flavour": "x"}}, "'flavour'"),
    ({"cache_fraction": -1}, "cache_fraction"),
    ({"cache_bytes": "4MB"}, "cache_bytes and cache_fraction"),
    ({"cache_fraction": []}, "cache_fraction"),
    ({"segment_bytes": 100}, "segment_bytes"),
    ({"lookahead": "soon"}, "lookahead"),
    ({"index": {"generate": {"size": "3MB", "codec": "zip"}}}, "index.generate.codec"),
    ({"index": "/nonexistent/idx"}, "index"),
    ({"policy": "random"}, "policy"),
    ({"costs": "/nonexistent/costs.json"}, "costs"),
    ({"repeats": 0}, "repeats"),
])
def test_bad_grids_are_one_line_errors_naming_the_key(tmp_path, capsys, over, key):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(_grid(**over)))
    rc = main(["validate", str(path), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err
    line = [x for x in err.splitlines() if x.startswith("tierlab: error:")]
    assert len(line) == 1 and key in line[0], err
    assert not (tmp_path / "out").exists()


def test_missing_grid_file_is_an_error():
    with pytest.raises(TierlabError, match="cannot read"):
        VG.load("/nonexistent/grid.yaml")


# --- a tiny grid end to end ------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("validate") / "out"
    rc = main(["validate", str(TINY), "--out", str(out), "--no-progress"])
    assert rc == 0
    return out


def test_tiny_grid_writes_every_output(tiny):
    for f in ("measured.parquet", "model.parquet", "validation.csv", "validation.md",
              "parity.png", "summary.json", "costs.json"):
        assert (tiny / f).stat().st_size > 0, f
    _, m = read_table(tiny / "measured.parquet")
    _, p = read_table(tiny / "model.parquet")
    assert set(m["source"]) == {"measured"} and set(p["source"]) == {"model"}
    assert len(m) == len(p) == 8
    assert set(m["device_mode"]) == {"emulated"}
    v = pd.read_csv(tiny / "validation.csv")
    assert len(v) == 8 and set(v["config"]) == {"base", "base-prefetch", "hybrid",
                                                "hybrid-prefetch"}
    s = json.loads((tiny / "summary.json").read_text())
    assert set(s["targets"]) >= {"qps_median_abs_rel_error", "qps_p90_abs_rel_error",
                                 "p99_median_abs_rel_error", "miss_rate_max_abs_pp",
                                 "kendall_tau_mean", "rows"}
    for t in s["targets"].values():
        assert set(t) == {"value", "threshold", "met"} and isinstance(t["met"], bool)
    assert s["targets"]["rows"]["value"] == 8 and s["targets"]["rows"]["met"] is False
    assert s["cells"] == 2  # SINGLE and AND, four configurations ranked in each
    md = (tiny / "validation.md").read_text()
    assert md.count("| nvme-p4800x |") == 8


def test_predictive_mode_runs_beside_the_replay_with_its_own_targets(tiny):
    """Each row's model also runs in predictive mode (the workload file and the
    cost table's CPU), scored into OUT/predictive against issue 21's targets."""
    for r in (tiny / "rows").iterdir():
        _, t = read_table(r / "model-table" / "cache_run.parquet")
        prm = json.loads(t["params"].iloc[0])
        assert "trace" not in prm["workload"] and prm["workload"].get("file")
        _, p = read_table(r / "model" / "cache_run.parquet")
        assert json.loads(p["params"].iloc[0])["workload"]["cpu"] == "measured"
    s = json.loads((tiny / "predictive" / "summary.json").read_text())
    assert s["rows"] == 8
    assert s["targets"]["qps_median_abs_rel_error"]["threshold"] == "<= 0.1"
    assert s["targets"]["qps_p90_abs_rel_error"]["threshold"] == "<= 0.25"


def test_short_rows_keep_the_median_of_their_repeats(tiny):
    for r in (tiny / "rows").iterdir():
        rep = json.loads((r / "measured" / "repeats.json").read_text())
        qps, timed = rep["qps"], rep["kept_timing"]
        # every tiny run is far below REPEAT_BELOW_S; late ones and noisy ones run again
        assert 3 <= len(qps) <= 3 + V.SPREAD_EXTRA + V.LATE_RETRIES and len(timed) == len(qps)
        _, m = read_table(r / "measured" / "cache_run.parquet")
        pool = [q for q, ok in zip(qps, timed) if ok] or qps
        kept = m["qps"].iloc[0]
        assert kept == qps[rep["kept"]] and kept in pool
        assert abs(kept - np.median(pool)) == min(abs(q - np.median(pool)) for q in pool)
        assert rep["twin"] is not None and rep["twin"] != rep["kept"]
        assert rep["metrics"][rep["kept"]]["qps"] == kept
    assert not list((tiny / "rows").glob("*/.measured*"))  # the other runs are gone
    # the noise floor: each row's twin run scored as the model is
    s = json.loads((tiny / "summary.json").read_text())
    floor = s["noise_floor"]
    assert floor["rows"] == 8 and set(floor["targets"]) >= {"qps_median_abs_rel_error",
                                                            "kendall_tau_mean"}
    t = floor["targets"]["qps_median_abs_rel_error"]
    assert t["model"] == pytest.approx(s["targets"]["qps_median_abs_rel_error"]["value"])
    assert t["runtime_vs_itself"] >= 0 and isinstance(t["noise_allows_it"], bool)
    assert "Noise floor" in (tiny / "validation.md").read_text()
    grid = VG.parse(yaml.safe_load(TINY.read_text()))
    grid.out = tiny
    notes = V.spread_notes(grid)  # the runtime's own noise, next to the model's errors
    assert len(notes) == 1 and "nvme-p4800x median" in notes[0]
    # every row ran 3+ times; one whose runs were late may have fewer than 2 to compare
    assert 1 <= int(notes[0].rsplit("(", 1)[1].split()[0]) <= 8


@pytest.mark.parametrize("plan, kept, runs, twin, min_runs", [
    # short runs: the late first one is run again; the median of three that kept time,
    # compared for the noise floor with the next one that kept time too
    ([(100, 0.05, 0.1), (90, 0.0, 0.1), (85, 0.0, 0.1), (80, 0.0, 0.1)], 85, 4, 3, 2),
    # a long run: min_runs times, the late ones again, at most LATE_RETRIES more times
    ([(50, 0.05, 2.0), (60, 0.03, 2.0), (55, 0.0, 2.0)], 55, 3, 1, 1),
    ([(50, 0.05, 2.0), (60, 0.03, 2.0), (40, 0.04, 2.0)], 50, 3, 1, 1),  # none kept time
    ([(50, 0.0, 2.0)], 50, 1, None, 1),  # once: no twin
    ([(50, 0.0, 2.0), (60, 0.0, 2.0)], 50, 2, 1, 2),
    ([(50, 0.0, 2.0), (60, 0.05, 2.0), (55, 0.0, 2.0)], 55, 3, 0, 2),
    # short runs far apart (a noisy moment): two more, the median of five
    ([(100, 0.0, 0.1), (50, 0.0, 0.1), (95, 0.0, 0.1), (98, 0.0, 0.1), (40, 0.0, 0.1)], 95, 5,
     3, 2),
    # ... two of them late: run again until five kept time (seven runs at most)
    ([(100, 0.0, 0.1), (60, 0.0, 0.1), (90, 0.0, 0.1), (70, 0.05, 0.1), (80, 0.05, 0.1),
      (95, 0.0, 0.1), (85, 0.0, 0.1), (1, 0.0, 0.1)], 90, 7, 1, 2),
    # close together: three are enough
    ([(100, 0.0, 0.1), (90, 0.0, 0.1), (95, 0.0, 0.1), (10, 0.0, 0.1)], 95, 3, 1, 2),
])
def test_emulated_runs_that_miss_their_device_timing_are_run_again(tmp_path, monkeypatch, plan,
                                                                    kept, runs, twin, min_runs):
    from tierlab.runtime import apcache
    from tierlab.traces import schema

    done = []

    def fake_run(spec, rdir, progress=None, **kw):
        rdir.mkdir(parents=True)
        (rdir / "cache_run.parquet").write_text(str(len(done)))
        done.append(rdir)

    def fake_read(path):
        qps, late, wall_s = plan[int(Path(path).read_text())]
        wall = wall_s * 1e9
        return "cache_run", pd.DataFrame([{"qps": float(qps), "wall_ns": wall,
                                           "latency_p99_ns": 1e6 / qps,
                                           "params": json.dumps({"device_late_ns": late * wall})}])

    monkeypatch.setattr(apcache, "run", fake_run)
    monkeypatch.setattr(schema, "read_table", fake_read)
    monkeypatch.setattr(V, "run_doc", lambda row, cache, index, workload: {})
    tmp = tmp_path / "row" / "measured"
    tmp.parent.mkdir()
    V._measure(None, tmp_path, tmp_path, tmp, 0, 3, cpu=False, min_runs=min_runs)
    assert len(done) == runs
    assert fake_read(tmp / "cache_run.parquet")[1]["qps"].iloc[0] == kept
    rep = json.loads((tmp / "repeats.json").read_text())
    assert rep["qps"] == [q for q, _, _ in plan[:runs]]
    assert rep["kept_timing"] == [late <= V.LATE_SHARE for _, late, _ in plan[:runs]]
    assert rep["twin"] == twin and plan[rep["kept"]][0] == kept
    # every run's metrics, as measured (what the run did not report: null)
    assert [m["latency_p99_ns"] for m in rep["metrics"]] == [1e6 / q for q, _, _ in plan[:runs]]
    assert all(m["storage_bytes_read"] is None for m in rep["metrics"])
    assert sorted(p.name for p in tmp.parent.iterdir()) == ["measured"]  # the others are gone


def test_the_kept_run_is_the_median_one_and_of_two_the_one_nearer_all_runs():
    def run(qps, ok=True):
        return (float(qps), f"run-{qps}", ok)

    assert V.median_run([run(3), run(1), run(2)])[0] == 3 - 1  # an odd count: its median
    # two kept runs (10 and 30): the late ones say the row usually runs near 28
    assert V.median_run([run(10), run(30), run(27, False), run(28, False), run(29, False)]
                        )[0] == 30
    assert V.median_run([run(10), run(30), run(11, False), run(12, False)])[0] == 10
    assert V.median_run([run(5, False), run(7, False), run(6, False)])[0] == 6  # none kept time
    assert V.spread([90.0, 100.0, 110.0]) == pytest.approx(0.2)


def test_cpu_trace_is_the_median_of_its_runs(tmp_path):
    from tierlab.traces.schema import write_table

    t = tmp_path / "query.parquet"
    rows = [{"run_id": "r", "source": "measured", "query_id": i, "query_type": "single",
             "query_class": "H", "terms": ["t"], "latency_ns": 10, "postings_scored": 1,
             "blocks_total": 1, "blocks_decoded": 1, "freq_blocks_decoded": 1,
             "dict_bytes_read": 0, "skip_bytes_read": 0, "did_bytes_read": 0,
             "freq_bytes_read": 0, "results": 1, "unknown_terms": 0} for i in range(3)]
    write_table("query", pd.DataFrame(rows), t)
    V._median_latency(t, [np.array([10, 50, 7]), np.array([30, 20, 9]), np.array([20, 40, 8])])
    name, q = read_table(t)
    assert name == "query" and q["latency_ns"].tolist() == [20, 40, 8]


def test_runtime_and_model_read_the_same_inputs(tiny):
    _, m = read_table(tiny / "measured.parquet")
    _, p = read_table(tiny / "model.parquet")
    costs = json.loads((tiny / "costs.json").read_text())
    for a, b in zip(m.sort_values("config").to_dict("records"),
                    p.sort_values("config").to_dict("records")):
        assert a["config"] == b["config"]
        # the same query file: the model replays a DRAM query run of it (cpu: measured),
        # taken next to the runtime run it is compared with
        assert Path(a["workload"]).parent == tiny / "workloads"
        trace = Path(b["workload"])
        assert trace.name == "cpu.trace" and trace.parent.name == "measured"
        assert trace.parent.parent.parent == tiny / "rows"
        _, trun = read_table(Path(b["workload"]) / "run.parquet")
        assert trun["workload"].iloc[0] == a["workload"] and trun["placement"].iloc[0] == "dram"
        assert a["cache_bytes"] == b["cache_bytes"] and a["queries"] == b["queries"]
        assert a["query_type"] == b["query_type"] and a["rp"] == b["rp"]
        prm = json.loads(b["params"])
        assert prm["passes"] == 1
        # a waiting thread spins as long in the model as the runtime's did (0: not pinned)
        assert prm["handoff_spin_ns"] == json.loads(a["params"])["handoff_spin_ns"]
        # calibrated only from the cost table measured on the index
        assert prm["costs"]["single"] == costs["single"]
        assert prm["costs"]["and"] == costs["and"]
        if a["config"].startswith("hybrid"):
            # one run spec: the same slow tier on both sides, placed in DRAM by the runtime
            assert a["slow_tier"] == b["slow_tier"] == "ddr4-2666"
            assert json.loads(a["params"])["slow_tier_placement"] == "dram"
            assert prm["tier_factor"] == pytest.approx(1.0)


def test_emulated_runs_late_on_their_device_are_flagged():
    def run(late_ns, mode="emulated"):
        return {"device_mode": mode, "wall_ns": 1_000_000,
                "params": json.dumps({"device_late_ns": late_ns})}

    ok = V.emulation_notes(pd.DataFrame([run(5_000), run(0), run(900_000, "real")]))
    assert ok == ["emulated devices kept their timing: no run was late for more than 2% of its "
                  "wall time (max 0.5%)"]
    bad = V.emulation_notes(pd.DataFrame([run(5_000), run(130_000), run(30_000)]))
    assert len(bad) == 1 and "2 of 3 run(s)" in bad[0] and "max 13.0%" in bad[0]
    assert V.emulation_notes(pd.DataFrame([run(900_000, "real")])) == []


def test_the_two_sides_report_the_same_parameters_as_written(tiny):
    """Both run the row's one run spec: nothing is normalised before pairing,
    so any difference in a parameter column is a mismatch (a page-cache cap
    the runtime's cgroup raised is in its row and given to the model)."""
    grid = VG.parse(yaml.safe_load(TINY.read_text()))
    grid.out = tiny
    m, p = V.collect(grid)
    assert R.param_mismatches(m, p) == []
    m.loc[0, "cache_bytes"] = p.loc[0, "cache_bytes"] = 4 << 20  # a raised cap, both sides
    assert R.param_mismatches(m, p) == []
    p.loc[0, "cores"] = 3
    assert len(R.param_mismatches(m, p)) == 1


def test_the_noise_floor_is_given_without_the_real_device_too(tiny, tmp_path):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(tiny, out)
    grid = VG.parse(yaml.safe_load(TINY.read_text()))
    grid.out = out
    m, p = V.collect(grid)
    real = m["query_type"] == "and"  # call the AND rows real: 4 rows, one cell
    for df in (m, p):
        df.loc[real.to_numpy(), "device"] = V.REAL
    res = R.analyse(grid.out, m, p, V.collect_twins(grid, m))
    doc = json.loads((out / "summary.json").read_text())
    assert doc["noise_floor"]["rows"] == 8
    assert doc["noise_floor_emulated_devices_only"]["rows"] == 4
    assert set(doc["noise_floor"]["by_device"]) == {"nvme-p4800x", V.REAL}
    assert res["text"].count("noise floor: the runtime against itself") == 2


def test_rerun_skips_finished_rows_and_redoes_a_missing_side(tiny):
    rows = sorted((tiny / "rows").iterdir())
    assert len(rows) == 8
    stamp = {r.name: (r / "measured" / "cache_run.parquet").stat().st_mtime_ns for r in rows}
    victim = rows[0]
    import shutil
    shutil.rmtree(victim / "model")
    assert main(["validate", str(TINY), "--out", str(tiny), "--no-progress"]) == 0
    for r in rows:  # no runtime run repeated, the model side of the victim redone
        assert (r / "measured" / "cache_run.parquet").stat().st_mtime_ns == stamp[r.name]
    assert (victim / "model" / "cache_run.parquet").exists()
    assert len(pd.read_csv(tiny / "validation.csv")) == 8


def test_changed_generation_parameters_need_another_folder(tiny, tmp_path, capsys):
    doc = yaml.safe_load(TINY.read_text())
    doc["index"]["generate"]["seed"] = 7
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(path), "--out", str(tiny), "--no-progress"]) == 2
    assert "another out folder" in capsys.readouterr().err


def test_ctrl_c_keeps_finished_rows(tiny, tmp_path, monkeypatch):
    import shutil

    out = tmp_path / "out"
    out.mkdir()
    for name in ("index", "corpus"):  # the inputs of the tiny run, not built again
        shutil.copytree(tiny / name, out / name)
    for name in ("index.json", "costs.json"):
        shutil.copy(tiny / name, out / name)
    doc = yaml.safe_load(TINY.read_text())
    doc["workload"]["type"] = "single"
    grid = VG.parse(doc)
    grid.out = out
    real_run_row, calls = V.run_row, []

    def interrupted_third(row, *a, **kw):
        calls.append(row.id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_run_row(row, *a, **kw)

    monkeypatch.setattr(V, "run_row", interrupted_third)
    got = V.run(grid, progress=False, log=lambda m: None)
    assert got.interrupted  # the caller reports what was finished, then re-raises
    done = [r for r in grid.rows if V.is_done(out, r)]
    assert [r.id for r in done] == calls[:2]
    R.analyse(got.out, got.measured, got.model, got.twins, got.notes)
    assert len(pd.read_csv(out / "validation.csv")) == 2  # analysed what was finished
    monkeypatch.setattr(V, "run_row", real_run_row)
    V.run(grid, progress=False, log=lambda m: None)  # the rerun finishes the rest
    assert all(V.is_done(out, r) for r in grid.rows)


def test_a_failed_runtime_run_is_listed_and_the_grid_goes_on(tiny, tmp_path, monkeypatch,
                                                             capsys):
    import shutil

    import tierlab.runtime.apcache as apc

    out = tmp_path / "out"
    out.mkdir()
    for name in ("index", "corpus"):
        shutil.copytree(tiny / name, out / name)
    for name in ("index.json", "costs.json"):
        shutil.copy(tiny / name, out / name)
    real_run = apc.run

    def oom_for_hybrid(spec, o, **kw):
        if spec["config"] == "hybrid":
            raise TierlabError("apcache run failed: the runtime was killed by signal 9")
        return real_run(spec, o, **kw)

    monkeypatch.setattr(apc, "run", oom_for_hybrid)
    assert main(["validate", str(TINY), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "row failed, continuing" in err and "signal 9" in err
    assert len(list((out / "rows").glob("*/failed.json"))) == 2  # SINGLE and AND
    assert len(pd.read_csv(out / "validation.csv")) == 6
    s = json.loads((out / "summary.json").read_text())
    assert sum("FAILED" in n for n in s["notes"]) == 2
    monkeypatch.setattr(apc, "run", real_run)
    assert main(["validate", str(TINY), "--out", str(out), "--no-progress"]) == 0
    assert not list((out / "rows").glob("*/failed.json"))
    assert len(pd.read_csv(out / "validation.csv")) == 8


# --- the real device ----------------------------------------------------------------------

def test_probe_and_spec(tmp_path):
    p = VD.probe_device(tmp_path, file_bytes=8 * 2**20, random_reads=64, threads=2,
                       run_reads=200, caps=(1 << 20, 1 << 20, 2 << 20))
    # measured numbers: finite and positive here; their sizes are measurements (tests/bench/)
    assert math.isfinite(p["read_bandwidth_bytes_per_s"]) and p["read_bandwidth_bytes_per_s"] > 0
    assert math.isfinite(p["read_4k_median_ns"]) and p["read_4k_median_ns"] > 0
    assert p["read_latency_ns"] >= 0
    assert p["queue_depth"] >= 1
    assert not list(tmp_path.glob(".probe-*"))  # the scratch file is removed
    path = V.write_device_spec(p, tmp_path / "real.yaml", block_device="254:0")
    s = specs.load(str(path), kind="storage")
    assert s.name == "real"
    assert s["read_bandwidth_bytes_per_s"] == pytest.approx(p["read_bandwidth_bytes_per_s"], 1e-6)
    assert s["queue_depth"] == p["queue_depth"]
    assert "measured on this machine by tierlab validate on" in s.source("read_latency_ns")
    # the model's line comes from reads through the runtime's own read path when they ran
    if p["read_path"] == "runtime":
        small, big = p["runtime_reads"]
        assert small["run_bytes"] == 4096 and big["run_bytes"] == 128 << 10
        assert big["mean_ns"] > small["mean_ns"] > 0
        assert s["read_latency_ns"] + 4096 / s["read_bandwidth_bytes_per_s"] * 1e9 == \
            pytest.approx(small["mean_ns"], rel=1e-3)
        assert "as the APCache runtime reads a real-device miss" in s.source("read_latency_ns")
        # and under each page-cache cap asked for (once each), in its own cgroup when writable
        lines = p["runtime_lines"]
        assert set(lines) <= {str(1 << 20), str(2 << 20)}
        for cap, at in lines.items():
            small, big = at["runtime_reads"]
            assert small["cap_bytes"] == big["cap_bytes"] == int(cap)
            assert (at["read_latency_ns"], at["read_bandwidth_bytes_per_s"]) == \
                V.runtime_line(small, big)
    else:
        assert p["runtime_reads_unused"]


def test_read_probe_errors_are_named(tmp_path):
    small = tmp_path / "small.bin"
    small.write_bytes(b"\0" * 8192)
    with pytest.raises(TierlabError, match="too small"):
        VD.runtime_reads(small, 128 << 10, 4 << 20, 10)
    with pytest.raises(TierlabError, match="4 KiB .. 1 MiB"):
        VD.runtime_reads(small, 100, 0, 10)


def test_host_caching_is_named():
    assert VD.host_caching_suspected({"read_4k_median_ns": 3_000})
    assert not VD.host_caching_suspected({"read_4k_median_ns": 80_000})


def test_a_real_rows_model_gets_the_line_its_own_probes_measured(tmp_path):
    probe = {"read_bandwidth_bytes_per_s": 1e9, "read_latency_ns": 50_000.0,
             "read_4k_median_ns": 60_000.0, "read_4k_p90_ns": 70_000.0, "o_direct": True,
             "queue_depth": 1, "iops_parallel": 1e4, "threads": 4, "file_bytes": 128 << 20,
             "random_reads": 100, "seq_chunk_bytes": 1 << 20, "folder": str(tmp_path),
             "direct_read_bandwidth_bytes_per_s": 1e9, "block_device": "254:0"}
    real = V.RealDevice(tmp_path / "real.yaml", {}, probe, tmp_path / "scratch.bin")

    def reads(small_ns, big_ns):
        return [{"run_bytes": 4096, "reads": 300, "mean_ns": small_ns, "how": "cgroup v1"},
                {"run_bytes": 131072, "reads": 300, "mean_ns": big_ns, "how": "cgroup v1"}]

    m = tmp_path / "measured"
    m.mkdir()
    # before 100/400 us, after 200/500 us: the line through the means, 150 and 450 us
    (m / "device-probe.json").write_text(json.dumps({"before": reads(100e3, 400e3),
                                                      "after": reads(200e3, 500e3)}))
    spec = specs.load(str(V._row_spec(m, real)), kind="storage")
    bw = (131072 - 4096) / 300e-6
    assert spec["read_bandwidth_bytes_per_s"] == pytest.approx(bw, rel=1e-6)
    assert spec["read_latency_ns"] == pytest.approx(150e3 - 4096 / bw * 1e9, abs=1)  # whole ns
    # a longer run no slower: no line, the grid's spec
    (m / "device-probe.json").write_text(json.dumps({"before": reads(300e3, 200e3),
                                                      "after": reads(300e3, 200e3)}))
    assert V._row_spec(m, real) \
        == tmp_path / "real.yaml"


def test_the_scratch_file_is_written_once_where_asked(tmp_path):
    path = tmp_path / "devices" / "probe-scratch.bin"  # its folder need not exist yet
    V._scratch_file(path, 2 << 20)
    assert path.stat().st_size == 2 << 20 and not path.with_name(path.name + ".tmp").exists()
    before = path.read_bytes()
    V._scratch_file(path, 2 << 20)  # there already: kept as it is
    assert path.read_bytes() == before
