"""Structured floorplans without a solver: groups in order, packed into horizontal
shelves of vertical strips that snake (left to right, then right to left), so that
consecutive groups stay neighbours.

For a target slowest time ``T`` each group needs ``need_g = ceil(work_g / (T x
core_flops))`` alive cores (and its memory). A dynamic programme over ``(first group of
a shelf, shelf parity)`` finds the fewest rows that hold all groups: for every shelf
height it packs the following groups greedily at their narrowest legal width. Bisection
on ``T`` finds the smallest feasible target; a few looser targets trade balance for
traffic; each layout is then stretched to use the left-over rows and columns. With one
shelf this is the work-proportional strip layout, with more it gets a much finer grain
than a column (the 32-stages-on-64-columns case).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from waferflow.mapper.bounds import slowest_time_bound
from waferflow.mapper.cost import evaluate_floorplan
from waferflow.mapper.problem import DeadCores, FloorplanProblem, Rect

_BISECT_STEPS = 16
_SLACKS = (0.0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.4)

Shelf = tuple[int, int, int, int, int]  # (row, height, first group, count, parity)


class _Bands:
    """Per shelf ``(row, height)``: cumulative usable cores along the columns."""

    def __init__(self, problem: FloorplanProblem) -> None:
        self.p = problem
        g = problem.grid
        self.rows, self.cols = g.rows, g.cols
        self.colpre = np.zeros((g.rows + 1, g.cols), dtype=np.int64)
        self.colpre[1:] = np.cumsum(g.alive_mask, axis=0)
        self.obstacle = problem.dead_cores is DeadCores.OBSTACLE
        self._cache: dict[tuple[int, int, int], tuple[list[int], list[int]]] = {}

    def band(self, row: int, height: int, parity: int) -> tuple[list[int], list[int]]:
        """``(cum, next_blocked)`` in fill direction (parity 1 runs right to left)."""
        key = (row, height, parity)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        cnt = self.colpre[row + height] - self.colpre[row]
        if parity:
            cnt = cnt[::-1]
        blocked = cnt < height if self.obstacle else np.zeros(self.cols, dtype=bool)
        cum = [0, *np.cumsum(np.where(blocked, 0, cnt)).tolist()]
        nxt = [self.cols] * (self.cols + 1)
        for x in range(self.cols - 1, -1, -1):
            nxt[x] = x if blocked[x] else nxt[x + 1]
        self._cache[key] = (cum, nxt)
        return cum, nxt

    def fill(
        self, row: int, height: int, parity: int, needs: list[int], first: int
    ) -> list[tuple[int, int]]:
        """Greedy ``(x, width)`` (in fill direction) for groups ``first, first+1, ...`` until
        the band is full."""
        cum, nxt = self.band(row, height, parity)
        out: list[tuple[int, int]] = []
        x = 0
        for g in range(first, len(needs)):
            while True:
                while x < self.cols and nxt[x] == x:
                    x += 1  # skip blocked columns
                if x >= self.cols:
                    return out
                end = bisect.bisect_left(cum, cum[x] + needs[g])  # narrowest width
                if end > self.cols:
                    return out
                if nxt[x] < end:  # a blocked column inside: start after it
                    x = nxt[x] + 1
                    continue
                out.append((x, end - x))
                x = end
                break
        return out


def _needs(problem: FloorplanProblem, t: float) -> list[int]:
    out = []
    for g, m in zip(problem.groups, problem.min_areas, strict=True):
        c = math.ceil(g.work / (t * problem.core_flops) * (1 - 1e-12)) if g.work > 0 else 1
        out.append(max(m, c, 1))
    return out


def _dp(problem: FloorplanProblem, bands: _Bands, needs: list[int]) -> list[Shelf] | None:
    """Fewest rows for all groups as snaking shelves; the shelves, or None if > rows."""
    n = len(needs)
    rows = bands.rows
    best: dict[tuple[int, int], int] = {(0, 0): 0}
    back: dict[tuple[int, int], tuple[int, int, int]] = {}
    for g in range(n):
        for parity in (0, 1):
            r0 = best.get((g, parity))
            if r0 is None:
                continue
            for h in range(1, rows - r0 + 1):
                placed = bands.fill(r0, h, parity, needs, g)
                for k in range(1, len(placed) + 1):
                    key = (g + k, 1 - parity)
                    if r0 + h < best.get(key, rows + 1):
                        best[key] = r0 + h
                        back[key] = (g, parity, h)
                if len(placed) == n - g:
                    break  # taller shelves only waste rows
    ends = [(best[(n, p)], p) for p in (0, 1) if (n, p) in best]
    if not ends:
        return None
    _, p = min(ends)
    shelves: list[Shelf] = []
    key = (n, p)
    while key != (0, 0):
        g, parity, h = back[key]
        shelves.append((best[(g, parity)], h, g, key[0] - g, parity))
        key = (g, parity)
    return shelves[::-1]


def _rects(
    problem: FloorplanProblem, bands: _Bands, shelves: list[Shelf], needs: list[int]
) -> tuple[Rect, ...] | None:
    cols = problem.grid.cols
    out: list[Rect] = []
    for row, h, first, count, parity in shelves:
        placed = bands.fill(row, h, parity, needs, first)[:count]
        if len(placed) < count:
            return None
        for x, w in placed:
            col = x if parity == 0 else cols - x - w
            out.append(Rect(row, col, h, w))
    return tuple(out)


def _stretch(problem: FloorplanProblem, shelves: list[Shelf], needs: list[int]) -> list[Shelf]:
    """Hand the unused rows to the shelves in proportion to their height."""
    rows = problem.grid.rows
    used = sum(h for _, h, _, _, _ in shelves)
    spare = rows - used
    if spare <= 0:
        return shelves
    heights = [h + spare * h // used for _, h, _, _, _ in shelves]
    i = 0
    while sum(heights) < rows:
        heights[i % len(heights)] += 1
        i += 1
    out, row = [], 0
    for (_, _, first, count, parity), h in zip(shelves, heights, strict=True):
        out.append((row, h, first, count, parity))
        row += h
    return out


def _widen(
    problem: FloorplanProblem, rects: tuple[Rect, ...], shelves: list[Shelf]
) -> tuple[Rect, ...]:
    """Within each shelf, give the spare columns one at a time to the slowest group."""
    cols = problem.grid.cols
    out = list(rects)
    for row, h, first, count, parity in shelves:
        idx = list(range(first, first + count))
        widths = {g: out[g].width for g in idx}
        spare = cols - sum(widths.values())
        for _ in range(max(spare, 0)):
            g = max(idx, key=lambda i: (problem.groups[i].work / (widths[i] * h), -i))
            widths[g] += 1
        x = 0
        for g in idx if parity == 0 else reversed(idx):
            out[g] = Rect(row, x, h, widths[g])
            x += widths[g]
    return tuple(out)


def shelf_layouts(problem: FloorplanProblem) -> list[tuple[Rect, ...]]:
    """Feasible shelf layouts for a range of targets, best objective first."""
    bands = _Bands(problem)
    t_lo = slowest_time_bound(problem)
    if t_lo <= 0:  # no work at all: memory alone decides
        t_lo = 1.0
    t_hi = t_lo
    for _ in range(40):
        if _dp(problem, bands, _needs(problem, t_hi)) is not None:
            break
        t_hi *= 2
    else:
        return []
    if _dp(problem, bands, _needs(problem, t_lo)) is not None:
        t_hi = t_lo
    for _ in range(_BISECT_STEPS):
        mid = math.sqrt(t_lo * t_hi)
        if _dp(problem, bands, _needs(problem, mid)) is not None:
            t_hi = mid
        else:
            t_lo = mid
    layouts: dict[tuple[Rect, ...], float] = {}
    for slack in _SLACKS:
        needs = _needs(problem, t_hi * (1 + slack))
        shelves = _dp(problem, bands, needs)
        if shelves is None:
            continue
        cands = [_rects(problem, bands, shelves, needs)]
        stretched = _stretch(problem, shelves, needs)
        wide = _rects(problem, bands, stretched, needs)
        if wide is not None:
            cands.append(_widen(problem, wide, stretched))
        for rects in cands:
            if rects is None:
                continue
            cost = evaluate_floorplan(problem, rects)
            if cost.feasible:
                layouts[rects] = cost.objective
    return sorted(
        layouts, key=lambda r: (layouts[r], [(x.row, x.col, x.height, x.width) for x in r])
    )
