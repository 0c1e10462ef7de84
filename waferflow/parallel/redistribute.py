"""Resharding between two stages of a per-layer plan, as point-to-point pieces.

In a per-layer plan (``cut=layer``) neighbouring stages can hold a value differently:
a data-parallel layer's output is split by batch over its ranks, the next layer may
need it whole (tensor-parallel: every part sees the whole batch), on one rank (the
seed's pool), or split another way; a tensor-parallel layer's input gradient is a
partial sum over its parts. The stages' ranks are different cores and may even be
different in number, so no collective spans them. Instead each rank of the
consuming stage receives exactly the pieces it needs from the ranks that hold them:

* a rank holds, along each mesh axis, what its placement says (``Split``: its blocks of
  the dimension, ``Replicated``: all, ``Partial``: all of a partial sum); ranks that
  differ only along axes where the value is replicated hold the same data, and the
  consumer reads from one of them (the one with its own rank number, if any);
* a piece is the overlap of what a holder has with what the consumer needs; pieces
  of partial sums covering the same region are added by the consumer;
* one holder's same piece going to several consumers is a broadcast (the seed's
  ``bcast`` out mode), different pieces to different consumers a split.

Regions are tracked per dimension as lists of index intervals, so block-cyclic
splits (heads of a fused projection) are exact too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from waferflow.ir.sharding import MeshAxis, Partial, Replicated, Sharding, Split
from waferflow.parallel.plan_spec import Mesh

Intervals = tuple[tuple[int, int], ...]
Region = tuple[Intervals, ...]  # per dimension
_AXES = (MeshAxis.DP, MeshAxis.TP)


@dataclass(frozen=True, slots=True)
class Piece:
    """What one holder rank sends one consumer rank."""

    src_rank: int
    elements: int
    region: Region
    partial: bool  # a partial sum: the consumer adds the pieces of the same region


def _split_intervals(size: int, block: int, n: int, index: int) -> Intervals:
    out = []
    for start in range(index * block, size, block * n):
        out.append((start, min(start + block, size)))
    return tuple(out)


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def region_of(
    shape: Sequence[int], sh: Sharding, mesh: Mesh, rank: int
) -> tuple[Region, frozenset[MeshAxis]]:
    """The indices ``rank`` holds of a value placed ``sh``, and the axes along which
    what it holds is a partial sum."""
    dims: list[Intervals] = [((0, size),) for size in shape]
    partial = set()
    for axis in _AXES:
        p = sh.get(axis)
        n = mesh.degree(axis)
        if isinstance(p, Split) and n > 1:
            cut = _split_intervals(shape[p.dim], p.block, n, mesh.index(rank, axis))
            dims[p.dim] = _intersect(dims[p.dim], cut)
        elif isinstance(p, Partial) and n > 1:
            partial.add(axis)
    return tuple(dims), frozenset(partial)


def _count(region: Region) -> int:
    return math.prod(sum(hi - lo for lo, hi in ivs) for ivs in region)


def pieces(
    shape: Sequence[int],
    held: Sharding,
    need: Sharding,
    mesh: Mesh,
    holders: Sequence[int],
    rank: int,
) -> list[Piece]:
    """The pieces consumer ``rank`` receives of a value placed ``held`` on the ranks
    ``holders`` of the producing stage, when it needs it placed ``need`` (see the
    module docstring). Replicated holders are read round robin by rank number."""
    want, want_partial = region_of(shape, need, mesh, rank)
    classes: dict[tuple[tuple[MeshAxis, int], ...], list[int]] = {}
    for r in holders:
        key = tuple(
            (a, mesh.index(r, a))
            for a in _AXES
            if mesh.degree(a) > 1 and not isinstance(held.get(a), Replicated)
        )
        classes.setdefault(key, []).append(r)
    out = []
    for key, members in classes.items():
        # a consumer that itself wants a partial sum along an axis takes its own share
        if any(a in want_partial and i != mesh.index(rank, a) for a, i in key):
            continue
        pick = next((r for r in members if r == rank % len(holders)), members[0])
        have, partial = region_of(shape, held, mesh, pick)
        inter = tuple(_intersect(x, y) for x, y in zip(have, want, strict=True))
        n = _count(inter)
        if n:
            out.append(Piece(pick, n, inter, bool(partial - want_partial)))
    return out


__all__ = ["Piece", "Region", "pieces", "region_of"]
