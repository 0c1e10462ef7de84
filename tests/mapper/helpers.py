"""Small problem builders shared by the mapper tests."""

from __future__ import annotations

from waferflow.mapper.placement import (
    AssignProblem,
    FloorplanProblem,
    Flow,
    Grid,
    Group,
    ObjectiveWeights,
    SolveOptions,
)

SRAM = 1_000_000
FLOPS = 1e9
FAST = SolveOptions(time_limit=2.0, seed=0)


def chain_floorplan(
    rows: int, cols: int, works=(1e9, 1e9, 1e9), flows=(1e8, 2e8), mem: int = 1, dead=frozenset()
) -> FloorplanProblem:
    """Groups in a chain; one second of work per core at 1 GFLOP/s; a byte-hop costs 1e-9."""
    groups = tuple(Group(f"g{i}", w, mem) for i, w in enumerate(works))
    fl = tuple(Flow(i, i + 1, b) for i, b in enumerate(flows))
    return FloorplanProblem(
        Grid(rows, cols, frozenset(dead)), groups, fl, FLOPS, SRAM, ObjectiveWeights(1.0, 1e-9, 0.0)
    )


def chain_assign(rows: int, cols: int, flows=(100.0, 200.0), dead=frozenset()) -> AssignProblem:
    n = len(flows) + 1
    fl = tuple(Flow(i, i + 1, b) for i, b in enumerate(flows))
    return AssignProblem(Grid(rows, cols, frozenset(dead)), n, (1,) * n, fl, SRAM)
