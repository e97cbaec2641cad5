"""The trend checks of `tierlab model reference` on hand-made cache_run rows:
each says `holds` when the numbers show the trend and not otherwise; the
figures are drawn."""
from __future__ import annotations

import json

import pandas as pd

from tierlab.model import reference as R

IDX = 1000


def row(config, device, qtype, rp, frac, qps, **kw):
    r = {"config": config, "device": device, "query_type": qtype, "rp": rp,
         "cache_bytes": int(frac * IDX), "index_bytes": IDX, "qps": qps, "lookahead": "none",
         "cores": 1, "latency_p99_ns": 1e6, "peak_dram_bytes": int(frac * IDX),
         "dram_budget_bytes": 0, "policy": "lru",
         "params": json.dumps({"working_set_bytes": 300})}
    r.update(kw)
    return r


def main_rows(hdd_prefetch_small=0.5, flat=True):
    rows = []
    for dev in ("hdd-7200", "nvme-p4800x"):
        for frac in R.FRACTIONS:
            grow = min(frac, 0.3) / 0.3  # saturates at the working set (30 %)
            for cfg, q in (("base", 10 + 90 * grow),
                           ("base-prefetch", (100 if dev.startswith("nvme") else
                                              100 * max(hdd_prefetch_small, grow))),
                           ("hybrid", 10 + 80 * grow),
                           ("hybrid-prefetch", 95 if flat else 95 * grow)):
                kw = {}
                if cfg.startswith("hybrid"):
                    kw = {"peak_dram_bytes": 5, "dram_budget_bytes": 5}
                rows.append(row(cfg, dev, "single", 0.25, frac, q, **kw))
    return pd.DataFrame(rows)


def test_saturation_prefetch_and_dram_trends_hold_on_matching_numbers():
    m = main_rows()
    t = R.saturation(m)
    assert t["holds"], t["exceptions"]
    assert R.prefetch_hides_nvme(m)["holds"]
    d = R.dram_saved(m)
    assert d["holds"] and d["numbers"][0]["dram_ratio"] > 10


def test_trends_fail_on_contrary_numbers():
    m = main_rows(hdd_prefetch_small=1.0)  # prefetch hides HDD latency too: not the reference
    assert not R.prefetch_hides_nvme(m)["holds"]
    m = main_rows()
    m.loc[(m["config"] == "base") & (m["cache_bytes"] == IDX), "qps"] = 30  # falls at the end
    assert not R.saturation(m)["holds"] or R.saturation(m)["curves_holding"] < 1
    m = main_rows()  # base matches hybrid-prefetch with hardly more DRAM
    m.loc[m["config"] == "base", "qps"] = 200
    m.loc[m["config"] == "hybrid-prefetch", "peak_dram_bytes"] = 40
    assert not R.dram_saved(m)["holds"]


def la_rows(la64_small):
    rows = []
    for dev in ("hdd-7200", "nvme-p4800x"):
        for i, frac in enumerate(R.SMALL):
            for la, q in (("16", 50), ("64", 50 * (la64_small + (1 - la64_small) * i / 4)),
                          ("adaptive", 52)):
                rows.append(row("hybrid-prefetch", dev, "single", 0.25, frac, q, lookahead=la))
    return pd.DataFrame(rows)


def test_lookahead_trend():
    assert R.fixed_lookahead_fragile(la_rows(0.5))["holds"]
    assert not R.fixed_lookahead_fragile(la_rows(1.0))["holds"]


def mc_rows(hdd):
    rows = []
    for dev, qps in (("hdd-7200", hdd), ("sas-ssd", [10, 18, 24, 28])):
        for c, q in zip((1, 2, 3, 4), qps):
            rows.append(row("hybrid-prefetch", dev, "single", 0.25, 0.2, q, cores=c,
                            latency_p99_ns=1e6 * c))
    return pd.DataFrame(rows)


def test_multicore_trend():
    assert R.multicore(mc_rows([10, 6, 7, 8]))["holds"]
    assert not R.multicore(mc_rows([10, 19, 27, 34]))["holds"]


def test_figures_are_drawn(tmp_path):
    paths = R.plot_all(main_rows(), la_rows(0.5), mc_rows([10, 6, 7, 8]), tmp_path)
    assert len(paths) == 4 and all(p.stat().st_size > 1000 for p in paths)
    assert "HOLDS" in R.format_trends({"saturation": R.saturation(main_rows())})
