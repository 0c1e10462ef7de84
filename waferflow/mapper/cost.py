"""Exact (floating-point) objective and feasibility of floorplans and assignments.

The CP-SAT models work on scaled integers; every result is re-scored here, so the
numbers printed beside baselines and bounds all come from one definition.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.mapper.problem import (
    AssignProblem,
    DeadCores,
    FloorplanProblem,
    Rect,
    centre_distance,
)


@dataclass(frozen=True)
class FloorplanCost:
    """The objective and its three terms (before weighting), plus what is wrong, if anything."""

    objective: float
    slowest_time: float  # seconds: max over groups of work / (cores x core_flops)
    traffic: float  # sum of bytes x centre-to-centre hops
    d2d: float  # sum of bytes x die crossings between centres
    violations: tuple[str, ...] = ()

    @property
    def feasible(self) -> bool:
        return not self.violations


def _centre_die_crossings(problem: FloorplanProblem, a: Rect, b: Rect) -> int:
    return problem.grid.die_crossings(a.centre_core, b.centre_core)


def evaluate_floorplan(problem: FloorplanProblem, rects: tuple[Rect, ...]) -> FloorplanCost:
    """Score ``rects`` (one per group, in group order) and list any violated constraint."""
    grid = problem.grid
    bad: list[str] = []
    if len(rects) != len(problem.groups):
        raise ValueError(f"{len(rects)} rectangles for {len(problem.groups)} groups")
    slowest = 0.0
    for g, r, need in zip(problem.groups, rects, problem.min_areas, strict=True):
        if (
            r.height < 1
            or r.width < 1
            or r.row < 0
            or r.col < 0
            or r.row + r.height > grid.rows
            or r.col + r.width > grid.cols
        ):
            bad.append(f"group {g.name!r}: rectangle {r} leaves the {grid.rows}x{grid.cols} grid")
            continue
        alive = grid.alive_in(r.row, r.col, r.height, r.width)
        if problem.dead_cores is DeadCores.OBSTACLE and alive < r.area:
            bad.append(f"group {g.name!r}: rectangle {r} contains {r.area - alive} dead core(s)")
        if alive < need:
            bad.append(
                f"group {g.name!r}: {alive} alive cores hold {alive * problem.core_sram} bytes, "
                f"needs {g.mem_bytes}"
            )
        if alive == 0:
            slowest = float("inf") if g.work > 0 else slowest
        else:
            slowest = max(slowest, g.work / (alive * problem.core_flops))
    for i in range(len(rects)):
        for j in range(i + 1, len(rects)):
            if rects[i].overlaps(rects[j]):
                bad.append(
                    f"groups {problem.groups[i].name!r} and {problem.groups[j].name!r} overlap"
                )
    traffic = 0.0
    d2d = 0.0
    for f in problem.flows:
        if f.src == f.dst:
            continue
        a, b = rects[f.src], rects[f.dst]
        traffic += f.bytes * centre_distance(a, b)
        d2d += f.bytes * _centre_die_crossings(problem, a, b)
    w = problem.weights
    objective = w.balance * slowest + w.traffic * traffic + w.d2d * d2d
    return FloorplanCost(objective, slowest, traffic, d2d, tuple(bad))


def assignment_cost(problem: AssignProblem, core_of_actor: tuple[int, ...]) -> float:
    """``sum(bytes x Manhattan hops)`` over the flows."""
    cols = problem.grid.cols
    total = 0.0
    for (a, b), byt in problem.pair_bytes.items():
        ra, ca = divmod(core_of_actor[a], cols)
        rb, cb = divmod(core_of_actor[b], cols)
        total += byt * (abs(ra - rb) + abs(ca - cb))
    return total


def assignment_violations(
    problem: AssignProblem, core_of_actor: tuple[int, ...]
) -> tuple[str, ...]:
    """Every broken rule of an assignment: dead or disallowed cores, crowding, memory."""
    bad: list[str] = []
    names = problem.actor_names
    if len(core_of_actor) != problem.n_actors:
        return (f"{len(core_of_actor)} cores for {problem.n_actors} actors",)
    alive = set(problem.grid.alive_cores)
    count: dict[int, int] = {}
    mem: dict[int, int] = {}
    for a, c in enumerate(core_of_actor):
        if c not in alive:
            bad.append(f"actor {names[a]!r} on dead or missing core {c}")
        elif problem.allowed is not None and c not in problem.allowed[a]:
            bad.append(f"actor {names[a]!r} outside its region (core {c})")
        count[c] = count.get(c, 0) + 1
        mem[c] = mem.get(c, 0) + problem.actor_mem[a]
    for c in sorted(count):
        if count[c] > problem.max_actors_per_core:
            bad.append(f"core {c} holds {count[c]} actors (max {problem.max_actors_per_core})")
        if mem[c] > problem.core_sram:
            bad.append(f"core {c} holds {mem[c]} bytes (SRAM {problem.core_sram})")
    return tuple(bad)
