"""The run specification (tierlab/core/run.schema.yaml, tierlab.core.runspec):
one schema, defaults and checks in one place, errors naming the key."""
from __future__ import annotations

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlab.cli import build_parser
from tierlab.core import runspec
from tierlab.core.errors import TierlabError


def test_the_schema_is_json_schema_and_every_key_is_documented():
    jsonschema.Draft202012Validator.check_schema(runspec.schema())
    for key in runspec.keys():
        info = runspec.info(key)
        assert info["description"].strip(), key
        assert "default" in info, key
        assert set(info["x-used-by"]) <= set(runspec.USERS) and info["x-used-by"], key
        assert key == key.lower() and "-" not in key, key  # snake_case keys


def test_the_defaults_are_a_valid_spec():
    spec = runspec.validate({})
    assert dict(spec).keys() == set(runspec.keys())
    assert spec["cache_bytes"] == 64 * 2**20 and spec["readahead_bytes"] == 128 * 2**10
    assert spec.explicit == frozenset()


@pytest.mark.parametrize("doc, key", [
    ({"cache_byte": 1}, "cache_byte"),
    ({"cache_bytes": "lots"}, "cache_bytes"),
    ({"cores": 0}, "cores"),
    ({"k": 2**32}, "k"),
    ({"config": "hybird"}, "config"),
    ({"policy": "mru"}, "policy"),
    ({"device": "floppy"}, "device"),
    ({"slow_tier": "hdd-7200"}, "slow_tier"),
    ({"slow_tier_placement": "pmem"}, "slow_tier_placement"),
    ({"segment_bytes": 100}, "segment_bytes"),
    ({"readahead_bytes": 0}, "readahead_bytes"),
    ({"readahead_bytes": "2MiB"}, "readahead_bytes"),
    ({"lookahead": 0}, "lookahead"),
    ({"config": "base", "lookahead": 4}, "lookahead"),
    ({"config": "base-prefetch", "lookahead": "adaptive"}, "lookahead"),
    ({"memory_limit": "yes"}, "memory_limit"),
    ({"cache_bytes": "1MB", "cache_fraction": 0.5}, "cache_bytes and cache_fraction"),
    ({"sample_ns": 10}, "sample_ns"),
])
def test_a_bad_value_is_one_error_naming_its_key(doc, key):
    with pytest.raises(TierlabError, match=key):
        runspec.validate(doc)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(runspec.keys()),
                       st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40),
                                 st.floats(allow_nan=True), st.text(max_size=12),
                                 st.lists(st.integers(), max_size=2)),
                       max_size=4))
def test_any_document_is_a_spec_or_an_error_naming_a_key(doc):
    try:
        spec = runspec.validate(doc)
    except TierlabError as e:
        assert any(str(e).startswith(k) or f" {k}" in str(e) or f"'{k}'" in str(e)
                   for k in doc) or "run spec" in str(e), str(e)
    else:
        assert set(spec) == set(runspec.keys())


def test_set_pairs_and_flags_read_values_as_yaml():
    assert runspec.parse_set(["cache_bytes=4MiB", "cores=2", "memory_limit=false",
                              "workload={file: q.txt}"]) == {
        "cache_bytes": "4MiB", "cores": 2, "memory_limit": False, "workload": {"file": "q.txt"}}
    with pytest.raises(TierlabError, match="KEY=VALUE"):
        runspec.parse_set(["cores"])


def test_a_pm_slow_tier_needs_a_placement_for_the_runtime():
    spec = runspec.validate({"slow_tier": "optane-dcpmm-g1"})  # the model needs none
    with pytest.raises(TierlabError, match="slow_tier_placement"):
        runspec.placement(spec)
    assert runspec.placement(runspec.validate({})) == "dram"
    assert runspec.placement(spec.replace(slow_tier_placement="pm:/mnt/pmem0")) == "pm:/mnt/pmem0"


def test_the_cache_size_follows_the_index_and_is_checked():
    spec = runspec.validate({"cache_fraction": 0.5, "config": "base"})
    assert spec.cache_size(10**6) == 500_000
    with pytest.raises(TierlabError, match="cache_fraction"):
        runspec.validate({"cache_fraction": 0.01, "cores": 4}).cache_size(10**6)


def test_run_columns_are_the_same_for_every_kind_of_run():
    spec = runspec.validate({"config": "base", "segment_bytes": "64KiB"})
    cols = runspec.run_columns(spec, 4096)
    assert cols["segment_bytes"] == 0 and cols["dram_budget_bytes"] == 0  # unused by base
    assert cols["slow_tier"] == "none" and cols["lookahead"] == "none"
    hp = runspec.run_columns(runspec.validate({}), 2**20)
    assert hp["slow_tier"] == "ddr4-2666" and hp["lookahead"] == "adaptive"


def _options(*words) -> set:
    parser = build_parser()
    for w in words:
        parser = next(a for a in parser._actions if hasattr(a, "choices") and
                      isinstance(a.choices, dict) and w in a.choices).choices[w]
    return {s for a in parser._actions for s in a.option_strings}


@pytest.mark.parametrize("command, used_by", [
    (("apcache", "run"), "runtime"), (("model", "run"), "model"), (("query", "run"), "query")])
def test_every_command_takes_its_keys_as_flags_and_set(command, used_by):
    opts = _options(*command)
    assert "--set" in opts
    missing = [runspec.flag(k) for k in runspec.keys(used_by)
               if runspec.flag(k) not in opts and k not in ("index", "workload")]
    assert not missing


def test_one_spec_file_is_read_by_the_runtime_and_the_model(tmp_path):
    from tierlab.model import config as C

    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump({"config": "base", "cache_bytes": "1MiB", "costs": "default",
                                    "memory_limit": False, "index": "reference"}))
    spec = runspec.load(path)
    model = C.load(path)
    assert model.spec == spec
    assert runspec.run_columns(spec, 2**20) == runspec.run_columns(model.spec, 2**20)


def test_the_key_table_in_the_docs_is_the_schema():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "run-spec.md").read_text()
    assert runspec.markdown_table() in doc, "regenerate docs/run-spec.md's table"
