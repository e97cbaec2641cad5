"""Synthesised memory streams of query workloads (tierlab.engine.memstream),
their memory costs on tiers (tierlab.engine.memcosts) and the QPS predictions
built on them (tierlab.experiments.tiers), on a tiny index."""
import numpy as np
import pytest

from tierlab.engine import memcosts, memsim, memstream
from tierlab.engine.index import Index
from tierlab.experiments import tiers
from tiny_inputs import corpus_and_index, with_h_workload


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return with_h_workload(corpus_and_index(tmp_path_factory.mktemp("memstream"), docs=1500),
                           queries=12)


def test_dictionary_probes_are_a_binary_search():
    assert memstream._dict_probes(0, 8) == [4, 2, 1, 0]
    assert memstream._dict_probes(5, 8) == [4, 6, 5]
    assert len(memstream._dict_probes(999, 1000)) <= 11


def test_stream_follows_the_index_layout_and_the_query_counts(tiny):
    qs = [("the",), ("the", "of")]
    with Index(tiny / "idx", "dram") as ix:
        ext = ix.extents()
        if not {"the", "of"} <= set(ext["term"]):
            qs = [(ext["term"][int(ext["postings"].idxmax())],),
                  tuple(ext.sort_values("postings")["term"].iloc[-2:])]
    s = memstream.workload_stream(tiny / "idx", qs, k=10)
    rec = s.records
    assert len(s.qtype) == 2 and list(s.qtype) == ["single", "and"]
    assert set(np.unique(rec["query"])) == {0, 1}
    assert s.accesses.sum() == len(rec)
    did = rec[rec["region"] == memsim.region_id("did")]
    # every DID load lies inside the DID bytes of a queried term
    row = ext.set_index("term")
    lo = {int(row.loc[t, "did_offset"]) & ~15 for q in qs for t in q}
    assert did["addr"].min() - memstream.region_base("did") >= min(lo)
    # the single query decodes all blocks of its term: one skip entry each
    sk = (rec["region"] == memsim.region_id("skip")) & (rec["query"] == 0)
    assert sk.sum() == s.blocks[0] == int(row.loc[qs[0][0], "blocks"])
    dic = (rec["region"] == memsim.region_id("dictionary")) & (rec["query"] == 0)
    assert dic.sum() == len(memstream._dict_probes(ext.index[ext["term"] == qs[0][0]][0],
                                                   len(ext)))


def test_tier_costs_order_and_the_section(tiny):
    s = memstream.workload_stream(tiny / "idx", tiny / "h.queries")
    cpu = np.full(len(s.qtype), 5000.0)
    sec = memcosts.section(s, cpu, ["ddr4-2666", "optane-dcpmm-g1", "rdma-remote"],
                           machine="xeon-gold-6252n")
    single = {t: sec["tiers"][t]["single"] for t in sec["tiers"]}
    assert single["ddr4-2666"]["all"]["extra_ns_per_query"] == pytest.approx(0.0, abs=1e-6)
    for st in ("dict", "did", "all"):
        assert 0 < single["optane-dcpmm-g1"][st]["extra_ns_per_query"] < \
            single["rdma-remote"][st]["extra_ns_per_query"]
    assert sec["baseline"] == "ddr4-2666" and sec["cpu_ns_per_access"]["single"] > 0


def test_structure_grid_and_plot(tiny, tmp_path):
    from tierlab.analysis.placements import plot_placements

    df = tiers.structure_grid(tiny / "idx", [tiny / "h.queries"],
                              tiers=("ddr4-2666", "cxl-type3", "rdma-remote"),
                              structures=("dict", "did"), cores=4, reps=1)
    assert len(df) == 6
    d = df.set_index(["tier", "structure"])
    assert d.loc[("ddr4-2666", "did"), "drop_pct"] == pytest.approx(0.0, abs=1e-9)
    assert 0 < d.loc[("cxl-type3", "did"), "drop_pct"] < d.loc[("rdma-remote", "did"), "drop_pct"]
    assert np.isnan(d.loc[("cxl-type3", "dict"), "qps_roofline"])  # the rule times postings only
    assert np.isfinite(d.loc[("cxl-type3", "did"), "qps_roofline"])
    png = plot_placements(df, tmp_path / "p.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_chapter6_rows_and_table(tiny):
    df = tiers.chapter6({"pfor-delta256": tiny / "idx"}, {("single", "H"): tiny / "h.queries"},
                        cores=24, reps=1)
    r = df.iloc[0]
    assert r["drop_pct"] >= r["drop_pct_one_core"] - 1e-9 >= 0  # sharing never costs less
    assert r["reference_backend_ratio"] == 1.37 and r["reference_drop_pct"] is None
    md = tiers.chapter6_markdown(df, size="tiny")
    assert "SINGLE H, 24 cores share the DIMMs" in md and "(1.37)" in md


def test_recorded_stream_takes_the_traced_queries(tiny, tmp_path):
    from tierlab.engine.workload import read_queries
    from tierlab.traces import memtrace

    qs = read_queries(tiny / "h.queries")
    syn = memstream.workload_stream(tiny / "idx", qs, k=10)
    rec = syn.records[syn.records["query"] % 3 == 0].copy()  # every 3rd query, as --every 3
    rec["query"] = rec["query"]  # workload ordinals, as the recorder writes them
    path = memtrace.write(tmp_path / "memtrace.bin", rec, every=3, k=10, queries=len(qs))
    got = memstream.recorded(tiny / "idx", tiny / "h.queries", tmp_path)
    n = len(range(0, len(qs), 3))
    assert len(got.qtype) == n and got.queries == qs[::3]
    assert np.array_equal(got.records["addr"], rec["addr"])
    assert set(np.unique(got.records["query"])) == set(range(n))
    assert (got.blocks == syn.blocks[::3]).all() and got.source.startswith("recorded")
    df = tiers.structure_grid(tiny / "idx", [tiny / "h.queries"], traces=[path],
                              tiers=("cxl-type3",), structures=("did",), reps=1)
    assert df["stream"].iloc[0] == "recorded" and df["queries"].iloc[0] == n
