"""The memory-trace format (traces/memtrace.md) and its reader
tierlab.traces.memtrace: layouts against the C header, the worked example
byte for byte, refusals, and the per query x region summary."""
import re
from pathlib import Path

import numpy as np
import pytest

from tierlab.core.errors import TierlabError
from tierlab.core.native import ffi_lib
from tierlab.core.registry import memory_regions
from tierlab.traces import memtrace as m

DOC = Path(__file__).resolve().parents[2] / "traces" / "memtrace.md"


def test_dtypes_are_the_c_layouts():
    ffi, lib = ffi_lib()
    for dtype, ctype in ((m.RECORD, "tierlab_memtrace_record"),
                         (m.HEADER, "tierlab_memtrace_header")):
        assert dtype.itemsize == ffi.sizeof(ctype)
        cfields = dict(ffi.typeof(ctype).fields)
        assert list(cfields) == list(dtype.names)
        for name, f in cfields.items():
            assert dtype.fields[name][1] == f.offset, name
            assert dtype.fields[name][0].itemsize == ffi.sizeof(f.type), name
    assert m.HEADER_BYTES == lib.TIERLAB_MEMTRACE_HEADER_BYTES
    assert m.VERSION == lib.TIERLAB_MEMTRACE_VERSION
    assert (m.LOAD, m.STORE) == (lib.TIERLAB_ACCESS_LOAD, lib.TIERLAB_ACCESS_STORE)
    assert m.BUDGET_HIT == lib.TIERLAB_MEMTRACE_BUDGET_HIT


def test_region_registry_is_the_c_numbers():
    _, lib = ffi_lib()
    names = memory_regions()
    assert len(names) == lib.TIERLAB_REGIONS
    for name in names:
        assert getattr(lib, f"TIERLAB_REGION_{name.upper()}") == names.index(name)
        assert lib.tierlab_memtrace_region_find(name.encode()) == names.index(name)
    assert lib.tierlab_memtrace_region_find(b"nope") == -1


def _example(path: Path) -> Path:
    """The worked example of traces/memtrace.md."""
    rec = np.array([(0x7f0000001000, 4, 8, m.LOAD, 3), (0x7f0000002038, 4, 16, m.STORE, 7)],
                   dtype=m.RECORD)
    return m.write(path, rec, every=2, max_bytes=300, flags=m.BUDGET_HIT, queries=10,
                   queries_sampled=5, queries_traced=1, k=10,
                   index_build_id=0x1122334455667788, workload_digest=0xa1a2a3a4a5a6a7a8,
                   stack_lo=0x7ffd00000000, stack_hi=0x7ffd00800000, checks=1,
                   codec="pfor-delta256", placement="did=dram")


def test_worked_example_byte_for_byte(tmp_path):
    data = _example(tmp_path / "ex.bin").read_bytes()
    dump = re.search(r"```\n(00000000:.*?)```", DOC.read_text(), re.S)[1]
    shown = {}
    for line in dump.strip().splitlines():
        off, rest = line.split(":", 1)
        shown[int(off, 16)] = bytes.fromhex(rest[1:40].replace(" ", ""))
    assert len(data) == 288
    for off in range(0, len(data), 16):
        want = shown.get(off, bytes(16))  # rows left out of the dump are zero
        assert data[off:off + 16] == want, hex(off)
    h, rec = m.read(tmp_path / "ex.bin")
    assert (h.every, h.max_bytes, h.records, h.queries, h.queries_sampled, h.queries_traced) == (
        2, 300, 2, 10, 5, 1)
    assert h.budget_hit and h.codec == "pfor-delta256" and h.placement == "did=dram"
    assert rec.dtype == m.RECORD and rec["region"].tolist() == [3, 7]
    assert "every 2nd query" in h.sampling() and "stopped by the budget" in h.sampling()


@pytest.mark.parametrize("damage, message", [
    (lambda b: b"XXXXXXXX" + b[8:], "not a memory trace"),
    (lambda b: b[:8] + (2).to_bytes(4, "little") + b[12:], "version 2"),
    (lambda b: b[:-1], "cut short"),
    (lambda b: b[:100], "not a memory trace"),
    (lambda b: b + bytes(16), "cut short"),
])
def test_refuses_what_is_not_a_whole_trace(tmp_path, damage, message):
    p = _example(tmp_path / "ex.bin")
    p.write_bytes(damage(p.read_bytes()))
    with pytest.raises(TierlabError, match=message):
        m.read(p)


def test_write_refuses_records_out_of_query_order(tmp_path):
    rec = np.array([(0, 2, 1, 0, 0), (0, 1, 1, 0, 0)], dtype=m.RECORD)
    with pytest.raises(TierlabError, match="query order"):
        m.write(tmp_path / "x.bin", rec)
    assert not list(tmp_path.iterdir())


def test_summary_counts_per_query_and_region(tmp_path):
    rec = np.array([
        (0x1000, 0, 8, m.LOAD, 3),     # did, line 0x40
        (0x1008, 0, 8, m.LOAD, 3),     # did, same line
        (0x103c, 0, 8, m.LOAD, 3),     # did, crosses into line 0x41
        (0x2000, 0, 16, m.STORE, 7),   # topk
        (0x7ffd00000100, 0, 8, m.STORE, 0),  # stack (other)
        (0x1000, 2, 100, m.LOAD, 3),   # query 2: 0x1000..0x1063 spans lines 0x40, 0x41
    ], dtype=m.RECORD)
    p = m.write(tmp_path / "s.bin", rec, stack_lo=0x7ffd00000000, stack_hi=0x7ffd00800000)
    rows = m.summary_rows(p, query_types=["single", "and", "and"])
    got = {(q, r): (a, lo, st, b, d, s) for q, r, a, lo, st, b, d, s in zip(
        rows["query_id"], rows["region"], rows["accesses"], rows["loads"], rows["stores"],
        rows["bytes"], rows["distinct_lines"], rows["stack_accesses"])}
    assert got == {(0, "did"): (3, 3, 0, 24, 2, 0), (0, "topk_heap"): (1, 0, 1, 16, 1, 0),
                   (0, "other"): (1, 0, 1, 8, 1, 1), (2, "did"): (1, 1, 0, 100, 2, 0)}
    assert rows["query_type"][-1] == "and"
    # the same in small chunks (whole queries per chunk)
    h, r = m.read(p)
    small = m.summarise_records(h, r, chunk=2)
    assert small["accesses"].tolist() == m.summarise_records(h, r)["accesses"].tolist()


def test_summary_table_fits_the_schema(tmp_path):
    from tierlab.traces import schema

    p = _example(tmp_path / "ex.bin")
    out = schema.write_table("memtrace_summary", m.summary_rows(p), tmp_path / "s.parquet")
    _, df = schema.read_table(out)
    assert df.region.tolist() == ["did", "topk_heap"] and (df.every == 2).all()
