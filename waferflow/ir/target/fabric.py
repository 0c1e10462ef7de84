"""A switched fabric: a tree of switches over the wafer's cores (``topology = "tree"``).

The cores keep their grid (for layouts, pictures and the mapper); their links are
not to each other but to switches. ``levels[0].fanout`` cores (row-major, so the
cores of one level-1 switch are consecutive) hang off each level-1 switch,
``levels[1].fanout`` level-1 switches off each level-2 switch, and so on; the top
level is one switch, so the fan-outs multiply to the number of cores. ``levels[k]``
also gives the bandwidth (per direction) and latency of every link *below* a
level-(k+1) switch: ``levels[0]`` the cores' ports, ``levels[1]`` the links between
level-1 and level-2 switches, ... A fat tree widens its upper links.

Switches are nodes beside the cores: the switch of level k (1-based) and index i has
the coordinate ``(-k, i)`` (never a core's) and the node id ``cores + (switches below
level k) + i``. A route climbs from its source to the lowest common switch and
descends to its destination; its distance is the links it crosses (2 per level
climbed). Switches add and copy streams: the in-network collectives
(``parallel/innet.py``) reduce on the way up and multicast on the way down.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from waferflow.ir.target.parts import Coord, LinkSpec
from waferflow.ir.target.ranges import MAX_CORES, sane


@dataclass(frozen=True, slots=True)
class FabricLevel:
    """One level of switches: how many children each has, and the links to them."""

    fanout: int = field(metadata=sane(2, MAX_CORES, "children", integer=True))
    # bytes/s per direction of each link to a child; seconds per hop
    bandwidth: float = field(metadata=sane(1, 1e30, "B/s"))
    latency: float = field(metadata=sane(0, 1.0, "s"))


@dataclass(frozen=True)
class Tree:
    """The node arithmetic of a tree of ``levels`` over ``cores`` cores."""

    cores: int
    levels: tuple[FabricLevel, ...]

    @property
    def height(self) -> int:
        return len(self.levels)

    def switches_at(self, level: int) -> int:
        """Switches of ``level`` (1-based)."""
        return self.cores // math.prod(lv.fanout for lv in self.levels[:level])

    @property
    def num_switches(self) -> int:
        return sum(self.switches_at(k) for k in range(1, self.height + 1))

    def node_id(self, c: Coord, cols: int) -> int:
        if c[0] >= 0:
            return c[0] * cols + c[1]
        level = -c[0]
        return self.cores + sum(self.switches_at(k) for k in range(1, level)) + c[1]

    def coord_of(self, node: int, cols: int) -> Coord:
        if node < self.cores:
            return divmod(node, cols)
        i = node - self.cores
        for k in range(1, self.height + 1):
            n = self.switches_at(k)
            if i < n:
                return (-k, i)
            i -= n
        raise ValueError(f"node {node} is beyond the fabric's {self.cores + self.num_switches}")

    def parent(self, c: Coord, cols: int) -> Coord | None:
        """The switch above ``c`` (a core or a switch); None for the top switch."""
        if c[0] >= 0:
            return (-1, (c[0] * cols + c[1]) // self.levels[0].fanout)
        level = -c[0]
        if level >= self.height:
            return None
        return (-(level + 1), c[1] // self.levels[level].fanout)

    def up(self, c: Coord, cols: int) -> list[Coord]:
        """``c`` and every switch above it, bottom to top."""
        out = [c]
        while (p := self.parent(out[-1], cols)) is not None:
            out.append(p)
        return out

    def path(self, a: Coord, b: Coord, cols: int) -> list[Coord]:
        """The route from ``a`` to ``b``: up to their lowest common switch, then down."""
        if a == b:
            return [a]
        ua, ub = self.up(a, cols), self.up(b, cols)
        common = set(ub)
        i = next(i for i, x in enumerate(ua) if x in common)
        j = ub.index(ua[i])
        return ua[: i + 1] + list(reversed(ub[:j]))

    def link_spec(self, a: Coord, b: Coord, cols: int) -> LinkSpec | None:
        """The link between adjacent ``a`` and ``b`` (either direction), else None."""
        for child, top in ((a, b), (b, a)):
            if self.parent(child, cols) == top:
                lv = self.levels[-top[0] - 1]
                return LinkSpec(lv.bandwidth, lv.latency)
        return None

    def children(self, s: Coord, cols: int) -> list[Coord]:
        level, i = -s[0], s[1]
        f = self.levels[level - 1].fanout
        if level == 1:
            return [divmod(i * f + j, cols) for j in range(f)]
        return [(-(level - 1), i * f + j) for j in range(f)]

    def edges(self, cols: int) -> Iterator[tuple[Coord, Coord]]:
        """Every (child, parent) link, cores first, then level by level."""
        for core in range(self.cores):
            c = divmod(core, cols)
            p = self.parent(c, cols)
            assert p is not None
            yield c, p
        for k in range(1, self.height):
            for i in range(self.switches_at(k)):
                p = self.parent((-k, i), cols)
                assert p is not None
                yield (-k, i), p

    def hops(self, a: Coord, b: Coord, cols: int) -> int:
        return len(self.path(a, b, cols)) - 1


__all__ = ["FabricLevel", "Tree"]
