"""Derived wafers: the k x k coarse view and random dead cores.

The coarse view (``Wafer.coarsen(k)``) lets whole-wafer plans simulate quickly: each
block of k x k cores becomes one node. What scales, and why:

* **ragged grids**: k need not divide the grid. The view has ceil(rows / k) x
  ceil(cols / k) nodes; those of the last row (column) cover only the fine rows
  (columns) left over, ``fine_rows - (rows - 1) * k``. The fine grid's size is kept
  (``Wafer.fine_rows`` / ``fine_cols``, 0 when k divides it) and every ragged node is
  listed in ``partial_cores`` with the fine cores it holds, so capacity, peak and SRAM
  scale exactly as for a partly dead node.
* **compute, SRAM, SRAM bandwidth** (and a core model's port bandwidth and op-group
  rates): summed over the block, i.e. times k**2 per
  nominal node and times (alive fine cores) / k**2 of that on a partial node. On a
  healthy wafer the totals are preserved exactly, ragged or not.
* **link bandwidth**: the cut between two neighbouring blocks is crossed by k fine
  links, so a coarse link carries k times the fine bandwidth; a cut along a ragged
  row (column) is crossed by fewer, and ``Wafer.link_spec`` / ``links`` scale its
  bandwidth to the fine links that cross it.
* **link latency**: a message between neighbouring blocks travels k fine hops (centre
  to centre), so a coarse hop costs k times the fine per-hop latency. Keeping the
  fine latency would make a coarse route k times too fast on latency-bound traffic.
  A hop into a ragged node is shorter ((k + edge) / 2 fine hops); it keeps k, an
  upper bound that keeps every coarse hop alike.
* **die-to-die link**: a coarse hop that crosses a die boundary travels k - 1 on-die
  hops and one die-to-die hop: latency (k - 1) * link.latency + d2d.latency, and
  bandwidth k * d2d.bandwidth (k d2d links cross the cut). A cut is straight, so its
  fine links all cross a die boundary or none does. When the die-to-die figures
  differ from the on-die ones, die boundaries must fall between coarse nodes (k
  divides the die size along every axis cut into several dies). When they are the
  same (or the wafer has no die-to-die spec) dies change no timing, and an axis
  whose die boundaries fall inside coarse nodes is left uncut in the view (one die
  along it); this is exact, not an approximation. E.g. ``wse2`` (dies of 84 x 108
  cores, same figures) coarsened by 16 is one die of 63 x 48 nodes.
* **faults**: a coarse node is dead only when all its fine cores are dead. A node
  with fewer alive fine cores than k**2 keeps that fraction of the compute, SRAM and
  SRAM bandwidth (``Wafer.partial_cores`` stores the alive fine-core count, exactly).
  A node whose alive cores are not all joined by links inside its block (a dead wall
  or a cut of dead links runs through it: ``split_nodes``) keeps only its largest
  connected part; the rest counts as dead, so the view never joins cores the wafer
  cannot (a cut through a column of nodes stays a cut). A coarse link is dead when no
  usable fine link crosses its cut between the parts the two nodes keep; a cut that
  is only partly usable keeps its full bandwidth (an approximation: the bandwidth
  counts the fine links crossing the cut, dead or alive).
* **name**: the view of ``wse2`` by 16 is named ``wse2@16x``, so a plan made for one
  view is not run on another (``verify_plan`` compares the names when either is a view).
* **composition**: ``coarsen_factor`` multiplies, and coarsening by a then by b is
  coarsening by a * b, ragged grids included: ceil(ceil(n / a) / b) = ceil(n / ab),
  the blocks nest (node i of the second view covers fine rows i*ab .. min((i+1)*ab, n)
  either way), and alive counts, dead links, dies and link figures follow (figures up
  to float rounding) as long as no node is split; a split node drops the same cores
  either way only when its parts do not rejoin in the bigger block, so with splits the
  two views may differ (both are faithful). ``coarsen(1)`` is the wafer itself. A crossbar has no geometry
  to coarsen: ``coarsen(k > 1)`` on one is an error.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
from typing import TYPE_CHECKING

from waferflow.errors import ConfigError
from waferflow.ir.target.parts import Coord, CoreModel, LinkSpec, Topology
from waferflow.ir.target.validate import divisors

if TYPE_CHECKING:
    from waferflow.ir.target.wafer import Wafer


def coarsen(w: Wafer, k: int) -> Wafer:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"coarsen: k must be an integer >= 1, got {k!r}")
    if k == 1:
        return w
    if w.topology in (Topology.CROSSBAR, Topology.TREE):
        raise ConfigError(
            f"coarsen(k={k}): {w.name} is a {w.topology.value}; blocks of its cores have no "
            "geometry, so it has no coarse view (use k=1)"
        )
    die_rows, die_cols, d2d = _coarse_dies(w, k)
    factor = w.coarsen_factor * k
    fine_rows, fine_cols = w.fine_shape
    rows, cols = -(-w.rows // k), -(-w.cols // k)
    kk = k * k
    coarse = dataclasses.replace(
        w,
        name=view_name(w.name, factor),
        rows=rows,
        cols=cols,
        peak_flops=tuple((d, p * kk) for d, p in w.peak_flops),
        sram_bytes=w.sram_bytes * kk,
        sram_bandwidth=w.sram_bandwidth * kk,
        link=LinkSpec(w.link.bandwidth * k, w.link.latency * k),
        core=_coarse_core(w, kk),
        die_rows=die_rows,
        die_cols=die_cols,
        d2d_link=d2d,
        dead_cores=frozenset(),
        dead_links=frozenset(),
        partial_cores=(),
        coarsen_factor=factor,
        fine_rows=fine_rows,  # normalised to 0 where k divides
        fine_cols=fine_cols,
    )
    kept = split_nodes(w, k)
    dead, partial = _coarse_nodes(w, coarse, k, kept)
    coarse = dataclasses.replace(coarse, dead_cores=dead, partial_cores=partial)
    dead_links = _dead_coarse_links(w, coarse, k, kept)
    return dataclasses.replace(coarse, dead_links=dead_links) if dead_links else coarse


def _coarse_core(w: Wafer, kk: int) -> CoreModel | None:
    """A node's core model: its k x k cores' ports and rates side by side."""
    c = w.core
    if c is None:
        return None
    return dataclasses.replace(
        c, port_bandwidth=c.port_bandwidth * kk, rates=tuple((g, r * kk) for g, r in c.rates)
    )


def view_name(name: str, factor: int) -> str:
    """``wse2`` coarsened 16x is ``wse2@16x``; views of views name the product."""
    return f"{name.split('@')[0]}@{factor}x"


def _coarse_dies(w: Wafer, k: int) -> tuple[int, int, LinkSpec | None]:
    """The view's die grid and die-to-die spec (see the module docstring)."""
    dh, dw = w.die_shape
    cut_rows = w.die_rows > 1 and dh % k != 0  # die boundaries inside coarse nodes
    cut_cols = w.die_cols > 1 and dw % k != 0
    same = w.d2d_link is None or w.d2d_link == w.link
    if (cut_rows or cut_cols) and not same:
        sizes = [n for n, many in ((dh, w.die_rows > 1), (dw, w.die_cols > 1)) if many]
        raise ConfigError(
            f"coarsen(k={k}): {w.name}'s dies are {dh} x {dw} cores and its die-to-die link "
            "differs from its on-die link, so die boundaries must fall between coarse nodes: "
            f"k must divide {' and '.join(map(str, sizes))}; "
            f"choose one of {divisors(math.gcd(*sizes))}"
        )
    die_rows = 1 if cut_rows else w.die_rows
    die_cols = 1 if cut_cols else w.die_cols
    if w.d2d_link is None:
        return die_rows, die_cols, None
    if same:  # stays equal to the on-die spec exactly, so later views may cut dies too
        return die_rows, die_cols, LinkSpec(w.link.bandwidth * k, w.link.latency * k)
    d2d = LinkSpec(w.d2d_link.bandwidth * k, w.link.latency * (k - 1) + w.d2d_link.latency)
    return die_rows, die_cols, d2d


def _alive_fine(w: Wafer, c: Coord, partial: dict[Coord, int]) -> int:
    """Alive fine cores in cell ``c`` of ``w`` (1 on a fine wafer)."""
    if c in w.dead_cores:
        return 0
    if c in partial:
        return partial[c]
    h, wd = w.node_shape(c)
    return h * wd


def _block(w: Wafer, node: Coord, k: int) -> list[Coord]:
    r0, c0 = node[0] * k, node[1] * k
    return [(r, c) for r in range(r0, min(r0 + k, w.rows)) for c in range(c0, min(c0 + k, w.cols))]


def split_nodes(w: Wafer, k: int) -> dict[Coord, frozenset[Coord]]:
    """Nodes of the k x k view whose alive cells are not all joined by links inside the
    block (a dead wall or a cut of dead links runs through it), each with the cells
    it keeps: its largest connected part (most alive fine cores; ties: the part with
    the first cell). The rest of such a block counts as dead in the view, so that the
    view never joins what the wafer does not."""
    blocks: set[Coord] = {(c[0] // k, c[1] // k) for c in w.dead_cores}
    for a, b in w.dead_links:
        if (a[0] // k, a[1] // k) == (b[0] // k, b[1] // k):
            blocks.add((a[0] // k, a[1] // k))
    if not blocks:
        return {}
    partial = dict(w.partial_cores)
    dead, dead_links = w.dead_cores, w.dead_links
    torus = w.topology is Topology.TORUS
    out: dict[Coord, frozenset[Coord]] = {}
    for node in sorted(blocks):
        cells = [c for c in _block(w, node, k) if c not in dead]
        inside = set(cells)
        parts: list[tuple[int, Coord, list[Coord]]] = []
        seen: set[Coord] = set()
        for start in cells:
            if start in seen:
                continue
            seen.add(start)
            part, i = [start], 0
            while i < len(part):
                x = part[i]
                i += 1
                r, c = x
                near = w.neighbors(x) if torus else ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
                for y in near:
                    if y in inside and y not in seen:
                        if dead_links and (min(x, y), max(x, y)) in dead_links:
                            continue
                        seen.add(y)
                        part.append(y)
            alive = sum(_alive_fine(w, c, partial) for c in part) if partial else len(part)
            parts.append((-alive, min(part), part))
        if len(parts) > 1:
            out[node] = frozenset(min(parts)[2])
    return out


def _coarse_nodes(
    w: Wafer, coarse: Wafer, k: int, kept: dict[Coord, frozenset[Coord]]
) -> tuple[frozenset[Coord], tuple[tuple[Coord, int], ...]]:
    """Dead nodes and partial nodes (alive fine cores < factor**2) of the view.

    Only nodes that lose fine cores (from ``w``'s dead and partial nodes, or the parts
    a split node leaves out, ``kept``) or lie on a ragged edge can differ from a full
    healthy node, so only those are visited.
    """
    lost: dict[Coord, int] = {}  # fine cores missing from each touched coarse node
    for c in w.dead_cores:
        node = (c[0] // k, c[1] // k)
        h, wd = w.node_shape(c)
        lost[node] = lost.get(node, 0) + h * wd
    for c, alive in w.partial_cores:
        node = (c[0] // k, c[1] // k)
        h, wd = w.node_shape(c)
        lost[node] = lost.get(node, 0) + h * wd - alive
    partial = dict(w.partial_cores)
    for node, part in kept.items():
        left_out = [c for c in _block(w, node, k) if c not in part]
        lost[node] = lost.get(node, 0) + sum(_alive_fine(w, c, partial) for c in left_out)
    nodes = set(lost)
    if coarse.fine_rows:
        nodes |= {(coarse.rows - 1, c) for c in range(coarse.cols)}
    if coarse.fine_cols:
        nodes |= {(r, coarse.cols - 1) for r in range(coarse.rows)}
    full = coarse.coarsen_factor**2
    dead: set[Coord] = set()
    partial: list[tuple[Coord, int]] = []
    for node in nodes:
        h, wd = coarse.node_shape(node)
        alive = h * wd - lost.get(node, 0)
        if alive == 0:
            dead.add(node)
        elif alive < full:
            partial.append((node, alive))
    return frozenset(dead), tuple(sorted(partial))


def _dead_coarse_links(
    w: Wafer, coarse: Wafer, k: int, kept: dict[Coord, frozenset[Coord]]
) -> frozenset[tuple[Coord, Coord]]:
    """Coarse links with no usable fine link across their cut between the parts the
    two nodes keep, between alive nodes."""
    if not w.dead_cores and not w.dead_links:
        return frozenset()
    # A cut with no usable crossing link has a fault on it: a dead link crossing it, or
    # a dead core or a split in one of its two blocks. So only the cuts of those blocks
    # are checked.
    candidates: set[tuple[Coord, Coord]] = set()
    for node in {(c[0] // k, c[1] // k) for c in w.dead_cores} | kept.keys():
        for nb in coarse.neighbors(node):
            candidates.add((min(node, nb), max(node, nb)))
    for a, b in w.dead_links:
        na, nb = (a[0] // k, a[1] // k), (b[0] // k, b[1] // k)
        if na != nb:
            candidates.add((min(na, nb), max(na, nb)))

    def usable(x: Coord, y: Coord, a: Coord, b: Coord) -> bool:
        return w.has_link(x, y) and x in kept.get(a, (x,)) and y in kept.get(b, (y,))

    out = set()
    for a, b in candidates:
        if coarse.is_dead(a) or coarse.is_dead(b):
            continue  # the node's links are gone anyway
        if not any(usable(x, y, a, b) for x, y in _crossing(w, a, b, k)):
            out.add((a, b))
    return frozenset(out)


def _crossing(w: Wafer, a: Coord, b: Coord, k: int) -> list[tuple[Coord, Coord]]:
    """Links of ``w`` (x in block a, y in block b) that cross the cut between two
    adjacent coarse nodes: k of them (fewer on a ragged edge), or 2k on a torus ring
    of two coarse nodes."""
    pairs: list[tuple[Coord, Coord]] = []
    r0, c0 = a[0] * k, a[1] * k
    r1, c1 = min(r0 + k, w.rows), min(c0 + k, w.cols)  # block a is rows r0..r1-1
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        if dr:  # the block's top (dr=-1) or bottom (dr=1) row
            edge = [(r0 if dr < 0 else r1 - 1, c) for c in range(c0, c1)]
        else:  # its left or right column
            edge = [(r, c0 if dc < 0 else c1 - 1) for r in range(r0, r1)]
        for x in edge:
            y = (x[0] + dr, x[1] + dc)
            if w.topology is Topology.TORUS:
                y = (y[0] % w.rows, y[1] % w.cols)
            if w.in_grid(y) and (y[0] // k, y[1] // k) == b and w.is_adjacent(x, y):
                pairs.append((x, y))
    return pairs


def with_dead_cores(w: Wafer, fraction: float, seed: int) -> Wafer:
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 <= fraction < 1:
        raise ConfigError(
            f"with_dead_cores: the fraction (faults.random_dead_fraction) must be in [0, 1), got {fraction!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(
            f"with_dead_cores: the seed (faults.seed) must be an integer, got {seed!r}"
        )
    n = w.num_cores
    target = min(round(fraction * n), n - 1)
    need = target - len(w.dead_cores)
    if need <= 0:
        return w
    dead_ids = sorted(w.core_id(c) for c in w.dead_cores)
    ranks = random.Random(seed).sample(range(n - len(dead_ids)), need)
    new = {w.coord(_nth_alive(r, dead_ids)) for r in ranks}
    partial = tuple((c, a) for c, a in w.partial_cores if c not in new)
    return dataclasses.replace(w, dead_cores=w.dead_cores | new, partial_cores=partial)


def _nth_alive(rank: int, dead_ids: list[int]) -> int:
    """Id of the alive core of the given rank, skipping the sorted ``dead_ids``."""
    skipped = bisect.bisect_right(dead_ids, rank)
    while True:
        again = bisect.bisect_right(dead_ids, rank + skipped)
        if again == skipped:
            return rank + skipped
        skipped = again
