"""`tierlab bench model` on one cell of the reference grid (slow: the
reference scale)."""
from __future__ import annotations

import json

import pytest

from tierlab.cli import main


@pytest.mark.slow
def test_bench_model_one_cell(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["bench", "model", "--out", str(out), "--fraction", str(1 / 384),
                 "--workers", "1", "--no-progress"]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["cells_run"] == 1
    g = doc["grid"]
    assert g["block_requests"] > 0 and g["grid_wall_s_extrapolated"] == pytest.approx(
        384 * g["wall_s"])
    b = doc["bookkeeping"]
    assert b["tierlab_lru"]["requests_per_s"] > 0
    if b.get("libcachesim_lru"):
        assert b["miss_ratios_agree"]
    assert "LRU bookkeeping" in capsys.readouterr().out


def test_bench_model_rejects_a_bad_fraction(tmp_path, capsys):
    assert main(["bench", "model", "--out", str(tmp_path / "m.json"), "--fraction", "2"]) == 2
    assert "--fraction" in capsys.readouterr().err
