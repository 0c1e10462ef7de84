"""What every placement result carries: status, objective, bound, gap, effort, techniques,
and a small text picture of the placement."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from waferflow.mapper.cost import FloorplanCost
from waferflow.mapper.problem import Grid, Rect

# symbols for groups in a floorplan view; beyond these, groups repeat symbols
_SYMBOLS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_MAX_DRAWN = 128  # larger grids are summarised, not drawn


class Status(Enum):
    OPTIMAL = "OPTIMAL"  # the objective meets the reported bound (up to the gap limit)
    FEASIBLE = "FEASIBLE"  # a valid placement, optimality not proven
    BASELINE = "BASELINE"  # produced by a simple heuristic, no search


@dataclass(frozen=True)
class SolveReport:
    """How a placement was found and how good it is known to be.

    ``best_bound`` is a lower bound on the optimum of the problem as posed (the best of
    the solver's bound and the analytic bounds); ``gap = (objective - best_bound) /
    objective``. ``wall_time`` is the only field that differs between identical runs;
    :meth:`to_dict` leaves it out unless asked.
    """

    status: Status
    objective: float
    best_bound: float
    gap: float
    wall_time: float
    deterministic_time: float
    techniques: tuple[str, ...]
    view: str

    def to_dict(self, *, include_wall_time: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status.value,
            "objective": self.objective,
            "best_bound": self.best_bound,
            "gap": self.gap,
            "deterministic_time": round(self.deterministic_time, 9),
            "techniques": list(self.techniques),
            "view": self.view,
        }
        if include_wall_time:
            d["wall_time"] = self.wall_time
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def summary(self) -> str:
        return (
            f"{self.status.value} objective={self.objective:.6g} bound={self.best_bound:.6g} "
            f"gap={100 * self.gap:.2f}% det_time={self.deterministic_time:.2f}s "
            f"wall={self.wall_time:.2f}s techniques={','.join(self.techniques)}"
        )


def relative_gap(objective: float, bound: float) -> float:
    if objective <= 0:
        return 0.0
    return max(0.0, (objective - bound) / objective)


def floorplan_view(grid: Grid, rects: tuple[Rect, ...]) -> str:
    """One character per core: the group's symbol, ``#`` dead, ``.`` unused."""
    if grid.rows > _MAX_DRAWN or grid.cols > _MAX_DRAWN:
        return f"({grid.rows}x{grid.cols} grid, {len(rects)} regions: too large to draw)"
    cells = [["." for _ in range(grid.cols)] for _ in range(grid.rows)]
    for i, r in enumerate(rects):
        sym = _SYMBOLS[i % len(_SYMBOLS)]
        for y, x in r.cores():
            cells[y][x] = sym
    for y, x in grid.dead:
        cells[y][x] = "#"
    return "\n".join("".join(row) for row in cells)


def assignment_view(grid: Grid, core_of_actor: tuple[int, ...]) -> str:
    """Actor numbers on their cores (the lowest, with ``+`` when a core holds several),
    ``#`` dead, ``.`` empty."""
    if grid.rows > _MAX_DRAWN or grid.cols > _MAX_DRAWN:
        return f"({grid.rows}x{grid.cols} grid, {len(core_of_actor)} actors: too large to draw)"
    width = len(str(max(len(core_of_actor) - 1, 0))) + 1
    first: dict[int, int] = {}
    many: set[int] = set()
    for a, c in enumerate(core_of_actor):
        if c in first:
            many.add(c)
        else:
            first[c] = a
    lines = []
    for y in range(grid.rows):
        cells = []
        for x in range(grid.cols):
            c = y * grid.cols + x
            if (y, x) in grid.dead:
                cells.append("#".rjust(width))
            elif c in first:
                cells.append((str(first[c]) + ("+" if c in many else "")).rjust(width))
            else:
                cells.append(".".rjust(width))
        lines.append(" ".join(cells))
    return "\n".join(lines)


@dataclass(frozen=True)
class FloorplanResult:
    """One rectangle per group (in group order), its exact cost, and how it was found."""

    rects: tuple[Rect, ...]
    cost: FloorplanCost
    report: SolveReport

    @property
    def objective(self) -> float:
        return self.cost.objective

    def to_dict(self) -> dict[str, Any]:
        return {
            "rects": [[r.row, r.col, r.height, r.width] for r in self.rects],
            "objective": self.cost.objective,
            "slowest_time": self.cost.slowest_time,
            "traffic": self.cost.traffic,
            "d2d": self.cost.d2d,
            "report": self.report.to_dict(),
        }

    def to_json(self) -> str:
        """Byte-identical for identical inputs and seed (wall time left out)."""
        return json.dumps(self.to_dict(), sort_keys=True)


@dataclass(frozen=True)
class Assignment:
    """The core of every actor, ``sum(bytes x hops)``, and how it was found."""

    core_of_actor: tuple[int, ...]
    cost: float
    report: SolveReport

    def to_dict(self) -> dict[str, Any]:
        return {
            "core_of_actor": list(self.core_of_actor),
            "cost": self.cost,
            "report": self.report.to_dict(),
        }

    def to_json(self) -> str:
        """Byte-identical for identical inputs and seed (wall time left out)."""
        return json.dumps(self.to_dict(), sort_keys=True)
