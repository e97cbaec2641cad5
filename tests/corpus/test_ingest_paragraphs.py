"""`corpus ingest --format paragraphs` (documents separated by blank lines,
e.g. a dictd dictionary such as Debian's dict-gcide, read through gzip) and
`index info`'s overhead line (skip list + dictionary against the postings)."""
from __future__ import annotations

import gzip
import json

import pytest

from tierlab.cli import main
from tierlab.core.errors import TierlabError
from tierlab.engine.ingest import ingest


def test_paragraphs_are_documents(tmp_path):
    src = tmp_path / "d.dict.dz"
    src.write_bytes(gzip.compress(b"\n\nAardvark\n  An animal.\n\n\n\nAbacus\n   A frame\n"
                                  b"   for counting.\n\nZebra\n"))
    m = ingest([src], tmp_path / "c.txt", fmt="paragraphs", progress=False)
    assert (tmp_path / "c.txt").read_text().splitlines() == [
        "Aardvark An animal.", "Abacus A frame for counting.", "Zebra"]
    assert m["documents"] == 3


def test_paragraph_errors_name_their_line(tmp_path):
    src = tmp_path / "d.txt"
    src.write_bytes(b"one\n\ntwo\nbad \x92 byte\n\nthree\n")
    with pytest.raises(TierlabError, match=r"d\.txt:4: invalid UTF-8"):
        ingest([src], tmp_path / "c.txt", fmt="paragraphs", progress=False)
    m = ingest([src], tmp_path / "c.txt", fmt="paragraphs", skip_bad=True, progress=False)
    assert m["documents"] == 2 and m["source"]["files"][0]["skipped_bad"] == 1


def test_index_info_reports_the_overhead(tmp_path, capsys):
    (tmp_path / "c.txt").write_text("".join(f"w{i} w{i % 7} common\n" for i in range(300)))
    assert main(["index", "build", str(tmp_path / "c.txt"), "--out", str(tmp_path / "idx"),
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["index", "info", str(tmp_path / "idx"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    files = doc["files"]
    assert doc["skip_dict_bytes"] == files["skip.bin"] + files["dict.bin"]
    assert doc["postings_bytes"] == doc["did_block_bytes"] + doc["freq_block_bytes"]
    assert doc["skip_dict_vs_postings"] == pytest.approx(doc["skip_dict_bytes"]
                                                         / doc["postings_bytes"])
    assert main(["index", "info", str(tmp_path / "idx")]) == 0
    assert "skip list + dictionary" in capsys.readouterr().out
