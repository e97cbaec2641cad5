"""`tierlab corpus generate|ingest|stats` end to end on tiny inputs."""
from __future__ import annotations

import json

import pytest

from tierlab.cli import main


def test_generate_then_stats_then_verify(tmp_path, capsys):
    out = tmp_path / "synth.txt"
    assert main(["corpus", "generate", "--docs", "300", "--seed", "4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "documents        300" in text and "zipf exponent" in text and "MB/s" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "synth.txt", "synth.txt.json", "synth.txt.terms.tsv"]
    assert main(["corpus", "stats", str(out), "--verify"]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["corpus", "stats", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"]["seed"] == 4


def test_generate_by_size_with_every_parameter(tmp_path, capsys):
    out = tmp_path / "c.txt"
    assert main(["corpus", "generate", "--size", "64KiB", "--doc-bytes", "256", "--zipf-s", "1.1",
                 "--tail-s", "1.8", "--knee", "2000", "--vocab-max", "100000", "--quiet",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    m = json.loads((tmp_path / "c.txt.json").read_text())
    assert m["bytes"] >= 65536 and m["doc_bytes"] == 256
    assert (m["source"]["zipf_s"], m["source"]["tail_s"], m["source"]["knee"]) == (1.1, 1.8, 2000)


def test_verify_notices_a_changed_corpus(tmp_path, capsys):
    out = tmp_path / "c.txt"
    assert main(["corpus", "generate", "--docs", "50", "--quiet", "--out", str(out)]) == 0
    data = bytearray(out.read_bytes())
    data[10] = ord("q") if data[10] != ord("q") else ord("z")
    out.write_bytes(bytes(data))
    assert main(["corpus", "stats", str(out), "--verify"]) == 2
    assert "digest differs" in capsys.readouterr().err


def test_verify_notices_a_changed_term_table(tmp_path, capsys):
    out = tmp_path / "c.txt"
    assert main(["corpus", "generate", "--docs", "50", "--quiet", "--out", str(out)]) == 0
    table = tmp_path / "c.txt.terms.tsv"
    rows = table.read_text().splitlines()
    term, postings, occurrences = rows[1].split("\t")
    rows[1] = f"{term}\t{postings}\t{int(occurrences) + 1}"
    table.write_text("\n".join(rows) + "\n")
    assert main(["corpus", "stats", str(out), "--verify"]) == 2
    assert "term counts differ" in capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["--size", "12XB"], "cannot read size"),
    (["--size", "1MB", "--docs", "5"], "not allowed with"),
    (["--docs", "0"], "must be at least 1"),
])
def test_generate_rejects_bad_options(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as e:
        main(["corpus", "generate", *args, "--out", str(tmp_path / "c.txt")])
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_ingest_text_and_jsonl(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("First document.\nSecond one\n")
    (tmp_path / "b.jsonl").write_text('{"id": 1, "text": "Third"}\n')
    out = tmp_path / "c.txt"
    assert main(["corpus", "ingest", str(tmp_path / "a.txt"), str(tmp_path / "b.jsonl"),
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "documents        3" in text and "b.jsonl: jsonl, 1 documents" in text
    assert out.read_text() == "First document.\nSecond one\nThird\n"


def test_stats_of_something_that_is_not_a_corpus(tmp_path, capsys):
    (tmp_path / "x.txt").write_text("hello\n")
    assert main(["corpus", "stats", str(tmp_path / "x.txt")]) == 2
    assert "no manifest" in capsys.readouterr().err


def test_help_texts(capsys):
    for cmd in (["corpus", "generate"], ["corpus", "ingest"], ["corpus", "stats"]):
        with pytest.raises(SystemExit) as e:
            main([*cmd, "--help"])
        assert e.value.code == 0
    assert "Common Crawl" in capsys.readouterr().out
