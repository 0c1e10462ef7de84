"""Islands: the groups of alive cores that routes can join, and the view a plan may use.

Dead cores and dead links can cut a wafer (or one of its coarse views) into islands
with no route between them. A plan spread over two islands would need messages that
cannot travel, and routing would only find out after placement. ``connected_view``
runs before anything is placed:

* one island: the wafer itself;
* a largest island holding all but at most ``STRANDED_MAX`` of the capacity (a few
  cores walled in by dead neighbours, common with many random faults): the wafer with
  the stranded cores marked dead, and a note saying how much capacity that left out;
* otherwise: a ``PlanError`` naming the islands (size, rows and columns) and what
  to change.

``islands`` finds them in about ``O(rows + runs + faults)`` for a mesh or a torus: a
row splits into runs of alive cores joined by alive links (one run per row on a
healthy wafer), and runs of neighbouring rows join where an alive link crosses their
overlap. A crossbar joins every pair of cores except the dead links.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from waferflow.errors import PlanError
from waferflow.ir.target.parts import Coord, Topology
from waferflow.ir.target.wafer import Wafer

__all__ = ["STRANDED_MAX", "Island", "connected_view", "islands"]

STRANDED_MAX = 0.05  # capacity outside the largest island that is left out, not refused
_SHOWN = 4  # islands named in a message
_LISTED = 8  # stranded cores listed in a note


@dataclass(frozen=True)
class Island:
    """One island: its alive nodes, their capacity (in full nodes) and bounding box."""

    nodes: int
    capacity: float
    rows: tuple[int, int]  # first, last
    cols: tuple[int, int]
    cells: tuple[Coord, ...] = ()  # filled in for all but the largest island

    def describe(self, wafer: Wafer) -> str:
        what = ("core" if wafer.coarsen_factor == 1 else "node") + ("s" if self.nodes > 1 else "")
        span = (
            f"core {list(self.cells[0])}"
            if self.nodes == 1 and self.cells
            else f"rows {self.rows[0]}-{self.rows[1]}, cols {self.cols[0]}-{self.cols[1]}"
        )
        return f"{self.nodes} {what} ({span})"


class _UnionFind:
    def __init__(self) -> None:
        self.parent: list[int] = []

    def add(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def islands(w: Wafer) -> list[Island]:
    """The islands of ``w``'s alive nodes, largest capacity first (ties: the one with
    the first node in row-major order); all but the first list their cells."""
    groups = _crossbar_groups(w) if w.topology is Topology.CROSSBAR else _grid_groups(w)
    partial = dict(w.partial_cores)
    out = []
    for cells_of in groups:
        cells = [c for run in cells_of for c in run]
        cap = sum(w.capacity(c) if c in partial else 1.0 for c in cells) if partial else len(cells)
        rows = [c[0] for c in cells]
        cols = [c[1] for c in cells]
        out.append((cap, min(cells), cells, (min(rows), max(rows)), (min(cols), max(cols))))
    out.sort(key=lambda t: (-t[0], t[1]))
    return [
        Island(len(cells), cap, rows, cols, tuple(sorted(cells)) if i else ())
        for i, (cap, _, cells, rows, cols) in enumerate(out)
    ]


def _grid_groups(w: Wafer) -> list[list[list[Coord]]]:
    """Mesh / torus: runs of each row, joined by union-find; groups of runs as cells."""
    rows, cols = w.rows, w.cols
    torus = w.topology is Topology.TORUS
    dead_in_row: dict[int, list[int]] = defaultdict(list)
    for r, c in w.dead_cores:
        dead_in_row[r].append(c)
    cut_in_row: dict[int, set[int]] = defaultdict(set)  # c: the link c -- c+1 is dead
    cut_down: dict[int, list[int]] = defaultdict(list)  # r: c where r -- r+1 is dead
    wrap_cut_row: set[int] = set()  # r: the wrap link (r, cols-1) -- (r, 0) is dead
    wrap_cut_col: list[int] = []  # c: the wrap link (rows-1, c) -- (0, c) is dead
    for a, b in w.dead_links:
        if a[0] == b[0]:
            if abs(a[1] - b[1]) == 1:
                cut_in_row[a[0]].add(min(a[1], b[1]))
            else:
                wrap_cut_row.add(a[0])
        elif abs(a[0] - b[0]) == 1:
            cut_down[min(a[0], b[0])].append(a[1])
        else:
            wrap_cut_col.append(a[1])
    for v in cut_down.values():
        v.sort()
    wrap_cut_col.sort()

    uf = _UnionFind()
    runs_of: list[list[tuple[int, int, int]]] = []  # per row: (first col, last col, id)
    for r in range(rows):
        runs = [(a, b, uf.add()) for a, b in _row_runs(cols, dead_in_row.get(r, ()), cut_in_row.get(r, ()))]  # fmt: skip
        if torus and cols >= 3 and len(runs) > 1 and r not in wrap_cut_row:
            first, last = runs[0], runs[-1]
            if first[0] == 0 and last[1] == cols - 1:
                uf.union(first[2], last[2])
        runs_of.append(runs)
    for r in range(rows - 1):
        _join_rows(runs_of[r], runs_of[r + 1], cut_down.get(r, []), uf)
    if torus and rows >= 3:
        _join_rows(runs_of[rows - 1], runs_of[0], wrap_cut_col, uf)

    groups: dict[int, list[list[Coord]]] = defaultdict(list)
    for r, runs in enumerate(runs_of):
        for first, last, rid in runs:
            groups[uf.find(rid)].append([(r, c) for c in range(first, last + 1)])
    return list(groups.values())


def _row_runs(cols: int, dead: Iterable[int], cuts: Iterable[int]) -> list[tuple[int, int]]:
    """Maximal column ranges of one row's alive cores joined by alive links (``cuts``:
    columns c whose link to c + 1 is dead)."""
    points = sorted([(d, 0) for d in dead] + [(c, 1) for c in cuts])
    runs: list[tuple[int, int]] = []
    start = 0
    for x, is_cut in points:
        end = x if is_cut else x - 1  # a cut ends the run at x, a dead core before it
        if start <= end:
            runs.append((start, end))
        start = max(start, x + 1)
    if start <= cols - 1:
        runs.append((start, cols - 1))
    return runs


def _join_rows(
    upper: list[tuple[int, int, int]],
    lower: list[tuple[int, int, int]],
    cut: list[int],
    uf: _UnionFind,
) -> None:
    """Join runs of two neighbouring rows that overlap in a column whose vertical link
    is alive (``cut``: sorted columns whose link is dead)."""
    i = j = 0
    while i < len(upper) and j < len(lower):
        a0, a1, ra = upper[i]
        b0, b1, rb = lower[j]
        lo, hi = max(a0, b0), min(a1, b1)
        if lo <= hi:
            dead = bisect.bisect_right(cut, hi) - bisect.bisect_left(cut, lo)
            if dead < hi - lo + 1:
                uf.union(ra, rb)
        if a1 < b1:
            i += 1
        else:
            j += 1


def _crossbar_groups(w: Wafer) -> list[list[list[Coord]]]:
    """A crossbar links every pair; a core not touched by a dead link reaches every
    other, so only when every alive core is touched is a search needed."""
    alive = [w.coord(i) for i in w.alive_cores()]
    if not w.dead_links:
        return [[alive]]
    touched = {c for link in w.dead_links for c in link} - w.dead_cores
    if len(touched) < len(alive):
        return [[alive]]
    uf = _UnionFind()
    index = {c: uf.add() for c in alive}
    for i, a in enumerate(alive):
        for b in alive[i + 1 :]:
            if (min(a, b), max(a, b)) not in w.dead_links:
                uf.union(index[a], index[b])
    groups: dict[int, list[Coord]] = defaultdict(list)
    for c in alive:
        groups[uf.find(index[c])].append(c)
    return [[cells] for cells in groups.values()]


def connected_view(w: Wafer, context: str = "") -> tuple[Wafer, tuple[str, ...]]:
    """``w`` ready for a plan: itself when its alive nodes are connected; with the
    stranded ones marked dead (and a note) when they hold at most ``STRANDED_MAX`` of
    its capacity; else a ``PlanError`` naming the islands. ``context`` says where
    the view comes from, for the message (``"span=3 view of mesh16x16"``)."""
    if not w.dead_cores and not w.dead_links:
        return w, ()
    found = islands(w)
    if len(found) <= 1:
        return w, ()
    total = sum(i.capacity for i in found)
    rest = total - found[0].capacity
    name = context or f"wafer {w.name!r}"
    what = "cores" if w.coarsen_factor == 1 else "nodes"
    if rest <= STRANDED_MAX * total:
        stranded = [c for i in found[1:] for c in i.cells]
        shown = ", ".join(str(list(c)) for c in stranded[:_LISTED])
        more = f" and {len(stranded) - _LISTED} more" if len(stranded) > _LISTED else ""
        one = what[:-1] if len(stranded) == 1 else what
        note = (
            f"{name}: left out {len(stranded)} alive {one} cut off from the rest by dead "
            f"cores and links ({100 * rest / total:.2g}% of its capacity): {shown}{more}"
        )
        dead = w.dead_cores | frozenset(stranded)
        partial = tuple((c, n) for c, n in w.partial_cores if c not in dead)
        return dataclasses.replace(w, dead_cores=dead, partial_cores=partial), (note,)
    listed = "; ".join(f"island {k + 1}: {i.describe(w)}" for k, i in enumerate(found[:_SHOWN]))
    more = f"; and {len(found) - _SHOWN} smaller" if len(found) > _SHOWN else ""
    view_hint = (
        " or plan on a finer view (a smaller --coarsen or span), whose nodes do not straddle "
        "the cut"
        if w.coarsen_factor > 1
        else ""
    )
    raise PlanError(
        f"{name} is cut into {len(found)} islands of alive {what} that no route joins "
        f"(dead cores and links wall them off): {listed}{more}. A plan runs on connected "
        f"{what}: revive links across the cut (faults.dead_links){view_hint}, or mark the "
        "islands you do not want dead (faults.dead_cores) to plan on the largest one"
    )
