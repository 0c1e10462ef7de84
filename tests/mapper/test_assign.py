"""Actor assignment: hand-computed optima, limits, determinism, dead cores, LNS."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.mapper.helpers import FAST, SRAM, chain_assign
from waferflow.errors import PlanError
from waferflow.mapper.placement import (
    AssignProblem,
    Flow,
    Grid,
    SolveOptions,
    Status,
    assignment_cost,
    assignment_lower_bound,
    assignment_violations,
    solve_assignment,
)


def _hops(p: AssignProblem, a: int, b: int, cores: tuple[int, ...]) -> int:
    (ra, ca), (rb, cb) = p.grid.coord(cores[a]), p.grid.coord(cores[b])
    return abs(ra - rb) + abs(ca - cb)


def test_chain_on_1x3_is_in_order() -> None:
    p = chain_assign(1, 3)
    res = solve_assignment(p, FAST)
    assert res.cost == 300.0  # both flows one hop
    assert res.core_of_actor[1] == 1
    assert res.report.status is Status.OPTIMAL


def test_chain_on_2x2() -> None:
    res = solve_assignment(chain_assign(2, 2), FAST)
    assert res.cost == 300.0
    assert res.report.status is Status.OPTIMAL


def test_heavy_talkers_end_up_adjacent() -> None:
    # a ring of light flows around 6 actors, and one heavy pair across it
    flows = [Flow(i, (i + 1) % 6, 1.0) for i in range(6)] + [Flow(0, 3, 1000.0)]
    p = AssignProblem(Grid(3, 3), 6, (1,) * 6, tuple(flows), SRAM)
    res = solve_assignment(p, FAST)
    assert _hops(p, 0, 3, res.core_of_actor) == 1


def _brute_force(p: AssignProblem) -> float:
    cores = p.grid.alive_cores
    return min(
        assignment_cost(p, perm)
        for perm in itertools.permutations(cores, p.n_actors)
        if not assignment_violations(p, perm)
    )


@settings(
    max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    flows=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(1, 50)), min_size=1, max_size=8
    ),
    dead=st.sets(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=2),
)
def test_matches_brute_force_and_bounds_hold(flows, dead) -> None:
    grid = Grid(3, 3, frozenset(dead))
    assume(len(grid.islands()) == 1)
    p = AssignProblem(grid, 5, (1,) * 5, tuple(Flow(a, b, float(w)) for a, b, w in flows), SRAM)
    opt = _brute_force(p)
    res = solve_assignment(p, FAST)
    assert res.cost == pytest.approx(opt)
    assert assignment_lower_bound(p) <= opt + 1e-9
    assert res.report.best_bound <= opt + 1e-9


@settings(
    max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    dead=st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=8),
    n=st.integers(2, 20),
)
def test_dead_cores_are_never_used(dead, n) -> None:
    grid = Grid(6, 6, frozenset(dead))
    assume(len(grid.islands()) == 1 and grid.num_alive >= n)
    flows = tuple(Flow(i, (i * 7 + 3) % n, float(1 + i % 5)) for i in range(n))
    p = AssignProblem(grid, n, (1,) * n, flows, SRAM)
    res = solve_assignment(p, SolveOptions(time_limit=0.3))
    assert all(grid.coord(c) not in dead for c in res.core_of_actor)
    assert not assignment_violations(p, res.core_of_actor)


def _layered(n: int, rows: int, cols: int) -> AssignProblem:
    width = 6
    flows = []
    for a in range(n - width):
        flows.append(Flow(a, a + width, float(100 + 37 * (a % 7))))
        flows.append(Flow(a, a + width + (1 if (a + 1) % width else -1), float(10 + a % 3)))
    return AssignProblem(Grid(rows, cols), n, (1,) * n, tuple(flows), SRAM)


def test_large_problems_use_lns_and_beat_the_start() -> None:
    p = _layered(60, 8, 9)
    res = solve_assignment(p, SolveOptions(time_limit=1.0))
    assert any(t.startswith("lns:assignment") for t in res.report.techniques)
    assert not assignment_violations(p, res.core_of_actor)
    from waferflow.mapper.placement import greedy, snake

    assert res.cost <= min(greedy(p).cost, snake(p).cost)
    assert res.report.best_bound <= res.cost


def test_same_seed_same_result_byte_for_byte() -> None:
    for p, limit in ((_layered(30, 6, 6), 0.2), (_layered(60, 8, 9), 0.2)):
        a = solve_assignment(p, SolveOptions(time_limit=limit, seed=3))
        b = solve_assignment(p, SolveOptions(time_limit=limit, seed=3))
        assert a.core_of_actor == b.core_of_actor
        assert a.to_json() == b.to_json()


def test_tiny_time_limit_still_returns_a_placement_with_its_gap() -> None:
    p = _layered(30, 6, 6)
    res = solve_assignment(p, SolveOptions(time_limit=0.01))
    assert res.report.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert not assignment_violations(p, res.core_of_actor)
    assert 0.0 <= res.report.gap < 1.0


def test_memory_and_sharing_limits_are_respected() -> None:
    # two actors fit on a core by count, but only if their memory fits too
    mem = (600, 600, 300, 300)
    flows = (Flow(0, 1, 100.0), Flow(2, 3, 100.0), Flow(1, 2, 1.0))
    p = AssignProblem(Grid(1, 3), 4, mem, flows, 1000, max_actors_per_core=2)
    res = solve_assignment(p, FAST)
    cores = res.core_of_actor
    assert cores[2] == cores[3]  # they share a core: zero hops
    assert cores[0] != cores[1]  # 1200 bytes would not fit
    assert res.cost == 100.0 + 1.0
    assert not assignment_violations(p, cores)


def test_regions_restrict_actors() -> None:
    allowed = ((0, 1), (2, 3), (2, 3))
    p = AssignProblem(
        Grid(2, 2), 3, (1, 1, 1), (Flow(0, 1, 5.0), Flow(1, 2, 5.0)), SRAM, allowed=allowed
    )
    res = solve_assignment(p, FAST)
    assert res.core_of_actor[0] in (0, 1)
    assert set(res.core_of_actor[1:]) == {2, 3}
    assert res.cost == 10.0


def test_actor_too_big_names_actor_and_bytes() -> None:
    with pytest.raises(PlanError, match=r"'conv1' needs .*2000000 bytes"):
        AssignProblem(Grid(2, 2), 2, (10, 2_000_000), (), SRAM, names=("fc", "conv1"))


def test_too_many_actors_is_an_error() -> None:
    with pytest.raises(PlanError, match="5 actors do not fit on 4 alive cores"):
        AssignProblem(Grid(2, 2), 5, (1,) * 5, (), SRAM)


def test_disconnected_grid_is_an_error() -> None:
    with pytest.raises(PlanError, match="islands"):
        chain_assign(2, 3, dead={(0, 1), (1, 1)})


def test_export_model_for_a_large_problem(tmp_path) -> None:
    path = tmp_path / "assign.pbtxt"
    solve_assignment(_layered(60, 8, 9), SolveOptions(time_limit=0.2, export_model=path))
    assert "variables" in path.read_text()[:2000]


def test_the_rank_lns_stops_once_rounds_stop_improving() -> None:
    """A start no move can improve (no flows): with ``stall_rounds`` the search stops
    after exactly that many rounds; without, it runs until its budget is spent."""
    from waferflow.mapper.lns import improve_assignment

    p = AssignProblem(Grid(4, 4), 8, (1,) * 8, (), SRAM)
    start = tuple(range(8))
    opts = SolveOptions(time_limit=2.0, seed=1)

    _, _, rounds, better = improve_assignment(p, start, 2.0, opts, -1.0, stall_rounds=3)
    assert (rounds, better) == (3, 0)
    _, used, rounds, _ = improve_assignment(p, start, 0.02, opts, -1.0, stall_rounds=None)
    assert rounds > 3 and used >= 0.019


def test_the_rank_lns_budget_scales_with_the_problem() -> None:
    from waferflow.mapper.lns import MIN_LNS_SECONDS, SECONDS_PER_ACTOR, lns_budget

    assert lns_budget(10, 5.0) == MIN_LNS_SECONDS
    assert lns_budget(200, 5.0) == pytest.approx(200 * SECONDS_PER_ACTOR)
    assert lns_budget(10_000, 5.0) == 5.0  # never more than what is left


def test_a_slow_clock_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search stops on deterministic work only: with a clock that jumps a minute
    at every reading (an extremely loaded machine), the same rounds run and the same
    placement comes out (solver loops once stopped on wall-clock time)."""
    p = _layered(60, 8, 9)
    quiet = solve_assignment(p, SolveOptions(time_limit=0.2, seed=3))
    ticks = itertools.count(0.0, 60.0)
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks))
    slow = solve_assignment(p, SolveOptions(time_limit=0.2, seed=3))
    assert slow.core_of_actor == quiet.core_of_actor
    assert slow.to_json() == quiet.to_json()  # rounds included


def test_the_rank_refinement_direct_model_budget_scales_with_the_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Up to ``DIRECT_LIMIT`` ranks the refinement also solves the direct model: with a
    10 s placement budget it gets ``lns_budget`` of half of it (1 s for a few ranks),
    not the half itself (5 s that, on real plans, found nothing a fraction had not)."""
    from waferflow.mapper import bridge
    from waferflow.mapper.lns import lns_budget

    limits: list[float] = []
    real = bridge.solve_assignment

    def spy(problem: AssignProblem, options: SolveOptions) -> object:
        limits.append(options.time_limit)
        return real(problem, options)

    monkeypatch.setattr(bridge, "solve_assignment", spy)
    p = chain_assign(2, 3)
    cores, rep = bridge.refine_ranks(p, (5, 0, 4), SolveOptions(time_limit=10.0))
    assert limits == [lns_budget(p.n_actors, 5.0)] and limits[0] < 5.0
    assert assignment_cost(p, cores) <= assignment_cost(p, (5, 0, 4))
    assert rep.deterministic_time <= 10.0


def test_the_assignment_lns_of_a_large_plan_stops_once_rounds_stop_improving() -> None:
    """Once ``STALL_ROUNDS`` rounds in a row gain nothing the LNS stops, well before its
    budget (it ran the budget out before, or 10,000 rounds of tiny sub-problems: a
    4-core wafer took minutes whatever the time limit)."""
    import re

    from waferflow.mapper.lns import STALL_ROUNDS

    res = solve_assignment(_layered(60, 8, 9), SolveOptions(time_limit=5.0, seed=1))
    lns = next(t for t in res.report.techniques if t.startswith("lns:assignment"))
    got = re.fullmatch(r"lns:assignment\(rounds=(\d+),improved=(\d+)\)", lns)
    assert got is not None
    assert int(got[1]) >= STALL_ROUNDS + int(got[2])
    assert res.report.deterministic_time < 2.5  # of 5 deterministic seconds
