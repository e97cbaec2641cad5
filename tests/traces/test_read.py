"""Finding and reading the result tables under a path (tierlab.traces.read):
what counts as a table, what is skipped, rows repeated in several files."""
import pandas as pd
import pytest

from tierlab.core.errors import TierlabError
from tierlab.traces import schema
from tierlab.traces.read import find_tables, read_tables, table_of


def _terms(run_id="r1", n=2):
    return pd.DataFrame({"run_id": [run_id] * n, "source": ["measured"] * n,
                         "query_id": list(range(n)), "term_pos": [0] * n,
                         "term": [f"t{i}" for i in range(n)], "postings": [5] * n,
                         "blocks_total": [1] * n, "blocks_decoded": [1] * n})


@pytest.fixture
def tree(tmp_path):
    """a/term.parquet, a/b/term.csv (same rows), c/term.parquet (another run),
    and files that are no tables."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "c").mkdir()
    schema.write_table("term", _terms(), tmp_path / "a" / "term.parquet")
    schema.write_table("term", _terms(), tmp_path / "a" / "b" / "term.csv")
    schema.write_table("term", _terms("r2", 3), tmp_path / "c" / "term.parquet")
    (tmp_path / "a" / "summary.json").write_text("{}")
    (tmp_path / "a" / "hits.tsv").write_text("query_id\trank\n")
    pd.DataFrame({"x": [1]}).to_parquet(tmp_path / "c" / "other.parquet")
    (tmp_path / "c" / "notes.csv").write_text("colour,size\nred,1\n")
    # an atomic write in flight, and a hidden folder: not results
    (tmp_path / "c" / ".term.parquet.tmp-1").write_text("partial")
    (tmp_path / ".cells.tmp-1").mkdir()
    schema.write_table("term", _terms("r3"), tmp_path / ".cells.tmp-1" / "term.parquet")
    return tmp_path


def test_a_folder_is_searched_recursively(tree):
    skipped = []
    found = find_tables(tree, skipped)
    assert [(n, p.relative_to(tree).as_posix()) for n, p in found] == [
        ("term", "a/b/term.csv"), ("term", "a/term.parquet"), ("term", "c/term.parquet")]
    assert sorted(p.name for p, _ in skipped) == ["notes.csv", "other.parquet"]
    assert any("no tierlab.schema_version" in why for _, why in skipped)


def test_rows_in_several_files_count_once(tree):
    kinds = read_tables(find_tables(tree))
    t = kinds["term"]
    assert len(t.files) == 3 and t.rows_in_files == 7
    assert len(t.df) == 5 and sorted(set(t.df["run_id"])) == ["r1", "r2"]


def test_one_file_and_what_is_not_a_table(tree):
    assert find_tables(tree / "a" / "b" / "term.csv") == [("term", tree / "a" / "b" / "term.csv")]
    for f, msg in (("a/summary.json", "not a result table"),
                   ("c/other.parquet", "no tierlab.schema_version"),
                   ("c/notes.csv", "header is no table"),
                   ("missing.parquet", "no such file or folder")):
        with pytest.raises(TierlabError, match=msg):
            find_tables(tree / f)
    (tree / "empty").mkdir()
    with pytest.raises(TierlabError, match="no result tables in this folder"):
        find_tables(tree / "empty")


def test_a_broken_table_is_found_and_fails_its_check(tree):
    bad = tree / "a" / "term.parquet"
    bad.write_bytes(bad.read_bytes()[:100])  # truncated
    assert table_of(tree / "c" / "term.parquet") == "term"
    skipped = []
    found = find_tables(tree, skipped)
    assert ("", bad) in found and bad not in [p for p, _ in skipped]
    errors = []
    kinds = read_tables(found, errors)
    assert len(errors) == 1 and str(bad) in errors[0] and "not a readable Parquet" in errors[0]
    assert kinds["term"].rows_in_files == 5
    with pytest.raises(TierlabError, match="not a readable Parquet"):
        read_tables([("", bad)])
