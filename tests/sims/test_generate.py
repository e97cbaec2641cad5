"""Generated configurations and traces against committed golden files, for
every back-end that generates files and both modes, from a DRAM and an
Optane spec and a small mixed stream (sims_inputs.mixed_stream).

Regenerate after a deliberate change: TIERLAB_REGOLD=1 pytest tests/sims/test_generate.py
(then review the diff)."""
import os
import re

import pytest

from tierlab.experiments.sims import gem5, run
from sims_inputs import GOLDEN, write_mixed

CASES = [("ramulator2", "optane-dcpmm-g1"), ("ramulator2", "ddr4-2666"),
         ("vans", "optane-dcpmm-g1"), ("gem5", "optane-dcpmm-g1")]


def _norm(data: bytes) -> bytes:
    """The tierlab version is not part of what is checked."""
    return re.sub(rb"tierlab \d+\.\d+\.\d+\S*", b"tierlab VERSION", data)


@pytest.mark.parametrize("backend,spec", CASES)
def test_generated_files_match_golden(tmp_path, backend, spec):
    out = tmp_path / "out"
    done = run.generate(backend, spec, write_mixed(tmp_path), out)
    gold = GOLDEN / f"{backend}-{spec}"
    for mode, paths in done.items():
        for p in paths:
            # the gem5 scripts do not depend on the mode: one golden copy
            same = backend == "gem5" and p.suffix == ".py"
            want = gold / ("unloaded" if same else mode) / p.name
            got = _norm(p.read_bytes())
            if os.environ.get("TIERLAB_REGOLD"):
                want.parent.mkdir(parents=True, exist_ok=True)
                want.write_bytes(got)
            assert want.exists(), f"no golden file {want} (TIERLAB_REGOLD=1 writes it)"
            assert got == want.read_bytes(), f"{p.name} ({mode}) differs from {want}"


@pytest.mark.parametrize("backend,spec", CASES)
def test_text_files_start_with_provenance(tmp_path, backend, spec):
    done = run.generate(backend, spec, write_mixed(tmp_path), tmp_path / "out")
    for paths in done.values():
        for p in paths:
            if p.suffix == ".trace" and backend == "ramulator2":
                continue  # Ramulator's trace readers take no comment line (docs/simulators.md)
            if p.name == "packets.trace":
                header, _ = gem5.read_packet_trace(p.read_bytes())
                first = header[1].decode()
            else:
                first = p.read_text().splitlines()[0]
            assert f"from spec {spec} ({spec}.yaml)" in first and "tierlab" in first, p
