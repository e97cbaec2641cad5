"""User mistakes are one line on stderr and exit status 2, and leave no
output behind; real bugs keep their traceback (issue 19, part 4: the cases
reported, and what tests/cli/test_cli_fuzz.py found, as regressions)."""
from __future__ import annotations

import pytest

from tierlab.cli import main
from tiny_inputs import corpus_and_index, with_h_workload
from tierlab.core.errors import TierlabError


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return with_h_workload(corpus_and_index(tmp_path_factory.mktemp("errors"), docs=800,
                                            doc_bytes=256))


def fails(capsys, argv) -> str:
    """Run `tierlab ARGV`: exit status 2 with one line on stderr, no
    traceback; returns that line."""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_issue19_query_run_k_beyond_32_bits(data, tmp_path, capsys):
    err = fails(capsys, ["query", "run", str(data / "idx"), str(data / "h.queries"), "--out",
                         str(tmp_path / "q.parquet"), "--k", "4294967296", "--quiet"])
    assert "k: 4294967296 is not a whole number 1 .. 4294967295" in err
    assert not list(tmp_path.iterdir())


def test_issue19_query_terms_largest_k_answers(data, capsys):
    first = (data / "h.queries").read_text().split()[0]
    assert main(["query", "terms", str(data / "idx"), first, "--k", "4294967295"]) == 0
    assert "hits" in capsys.readouterr().out


def test_issue19_results_naming_a_folder(data, tmp_path, capsys):
    out = tmp_path / "q.parquet"
    err = fails(capsys, ["query", "run", str(data / "idx"), str(data / "h.queries"), "--out",
                         str(out), "--results", str(tmp_path), "--quiet"])
    assert f"--results {tmp_path}: is a folder" in err
    assert not out.exists()
    err = fails(capsys, ["apcache", "run", "--index", str(data / "idx"), "--workload",
                         str(data / "h.queries"), "--out", str(tmp_path / "ap"), "--results",
                         str(tmp_path), "--quiet"])
    assert "is a folder" in err and not (tmp_path / "ap").exists()


def test_issue19_trace_naming_a_file_leaves_no_table(data, tmp_path, capsys):
    """--trace naming an existing file failed after the --out table and its
    summary were written, so the run looked complete."""
    out, trace = tmp_path / "q.parquet", tmp_path / "t"
    trace.write_text("mine\n")
    err = fails(capsys, ["query", "run", str(data / "idx"), str(data / "h.queries"), "--out",
                         str(out), "--trace", str(trace), "--results", str(tmp_path / "r.tsv"),
                         "--quiet"])
    assert f"--trace {trace}: exists and is not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]
    assert trace.read_text() == "mine\n"


@pytest.mark.parametrize("out", ["afile/q.parquet", "q.txt", ""])
def test_out_that_cannot_be_written(data, tmp_path, capsys, out):
    (tmp_path / "afile").write_text("x")
    fails(capsys, ["query", "run", str(data / "idx"), str(data / "h.queries"), "--out",
                   str(tmp_path / out) if out else out, "--quiet"])


def test_issue19_overlong_query_names_the_file_line(data, tmp_path, capsys):
    """A query of 18 terms on line 5001: the file's line, not a position in
    the 4096-query batch it falls in."""
    log = tmp_path / "log.queries"
    first = (data / "h.queries").read_text().split()[0]
    log.write_text(f"{first}\n" * 5000 + " ".join(f"t{i}" for i in range(18)) + "\n")
    err = fails(capsys, ["query", "run", str(data / "idx"), str(log), "--out",
                         str(tmp_path / "q.parquet"), "--quiet"])
    assert f"{log}:5001: 18 terms" in err
    assert not (tmp_path / "q.parquet").exists()


def test_a_usage_error_is_one_line(capsys):
    err = fails(capsys, ["query", "run"])
    assert err.startswith("tierlab query run: error: the following arguments are required")
    assert "--help" in err


def test_a_multi_line_error_is_joined(data, tmp_path, capsys):
    """corpus stats --verify lists every mismatch: on one line."""
    import shutil

    c = tmp_path / "c.txt"
    for f in data.glob("c.txt*"):
        shutil.copy(f, tmp_path / f.name)
    c.write_bytes(c.read_bytes() + b"extra words here\n")
    err = fails(capsys, ["corpus", "stats", str(c), "--verify"])
    assert "does not match its manifest:" in err


def test_a_spec_file_that_is_not_utf8(data, tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_bytes(b"\x9e\xff cores: 1\n")
    err = fails(capsys, ["apcache", "run", str(spec), "--index", str(data / "idx"), "--quiet"])
    assert "not UTF-8 text" in err


def test_a_bug_keeps_its_traceback(monkeypatch, capsys):
    """Only TierlabError (and argparse's usage errors) are the user's: any
    other exception is a bug and propagates with its traceback."""
    from tierlab.cli import list_

    def broken(args):
        raise ValueError("a bug")
    real = list_.register

    def register(sub):
        real(sub)
        sub.choices["list"].set_defaults(func=broken)
    monkeypatch.setattr(list_, "register", register)
    with pytest.raises(ValueError, match="a bug"):
        main(["list", "codecs"])

    def user_error(args):
        raise TierlabError("first line\n  second\n  third")
    monkeypatch.setattr(list_, "register", lambda sub: (real(sub), sub.choices["list"]
                                                        .set_defaults(func=user_error)))
    assert main(["list", "codecs"]) == 2
    assert capsys.readouterr().err == "tierlab: error: first line second; third\n"


@pytest.mark.parametrize("argv, says", [
    (["corpus", "generate", "--size", "999999999999TB"], "--size must be between 1 byte"),
    (["corpus", "generate", "--doc-bytes", "4294967296", "--docs", "3"], "below 2^32"),
    (["corpus", "generate", "--docs", "4294967294", "--doc-bytes", "1048576"], "free in"),
    (["corpus", "generate", "--size", "1000000TiB"], "free in"),
])
def test_corpus_generate_beyond_its_types_or_the_disk(tmp_path, capsys, argv, says):
    err = fails(capsys, argv + ["--quiet", "--out", str(tmp_path / "c.txt")])
    assert says in err
    assert not list(tmp_path.iterdir())


def test_workload_generate_beyond_memory(data, tmp_path, capsys):
    err = fails(capsys, ["workload", "generate", "--corpus", str(data / "c.txt"), "--class",
                         "H", "--queries", "1000000000000", "--quiet", "--out",
                         str(tmp_path / "w.queries")])
    assert "generating 1,000,000,000,000 queries needs" in err and "lower --queries" in err


def test_index_build_arguments_beyond_their_types(data, tmp_path, capsys):
    for flag, value in (("--memory-budget", "999999999999TB"), ("--doc-bytes", "-1"),
                        ("--doc-bytes", "4294967296")):
        fails(capsys, ["index", "build", str(data / "c.txt"), "--quiet", "--out",
                       str(tmp_path / "idx"), flag, value])
    assert not (tmp_path / "idx").exists()


def test_non_utf8_names_on_the_command_line(data, tmp_path, capsys):
    """A command line that is not UTF-8 reaches Python with surrogates."""
    assert "not UTF-8" in fails(capsys, ["query", "terms", str(data / "idx"), "\udcff"])
    fails(capsys, ["index", "build", str(data / "c.txt"), "--codec", "\udcff", "--quiet",
                   "--out", str(tmp_path / "i")])
    fails(capsys, ["index", "export", str(data / "idx"), "--ciff", str(tmp_path), "--quiet"])


@pytest.mark.parametrize("argv, says", [
    (["--cache-bytes", "18446744073709551616"], "cache_bytes: at most 2^63 - 1"),
    (["--set", "index={documents: 100000000000000000000, postings: 100000000000000000000, "
      "vocabulary: 10, index_bytes: 1000000000000000000000}"], "'documents' must be"),
])
def test_model_values_beyond_the_tables_int64(tmp_path, capsys, argv, says):
    """They passed validation and failed writing cache_run (OverflowError)."""
    err = fails(capsys, ["model", "run", *argv, "--out", str(tmp_path / "m")])
    assert says in err and not (tmp_path / "m").exists()


def test_bench_warns_only_about_good_arguments(tmp_path, capsys):
    """A --reps warning printed before --out was found unwritable made the
    usage error two lines."""
    err = fails(capsys, ["bench", "codecs", "--reps", "1", "--out", "/proc/nope/x.json",
                         "--no-progress"])
    assert "cannot write" in err
