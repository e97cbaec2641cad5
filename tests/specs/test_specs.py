"""sim-configs specs: every shipped spec loads, `extends` resolves, and bad
specs get an error naming the file and the key."""
import pytest

from tierlab.core import specs
from tierlab.core.errors import TierlabError


def test_every_shipped_spec_loads_with_sources():
    assert specs.names()
    for name in specs.names():
        s = specs.load(name)
        assert s.kind in specs.KINDS
        for key in specs.REQUIRED[s.kind]:
            assert s[key] >= 0 and s.source(key).strip()


def test_extends_inherits_and_overrides():
    base, cxl = specs.load("ddr4-2666"), specs.load("cxl-type3")
    assert cxl["write_latency_ns"] == base["write_latency_ns"]
    assert cxl["read_latency_random_ns"] > base["read_latency_random_ns"]


def _write(tmp_path, text, name="dev.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text,match", [
    ("kind: storage\nread_bandwidth_bytes_per_s: {value: 5, source: x}\n", "needs key 'read_latency_ns'"),
    ("kind: disk\n", "key 'kind' must be one of"),
    ("kind: storage\nread_latency_ns: 3\n", "key 'read_latency_ns' must be a mapping"),
    ("kind: storage\nread_latency_ns: {value: -1, source: x}\n", "must not be negative"),
    ("kind: storage\nread_latency_ns: {value: 1, source: ''}\n", "needs a source"),
    ("kind: storage\nread_latency_ns: {value: fast, source: x}\n", "must be a number"),
    ("kind: storage\nread_bandwidth_bytes_per_s: {value: 0, source: x}\n"
     "read_latency_ns: {value: 1, source: x}\nqueue_depth: {value: 1, source: x}\n",
     "'read_bandwidth_bytes_per_s' must be at least 1"),
    ("- a\n- b\n", "a spec is a YAML mapping"),
])
def test_bad_spec_names_the_key(tmp_path, text, match):
    with pytest.raises(TierlabError, match=match):
        specs.load(str(_write(tmp_path, text)))


def test_exponent_without_sign_is_a_number(tmp_path):
    p = _write(tmp_path, "kind: storage\nread_bandwidth_bytes_per_s: {value: 1.5e9, source: x}\n"
                         "read_latency_ns: {value: 1e4, source: x}\n"
                         "queue_depth: {value: 4, source: x}\n")
    assert specs.load(str(p))["read_bandwidth_bytes_per_s"] == 1.5e9


def test_unknown_name_and_wrong_kind():
    with pytest.raises(TierlabError, match="unknown device or tier spec 'floppy'.*hdd-7200"):
        specs.load("floppy")
    with pytest.raises(TierlabError, match="is a memory spec; a storage spec is needed"):
        specs.load("ddr4-2666", kind="storage")


def test_extends_loop(tmp_path):
    _write(tmp_path, "kind: storage\nextends: " + str(tmp_path / "b.yaml") + "\n", "a.yaml")
    _write(tmp_path, "kind: storage\nextends: " + str(tmp_path / "a.yaml") + "\n", "b.yaml")
    with pytest.raises(TierlabError, match="loops"):
        specs.load(str(tmp_path / "a.yaml"))
