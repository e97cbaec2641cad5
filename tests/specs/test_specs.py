"""sim-configs specs: every shipped spec loads, `extends` resolves, and bad
specs get an error naming the file and the key."""
import json

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
    assert cxl["access_granularity_bytes"] == base["access_granularity_bytes"]
    assert cxl.source("interleave_bytes") == base.source("interleave_bytes")
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


def test_a_new_storage_device_is_one_yaml_file(tmp_path, monkeypatch):
    """Adding a device touches one file: sim-configs/devices/<name>.yaml. The
    registry, the run spec, the runtime's emulation and the model pick it up."""
    import shutil
    import subprocess
    import sys

    from tierlab.core import registry, runspec
    from tierlab.model import config as C

    root = tmp_path / "sim-configs"
    shutil.copytree(specs.specs_dir().parent, root)
    (root / "devices" / "slow-ssd.yaml").write_text(
        "name: slow-ssd\nkind: storage\nextends: nvme-p4800x\n"
        "read_latency_ns: {value: 90000, source: 'assumption: a test device'}\n")
    monkeypatch.setenv("TIERLAB_SIM_CONFIGS", str(root))
    assert "slow-ssd" in registry.devices()
    spec = runspec.validate({"device": "slow-ssd", "config": "base", "cache_bytes": "64KiB"})
    listed = subprocess.run([sys.executable, "-m", "tierlab", "list", "devices"],
                            capture_output=True, text=True, check=True).stdout
    assert "slow-ssd" in listed and "90,000" in listed
    small = {"documents": 2000, "postings": 100_000, "vocabulary": 5000, "index_bytes": 150_000}
    costs = {t: {"query_ns": 1000, "block_ns": 300, "posting_ns": 5} for t in ("single", "and")}
    res = C.run(C.validate({**spec.as_dict("model"), "index": small, "costs": costs,
                            "workload": {"type": "single", "class": "H", "queries": 20}}))
    assert res.run["device"] == "slow-ssd"
    assert json.loads(res.run["params"])["device_spec"]["read_latency_ns"]["value"] == 90000


def test_machine_specs_load_and_the_platform_extends_the_cpu():
    from tierlab.core import registry

    assert {"xeon-gold-6252n", "this-vm", "apcache-2x-xeon-gold-6252n"} <= set(registry.machines())
    cpu, plat = specs.load("xeon-gold-6252n", kind="machine"), specs.load(
        "apcache-2x-xeon-gold-6252n", kind="machine")
    assert plat["sockets"] == 2 and cpu["sockets"] == 1
    assert plat["llc_bytes"] == cpu["llc_bytes"] == 35.75 * 2**20
    assert plat.memory == "ddr4-2666"
    for name in registry.machines():
        m = specs.load(name, kind="machine")
        for level in ("l1d", "l2", "llc"):  # whole sets of whole lines
            size, ways = m[f"{level}_bytes"], m[f"{level}_ways"]
            assert size == 0 or (size / (ways * m["line_bytes"])).is_integer(), (name, level)
        assert specs.load(m.memory, kind="memory")


def test_memory_specs_carry_what_the_timing_model_reads():
    from tierlab.core import registry

    for name in ("ddr4-2666", "ddr5-4800", "optane-dcpmm-g1", "optane-dcpmm-g1-x6",
                 "numa-remote-ddr4", "rdma-remote", "cxl-type3"):
        assert name in registry.tiers()
        s = specs.load(name, kind="memory")
        for key in ("read_latency_seq_ns", "read_latency_random_ns", "write_latency_ns",
                    "read_bandwidth_bytes_per_s", "write_bandwidth_bytes_per_s",
                    "access_granularity_bytes", "device_buffer_bytes", "max_outstanding",
                    "dimms"):
            assert s.get(key) is not None and s.source(key).strip(), (name, key)
    x6, one = specs.load("optane-dcpmm-g1-x6"), specs.load("optane-dcpmm-g1")
    assert x6["read_bandwidth_bytes_per_s"] > 5 * one["read_bandwidth_bytes_per_s"]
    assert x6["access_granularity_bytes"] == 256
