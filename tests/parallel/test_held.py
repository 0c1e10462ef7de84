"""``parallel.held``: the memory lower bound the plan search rules candidates out with
is below the planned peak of every core of built plans, and ruling out changes nothing
the search keeps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from waferflow.ir.graph import Graph
from waferflow.ir.target import get_wafer
from waferflow.parallel import search as search_mod
from waferflow.parallel.driver import build_state, clone_graph, parallelize
from waferflow.parallel.held import held_bytes, shortfall
from waferflow.parallel.search import search_plans

from .graphs import chain

PLANS = (
    "dp=2,tp=2,pp=1,microbatches=1",
    "dp=2,tp=1,pp=2,microbatches=4",
    "dp=1,tp=2,pp=3,microbatches=4,schedule=gpipe",
    "dp=4,tp=1,pp=1,microbatches=2,zero=1",
    "dp=2,tp=2,pp=1,microbatches=2,zero=3",
    "dp=2,tp=2,pp=2,microbatches=2,zero=2",
)


@pytest.mark.parametrize("plan", PLANS)
def test_the_bound_is_below_every_cores_planned_peak(gpt2_tiny: Graph, plan: str) -> None:
    g = clone_graph(gpt2_tiny)
    st = build_state(g, get_wafer("mesh16x16"), plan, check_memory=False, verify=False)
    held = held_bytes(g, st)
    assert st.memory is not None and set(held) == set(range(st.plan.pp))
    for core in st.memory.cores:
        assert 0 < held[core.stage] <= core.peak_bytes


def test_the_bound_holds_on_llama(llama_tiny: Graph) -> None:
    g = clone_graph(llama_tiny)
    st = build_state(g, get_wafer("mesh16x16"), "dp=2,tp=2,pp=2,microbatches=2",
                     check_memory=False, verify=False)  # fmt: skip
    held = held_bytes(g, st)
    assert st.memory is not None and held
    assert all(held[c.stage] <= c.peak_bytes for c in st.memory.cores)


def test_no_bound_with_recompute(gpt2_tiny: Graph) -> None:
    g = clone_graph(gpt2_tiny)
    st = parallelize(g, get_wafer("mesh16x16"), "dp=2,tp=2,pp=1,microbatches=2,recompute=true")
    assert held_bytes(g, st) == {} and shortfall(g, st) is None


def test_a_stage_over_its_cores_is_short(gpt2_tiny: Graph) -> None:
    g = clone_graph(gpt2_tiny)
    wafer = replace(get_wafer("mesh16x16"), sram_bytes=64 * 1024)
    st = parallelize(g, wafer, "dp=1,tp=1,pp=1,microbatches=1,span=1")
    short = shortfall(g, st)
    assert short is not None and short.stage == 0
    assert short.need_bytes == held_bytes(g, st)[0] > short.capacity_bytes == 64 * 1024


def test_ruling_out_changes_nothing_the_search_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """With SRAM tight enough that some of the best-screened candidates do not fit (a
    chain of 4 layers of 128 KiB activations, 200 KiB a node), the search rules them
    out unbuilt; without the bound it builds them, finds they do not fit, and keeps
    the same plan from the same builds."""
    graph = chain(4, 8, 4096, 10**6, 2 * 10**6)
    wafer = replace(get_wafer("mesh16x16"), sram_bytes=8 * 1024)
    fast = search_plans(graph, wafer, top=2)
    assert fast.ruled_out > 0
    assert f"{fast.ruled_out} ruled out unbuilt" in fast.summary()
    monkeypatch.setattr(search_mod, "shortfall", lambda g, st: None)
    slow = search_plans(graph, wafer, top=2)
    assert slow.ruled_out == 0 and slow.built == fast.built + fast.ruled_out
    assert slow.best == fast.best
    for a, b in zip(fast.rows, slow.rows, strict=True):
        assert (a.plan, a.fits, a.kept, a.step_seconds) == (b.plan, b.fits, b.kept, b.step_seconds)
        if a.ruled_out:
            assert b.built and b.fits is False and b.peak_bytes is not None
            assert a.peak_bytes is not None and a.peak_bytes <= b.peak_bytes
            assert ">= " in fast.table() and a.plan in fast.table()
