"""Validation arithmetic: pairing runs, errors against targets, Kendall tau,
and the mechanism named where the model misses."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from tierlab.analysis import validation as v
from tierlab.core.errors import TierlabError

CONFIGS = ["base", "base-prefetch", "hybrid", "hybrid-prefetch"]


def _runs(source, qps_scale=1.0, miss_shift=0.0, cells=12):
    rows = []
    for c, (cache, dev) in enumerate(itertools.product([1 << 20, 1 << 22, 1 << 24], ["hdd-7200", "nvme-p4800x"])):
        if c >= cells:
            break
        for i, cfg in enumerate(CONFIGS):
            rows.append({"config": cfg, "policy": "lru", "device": dev, "query_type": "single",
                         "query_class": "H", "rp": 0.25, "cores": 1, "cache_bytes": cache,
                         "segment_bytes": 32768, "lookahead": "adaptive",
                         "dram_budget_bytes": 50 << 20,
                         "qps": (100.0 + 50 * i + c) * qps_scale, "latency_p99_ns": 1e6 * (5 - i),
                         "page_cache_miss_rate": 0.3, "segment_cache_miss_rate": 0.2 + miss_shift,
                         "storage_bytes_read": 1000, "worker_stall_ns": 10, "query_wait_ns": 5,
                         "latency_mean_ns": 5e5, "source": source})
    return pd.DataFrame(rows)


def _brute_tau(a, b):
    s = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        s += np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])
    return s / math.comb(len(a), 2)


@pytest.mark.parametrize("seed", range(5))
def test_kendall_tau_matches_brute_force_without_ties(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.permutation(7).astype(float), rng.permutation(7).astype(float)
    assert v.kendall_tau(a, b) == pytest.approx(_brute_tau(a, b))
    assert v.kendall_tau(a, a) == 1.0 and v.kendall_tau(a, -a) == -1.0


def test_perfect_model_meets_every_target():
    m = _runs("measured")
    s, cells = v.summarise(v.pair(m, _runs("model")), v.Targets(min_cells=24))
    assert s.met and s.qps_median == 0 and s.kendall_tau_mean == 1.0 and len(cells) == 6


def test_biased_model_misses_qps_and_names_the_mechanism():
    p = v.pair(_runs("measured"), _runs("model", qps_scale=1.3, miss_shift=0.05))
    s, _ = v.summarise(p)
    assert s.qps_median == pytest.approx(0.3)
    assert not s.checks["qps_median_abs_rel_error"]["met"]
    assert s.checks["miss_rate_max_abs_pp"]["value"] == pytest.approx(5.0)
    assert not s.checks["rows"]["met"]  # 24 rows < 48
    assert set(p["diagnosis"]) == {"segment-cache contents (eviction/admission)"}
    assert s.kendall_tau_mean == 1.0  # a uniform bias keeps the ranking


def test_ranking_flip_lowers_tau():
    model = _runs("model")
    model.loc[model["config"] == "base", "qps"] = 1e6  # base now ranks first everywhere
    s, _ = v.summarise(v.pair(_runs("measured"), model))
    assert s.kendall_tau_mean == pytest.approx(0.0)


def test_no_overlap_and_duplicates_are_errors():
    m = _runs("measured")
    other = _runs("model")
    other["segment_bytes"] = 4096
    with pytest.raises(TierlabError, match="share no parameter combination"):
        v.pair(m, other)
    with pytest.raises(TierlabError, match="repeated parameter rows"):
        v.pair(pd.concat([m, m]), _runs("model"))
    with pytest.raises(TierlabError, match="missing columns"):
        v.pair(m.drop(columns=["qps"]), _runs("model"))


def test_parity_plot_writes_a_png(tmp_path):
    p = v.pair(_runs("measured"), _runs("model", qps_scale=1.1))
    v.parity_plot(p, tmp_path / "parity.png")
    assert (tmp_path / "parity.png").stat().st_size > 5000


def test_a_real_device_row_whose_caches_agree_names_the_kernel_page_cache():
    row = {"qps_rel_error": 0.4, "latency_p99_ns_rel_error": -0.5,
           "storage_bytes_read_measured": 1e8, "storage_bytes_read_model": 1.02e8}
    assert v.diagnose({**row, "device": "nvme-p4800x"}).startswith("device timing")
    assert v.diagnose({**row, "device": "real"}).startswith("kernel page-cache CPU")


def test_discordant_pairs_name_the_near_ties():
    rows = [  # cell a: base and hybrid swap 0.5 % apart; cell b: agree; cell c: swap 20 % apart
        ("a", "hdd", "base", 100.0, 90.0), ("a", "hdd", "hybrid", 100.5, 89.0),
        ("b", "nvme", "base", 100.0, 90.0), ("b", "nvme", "hybrid", 200.0, 180.0),
        ("c", "real", "base", 100.0, 130.0), ("c", "real", "hybrid", 125.0, 120.0)]
    p = pd.DataFrame(rows, columns=["cell", "device", "config", "qps_measured", "qps_model"])
    d = v.discordant_pairs(p)
    assert d["device"].tolist() == ["hdd", "real"]
    assert d["measured_gap"].round(3).tolist() == [0.005, 0.2]
    assert (d["measured_gap"] < v.NEAR_TIE).tolist() == [True, False]
    assert v.discordant_pairs(p[p["cell"] == "b"]).empty


def _bistable_model(measured_qps_drop, measured_miss=0.6):
    """The measured runs, and a model whose base-prefetch rows of the first
    two cells are bistable: its usual state as measured but for QPS, its
    other state (head start) at 60 % of that QPS and twice the miss rate."""
    meas, mod = _runs("measured"), _runs("model")
    mod["bistable"] = False
    for k in v.HEAD_START:
        mod[f"{k}_head_start"] = math.nan
    hit = (mod["config"] == "base-prefetch") & mod["cache_bytes"].eq(1 << 20)
    mod.loc[hit, "bistable"] = True
    mod.loc[hit, "qps_head_start"] = 0.6 * mod.loc[hit, "qps"]
    mod.loc[hit, "page_cache_miss_rate_head_start"] = 0.6
    mod.loc[hit, "latency_p99_ns_head_start"] = mod.loc[hit, "latency_p99_ns"]
    mod.loc[hit, "segment_cache_miss_rate_head_start"] = mod.loc[hit, "segment_cache_miss_rate"]
    m = meas["config"].eq("base-prefetch") & meas["cache_bytes"].eq(1 << 20) & \
        meas["device"].eq("hdd-7200")  # the runtime thrashed in one of the two
    meas.loc[m, "qps"] *= measured_qps_drop
    meas.loc[m, "page_cache_miss_rate"] = measured_miss
    return meas, mod


def test_a_run_in_the_models_other_steady_state_is_named_and_shown_apart():
    meas, mod = _bistable_model(0.62)
    p = v.pair(meas, mod)
    other = p[[v.other_state(r) for r in p.to_dict("records")]]
    assert len(other) == 1 and other["device"].iloc[0] == "hdd-7200"
    assert other["diagnosis"].iloc[0].startswith("bistable")
    # the targets keep the prediction made; the settled-state table swaps in the other state
    assert p["page_cache_miss_rate_pp"].abs().max() == pytest.approx(30.0)
    settled = v.in_settled_state(p)
    assert settled["page_cache_miss_rate_pp"].abs().max() == pytest.approx(0.0)
    assert settled["qps_rel_error"].abs().max() < 0.04
    s, _ = v.summarise(p)
    text = v.format_summary(s, p)
    assert "bistable in the model: 2 row(s)" in text and "other state in 1" in text
    assert "with the state the runtime settled in" in text


def test_a_bistable_row_measured_in_the_predicted_state_is_not_swapped():
    meas, mod = _bistable_model(0.97, 0.3)  # nearer the usual state: the prediction stands
    p = v.pair(meas, mod)
    assert not any(v.other_state(r) for r in p.to_dict("records"))
    assert v.in_settled_state(p)["qps_rel_error"].equals(p["qps_rel_error"])
    text = v.format_summary(v.summarise(p)[0], p)
    assert "other state in 0" in text and "settled in (known" not in text
    # the miss rates decide when the states differ in them: a slow run that did not thrash
    meas, mod = _bistable_model(0.62, 0.3)
    assert not any(v.other_state(r) for r in v.pair(meas, mod).to_dict("records"))
    # a model table without the check pairs as before
    assert "bistable" not in v.pair(_runs("measured"), _runs("model")).columns


def test_noise_floor_scores_the_runtime_against_itself_beside_the_model():
    measured = _runs("measured")
    model = v.pair(measured, _runs("model", qps_scale=1.03))  # 3 % off everywhere
    # a twin run 10 % slower in every second row, its miss rate 4 pp higher: noisier
    # than the 5 % QPS target at the p90, and than 2 pp
    twin = _runs("measured")
    twin.loc[twin.index % 2 == 1, "qps"] *= 0.9
    twin.loc[twin.index % 2 == 1, "page_cache_miss_rate"] += 0.04
    floor = v.noise_floor(model, v.pair(measured, twin))
    t = floor["targets"]
    assert floor["rows"] == len(measured) and set(t) == set(v.FLOOR_TARGETS)
    assert t["qps_median_abs_rel_error"]["model"] == pytest.approx(0.03)
    assert t["qps_median_abs_rel_error"]["runtime_vs_itself"] == pytest.approx(0.05)
    assert t["qps_p90_abs_rel_error"]["runtime_vs_itself"] == pytest.approx(0.1)
    assert t["miss_rate_max_abs_pp"]["runtime_vs_itself"] == pytest.approx(4.0)
    assert not t["miss_rate_max_abs_pp"]["noise_allows_it"]
    assert t["qps_p90_abs_rel_error"]["noise_allows_it"]  # 0.1 <= 0.15
    assert t["miss_rate_max_abs_pp"]["model_met"]
    text = v.format_floor(floor)
    assert "miss_rate_max_abs_pp" in text.splitlines()[-2] and "below" in text
    md = v.format_markdown(model, v.summarise(model)[0], floor)
    assert "| miss_rate_max_abs_pp | 0.000 | 4.000 | <= 2.0 | **no** |" in md
    # a twin identical to the kept run: no noise, every target allowed
    same = v.noise_floor(model, v.pair(measured, _runs("measured")))
    assert all(x["noise_allows_it"] for x in same["targets"].values())
    assert same["targets"]["kendall_tau_mean"]["runtime_vs_itself"] == 1.0
