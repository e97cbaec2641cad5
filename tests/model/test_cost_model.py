"""The cost-table interface (model/costs.py CostModel): the measured table, the
costs a run spec gives inline and the tests' fake implement every method of
it with the same parameters, and the model calls every one of them. A method
renamed on one side fails here (and the class can no longer be made) instead
of the model silently charging nothing for it."""
from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from model_helpers import Costs as FakeCosts, fast_device, index_of, trace_of  # noqa: E402

from tierlab.core import specs  # noqa: E402
from tierlab.core.errors import TierlabError  # noqa: E402
from tierlab.model import config as C  # noqa: E402
from tierlab.model import costs as costs_mod  # noqa: E402
from tierlab.model.costs import CostModel  # noqa: E402
from tierlab.model.pagecache import PAGE  # noqa: E402
from tierlab.model.sim import Params, Simulation  # noqa: E402

METHODS = sorted(CostModel.__abstractmethods__)
IMPLEMENTATIONS = [costs_mod.Costs, C.InlineCosts, FakeCosts]


def _params(f) -> list[str]:
    return list(inspect.signature(f).parameters)


def test_the_interface_is_what_the_model_asks():
    assert set(METHODS) == {"query_cpu_ns", "extra_cpu_ns", "decode_block_ns", "handoff",
                            "wake_samples", "copy_rate", "cpu_factor", "page_hit_ns",
                            "page_touch_ns", "page_miss_ns", "describe"}
    assert set(C.PAGE_COST_KEYS) <= set(METHODS)  # config.run asks the table for these


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_every_implementation_has_every_method(cls):
    assert issubclass(cls, CostModel)
    assert not cls.__abstractmethods__, f"{cls.__name__} lacks {sorted(cls.__abstractmethods__)}"
    for name in METHODS:
        own = next(k for k in cls.__mro__ if name in vars(k))
        assert own is not CostModel, f"{cls.__name__}.{name} is the abstract one"
        want = _params(getattr(CostModel, name))
        # the real table may take more (optional) parameters, never fewer or others
        assert _params(getattr(cls, name))[:len(want)] == want, (cls.__name__, name)


def _table(**extra) -> costs_mod.Costs:
    return costs_mod.Costs(single=costs_mod.Coefficients(1000.0, 100.0, 1.0),
                           and_=costs_mod.Coefficients(1000.0, 100.0, 1.0),
                           codec="pfor-delta256", block_size=256, extra=extra)


def test_an_empty_table_and_inline_costs_are_neutral_like_the_fake():
    for costs in (_table(), C.InlineCosts({"single": {}, "and": {}}), FakeCosts()):
        assert costs.extra_cpu_ns("single", 5, 7) == 0.0
        assert costs.decode_block_ns() is None
        assert costs.handoff() == (0.0, 0.0)
        assert costs.wake_samples() is None and costs.copy_rate() is None
        assert costs.cpu_factor(1) == (1.0, "one core")
        assert costs.cpu_factor(4)[0] == 1.0
        assert (costs.page_hit_ns(), costs.page_touch_ns(), costs.page_miss_ns()) == (0, 0, 0)


class Spy(FakeCosts):
    """Records every CostModel method the model calls."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.called: set[str] = set()

    def __getattribute__(self, name):
        if name in METHODS:
            object.__getattribute__(self, "called").add(name)
        return object.__getattribute__(self, name)


def test_the_model_calls_every_method():
    spy = Spy(query_ns=1000, block_ns=100)
    ix = index_of([8 * PAGE] * 4)
    tr = trace_of([[0], [1, 2], [3]])
    p = Params(config="hybrid-prefetch", cache_bytes=1 << 20, segment_bytes=4096, passes=1,
               cores=2)
    Simulation(ix, tr, p, spy, fast_device(), specs.load("ddr4-2666"), drawn_wake_ups=True).run()
    cfg = C.validate({"config": "base", "device": "nvme-p4800x", "cache_fraction": 0.2,
                      "index": {"documents": 500, "postings": 20_000, "vocabulary": 2_000,
                                "index_bytes": 60_000},
                      "costs": {"single": {"query_ns": 1000}, "and": {"query_ns": 1000}},
                      "page_hit_ns": "table", "page_touch_ns": "table", "page_miss_ns": "table",
                      "workload": {"type": "single", "class": "H", "queries": 5}})
    C.run(cfg, costs=spy)
    assert spy.called == set(METHODS), f"never called: {sorted(set(METHODS) - spy.called)}"


def test_a_table_the_model_does_not_know_is_refused():
    class Duck:  # the old duck-typed fake: only the formula
        def query_cpu_ns(self, qtype, blocks, postings):
            return 1000.0

    with pytest.raises(TierlabError, match="CostModel"):
        Simulation(index_of([PAGE]), trace_of([[0]]), Params(config="base", cache_bytes=1 << 20),
                   Duck(), fast_device(), None)


def test_decode_block_ns_reads_the_decode_section():
    t = _table()
    t.decode = {"did_block_ns": 80.0, "freq_block_ns": 40.0}
    assert t.decode_block_ns() == 120.0
    t.decode = {"did_block_ns": 80.0}
    assert t.decode_block_ns() == 80.0
    assert np.isclose(_table(threads={"copy_bytes_per_s": 2e9}).copy_rate(), 2e9)
