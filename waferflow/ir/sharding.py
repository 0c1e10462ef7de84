"""Shardings: how a value is spread over the ranks of a parallel plan.

A plan's ranks form a mesh with named axes (``MeshAxis``): ``dp`` (data-parallel
replicas), ``tp`` (tensor-parallel ranks) and ``mb`` (micro-batches: a batch axis
that runs one after another on the same ranks instead of side by side). Along each
axis a value is, independently:

* ``Replicated``: every rank holds all of it;
* ``Split(dim, block)``: rank ``r`` of ``n`` holds the indices ``i`` of dimension
  ``dim`` with ``(i // block) % n == r``. ``block = size / n`` is the usual contiguous
  split; a smaller block is a *periodic* split, e.g. the heads of a fused
  query-key-value projection (every rank holds its heads of q, of k and of v), or
  heads once merged with the batch into one dimension by a view;
* ``Partial``: every rank holds a full-size tensor and the value is their sum
  (a matmul whose contraction dimension is split, a gradient summed over the batch).

A ``Sharding`` lists the non-replicated axes of one value. The functions at the end
move a split through views, transposes and permutes (``map_split_view``,
``map_split_permute``); when a split cannot be expressed after the view they return
None and the caller decides (gather, or refuse the plan).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class MeshAxis(Enum):
    """A named axis of the rank mesh; the value is its spelling in plans and IR."""

    DP = "dp"
    TP = "tp"
    MB = "mb"
    EP = "ep"  # expert parallel: a batch axis whose ranks also split the experts


@dataclass(frozen=True, slots=True)
class Replicated:
    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True, slots=True)
class Split:
    """Dimension ``dim`` is dealt to the ranks in blocks of ``block`` indices."""

    dim: int
    block: int

    def __post_init__(self) -> None:
        if self.dim < 0 or self.block < 1:
            raise ValueError(f"Split needs dim >= 0 and block >= 1, got {self.dim}, {self.block}")

    def period(self, n: int) -> int:
        """Indices after which the rank pattern repeats (``block * n``)."""
        return self.block * n

    def fits(self, size: int, n: int) -> bool:
        """Whether a dimension of ``size`` splits evenly this way over ``n`` ranks."""
        return size % self.period(n) == 0

    def __str__(self) -> str:
        return f"S({self.dim}/{self.block})"


@dataclass(frozen=True, slots=True)
class Partial:
    def __str__(self) -> str:
        return "P"


Placement = Replicated | Split | Partial
REPLICATED = Replicated()
PARTIAL = Partial()


def contiguous(dim: int, size: int, n: int) -> Split:
    """The contiguous split of a dimension of ``size`` over ``n`` ranks."""
    if n < 1 or size % n:
        raise ValueError(f"{n} ranks do not divide a dimension of size {size}")
    return Split(dim, size // n)


@dataclass(frozen=True, slots=True)
class Sharding:
    """Placements of one value along the mesh axes; axes not listed are replicated."""

    placements: tuple[tuple[MeshAxis, Placement], ...] = ()

    @staticmethod
    def of(items: dict[MeshAxis, Placement]) -> Sharding:
        kept = [(a, p) for a, p in items.items() if not isinstance(p, Replicated)]
        return Sharding(tuple(sorted(kept, key=lambda ap: list(MeshAxis).index(ap[0]))))

    def get(self, axis: MeshAxis) -> Placement:
        for a, p in self.placements:
            if a is axis:
                return p
        return REPLICATED

    def with_(self, axis: MeshAxis, placement: Placement) -> Sharding:
        items = dict(self.placements)
        items[axis] = placement
        return Sharding.of(items)

    @property
    def is_replicated(self) -> bool:
        return not self.placements

    def shard_factor(self, degrees: dict[MeshAxis, int]) -> int:
        """By how much a rank's share is smaller than the whole (splits only)."""
        f = 1
        for a, p in self.placements:
            if isinstance(p, Split):
                f *= degrees.get(a, 1)
        return f

    def __str__(self) -> str:
        if not self.placements:
            return "R"
        return "{" + ", ".join(f"{a.value}: {p}" for a, p in self.placements) + "}"


def shard_shape(
    shape: Sequence[int], sharding: Sharding, degrees: dict[MeshAxis, int]
) -> tuple[int, ...]:
    """The shape the largest share holds: each split dimension divided by its axis
    degree, rounded up (a padded split, e.g. a vocabulary that the degree does not
    divide, leaves the last rank a smaller share)."""
    out = list(shape)
    for a, p in sharding.placements:
        if isinstance(p, Split):
            out[p.dim] = -(-out[p.dim] // degrees.get(a, 1))
    return tuple(out)


# --- moving splits through views ------------------------------------------------------


def view_groups(
    src: Sequence[int], dst: Sequence[int]
) -> list[tuple[tuple[int, ...], tuple[int, ...]]] | None:
    """Pair runs of ``src`` dimensions with runs of ``dst`` dimensions of equal
    element count (how a row-major reshape regroups dimensions). None when the
    shapes hold different element counts or contain a zero."""
    if math.prod(src) != math.prod(dst) or 0 in src or 0 in dst:
        return None
    groups: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        ga: list[int] = []
        gb: list[int] = []
        pa = pb = 1
        if i < len(src):
            ga.append(i)
            pa *= src[i]
            i += 1
        if j < len(dst):
            gb.append(j)
            pb *= dst[j]
            j += 1
        while pa != pb:
            if pa < pb:
                if i >= len(src):
                    return None
                ga.append(i)
                pa *= src[i]
                i += 1
            else:
                if j >= len(dst):
                    return None
                gb.append(j)
                pb *= dst[j]
                j += 1
        groups.append((tuple(ga), tuple(gb)))
    return groups


def _strides(shape: Sequence[int], dims: Sequence[int]) -> list[int]:
    """Row-major stride of each of ``dims`` within the group of ``dims``."""
    return [math.prod(shape[e] for e in dims[k + 1 :]) for k in range(len(dims))]


def map_split_view(src: Sequence[int], dst: Sequence[int], split: Split, n: int) -> Split | None:
    """The split of a reshape's result, given its operand's ``split`` over ``n``
    ranks; None when no single-dimension split of the result holds the same data."""
    groups = view_groups(src, dst)
    if groups is None or not 0 <= split.dim < len(src):
        return None
    for ga, gb in groups:
        if split.dim not in ga:
            continue
        big_a = [d for d in ga if src[d] > 1]
        big_b = [d for d in gb if dst[d] > 1]
        if big_a == [split.dim] and len(big_b) == 1:
            return Split(big_b[0], split.block)  # only unit dims change: any split survives
        stride = _strides(src, ga)[ga.index(split.dim)]
        flat = stride * split.block  # block size in the flattened group
        for k, t in zip(gb, _strides(dst, gb), strict=True):
            if flat % t == 0 and (t * dst[k]) % (flat * n) == 0:
                return Split(k, flat // t)
        return None
    return None


def map_split_permute(split: Split, perm: Sequence[int]) -> Split:
    """Result dim ``j`` is operand dim ``perm[j]``."""
    return Split(list(perm).index(split.dim), split.block)


def transpose_perm(rank: int, dim0: int, dim1: int) -> tuple[int, ...]:
    perm = list(range(rank))
    a, b = dim0 % rank, dim1 % rank
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm)


__all__ = [
    "PARTIAL",
    "REPLICATED",
    "MeshAxis",
    "Partial",
    "Placement",
    "Replicated",
    "Sharding",
    "Split",
    "contiguous",
    "map_split_permute",
    "map_split_view",
    "shard_shape",
    "transpose_perm",
    "view_groups",
]
