"""`tierlab model run|sweep` end to end on tiny inputs; mistakes exit 2 with
one line naming the key."""
from __future__ import annotations

import yaml

from tierlab.cli import main
from tiny_inputs import SMALL_MODEL_SPEC
from tierlab.traces.schema import read_table

CFG = SMALL_MODEL_SPEC


def write(tmp_path, doc, name="cfg.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc))
    return p


def test_model_run(tmp_path, capsys):
    p = write(tmp_path, CFG)
    assert main(["model", "run", str(p), "--out", str(tmp_path / "o"), "--set", "lookahead=4"]) == 0
    out = capsys.readouterr().out
    assert "qps" in out and "wrote" in out
    _, run = read_table(tmp_path / "o" / "cache_run.parquet")
    assert run["lookahead"].iloc[0] == "4" and run["query_type"].iloc[0] == "and"
    assert "bistable" not in out  # not checked unless asked
    assert main(["model", "run", str(p), "--out", str(tmp_path / "o2"), "--set",
                 "check_bistable=true"]) == 0
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("bistable")]
    assert len(line) == 1 and "as far ahead as it may go" in line[0]


def test_model_run_errors_are_one_line(tmp_path, capsys):
    p = write(tmp_path, dict(CFG, colour="red"))
    assert main(["model", "run", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "colour" in err[0]
    p = write(tmp_path, CFG)
    assert main(["model", "run", str(p), "--set", "device=floppy"]) == 2
    assert "floppy" in capsys.readouterr().err
    assert main(["model", "run", str(tmp_path / "missing.yaml")]) == 2


def test_model_sweep_with_plot(tmp_path, capsys):
    grid = dict(CFG, config=["base", "base-prefetch"], cache_fraction=[0.1, 0.3],
                out=str(tmp_path / "sw"), workers=1)
    p = write(tmp_path, grid, "grid.yaml")
    assert main(["model", "sweep", str(p), "--plot", "--no-progress"]) == 0
    _, df = read_table(tmp_path / "sw" / "cache_run.parquet")
    assert len(df) == 4
    assert (tmp_path / "sw" / "qps_vs_cache.png").stat().st_size > 1000
    assert (tmp_path / "sw" / "cache_run.csv").exists()
