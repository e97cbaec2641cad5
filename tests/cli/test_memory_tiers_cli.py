"""The memory-tier commands end to end on tiny inputs (issue 20): `list
machines`, `bench memsim`, `model tiers`, `model chapter6`, `query costs
--tier`, and their user errors (one line, exit 2)."""
import json

import pandas as pd
import pytest

from tierlab.cli import main
from tiny_inputs import corpus_and_index, with_h_workload


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return with_h_workload(corpus_and_index(tmp_path_factory.mktemp("memtiers"), docs=1200),
                           queries=10)


def test_list_machines(capsys):
    assert main(["list", "machines"]) == 0
    out = capsys.readouterr().out
    assert "xeon-gold-6252n" in out and "this-vm" in out and "apcache-2x-xeon-gold-6252n" in out


def test_bench_memsim_writes_json(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["bench", "memsim", "--no-progress", "--accesses", "20000", "--reps", "1",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    names = [r["stream"] for r in doc["streams"]]
    assert names == ["sequential", "l1-resident", "random-miss", "mixed"]
    assert all(r["accesses_per_s"] > 0 for r in doc["streams"])
    assert doc["target"]["stream"] == "mixed" and len(doc["machine"]["loadavg_before_after"]) == 2


def test_model_tiers_table_and_figure(tiny, tmp_path, capsys):
    out = tmp_path / "t"
    assert main(["model", "tiers", str(tiny / "idx"), "--workload", str(tiny / "h.queries"),
                 "--tier", "cxl-type3", "--tier", "rdma-remote", "--reps", "1", "--cores", "2",
                 "--out", str(out)]) == 0
    df = pd.read_csv(out / "tiers.csv")
    assert len(df) == 8 and set(df["structure"]) == {"dict", "skip", "did", "freq"}
    assert (out / "placements.png").stat().st_size > 1000


def test_model_chapter6_small(tmp_path, capsys):
    out = tmp_path / "c6"
    assert main(["model", "chapter6", "--size", "2MB", "--queries", "5", "--codec", "base",
                 "--codec", "pfor-delta256", "--reps", "1", "--out", str(out)]) == 0
    df = pd.read_csv(out / "chapter6.csv")
    assert set(df["codec"]) == {"base", "pfor-delta256"} and len(df) == 6
    assert "| AND H, 24 cores share the DIMMs |" in (out / "chapter6.md").read_text()
    assert not list(out.glob("tierlab-chapter6-*"))  # the scratch folder went
    # M by the reference's absolute posting counts: longer M lists than the relative class
    out2 = tmp_path / "c6m"
    assert main(["model", "chapter6", "--size", "2MB", "--queries", "5", "--codec", "base",
                 "--m-class", "reference", "--reps", "1", "--out", str(out2)]) == 0
    m_rel = df[(df["codec"] == "base") & (df["class"] == "M")]["blocks_per_query"].iloc[0]
    m_abs = pd.read_csv(out2 / "chapter6.csv").query("`class` == 'M'")["blocks_per_query"].iloc[0]
    assert m_abs > m_rel


def test_query_costs_with_tiers(tiny, tmp_path, capsys, monkeypatch):
    from tierlab.model import costs

    # the CPU fit is tests/query/test_costs.py's; here a fixed table stands for it
    table = costs.Costs(single=costs.Coefficients(2000, 300, 5), and_=costs.Coefficients(3000, 300, 8),
                        codec="pfor-delta256", block_size=256)
    monkeypatch.setattr(costs, "measure", lambda *a, **k: table)
    out = tmp_path / "costs.json"
    assert main(["query", "costs", str(tiny / "idx"), "--workload", str(tiny / "h.queries"),
                 "--tier", "optane-dcpmm-g1", "--tier", "cxl-type3", "--out", str(out)]) == 0
    mem = json.loads(out.read_text())["memory"]
    row = mem["tiers"]["optane-dcpmm-g1"]["single"]
    assert row["did"]["extra_ns_per_block"] > 0 and row["roofline_postings_ns_per_block"] > 0
    assert mem["cpu_ns_per_access"]["single"] > 0
    assert "memory     extra ns over ddr4-2666" in capsys.readouterr().out
    # and the model reads it back
    assert costs.load(out).memory_extra_ns("cxl-type3", "single", "did", "block") > 0


@pytest.mark.parametrize("argv,msg", [
    (["model", "tiers", "IDX", "--workload", "nope.q", "--out", "OUT"], "no such file"),
    (["model", "tiers", "IDX", "--workload", "W", "--tier", "hdd-7200", "--out", "OUT"],
     "a memory spec is needed"),
    (["model", "tiers", "IDX", "--workload", "W", "--machine", "ddr4-2666", "--out", "OUT"],
     "a machine spec is needed"),
    (["model", "chapter6", "--codec", "zip", "--out", "OUT"], "--codec zip: unknown"),
    (["bench", "memsim", "--tier", "this-vm", "--out", "OUT/x.json"], "a memory spec is needed"),
    (["query", "costs", "--default", "--tier", "cxl-type3"], "--tier needs an INDEX"),
])
def test_user_errors_are_one_line(tiny, tmp_path, capsys, argv, msg):
    sub = {"IDX": str(tiny / "idx"), "W": str(tiny / "h.queries"), "OUT": str(tmp_path / "o")}
    argv = [sub.get(a, a.replace("OUT", str(tmp_path / "o"))) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and len(err.splitlines()) == 1
