"""The trend checks of `tierlab model reference` on hand-made cache_run rows:
each says `holds` when the numbers show the trend and not otherwise; the
figures are drawn."""
from __future__ import annotations

import json

import pandas as pd

from tierlab.experiments import reference as R

IDX = 1000


def row(config, device, qtype, rp, frac, qps, **kw):
    r = {"config": config, "device": device, "query_type": qtype, "rp": rp,
         "cache_bytes": int(frac * IDX), "index_bytes": IDX, "qps": qps, "lookahead": "none",
         "cores": 1, "latency_p99_ns": 1e6, "peak_dram_bytes": int(frac * IDX),
         "dram_budget_bytes": 0, "policy": "lru", "wall_ns": 1e9, "query_wait_ns": 0,
         "device_utilisation": 0.0, "storage_reads": 0, "storage_bytes_read": 0,
         "params": json.dumps({"working_set_bytes": 300, "device_spec": {"queue_depth": 1}})}
    r.update(kw)
    return r


def main_rows(hdd_prefetch_small=0.5, flat=True, nvme_cpu_bound=False):
    """HDD I/O-bound at small caches; NVMe too unless nvme_cpu_bound (then
    base on NVMe is flat and waits for no I/O)."""
    rows = []
    for dev in ("hdd-7200", "nvme-p4800x"):
        flat_dev = nvme_cpu_bound and dev.startswith("nvme")
        for frac in R.FRACTIONS:
            grow = 1.0 if flat_dev else min(frac, 0.3) / 0.3  # saturates at the working set
            io = 1 - grow  # share of wall time on storage, gone once the working set fits
            for cfg, q in (("base", 10 + 90 * grow),
                           ("base-prefetch", (100 if dev.startswith("nvme") else
                                              100 * max(hdd_prefetch_small, grow))),
                           ("hybrid", 10 + 80 * grow),
                           ("hybrid-prefetch", 95 if flat else 95 * grow)):
                kw = {"device_utilisation": io if cfg in ("base", "hybrid") else 0.0,
                      "query_wait_ns": 1e9 * (1 - q / 100) if cfg == "base-prefetch" else 0}
                if cfg.startswith("hybrid"):
                    kw.update(peak_dram_bytes=5, dram_budget_bytes=5)
                rows.append(row(cfg, dev, "single", 0.25, frac, q, **kw))
    return pd.DataFrame(rows)


def test_saturation_prefetch_and_dram_trends_hold_on_matching_numbers():
    m = main_rows()
    t = R.saturation(m)
    assert t["holds"], t["exceptions"]
    p = R.prefetch_hides_nvme(m)
    assert p["holds"] and p["numbers"][0]["hdd_prefetch_waits_smallest"] == 0.5
    d = R.dram_saved(m)
    assert d["holds"] and d["numbers"][0]["dram_ratio"] > 10


def test_saturation_rise_is_required_only_where_io_is_exposed():
    m = main_rows(nvme_cpu_bound=True)  # NVMe base flat and without I/O: not a failure
    t = R.saturation(m)
    assert t["holds"], t["exceptions"]
    assert t["io_bound_curves"] == 3  # base, hybrid, base-prefetch on HDD
    m = main_rows()
    sel = (m["config"] == "base") & (m["device"] == "hdd-7200")
    m.loc[sel, "qps"] = 10  # I/O-bound and flat: the trend fails
    t = R.saturation(m)
    assert not t["holds"]
    assert any(r["config"] == "base" and not r["rises"] for r in t["exceptions"])
    m = main_rows()  # no curve has exposed I/O: nothing shows the trend
    m["device_utilisation"] = 0.0
    m["query_wait_ns"] = 0
    assert not R.saturation(m)["holds"]


def test_trends_fail_on_contrary_numbers():
    m = main_rows(hdd_prefetch_small=1.0)  # prefetch hides HDD latency too: not the reference
    p = R.prefetch_hides_nvme(m)
    assert not p["holds"] and p["numbers"][0]["hdd_prefetch_waits_smallest"] == 0.0
    m = main_rows()
    m.loc[(m["config"] == "base") & (m["cache_bytes"] == IDX), "qps"] = 30  # falls at the end
    assert not R.saturation(m)["holds"] or R.saturation(m)["curves_holding"] < 1
    m = main_rows()  # base matches hybrid-prefetch with hardly more DRAM
    m.loc[m["config"] == "base", "qps"] = 200
    m.loc[m["config"] == "hybrid-prefetch", "peak_dram_bytes"] = 40
    assert not R.dram_saved(m)["holds"]


def la_rows(la64_small, adaptive=52, bp_la64_small=None):
    rows = []
    bp_la64_small = la64_small if bp_la64_small is None else bp_la64_small
    for dev in ("hdd-7200", "nvme-p4800x"):
        for i, frac in enumerate(R.SMALL):
            for la, q in (("16", 50), ("64", 50 * (la64_small + (1 - la64_small) * i / 4)),
                          ("adaptive", adaptive)):
                rows.append(row("hybrid-prefetch", dev, "single", 0.25, frac, q, lookahead=la))
            for la, q in (("16", 40), ("64", 40 * (bp_la64_small + (1 - bp_la64_small) * i / 4))):
                rows.append(row("base-prefetch", dev, "single", 0.25, frac, q, lookahead=la))
    return pd.DataFrame(rows)


def test_lookahead_trend():
    t = R.fixed_lookahead_fragile(la_rows(0.5))
    assert t["holds"] and all(t["fragile_somewhere"].values())
    assert not R.fixed_lookahead_fragile(la_rows(1.0))["holds"]  # LA 64 costs nothing
    assert not R.fixed_lookahead_fragile(la_rows(0.5, adaptive=40))["holds"]  # adaptive loses
    # hybrid-prefetch fragile, base-prefetch not: the trend needs both
    assert not R.fixed_lookahead_fragile(la_rows(0.5, bp_la64_small=1.0))["holds"]


def mc_rows(hdd, ssd=(10, 18, 24, 28), p99_grows=True):
    rows = []
    for dev, qps in (("hdd-7200", hdd), ("sas-ssd", ssd)):
        for c, q in zip((1, 2, 3, 4), qps):
            rows.append(row("hybrid-prefetch", dev, "single", 0.25, 0.2, q, cores=c,
                            latency_p99_ns=1e6 * (c if p99_grows else 1)))
    return pd.DataFrame(rows)


def test_multicore_trend():
    assert R.multicore(mc_rows([10, 6, 7, 8]))["holds"]
    assert not R.multicore(mc_rows([10, 19, 27, 34]))["holds"]  # HDD scales
    assert not R.multicore(mc_rows([10, 6, 7, 8], ssd=(10, 20, 30, 40)))["holds"]  # linear
    assert not R.multicore(mc_rows([10, 6, 7, 8], p99_grows=False))["holds"]  # flat tail


def test_multicore_names_the_cpu_factor_when_the_ssds_never_wait_for_storage():
    rows = mc_rows([10, 6, 7, 8], ssd=(10, 19.5, 28.5, 37))
    rows["params"] = [json.dumps({"cores_cpu_factor": 1 + 0.03 * (c - 1),
                                  "cores_cpu_factor_source": "measured up to 2 cores"})
                      for c in rows["cores"]]
    t = R.multicore(rows)
    assert not t["holds"]  # 4-core efficiency 0.925
    ssd = [r for r in t["numbers"] if r["device"] == "sas-ssd"][0]
    assert ssd["cpu_factor"] == [1.0, 1.03, 1.06, 1.09]
    assert "cpu_factor >= 1.111" in t["cpu_bound_ssds"] and "measured up to 2" in \
        t["cpu_bound_ssds"]
    assert "cpu_factor >= 1.111" in R.format_trends({"multicore": t})
    assert "1.037 at 2" in t["cpu_bound_ssds"]
    # a second SSD that waits for its device is not named; the one that never waits is
    nvme = rows[rows["device"] == "sas-ssd"].assign(device="nvme-p4800x")
    both = pd.concat([rows, nvme], ignore_index=True)
    both.loc[both["device"] == "sas-ssd", "query_wait_ns"] = 2e8  # 20 % waiting for storage
    note = R.multicore(both)["cpu_bound_ssds"]
    assert note.startswith("nvme-p4800x:") and "sas-ssd" not in note
    rows.loc[rows["device"] == "sas-ssd", "query_wait_ns"] = 2e8
    assert "cpu_bound_ssds" not in R.multicore(rows)


def test_figures_are_drawn(tmp_path):
    from tierlab.analysis.model_reference import plot_all

    paths = plot_all(main_rows(), la_rows(0.5), mc_rows([10, 6, 7, 8]), tmp_path)
    assert len(paths) == 4 and all(p.stat().st_size > 1000 for p in paths)
    assert "HOLDS" in R.format_trends({"saturation": R.saturation(main_rows())})


def test_lookahead_drop_must_be_a_small_cache_effect():
    la = la_rows(0.5)
    big = la["cache_bytes"] == int(R.SMALL[-1] * IDX)
    la.loc[big & (la["lookahead"] == "64"), "qps"] = 25  # LA 64 still half as fast at 20 %
    assert not R.fixed_lookahead_fragile(la)["holds"]
