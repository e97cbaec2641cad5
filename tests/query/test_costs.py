"""tierlab.model.costs: the NNLS solver against a brute-force oracle, the fit on
synthetic data with known coefficients, the JSON table (round trip, errors
naming the key), the per-machine default cache, and `tierlab query costs`
end to end on a tiny generated index."""
from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pandas as pd
import pytest

from tierlab.core import registry
from tierlab.engine import corpus
from tierlab.model import costs
from tierlab.core import native
from tierlab.cli import main
from tierlab.core.errors import TierlabError
from tierlab.engine.index import build


# --- NNLS -----------------------------------------------------------------------

def _oracle(A, b):
    """Smallest residual over every choice of the free set (an unconstrained
    least-squares solve on each subset, kept only when non-negative)."""
    n = A.shape[1]
    best, best_x = np.inf, np.zeros(n)
    for k in range(n + 1):
        for cols in itertools.combinations(range(n), k):
            x = np.zeros(n)
            if cols:
                x[list(cols)] = np.linalg.lstsq(A[:, cols], b, rcond=None)[0]
            if (x >= -1e-12).all():
                r = np.linalg.norm(A @ x - b)
                if r < best:
                    best, best_x = r, x
    return best, best_x


@pytest.mark.parametrize("seed", range(60))
def test_nnls_matches_oracle_and_is_non_negative(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(3, 30), rng.integers(1, 5)
    A = rng.normal(size=(m, n)) * rng.choice([1, 10, 1000], size=n)  # mixed column scales
    b = rng.normal(size=m) * 10
    x = costs.nnls(A, b)
    assert x.shape == (n,) and (x >= 0).all()
    best, _ = _oracle(A, b)
    assert np.linalg.norm(A @ x - b) <= best * (1 + 1e-7) + 1e-9
    # KKT: the gradient pulls no variable up from zero, and is ~0 on the free ones
    g = A.T @ (A @ x - b)
    scale = np.linalg.norm(A, axis=0) * (np.linalg.norm(b) + 1)
    assert (g >= -1e-7 * scale).all()
    assert (np.abs(g[x > 0]) <= 1e-7 * scale[x > 0]).all()


def test_nnls_edge_cases():
    assert (costs.nnls(np.zeros((4, 3)), np.ones(4)) == 0).all()  # nothing to fit
    assert (costs.nnls(np.eye(3), -np.ones(3)) == 0).all()  # every coefficient wants < 0
    x = costs.nnls(np.eye(3), np.array([1.0, -2.0, 3.0]))
    assert np.allclose(x, [1, 0, 3])
    A = np.column_stack([np.ones(5), np.arange(5.0), np.arange(5.0)])  # collinear columns
    x = costs.nnls(A, 2 + 3 * np.arange(5.0))
    assert (x >= 0).all() and np.allclose(A @ x, 2 + 3 * np.arange(5.0))
    with pytest.raises(ValueError):
        costs.nnls(np.ones((3, 2)), np.ones(4))
    with pytest.raises(ValueError):
        costs.nnls(np.array([[np.nan]]), np.ones(1))


# --- the fit -------------------------------------------------------------------------

def _synthetic(rng, truth, n=3000, noise=0.03):
    """Queries of three classes (H many blocks, M one block, L one tiny block)
    with latencies from known coefficients, multiplicative noise and 1 % of
    wild outliers (a shared machine's stalls)."""
    cls = rng.choice(["H", "M", "L"], size=n, p=[0.1, 0.3, 0.6])
    blocks = np.where(cls == "H", rng.integers(2, 400, n), 1)
    full = np.where(cls == "L", rng.integers(1, 4, n), rng.integers(5, 256, n))
    postings = np.where(cls == "H", (blocks - 1) * 256 + rng.integers(1, 257, n), full)
    y = truth.query_ns + truth.block_ns * blocks + truth.posting_ns * postings
    y = y * rng.lognormal(0, noise, n)
    wild = rng.random(n) < 0.01
    y[wild] *= rng.uniform(1, 3, wild.sum())
    return cls, blocks, postings, y


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("noise", [0.0, 0.03])
def test_fit_recovers_known_coefficients(seed, noise):
    rng = np.random.default_rng(seed)
    truth = costs.Coefficients(query_ns=rng.uniform(200, 3000), block_ns=rng.uniform(50, 800),
                               posting_ns=rng.uniform(1, 30))
    cls, b, p, y = _synthetic(rng, truth, noise=noise)
    got = costs.fit_coefficients(b, p, y, cls)
    # without noise only the 1 % outliers disturb, and the trimmed refit drops
    # them; with noise, block_ns is the weakest (blocks ~ postings / 256 for H)
    tol = {"query_ns": 0.1, "block_ns": 0.2, "posting_ns": 0.1} if noise else \
        dict.fromkeys(costs.COEFFICIENTS, 0.01)
    for k in costs.COEFFICIENTS:
        assert getattr(got, k) == pytest.approx(getattr(truth, k), rel=tol[k]), k
    pred = got.predict(b, p)
    assert np.median(np.abs(pred - y) / y) < 0.05


def test_fit_is_non_negative_and_honours_the_block_floor():
    rng = np.random.default_rng(7)
    # latencies that want a negative per-block cost: never returned
    b = rng.integers(1, 50, 500).astype(float)
    p = b * 256
    y = 5000 + 40 * p - 2000 * b
    got = costs.fit_coefficients(b, p, np.maximum(y, 100), None)
    assert min(got.query_ns, got.block_ns, got.posting_ns) >= 0
    floor = costs.fit_coefficients(b, p, np.maximum(y, 100), None, block_floor=300.0)
    assert floor.block_ns >= 300.0
    with pytest.raises(TierlabError, match="positive"):
        costs.fit_coefficients([1, 1], [1, 2], [100, 0])


def test_fit_table_reports_quality_per_type_and_class():
    rng = np.random.default_rng(3)
    rows = []
    for qtype, truth in (("single", costs.Coefficients(800, 150, 4)),
                         ("and", costs.Coefficients(1200, 300, 20))):
        cls, b, p, y = _synthetic(rng, truth, n=1500)
        rows.append(pd.DataFrame({"query_type": qtype, "query_class": cls, "blocks_decoded": b,
                                  "freq_blocks_decoded": b, "postings_scored": p,
                                  "results": np.minimum(p, 1024), "latency_ns": y}))
    coef, fit, extended = costs.fit_table(pd.concat(rows, ignore_index=True),
                                          {"did_block_ns": 60.0, "freq_block_ns": 40.0})
    assert coef["single"].block_ns == pytest.approx(150, rel=0.1)
    assert coef["and"].posting_ns == pytest.approx(20, rel=0.1)
    for qtype in registry.query_types():
        f = fit[qtype]
        assert f["queries"] == 1500 and f["block_ns_floor"] == pytest.approx(100.0)
        assert set(f["by_class"]) == {"H", "M", "L"}
        assert 0 <= f["median_abs_rel_error"] <= f["p90_abs_rel_error"] < 0.2
        assert set(extended[qtype]) == {"query_ns", "block_ns", "posting_ns", "result_ns"}
    with pytest.raises(TierlabError, match="no and queries"):
        costs.fit_table(rows[0])


# --- the table -----------------------------------------------------------------------

def _table(**over) -> costs.Costs:
    t = costs.Costs(single=costs.Coefficients(500.0, 120.0, 3.5),
                    and_=costs.Coefficients(900.0, 250.0, 12.0), codec="pfor-delta256",
                    block_size=256, index="/x/idx", placement="dram", machine={"cpu": "test"},
                    created_at="2025-01-01T00:00:00Z", decode={"did_block_ns": 80.0},
                    fit={"single": {"queries": 3}}, method="by hand",
                    extra={"with_results": {"single": {"query_ns": 1.0, "block_ns": 2.0,
                                                       "posting_ns": 3.0, "result_ns": 4.0}},
                           "note": "kept"})
    for k, v in over.items():
        setattr(t, k, v)
    return t


@pytest.fixture(autouse=True)
def quick_core_probe(monkeypatch):
    """Tables measured here need a cores section, not a precise one: 5 short
    rounds instead of 41 of >= 150 ms (what the probe measures is checked by
    shape; its precision is CORE_PROBE_ROUNDS's comment)."""
    monkeypatch.setattr(costs, "CORE_PROBE_ROUNDS", 5)
    monkeypatch.setattr(costs, "CORE_PROBE_MIN_NS", 20_000_000)

def test_cpu_factor_measured_extrapolated_or_none():
    t = _table()
    t.extra["cores"] = {"cpu_factor": {"1": 1.0, "2": 1.2}}
    assert t.cpu_factor(1) == (1.0, "one core")
    f, how = t.cpu_factor(2)
    assert f == 1.2 and how.startswith("measured")
    f, how = t.cpu_factor(4)  # +0.2 per core beyond the 2 measured
    assert f == pytest.approx(1.6) and how.startswith("extrapolated")
    t.extra["cores"] = {"cpu_factor": {"1": 1.0, "2": 0.86}}  # noise, not a speed-up
    for n in (2, 4):
        f, how = t.cpu_factor(n)
        assert f == 1.0 and "0.860" in how and "noise" in how
    t.extra["cores"] = {"cpu_factor": {"1": 1.0}}  # one CPU: nothing to measure
    assert t.cpu_factor(3)[0] == 1.0 and "one CPU" in t.cpu_factor(3)[1]
    del t.extra["cores"]
    f, how = t.cpu_factor(2)
    assert f == 1.0 and "no 'cores' section" in how
    assert "'cores'" in t.missing() and "'threads'" in t.missing()
    t.extra["threads"] = {"wake_ns": 1.0}  # before the worker's page touches were measured
    assert "threads.page_touch_ns" in t.missing() and "'threads'" not in t.missing()
    assert "threads.page_miss_ns" in t.missing()
    del t.extra["threads"]
    for bad in ({"1": 1.0, "2": "x"}, {"2": -1.0}, [1.0, 1.2]):
        t.extra["cores"] = {"cpu_factor": bad}
        with pytest.raises(TierlabError, match="cores.cpu_factor"):
            t.cpu_factor(2)


def test_save_load_round_trip(tmp_path):
    t = _table()
    path = t.save(tmp_path / "sub" / "c.json")
    d = json.loads(path.read_text())
    assert d["format"] == "tierlab-costs" and d["version"] == 1
    assert d["single"] == {"query_ns": 500.0, "block_ns": 120.0, "posting_ns": 3.5}
    assert d["and"]["posting_ns"] == 12.0 and d["note"] == "kept"
    back = costs.Costs.load(path)
    assert back.to_dict() == t.to_dict()
    assert not list(path.parent.glob(".*tmp*"))  # the temporary file is gone


def test_query_cpu_ns_vectorised():
    t = _table()
    assert t.query_cpu_ns("single", 2, 100) == 500 + 240 + 350
    b = np.array([0, 1, 10])
    p = np.array([0, 5, 2560])
    assert np.allclose(t.query_cpu_ns("and", b, p), 900 + 250 * b + 12 * p)
    types = np.array(["single", "and", "and"])
    assert np.allclose(t.query_cpu_ns(types, b, p),
                       np.where(types == "and", 900 + 250 * b + 12 * p, 500 + 120 * b + 3.5 * p))
    assert t.query_cpu_ns("single", 1, 1, results=1) == 1 + 2 + 3 + 4
    with pytest.raises(TierlabError, match="unknown query type 'or'"):
        t.query_cpu_ns("or", 1, 1)
    with pytest.raises(TierlabError, match="unknown query type"):
        t.query_cpu_ns(np.array(["single", "xor"]), b[:2], p[:2])
    with pytest.raises(TierlabError, match="with_results.and"):
        t.query_cpu_ns("and", 1, 1, results=1)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="other"), "'format' is 'other'"),
    (lambda d: d.update(version=2), "'version' is 2; this tierlab reads version 1"),
    (lambda d: d.pop("and"), "missing 'and'"),
    (lambda d: d["single"].pop("block_ns"), "missing 'single.block_ns'"),
    (lambda d: d["and"].update(posting_ns=-1.5), r"'and.posting_ns' is negative \(-1.5\)"),
    (lambda d: d["single"].update(query_ns="fast"), "'single.query_ns' must be a finite number"),
    (lambda d: d["single"].update(query_ns=True), "'single.query_ns' must be a finite number"),
    (lambda d: d.update(codec=None), "'codec' must be a codec name"),
    (lambda d: d.update(block_size=0), "'block_size' must be a positive whole number"),
])
def test_load_errors_name_the_key(tmp_path, edit, message):
    d = _table().to_dict()
    edit(d)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(d))
    with pytest.raises(TierlabError, match=message):
        costs.Costs.load(path)


def test_load_missing_or_not_json(tmp_path):
    with pytest.raises(TierlabError, match="no such cost table"):
        costs.load(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TierlabError, match="not JSON"):
        costs.load(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(TierlabError, match="not a JSON object"):
        costs.load(tmp_path / "list.json")


# --- measuring -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    d = tmp_path_factory.mktemp("costs")
    corpus.generate(d / "c.txt", corpus.GenerateParams(size_bytes=3_000_000), progress=False)
    build(d / "c.txt", d / "idx", codec="pfor-delta256")
    return d / "idx"


def test_cli_costs_end_to_end(tiny_index, tmp_path, capsys):
    out = tmp_path / "costs.json"
    assert main(["query", "costs", str(tiny_index), "--out", str(out), "--repeats", "3",
                 "--queries", "H=100", "--queries", "M=300", "--queries", "L=300"]) == 0
    report = capsys.readouterr().out
    assert "query_ns" in report and "wrote" in report
    t = costs.Costs.load(out)
    d = json.loads(out.read_text())
    assert d["codec"] == "pfor-delta256" and d["block_size"] == 256 and d["placement"] == "dram"
    assert d["machine"]["tierlab_version"] and d["method"] and d["created_at"]
    assert d["decode"]["did_block_ns"] > 0 and d["decode"]["freq_block_ns"] > 0
    assert sorted(d["workloads"]) == sorted(f"{q} {c}" for q in ("single", "and")
                                            for c in ("H", "M", "L"))
    for qtype in registry.query_types():
        c = t.coefficients(qtype)
        assert min(c.query_ns, c.block_ns, c.posting_ns) >= 0
        # the decode floor holds, and the fit explains the measured latencies
        assert c.block_ns >= d["fit"][qtype]["block_ns_floor"] > 0
        assert d["fit"][qtype]["queries"] > 300
        assert set(d["fit"][qtype]["by_class"]) == {"H", "M", "L"}
        # the fit's error is reported; how small it is depends on the machine's
        # load (typical: 20-35 %, 37 % at load 4): a measurement (tests/bench/)
        f = d["fit"][qtype]
        assert 0 <= f["median_abs_rel_error"] <= f["p90_abs_rel_error"]
    # a SINGLE query of a big term costs more than one of a rare term
    assert t.query_cpu_ns("single", 40, 10000) > t.query_cpu_ns("single", 1, 1)
    # the hand-off: every wake-up kept, sorted, for the model to draw from; wake_ns their median
    th = d["threads"]
    w = th["wake_ns_samples"]
    assert len(w) == th["rounds"] and w == sorted(w) and w[0] > 0
    assert th["wake_ns"] == pytest.approx(w[len(w) // 2], abs=1)
    assert (t.wake_samples() == np.asarray(w, dtype=float)).all()
    # the page-cache probes, each a pass's wall time over its accesses (hit, touch)
    # or a difference of two timings clamped at 0 (miss); that a whole page per
    # access costs more than a block's worth is a measurement (tests/bench/)
    assert t.page_hit_ns() == th["page_hit_ns"] > 0
    assert t.page_touch_ns() == th["page_touch_ns"] > 0
    assert t.page_miss_ns() == th["page_miss_ns"] >= 0
    # cores: timed on the H SINGLE workload, one factor per core count this machine allows
    cores = d["cores"]
    n = min(len(os.sched_getaffinity(0)), costs.CORE_PROBE_MAX)
    assert cores["measured_cores"] == n and cores["workload"] == "single-H.queries"
    assert sorted(cores["cpu_factor"], key=int) == [str(i) for i in range(1, n + 1)]
    assert cores["cpu_factor"]["1"] == 1.0
    for i in range(2, n + 1):  # each a median of the rounds' ratios, all of them positive
        r = cores["ratios"][str(i)]
        assert len(r) == costs.CORE_PROBE_ROUNDS and min(r) > 0
        assert cores["cpu_factor"][str(i)] == pytest.approx(float(np.median(r)), abs=1e-3)
    assert t.missing() is None


def test_measure_with_given_workload(tiny_index, tmp_path):
    from tierlab.engine.index import Index

    with Index(tiny_index) as ix:
        ext = ix.extents()
    top = ext.nlargest(30, "postings").term.tolist()
    rare = ext.nsmallest(30, "postings").term.tolist()
    wl = tmp_path / "mixed.queries"
    wl.write_text("".join(f"{t}\n" for t in top + rare)
                  + "".join(f"{a} AND {b}\n" for a, b in zip(top, top[1:] + rare)))
    t = costs.measure(tiny_index, workloads=[wl], repeats=1)
    # classes come from the terms' postings when the workload has no sidecar
    assert "H" in t.fit["single"]["by_class"] and "L" in t.fit["single"]["by_class"]
    assert t.fit["and"]["queries"] == 30
    assert t.extra["workloads"] == ["mixed.queries"]


@pytest.mark.parametrize("argv, message", [
    (["query", "costs", "IDX"], "--out FILE is required"),
    (["query", "costs", "--out", "x.json"], "give an INDEX"),
    (["query", "costs", "IDX", "--out", "x.json", "--queries", "X=3"], "--queries 'X=3'"),
    (["query", "costs", "IDX", "--out", "x.json", "--queries", "H=0"], "--queries 'H=0'"),
    (["query", "costs", "IDX", "--default"], "give no INDEX"),
    (["query", "costs", "IDX", "--out", "x.json", "--refresh"], "go with --default"),
    (["query", "costs", "IDX", "--out", "x.json", "--passes", "1"], "passes must be >= 2"),
    (["query", "costs", "IDX", "--out", "x.json", "--workload", "NOPE"], "--workload NOPE"),
])
def test_cli_costs_errors(tiny_index, argv, message, capsys):
    argv = [str(tiny_index) if a == "IDX" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_default_is_measured_once_and_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(costs, "DEFAULT_CORPUS_BYTES", 2_000_000)
    monkeypatch.setattr(costs, "DEFAULT_QUERIES", {"H": 50, "M": 100, "L": 100})
    path = costs.default_path("vbyte-delta")
    assert path.parent == tmp_path / "cache" / "tierlab"
    assert "vbyte-delta" in path.name and costs.__version__ in path.name
    with monkeypatch.context() as m:  # another build of the kernels: another table
        m.setattr(native, "library_digest", lambda: "0badc0de")
        assert costs.default_path("vbyte-delta") != path
    path.parent.mkdir(parents=True)
    path.write_text('{"format": "tierlab-costs", "version": 0}')  # a stale table: replaced
    t = costs.default("vbyte-delta")
    assert t.codec == "vbyte-delta" and costs.Costs.load(path).codec == "vbyte-delta"
    err = capsys.readouterr().err
    assert "measuring it again" in err
    older = t.to_dict()  # a table of an older tierlab, without the cores section: replaced
    del older["cores"]
    path.write_text(json.dumps(older))
    t = costs.default("vbyte-delta")
    assert "no 'cores' section" in capsys.readouterr().err and "cores" in t.extra
    assert str(path) in err  # never a hidden magic number

    def fail(*a, **k):
        raise AssertionError("measured again")
    monkeypatch.setattr(costs, "measure", fail)
    again = costs.default("vbyte-delta")
    assert again.to_dict() == costs.Costs.load(path).to_dict()
    assert main(["query", "costs", "--default", "--codec", "vbyte-delta", "--quiet"]) == 0
    with pytest.raises(TierlabError, match="unknown codec 'nope'"):
        costs.default("nope")
