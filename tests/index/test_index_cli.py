"""`tierlab index build|info` end to end on a tiny corpus."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from index_helpers import random_corpus, write  # noqa: E402

from tierlab.cli import main  # noqa: E402


def test_build_and_info(tmp_path, capsys):
    c = write(tmp_path / "c.txt", random_corpus(seed=2, docs=500))
    assert main(["index", "build", str(c), "--out", str(tmp_path / "idx"), "--block-size", "128",
                 "--memory-budget", "128KiB"]) == 0
    out = capsys.readouterr().out
    assert "MB/s" in out and "dids.bin" in out and "% of base" in out
    assert main(["index", "info", str(tmp_path / "idx")]) == 0
    out = capsys.readouterr().out
    assert "checked" in out and "ok" in out and "page cache" in out
    assert main(["index", "info", str(tmp_path / "idx"), "--json"]) == 0
    m = json.loads(capsys.readouterr().out)
    assert m["block_size"] == 128 and m["runs"] >= 1 and m["did_ratio"] == 1.0


def test_errors_are_one_line(tmp_path, capsys):
    c = write(tmp_path / "c.txt", b"a b c\n")
    assert main(["index", "build", str(c), "--out", str(tmp_path / "idx"), "--quiet"]) == 0
    assert main(["index", "build", str(c), "--out", str(tmp_path / "idx"), "--quiet"]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["index", "build", str(c), "--out", str(tmp_path / "i2"), "--codec", "nope"]) == 2
    assert "unknown codec" in capsys.readouterr().err
    assert main(["index", "info", str(tmp_path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err
