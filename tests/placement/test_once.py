"""Placement does each piece of work once: the program is scheduled once and
retargeted to every candidate layout; the kept candidate's simulation is the report's
(``CompiledPlan.simulate`` reuses it, with the same figures as a fresh run); ``--plan
auto`` hands its built plan to placement, which does not schedule it again."""

from __future__ import annotations

import importlib
import re

import pytest

import waferflow as wf
import waferflow.parallel.driver as driver
from waferflow.backend_sim import simulate
from waferflow.ir.graph import Graph
from waferflow.ir.target import get_wafer
from waferflow.passes.place import PlaceOptions, place_parallel

PIPE = "dp=2,tp=2,pp=2,microbatches=2,span=1"


def _timeless(text: str) -> str:
    """A placement's text without its wall-clock figures."""
    text = re.sub(r"\(\d+(\.\d+)? s wall\)", "", text)
    return re.sub(r"placement wall time: .*", "", text)


def _count(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counting(*a: object, **k: object) -> object:
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_the_program_is_scheduled_once_for_every_candidate(
    gpt2_tiny: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    import waferflow.passes.place_candidates as candidates

    scheduled = _count(monkeypatch, candidates, "schedule")
    r = place_parallel(gpt2_tiny, get_wafer("mesh16x16"), PIPE, options=PlaceOptions(1.0))
    built = [c for c in r.candidates if "same layout" not in c.note and "no better" not in c.note]
    assert len(built) >= 3  # candidates with layouts of their own, each assembled
    assert len(scheduled) == 1


def test_the_kept_run_is_the_report(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = wf.compile("hf:gpt2-tiny", wafer="mesh16x16", mode="train", batch=8, seq=32,
                          plan=PIPE, place_time=1.0)  # fmt: skip
    assert compiled.placement is not None and compiled.placement.run is not None
    engine = importlib.import_module("waferflow.backend_sim.simulate")
    runs = _count(monkeypatch, engine, "run")
    report = compiled.simulate()
    assert runs == []  # no second simulation
    fresh = simulate(compiled.plan, compiled.wafer)
    assert report.result.plan is compiled.plan
    assert report.result.step_time_ps == fresh.step_time_ps
    assert report.result.summary() == fresh.summary()
    assert report.result.actor_start_ps == fresh.actor_start_ps


def test_routes_other_than_the_simulators_are_simulated_afresh(gpt2_tiny: Graph) -> None:
    r = place_parallel(
        gpt2_tiny, get_wafer("mesh16x16"), PIPE, options=PlaceOptions(1.0, route="yx")
    )
    assert r.run is None and r.simulation() is None


def test_plan_auto_hands_its_build_to_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    built = _count(monkeypatch, driver, "schedule")
    import waferflow.passes.place_candidates as candidates

    rebuilt = _count(monkeypatch, candidates, "schedule")
    compiled = wf.compile("hf:gpt2-tiny", wafer="mesh16x16", mode="train", batch=8, seq=32,
                          plan="auto", place_time=1.0)  # fmt: skip
    assert compiled.search is not None and compiled.placement is not None
    assert len(built) == compiled.search.built  # one schedule per plan the search built
    assert rebuilt == []  # placement started from the search's program
    assert compiled.placement.candidates[0].method.endswith("(default)")


@pytest.mark.parametrize("jobs", [2, 3])
def test_candidates_built_on_worker_processes_give_the_same_placement(
    gpt2_tiny: Graph, jobs: int
) -> None:
    """``jobs`` processes build and time the candidates at once; the table, the kept
    plan and its run are those of building them one after the other."""
    w = get_wafer("mesh16x16")
    one = place_parallel(gpt2_tiny, w, PIPE, options=PlaceOptions(1.0, jobs=1))
    many = place_parallel(gpt2_tiny, w, PIPE, options=PlaceOptions(1.0, jobs=jobs))
    assert many.candidates == one.candidates
    assert _timeless(str(many)) == _timeless(str(one))
    assert many.plan == one.plan
    assert many.run is not None and one.run is not None
    assert many.run.step_time_ps == one.run.step_time_ps


def test_a_winner_found_by_a_worker_is_built_again_here(
    gpt2_tiny: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process builds the likeliest winners (least rank byte-hops), the workers
    the rest; when a worker's candidate is fastest, its plan is built again here (the
    worker's stays in the worker's memory)."""
    from waferflow.passes.place_candidates import ParallelPlacement

    w, plan = get_wafer("torus8x8"), "dp=4,tp=2,pp=2,microbatches=2"
    one = place_parallel(gpt2_tiny, w, plan, options=PlaceOptions(1.0, jobs=1))
    winner = next(i for i, c in enumerate(one.candidates) if c.method == one.chosen)
    assert winner != 0  # a candidate built in settle: the case this test is about
    last = staticmethod(lambda t: (t.idx == winner, t.rank_cost, t.idx))
    monkeypatch.setattr(ParallelPlacement, "likeliest", last)  # the winner to the worker
    evaluated = _count(monkeypatch, ParallelPlacement, "evaluate")
    many = place_parallel(gpt2_tiny, w, plan, options=PlaceOptions(1.0, jobs=2))
    assert many.candidates == one.candidates
    assert many.chosen == one.chosen and many.plan == one.plan
    pending = [i for i, c in enumerate(one.candidates) if i and "=" not in c.note]
    # the first candidate, this process's half of the rest, the winner once more
    assert len(evaluated) == 1 + -(-len(pending) // 2) + 1


def test_how_many_processes_build_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    from waferflow.errors import ConfigError
    from waferflow.passes.place_result import PARALLEL_ACTORS
    from waferflow.workers import usable_cpus

    monkeypatch.delenv("WAFERFLOW_PLACE_JOBS", raising=False)
    assert PlaceOptions().workers_for(PARALLEL_ACTORS - 1) == 1  # small: forking does not pay
    assert PlaceOptions().workers_for(PARALLEL_ACTORS) == usable_cpus()
    assert PlaceOptions(jobs=3).workers_for(10) == 3
    monkeypatch.setenv("WAFERFLOW_PLACE_JOBS", "2")
    assert PlaceOptions().workers_for(10) == 2
    assert PlaceOptions(jobs=1).workers_for(PARALLEL_ACTORS) == 1
    monkeypatch.setenv("WAFERFLOW_PLACE_JOBS", "two")
    with pytest.raises(ConfigError, match="WAFERFLOW_PLACE_JOBS='two'"):
        PlaceOptions().workers_for(10)
