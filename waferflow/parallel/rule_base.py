"""What a sharding rule sees and returns, for one op along one mesh axis.

A rule gets the op and the current placement of each operand along the axis
(``UNDECIDED`` for a parameter whose split is not chosen yet) and returns:

* ``need``: per operand, the placement the op wants (None: as it is). The engine
  turns a difference into a decision (undecided parameter), a free local slice
  (replicated to split) or a conversion (a collective: partial to replicated is an
  all-reduce, split to replicated an all-gather, ...);
* ``out``: the placement of each result;
* ``divided``: whether the op's work is cut ``n`` ways along the axis (its output is
  split, or it contracts a split dimension);
* ``stats_dim``: a softmax over a split dimension keeps its split and exchanges
  per-row statistics (a small all-reduce after the op);
* ``note``: a fallback was taken (the op is replicated: correct, slower);
* ``error``: the plan cannot shard this op as asked (the engine raises PlanError).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from waferflow.ir.graph import Op, Value
from waferflow.ir.sharding import REPLICATED, MeshAxis, Partial, Placement, Replicated, Split
from waferflow.parallel.plan_spec import LayerMode


@dataclass(frozen=True, slots=True)
class Undecided:
    """A parameter (or state buffer) whose split along an axis is not chosen yet."""

    def __str__(self) -> str:
        return "?"


UNDECIDED = Undecided()
AnyPlacement = Placement | Undecided


@dataclass
class RuleOut:
    need: list[AnyPlacement | None]
    out: list[Placement]
    divided: bool = False
    stats_dim: int | None = None
    note: str = ""
    error: str = ""


# chooses the block of a column split of a matmul result: (op, result dim) -> block
BlockChooser = Callable[[Op, int], int]


@dataclass(frozen=True)
class AxisCtx:
    """The axis a rule runs on: its degree, whether it splits the batch, the layer
    mode of the op (per-layer patterns) and the global batch size."""

    axis: MeshAxis
    n: int
    batch: int
    mode: LayerMode | None = None
    choose_block: BlockChooser | None = field(default=None, repr=False)

    @property
    def is_batch(self) -> bool:
        return self.axis in (MeshAxis.DP, MeshAxis.EP, MeshAxis.MB)


def shape(v: Value) -> tuple[int, ...]:
    return v.type.shape


def is_r(p: AnyPlacement | None) -> bool:
    return isinstance(p, Replicated)


def is_u(p: AnyPlacement | None) -> bool:
    return isinstance(p, Undecided)


def is_p(p: AnyPlacement | None) -> bool:
    return isinstance(p, Partial)


def is_s(p: AnyPlacement | None) -> bool:
    return isinstance(p, Split)


def norm_dim(d: int, rank: int) -> int:
    return d % rank if rank else 0


def dims_attr(op: Op, key: str, rank: int) -> tuple[int, ...] | None:
    """An int or list-of-int attribute as normalised dims; None if absent."""
    v = op.attrs.get(key)
    if v is None:
        return None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return (norm_dim(v, rank),)
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
        return tuple(norm_dim(int(x), rank) for x in v)  # type: ignore[arg-type]
    return None


def replicate_all(op: Op, ins: Sequence[AnyPlacement], note: str = "") -> RuleOut:
    """The safe fallback: every operand replicated, every result replicated."""
    need: list[AnyPlacement | None] = [None if is_r(p) else REPLICATED for p in ins]
    return RuleOut(need, [REPLICATED] * len(op.results), False, note=note)


def keep(ins: Sequence[AnyPlacement]) -> list[AnyPlacement | None]:
    """Operands as they are (undecided ones become replicated)."""
    return [REPLICATED if is_u(p) else None for p in ins]


def fits(split: Split, size: int, n: int) -> bool:
    return size % (split.block * n) == 0


__all__ = [
    "UNDECIDED",
    "AnyPlacement",
    "AxisCtx",
    "BlockChooser",
    "RuleOut",
    "Undecided",
    "dims_attr",
    "fits",
    "is_p",
    "is_r",
    "is_s",
    "is_u",
    "keep",
    "norm_dim",
    "replicate_all",
    "shape",
]
