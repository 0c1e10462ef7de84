"""The uniform baseline (every dp x tp x pp x micro-batch plan, ring all-reduce,
default layout, simulated) and ``--plan auto`` held against it: never slower."""

from __future__ import annotations

import pytest

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.target import get_wafer
from waferflow.parallel import build_parallel_plan
from waferflow.parallel import search as search_mod
from waferflow.parallel.plan_spec import CollectiveAlgo, ParallelPlan, parse_plan
from waferflow.parallel.search import PlanSearch, SearchRow, search_plans
from waferflow.parallel.uniform import UniformBaseline, uniform_baseline, uniform_plans

WAFER = "mesh4x4"


@pytest.fixture(scope="module")
def tiny_infer() -> Graph:
    from waferflow.frontend import load_model, trace

    b = load_model("hf:gpt2-tiny", batch=1, seq=16)
    return trace(b.module, b.example_inputs, mode="infer", name=b.name)


@pytest.fixture(scope="module")
def baseline(tiny_infer: Graph) -> UniformBaseline:
    return uniform_baseline(tiny_infer, get_wafer(WAFER))


def _simulated(graph: Graph, plan: str | ParallelPlan) -> float:
    r = build_parallel_plan(graph, get_wafer(WAFER), plan)
    assert r.wafer is not None
    return simulate(r.plan, r.wafer).step_time


def test_the_grid_is_every_degree_the_model_takes(tiny_infer: Graph) -> None:
    plans = uniform_plans(tiny_infer, get_wafer(WAFER))
    # batch 1: dp = micro-batches = 1; 4 heads: tp 1, 2, 4; 16 cores: tp x pp <= 16
    expected = {(1, t, p, 1) for t in (1, 2, 4) for p in (1, 2, 3, 4, 6, 8) if t * p <= 16}
    assert {(p.dp, p.tp, p.pp, p.microbatches) for p in plans} == expected
    assert len(plans) == len(expected) == 16
    assert all(p.algo is CollectiveAlgo.RING and not p.recompute for p in plans)
    for refused in ("tp=3", "pp=12"):  # degrees of the search's lists the model refuses
        with pytest.raises(PlanError):
            build_parallel_plan(tiny_infer, get_wafer(WAFER), refused)


def test_best_is_the_fastest_simulated(tiny_infer: Graph, baseline: UniformBaseline) -> None:
    steps = [r.step_seconds for r in baseline.rows]
    assert all(s is not None for s in steps) and len(steps) == 16
    best = baseline.best_row
    assert best is not None and best.step_seconds == min(s for s in steps if s is not None)
    assert baseline.best is not None and str(baseline.best) == best.plan
    assert _simulated(tiny_infer, baseline.best) == best.step_seconds
    other = next(r for r in baseline.rows if r.plan != best.plan)
    assert _simulated(tiny_infer, other.plan) == other.step_seconds
    assert baseline.summary().startswith("uniform plans: 16 tried, 16 fit; best ")


def test_plan_auto_held_against_them_is_never_slower(tiny_infer: Graph) -> None:
    s = search_plans(tiny_infer, get_wafer(WAFER), uniform=True)
    assert s.uniform is not None and s.vs_uniform is not None and s.vs_uniform <= 1.0
    assert s.simulated_seconds == _simulated(tiny_infer, s.best)
    assert "plan auto vs the best uniform plan" in s.summary()


def _slow_search(graph: Graph, wafer, **_) -> PlanSearch:  # type: ignore[no-untyped-def]
    slow = parse_plan("dp=1,tp=1,pp=8,microbatches=1")  # a long pipeline, one micro-batch
    row = SearchRow(plan=str(slow), ranks=8, span=1, rough_seconds=0.0, rough_bytes=0,
                    rough_fits=True, built=True, fits=True, kept=True)  # fmt: skip
    return PlanSearch(best=slow, rows=(row,), screened=1, built=1)


def test_a_slower_searched_plan_gives_way_to_the_best_uniform_one(
    tiny_infer: Graph, baseline: UniformBaseline, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_mod, "_search", _slow_search)
    alone = search_plans(tiny_infer, get_wafer(WAFER))
    assert str(alone.best).startswith("dp=1,tp=1,pp=8")  # the search alone keeps it
    held = search_plans(tiny_infer, get_wafer(WAFER), uniform=True)
    assert held.uniform_kept and held.best == baseline.best
    assert held.vs_uniform == 1.0 and held.simulated_seconds == baseline.best_seconds
    assert held.searched_seconds is not None and held.searched_seconds > held.simulated_seconds
    assert [r.kept for r in held.rows] == [False, True]
    assert held.kept.note == "best uniform plan" and held.kept.plan == str(baseline.best)


def test_search_fitting_nothing_falls_back_then_refuses(
    tiny_infer: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_a, **_k):  # type: ignore[no-untyped-def]
        raise PlanError("plan auto: nothing fits (test)")

    monkeypatch.setattr(search_mod, "_search", refuse)
    held = search_plans(tiny_infer, get_wafer(WAFER), uniform=True)
    assert held.uniform_kept and held.searched_seconds is None and len(held.rows) == 1
    import waferflow.parallel.uniform as uniform_mod

    monkeypatch.setattr(uniform_mod, "uniform_baseline",
                        lambda *_a, **_k: UniformBaseline((), None))  # fmt: skip
    with pytest.raises(PlanError, match=r"nothing fits \(test\)"):
        search_plans(tiny_infer, get_wafer(WAFER), uniform=True)


def test_compile_auto_with_placement_is_never_slower_than_the_best_uniform_plan() -> None:
    import waferflow as wf

    c = wf.compile("hf:gpt2-tiny", wafer=WAFER, batch=1, seq=16, plan="auto", place="auto",
                   place_time=1.0, uniform_baseline=True, keep_ir=False)  # fmt: skip
    assert c.search is not None and c.search.uniform is not None
    best = c.search.uniform.best_seconds
    assert best is not None and c.simulate().step_time <= best


def test_held_search_builds_each_plan_once(
    tiny_infer: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held against the uniform plans, the searched plan is simulated from the search's
    own build and a kept uniform plan comes with its build (placement starts from it):
    nothing is built again."""

    def rebuild(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("built again")

    monkeypatch.setattr(search_mod, "build_parallel_plan", rebuild)
    s = search_plans(tiny_infer, get_wafer(WAFER), uniform=True)
    assert s.state is not None and s.state[1].plan == s.best
    assert s.simulated_seconds is not None and s.searched_seconds is not None


def test_a_kept_uniform_plan_is_handed_over_as_built(
    tiny_infer: Graph, baseline: UniformBaseline, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    real = search_mod.build_parallel_plan

    def count(graph, wafer, plan, **kw):  # type: ignore[no-untyped-def]
        built.append(str(plan))
        return real(graph, wafer, plan, **kw)

    monkeypatch.setattr(search_mod, "_search", _slow_search)
    monkeypatch.setattr(search_mod, "build_parallel_plan", count)
    held = search_plans(tiny_infer, get_wafer(WAFER), uniform=True)
    assert held.uniform_kept and held.state is not None
    assert held.state[1].plan == held.best == baseline.best
    assert built == ["dp=1,tp=1,pp=8,microbatches=1"]  # only the stand-in search's plan


def test_uniform_plans_the_memory_bound_rules_out_are_not_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dataclasses import replace

    import waferflow.parallel.uniform as uniform_mod

    from .graphs import chain

    graph = chain(4, 8, 4096, 10**6, 2 * 10**6)  # 128 KiB activations a layer, 8 KiB cores
    wafer = replace(get_wafer("mesh16x16"), sram_bytes=8 * 1024)
    fast = uniform_baseline(graph, wafer, max_ranks=8)
    ruled = [r for r in fast.rows if r.note == "does not fit (memory bound)"]
    assert ruled and all(r.fits is False for r in ruled)
    monkeypatch.setattr(uniform_mod, "shortfall", lambda g, st: None)
    slow = uniform_baseline(graph, wafer, max_ranks=8)
    assert [(r.plan, r.fits, r.step_seconds) for r in slow.rows] == [
        (r.plan, r.fits, r.step_seconds) for r in fast.rows
    ]
    assert slow.best == fast.best
