"""Derived wafers: the k x k coarse view and random dead cores.

The coarse view (``Wafer.coarsen(k)``) lets whole-wafer plans simulate quickly: each
block of k x k cores becomes one node. What scales, and why:

* **compute, SRAM, SRAM bandwidth**: summed over the block, i.e. times k**2. On a
  healthy wafer the totals are preserved exactly.
* **link bandwidth**: the cut between two neighbouring blocks is crossed by k fine
  links, so a coarse link carries k times the fine bandwidth.
* **link latency**: a message between neighbouring blocks travels k fine hops (centre
  to centre), so a coarse hop costs k times the fine per-hop latency. Keeping the
  fine latency would make a coarse route k times too fast on latency-bound traffic.
* **die-to-die link**: a coarse hop that crosses a die boundary travels k - 1 on-die
  hops and one die-to-die hop: latency (k - 1) * link.latency + d2d.latency, and
  bandwidth k * d2d.bandwidth (k d2d links cross the cut). Die boundaries must fall
  between coarse nodes, so k must divide the die size.
* **faults**: a coarse node is dead only when all its fine cores are dead. A partly
  dead node keeps the alive fraction of its compute, SRAM and SRAM bandwidth
  (``Wafer.partial_cores`` stores the alive fine-core count, exactly, so coarsening
  twice equals coarsening once by the product). A coarse link is dead only when no
  usable fine link crosses its cut; a cut that is only partly usable keeps its full
  bandwidth (an approximation: the simulator sees no per-link bandwidth override).
  Fine links and dead links inside a block are not represented.
* ``coarsen_factor`` multiplies; ``coarsen(1)`` is the wafer itself. A crossbar has
  no geometry to coarsen: ``coarsen(k > 1)`` on one is an error.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random
from typing import TYPE_CHECKING

from waferflow.errors import ConfigError
from waferflow.ir.target.parts import Coord, LinkSpec, Topology
from waferflow.ir.target.validate import divisors

if TYPE_CHECKING:
    from waferflow.ir.target.wafer import Wafer


def _common_divisors(*ns: int) -> list[int]:
    return divisors(math.gcd(*ns))


def coarsen(w: Wafer, k: int) -> Wafer:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"coarsen: k must be an integer >= 1, got {k!r}")
    if k == 1:
        return w
    if w.topology is Topology.CROSSBAR:
        raise ConfigError(
            f"coarsen(k={k}): {w.name} is a crossbar; blocks of a crossbar have no geometry, "
            "so it has no coarse view (use k=1)"
        )
    if w.rows % k or w.cols % k:
        raise ConfigError(
            f"coarsen(k={k}): k must divide the {w.rows} x {w.cols} grid of {w.name}; "
            f"choose one of {_common_divisors(w.rows, w.cols)}"
        )
    dh, dw = w.die_shape
    if dh % k or dw % k:
        raise ConfigError(
            f"coarsen(k={k}): {w.name}'s dies are {dh} x {dw} cores and die boundaries must "
            f"fall between coarse nodes, so k must divide {dh} and {dw}; "
            f"choose one of {_common_divisors(dh, dw)}"
        )
    kk = k * k
    full_old = w.coarsen_factor**2
    full_new = (w.coarsen_factor * k) ** 2
    partial_old = dict(w.partial_cores)

    # Alive fine-core deficit per coarse node, from the (sparse) faults only.
    deficit: dict[Coord, int] = {}
    for c in w.dead_cores:
        node = (c[0] // k, c[1] // k)
        deficit[node] = deficit.get(node, 0) + full_old
    for c, alive in partial_old.items():
        node = (c[0] // k, c[1] // k)
        deficit[node] = deficit.get(node, 0) + full_old - alive
    dead = frozenset(n for n, d in deficit.items() if d == full_new)
    partial = tuple(sorted((n, full_new - d) for n, d in deficit.items() if 0 < d < full_new))

    link = LinkSpec(w.link.bandwidth * k, w.link.latency * k)
    d2d = None
    if w.d2d_link is not None:
        d2d = LinkSpec(w.d2d_link.bandwidth * k, w.link.latency * (k - 1) + w.d2d_link.latency)
    rows, cols = w.rows // k, w.cols // k
    coarse = dataclasses.replace(
        w,
        rows=rows,
        cols=cols,
        peak_flops=tuple((d, p * kk) for d, p in w.peak_flops),
        sram_bytes=w.sram_bytes * kk,
        sram_bandwidth=w.sram_bandwidth * kk,
        link=link,
        d2d_link=d2d,
        dead_cores=dead,
        dead_links=frozenset(),
        partial_cores=partial,
        coarsen_factor=w.coarsen_factor * k,
    )
    dead_links = _dead_coarse_links(w, coarse, k)
    return dataclasses.replace(coarse, dead_links=dead_links) if dead_links else coarse


def _dead_coarse_links(w: Wafer, coarse: Wafer, k: int) -> frozenset[tuple[Coord, Coord]]:
    """Coarse links with no usable fine link across their cut, between alive nodes."""
    if not w.dead_cores and not w.dead_links:
        return frozenset()
    # A cut with no usable crossing link has a fault on it: a dead link crossing it or a
    # dead core in one of its two blocks. So only the cuts of those blocks are checked.
    candidates: set[tuple[Coord, Coord]] = set()
    for c in w.dead_cores:
        node = (c[0] // k, c[1] // k)
        for nb in coarse.neighbors(node):
            candidates.add((min(node, nb), max(node, nb)))
    for a, b in w.dead_links:
        na, nb = (a[0] // k, a[1] // k), (b[0] // k, b[1] // k)
        if na != nb:
            candidates.add((min(na, nb), max(na, nb)))
    out = set()
    for a, b in candidates:
        if coarse.is_dead(a) or coarse.is_dead(b):
            continue  # the node's links are gone anyway
        if not any(w.has_link(x, y) for x, y in _crossing(w, a, b, k)):
            out.add((a, b))
    return frozenset(out)


def _crossing(w: Wafer, a: Coord, b: Coord, k: int) -> list[tuple[Coord, Coord]]:
    """Fine links (x in block a, y in block b) that cross the cut between two adjacent
    coarse nodes: k of them, or 2k on a torus ring of two coarse nodes."""
    pairs: list[tuple[Coord, Coord]] = []
    r0, c0 = a[0] * k, a[1] * k
    for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
        for i in range(k):
            if dr:  # the block's top (dr=-1) or bottom (dr=1) row
                x = (r0 if dr < 0 else r0 + k - 1, c0 + i)
            else:  # its left or right column
                x = (r0 + i, c0 if dc < 0 else c0 + k - 1)
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
