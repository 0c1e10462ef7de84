"""Structured placement inside regions, without a solver: block tilings of a stage's
rectangle, one-hop ring orders of a block, cutting floorplan rectangles down to the
cores their groups need, and floorplans on a grid of tensor-parallel blocks. Used by
``waferflow.passes.place`` through ``waferflow.mapper.bridge``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from waferflow.errors import PlanError
from waferflow.mapper.problem import (
    FloorplanProblem,
    Grid,
    ObjectiveWeights,
    Rect,
    centre_distance,
)

if TYPE_CHECKING:
    from waferflow.mapper.bridge import RankFlows


def _factor_pairs(n: int) -> list[tuple[int, int]]:
    return [(a, n // a) for a in range(1, n + 1) if n % a == 0]


def block_orders(a: int, b: int) -> list[list[tuple[int, int]]]:
    """Orders of the cells of an ``a x b`` block, for the ranks of a tensor-parallel
    group: row-major (the block is a grid in row-major order, which 2D collectives
    use), snaking, and -- when the block has one -- a Hamiltonian cycle, so that a ring
    in rank order moves one hop per step, closing edge included."""
    orders = [[(i, j) for i in range(a) for j in range(b)]]
    if a > 1:
        orders.append([(i, j if i % 2 == 0 else b - 1 - j) for i in range(a) for j in range(b)])
    if a > 1 and b > 1 and (a * b) % 2 == 0:
        orders.append(_cycle(a, b) if b % 2 == 0 else [(i, j) for j, i in _cycle(b, a)])
    return orders


def _cycle(a: int, b: int) -> list[tuple[int, int]]:
    """A Hamiltonian cycle of an ``a x b`` grid with ``b`` even: down column 0, up and
    down the columns 1..b-1 over rows 1..a-1, back along row 0."""
    out = [(i, 0) for i in range(a)]
    for j in range(1, b):
        rows = range(a - 1, 0, -1) if j % 2 else range(1, a)
        out += [(i, j) for i in rows]
    out += [(0, j) for j in range(b - 1, 0, -1)]
    return out


def _block_tilings(rect: Rect, dp: int, tp: int) -> list[list[tuple[int, int]]]:
    """Every block-grid tiling of ``rect`` (as (row, col) per rank, rank = d * tp + t): a
    tensor-parallel group is an ``a x b`` block (cells in one of ``block_orders``),
    replicas are blocks in row-major or column-major order, anchored at each corner when
    the rectangle is larger than the blocks need."""
    out: list[list[tuple[int, int]]] = []
    for a, b in _factor_pairs(tp):
        if a > rect.height or b > rect.width:
            continue
        q_max, p_max = rect.width // b, rect.height // a
        if p_max * q_max < dp:
            continue
        orders = block_orders(a, b)
        for by_rows in (True, False):
            if by_rows:
                q = min(q_max, dp)
                p = -(-dp // q)
            else:
                p = min(p_max, dp)
                q = -(-dp // p)
            used_h, used_w = p * a, q * b
            anchors = {
                (rect.row + dr, rect.col + dc)
                for dr in (0, rect.height - used_h)
                for dc in (0, rect.width - used_w)
            }
            for order in orders:
                for r0, c0 in sorted(anchors):
                    cells = []
                    for d in range(dp):
                        bi, bj = (d // q, d % q) if by_rows else (d % p, d // p)
                        cells += [(r0 + bi * a + i, c0 + bj * b + j) for i, j in order]
                    out.append(cells)
    return out


def _walk_tilings(rect: Rect, usable: np.ndarray, n: int) -> list[list[tuple[int, int]]]:
    """Row-major and column-major walks (plain and snaking) over the usable cells: the
    fallback when dead cells break every block tiling."""
    rows = range(rect.row, rect.row + rect.height)
    cols = range(rect.col, rect.col + rect.width)
    out = []
    for by_rows in (True, False):
        for snake in (False, True):
            cells = []
            outer, inner = (rows, cols) if by_rows else (cols, rows)
            for k, x in enumerate(outer):
                seq = list(inner)[::-1] if snake and k % 2 else list(inner)
                for y in seq:
                    r, c = (x, y) if by_rows else (y, x)
                    if usable[r, c]:
                        cells.append((r, c))
            if len(cells) >= n:
                out.append(cells[:n])
    return out


def tile_stages(
    rects: Sequence[Rect],
    dp: int,
    tp: int,
    usable: np.ndarray,
    flows: RankFlows | None,
) -> tuple[tuple[int, ...], ...]:
    """The ranks of every stage on the usable cells of its rectangle: block tilings
    (``_block_tilings``), else walks over the usable cells. Stages are tiled in order; each takes the tiling with the least bytes x
    hops to itself and the stages already tiled (the first valid one without flows).
    Raises ``PlanError`` if a rectangle holds fewer usable cells than ranks."""
    ranks = dp * tp
    rows, cols = usable.shape
    pos = np.full(len(rects) * ranks, -1, dtype=np.int64)  # core of every rank, -1 unset
    arr = np.array(flows.pairs, dtype=np.float64) if flows is not None and flows.pairs else None
    taken = np.zeros_like(usable)
    out: list[tuple[int, ...]] = []
    for s, rect in enumerate(rects):
        free = usable & ~taken
        cands = [
            cells
            for cells in _block_tilings(rect, dp, tp) + _walk_tilings(rect, free, ranks)
            if all(0 <= r < rows and 0 <= c < cols and free[r, c] for r, c in cells)
            and len(set(cells)) == ranks
        ]
        if not cands:
            raise PlanError(
                f"stage {s}: rectangle {rect} holds {int(free[rect.row : rect.row + rect.height, rect.col : rect.col + rect.width].sum())} "
                f"usable cores for {ranks} ranks"
            )
        best = cands[0]
        if arr is not None:
            best = min(cands, key=lambda cells: _stage_cost(arr, pos, s, ranks, cells, cols))
        ids = tuple(r * cols + c for r, c in best)
        pos[s * ranks : (s + 1) * ranks] = ids
        for r, c in best:
            taken[r, c] = True
        out.append(ids)
    return tuple(out)


def _stage_cost(
    arr: np.ndarray, pos: np.ndarray, s: int, ranks: int, cells: list[tuple[int, int]], cols: int
) -> float:
    trial = pos.copy()
    trial[s * ranks : (s + 1) * ranks] = [r * cols + c for r, c in cells]
    a, b = arr[:, 0].astype(np.int64), arr[:, 1].astype(np.int64)
    lo, hi = s * ranks, (s + 1) * ranks
    mine = ((a >= lo) & (a < hi)) | ((b >= lo) & (b < hi))
    ok = mine & (trial[a] >= 0) & (trial[b] >= 0)
    pa, pb = trial[a[ok]], trial[b[ok]]
    d = np.abs(pa // cols - pb // cols) + np.abs(pa % cols - pb % cols)
    return float((arr[ok, 2] * d).sum())


def _minimal_subrects(problem: FloorplanProblem, rect: Rect, need: int) -> list[Rect]:
    """Sub-rectangles of ``rect`` with just enough usable cores (``need``): no row or
    column could be dropped."""
    out = []
    for h in range(1, rect.height + 1):
        for w in range(1, rect.width + 1):
            if h * w < need or (h - 1) * w >= need or h * (w - 1) >= need:
                continue
            for r in range(rect.row, rect.row + rect.height - h + 1):
                for c in range(rect.col, rect.col + rect.width - w + 1):
                    sub = Rect(r, c, h, w)
                    if problem.region_cores(sub) >= need:
                        out.append(sub)
    return out


def shrink_rects(problem: FloorplanProblem, rects: Sequence[Rect]) -> tuple[Rect, ...]:
    """Each rectangle cut down to a sub-rectangle of just the cores its group needs
    (the floorplan objective does not charge for spare area, but only the needed cores
    get ranks): group by group, the sub-rectangle with the least traffic and die cost
    to the others, twice over. Dead cores make some shapes need more rows or columns;
    a rectangle with no such sub-rectangle is kept."""
    cur = list(rects)
    w = problem.weights
    grid = problem.grid
    touching: list[list[tuple[int, float]]] = [[] for _ in cur]
    for f in problem.flows:
        if f.src != f.dst and f.bytes > 0:
            touching[f.src].append((f.dst, f.bytes))
            touching[f.dst].append((f.src, f.bytes))

    def cost(g: int, r: Rect) -> float:
        total = 0.0
        for o, byt in touching[g]:
            hops = centre_distance(r, cur[o])
            dies = grid.die_crossings(r.centre_core, cur[o].centre_core)
            total += byt * (w.traffic * hops + w.d2d * dies)
        return total

    for _ in range(2):
        for g, need in enumerate(problem.min_areas):
            subs = _minimal_subrects(problem, cur[g], need)
            if subs:
                cur[g] = min(subs, key=lambda r: (cost(g, r), r.area, r.row, r.col))
    return tuple(cur)


def block_shape(tp: int) -> tuple[int, int]:
    """The most nearly square ``a x b`` block of ``tp`` cores, ``a <= b`` (wider than
    tall: the group's collectives run mostly along rows)."""
    a = max(d for d in range(1, math.isqrt(tp) + 1) if tp % d == 0)
    return a, tp // a


def block_problem(
    problem: FloorplanProblem, usable: np.ndarray, a: int, b: int, per_group: int
) -> FloorplanProblem:
    """``problem`` on a grid of ``a x b`` cells (a cell is usable when all its cores
    are); each group needs ``per_group`` cells. Hops cost ``(a + b) / 2`` times more."""
    rows, cols = usable.shape[0] // a, usable.shape[1] // b
    if rows < 1 or cols < 1:
        raise PlanError(f"the {usable.shape[0]}x{usable.shape[1]} grid has no {a}x{b} cell")
    cells = usable[: rows * a, : cols * b].reshape(rows, a, cols, b).all(axis=(1, 3))
    dead = frozenset((int(r), int(c)) for r, c in zip(*np.nonzero(~cells), strict=True))
    g = problem.grid
    grid = Grid(rows, cols, dead, min(g.die_rows, rows), min(g.die_cols, cols))
    scale = (a + b) / 2
    w = problem.weights
    groups = tuple(replace(grp, mem_bytes=per_group * problem.core_sram) for grp in problem.groups)
    return FloorplanProblem(
        grid,
        groups,
        problem.flows,
        problem.core_flops,
        problem.core_sram,
        ObjectiveWeights(w.balance, w.traffic * scale, w.d2d),
        problem.dead_cores,
    )


__all__ = [
    "block_orders",
    "block_problem",
    "block_shape",
    "shrink_rects",
    "tile_stages",
]
