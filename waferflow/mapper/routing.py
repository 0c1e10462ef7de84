"""Routes on the wafer: dimension-order (XY / YX) with shortest detours around faults.

Coordinates are ``(row, col)``; X is the column, Y the row. An ``xy`` route first
moves along the row (changing the column), then along the column. On a torus each
dimension goes the shorter way around (ties go the positive way). On a crossbar every
ordered pair of cores has its own link, so a route is ``[src, dst]``. On a switched
fabric (topology ``tree``) a route climbs to the lowest switch above both ends and
comes down again; switches are the coordinates ``(-level, index)``.

When the dimension-order path touches a dead core or a dead link, the route is a
shortest path over the alive cores and links found by breadth-first search; the
neighbour order is fixed, so the detour is deterministic.

Plain data in, plain data out: the wafer's fields are read directly.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Literal

from waferflow.errors import PlanError
from waferflow.ir.target.wafer import Coord, Topology, Wafer

RouteOrder = Literal["xy", "yx"]


def _check_coord(wafer: Wafer, c: Coord, what: str) -> None:
    if not (0 <= c[0] < wafer.rows and 0 <= c[1] < wafer.cols):
        raise PlanError(f"{what} {c} is outside wafer {wafer.name!r} ({wafer.rows}x{wafer.cols})")


def _steps(a: int, b: int, n: int, wrap: bool) -> list[int]:
    """The positions visited after ``a`` when moving to ``b`` along a ring/line of n."""
    if a == b:
        return []
    if not wrap:
        step = 1 if b > a else -1
        return list(range(a + step, b + step, step))
    fwd = (b - a) % n
    back = (a - b) % n
    step = 1 if fwd <= back else -1
    count = fwd if step == 1 else back
    return [(a + step * (i + 1)) % n for i in range(count)]


def _dor(wafer: Wafer, src: Coord, dst: Coord, col_first: bool) -> list[Coord]:
    _check_coord(wafer, src, "route source")
    _check_coord(wafer, dst, "route destination")
    if wafer.topology is Topology.CROSSBAR:
        return [src] if src == dst else [src, dst]
    wrap = wafer.topology is Topology.TORUS
    path = [src]
    r, c = src
    if col_first:
        path += [(r, cc) for cc in _steps(c, dst[1], wafer.cols, wrap)]
        path += [(rr, dst[1]) for rr in _steps(r, dst[0], wafer.rows, wrap)]
    else:
        path += [(rr, c) for rr in _steps(r, dst[0], wafer.rows, wrap)]
        path += [(dst[0], cc) for cc in _steps(c, dst[1], wafer.cols, wrap)]
    return path


def xy_route(wafer: Wafer, src: Coord, dst: Coord) -> list[Coord]:
    """Dimension-order route, column (X) first; ignores faults."""
    return _dor(wafer, src, dst, col_first=True)


def yx_route(wafer: Wafer, src: Coord, dst: Coord) -> list[Coord]:
    """Dimension-order route, row (Y) first; ignores faults."""
    return _dor(wafer, src, dst, col_first=False)


def link_is_dead(wafer: Wafer, a: Coord, b: Coord) -> bool:
    dl = wafer.dead_links
    return bool(dl) and ((a, b) in dl or (b, a) in dl)


def adjacent(wafer: Wafer, a: Coord, b: Coord) -> bool:
    """Whether the wafer has a (physical) link from ``a`` to ``b``, dead or alive."""
    if a == b:
        return False
    if wafer.topology is Topology.TREE:
        return wafer.is_adjacent(a, b)
    if wafer.topology is Topology.CROSSBAR:
        return True
    dr = abs(a[0] - b[0])
    dc = abs(a[1] - b[1])
    if wafer.topology is Topology.TORUS:
        dr = min(dr, wafer.rows - dr)
        dc = min(dc, wafer.cols - dc)
    return dr + dc == 1


def neighbors(wafer: Wafer, c: Coord) -> list[Coord]:
    """Physically adjacent cores of a mesh or torus, in the fixed order E, W, S, N
    (deduplicated; a torus of width 2 reaches the same neighbour both ways)."""
    r, col = c
    wrap = wafer.topology is Topology.TORUS
    out: list[Coord] = []
    for dr, dc in ((0, 1), (0, -1), (1, 0), (-1, 0)):
        rr, cc = r + dr, col + dc
        if wrap:
            rr %= wafer.rows
            cc %= wafer.cols
        elif not (0 <= rr < wafer.rows and 0 <= cc < wafer.cols):
            continue
        if (rr, cc) != c and (rr, cc) not in out:
            out.append((rr, cc))
    return out


def path_is_healthy(wafer: Wafer, path: list[Coord]) -> bool:
    """No dead core and no dead link on ``path``."""
    dead = wafer.dead_cores
    if dead and any(c in dead for c in path):
        return False
    if wafer.dead_links:
        return not any(link_is_dead(wafer, a, b) for a, b in itertools.pairwise(path))
    return True


def route(wafer: Wafer, src: Coord, dst: Coord, order: str = "xy") -> list[Coord]:
    """The route from ``src`` to ``dst`` (both endpoints included).

    Dimension-order when that path is healthy; otherwise the shortest path over alive
    cores and links (BFS, fixed neighbour order). Raises ``PlanError`` naming the
    endpoints when an endpoint is dead or no path exists.
    """
    if order not in ("xy", "yx"):
        raise PlanError(f"unknown route order {order!r}; use 'xy' or 'yx'")
    if wafer.tree is not None:  # one path in a tree (a fabric without faults)
        for end, what in ((src, "source"), (dst, "destination")):
            if end[0] >= 0:
                _check_coord(wafer, end, f"route {what}")
        return wafer.tree.path(src, dst, wafer.cols)
    path = _dor(wafer, src, dst, col_first=order == "xy")
    if not wafer.dead_cores and not wafer.dead_links:
        return path
    for end, what in ((src, "source"), (dst, "destination")):
        if end in wafer.dead_cores:
            raise PlanError(f"route {src} -> {dst}: the {what} core {end} is dead")
    if path_is_healthy(wafer, path):
        return path
    if wafer.topology is Topology.CROSSBAR:
        raise PlanError(f"no route {src} -> {dst} on crossbar {wafer.name!r}: their link is dead")
    return _bfs(wafer, src, dst)


def _bfs(wafer: Wafer, src: Coord, dst: Coord) -> list[Coord]:
    dead = wafer.dead_cores
    parent: dict[Coord, Coord] = {src: src}
    queue: deque[Coord] = deque([src])
    while queue:
        c = queue.popleft()
        if c == dst:
            break
        for nb in neighbors(wafer, c):
            if nb in parent or nb in dead or link_is_dead(wafer, c, nb):
                continue
            parent[nb] = c
            queue.append(nb)
    if dst not in parent:
        raise PlanError(
            f"no route {src} -> {dst} on wafer {wafer.name!r}: dead cores and links cut "
            "them apart; move one of the endpoints"
        )
    path = [dst]
    while path[-1] != src:
        path.append(parent[path[-1]])
    path.reverse()
    return path


def hops(path: list[Coord]) -> int:
    return len(path) - 1


__all__ = [
    "RouteOrder",
    "adjacent",
    "hops",
    "link_is_dead",
    "neighbors",
    "path_is_healthy",
    "route",
    "xy_route",
    "yx_route",
]
