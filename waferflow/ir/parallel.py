"""Parallel annotations: what the parallel passes decide, kept in the IR.

Three levels, each typed and frozen, each printed and parsed with the graph
(docs/ir.md, "Parallel annotations"):

* the graph's ``GraphParallel``: the plan (as its text), the wafer view it runs on,
  the mesh degrees (``dp``, ``tp``, ``mb``), the number of stages and of ranks per
  stage, and how far the plan has been lowered (``ParallelLevel``);
* each value's ``Sharding`` (``ir/sharding.py``, on ``Value.sharding``): per mesh axis
  replicated, ``split(dim)`` or ``partial`` (a sum over the axis's ranks);
* each op's ``OpParallel``: its pipeline stage, its micro-batch mode (``MbMode``), the
  placements it needs of its operands, the axes dividing its work, the softmax
  statistics it exchanges, and, once placed, the core of each of its ranks (``region``).

The rules shared by the verifier and the parallel passes also live here: which
operand differences cost nothing (``needs_conversion``), which operands an op reads
only for their shape (``reads_value``), and how an op is named in messages
(``op_label``). This module imports only ``ir``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from waferflow.ir.opkind import VIEWS, OpKind
from waferflow.ir.sharding import MeshAxis, Partial, Placement, Replicated, Sharding, Split

if TYPE_CHECKING:  # graph.py imports this module for the annotation types
    from waferflow.ir.graph import Op, Value

K = OpKind

# ops whose result is a rearranged view of their first operand: a re-placement of a
# source seen through them is a reload, not communication
VIEWISH = frozenset(
    {K.VIEW, K.SQUEEZE, K.UNSQUEEZE, K.TRANSPOSE, K.PERMUTE, K.EXPAND, K.ALIAS,
     K.DETACH, K.CLONE}
)  # fmt: skip

# the order axes print in and chain in
AXES = (MeshAxis.MB, MeshAxis.DP, MeshAxis.EP, MeshAxis.TP)
RANK_AXES = (MeshAxis.DP, MeshAxis.EP, MeshAxis.TP)  # the axes ranks lie along (mb: in time)


class MbMode(Enum):
    """How often an op runs in a step with micro-batches."""

    PER_MB = "per_mb"  # once per micro-batch: it touches batch data
    EARLY = "early"  # once, before the micro-batches: batch-independent
    LATE = "late"  # once, after the last micro-batch: it needs all of them


class ParallelLevel(Enum):
    """How far a parallel plan has been lowered into the graph."""

    SHARDED = "sharded"  # shardings and stages chosen; conversions still implicit
    COLLECTIVES = "collectives"  # every conversion is an explicit collective op


@dataclass(frozen=True, slots=True)
class GraphParallel:
    """The plan a graph is sharded for. ``plan`` is the plan's text (parsed by
    ``waferflow.parallel``); the degrees repeat what the IR itself needs to check
    shardings. ``ranks`` is the ranks of one stage (``dp x tp``, or ``ways`` for a
    per-layer pattern, whose dp and tp share the ranks). ``reshard``: a value crossing
    from one stage to another is resharded by the transfers themselves (a per-layer
    plan, whose stages have ranks of their own), so no collective converts it."""

    plan: str
    wafer: str
    dp: int = 1
    tp: int = 1
    mb: int = 1
    pp: int = 1
    ranks: int = 1
    level: ParallelLevel = ParallelLevel.SHARDED
    zero: int = 0  # ZeRO stage: 3 keeps parameters only as their dp shard (``stored_shard``)
    ep: int = 1  # expert-parallel ranks (a batch axis that also splits the experts)
    reshard: bool = False

    def degree(self, axis: MeshAxis) -> int:
        return {MeshAxis.DP: self.dp, MeshAxis.TP: self.tp, MeshAxis.MB: self.mb,
                MeshAxis.EP: self.ep}[axis]  # fmt: skip

    def degrees(self) -> dict[MeshAxis, int]:
        return {a: self.degree(a) for a in MeshAxis}

    @property
    def axes(self) -> tuple[MeshAxis, ...]:
        """The axes of degree > 1, in ``AXES`` order."""
        return tuple(a for a in AXES if self.degree(a) > 1)


@dataclass(frozen=True, slots=True)
class OpParallel:
    """How one op runs in a parallel plan.

    ``inputs[i]`` is the placement the op needs of operand ``i`` (it differs from the
    operand's own sharding where a conversion happens); ``divided`` the axes along
    which its work is cut; ``stats`` the (axis, dim) of a softmax over a split
    dimension, whose per-row statistics are exchanged; ``region[r]`` the core (a
    row-major id on the plan's wafer view) of rank ``r`` once placed, else empty.
    """

    stage: int
    mode: MbMode = MbMode.EARLY
    inputs: tuple[Sharding, ...] = ()
    divided: tuple[MeshAxis, ...] = ()
    stats: tuple[tuple[MeshAxis, int], ...] = ()
    region: tuple[int, ...] = ()


def sorted_axes(axes: Iterable[MeshAxis]) -> tuple[MeshAxis, ...]:
    have = set(axes)
    return tuple(a for a in AXES if a in have)


def reads_value(op: Op, index: int) -> bool:
    """Whether ``op`` reads operand ``index``'s values, not only its shape: a FILL
    (``ones_like(loss)``, the backward seed; ``zeros_like``) takes its first operand
    for the shape alone."""
    return not (op.kind is K.FILL and index == 0)


def from_source(v: Value) -> bool:
    """Whether ``v`` is a source (input, weight, buffer) seen through views."""
    while v.producer is not None and v.producer.kind in VIEWISH and v.producer.operands:
        v = v.producer.operands[0]
    return v.producer is not None and v.producer.is_source


def root_value(v: Value) -> Value:
    """Follow views (``VIEWS``, which never copy) back to the value holding the data."""
    while v.producer is not None and v.producer.kind in VIEWS and v.producer.operands:
        v = v.producer.operands[0]
    return v


def stored_shard(v: Value, axis: MeshAxis, have: Placement) -> bool:
    """Whether ``v`` is a parameter or optimizer state (seen through views) kept only
    as its shard along ``dp`` (ZeRO): unlike an input, which each rank loads as it
    needs it, such a shard is all a rank has, so re-placing it is communication."""
    if axis is not MeshAxis.DP or not isinstance(have, Split):
        return False
    while v.producer is not None and v.producer.kind in VIEWISH and v.producer.operands:
        v = v.producer.operands[0]
    return v.producer is not None and v.producer.kind in (K.PARAM, K.BUFFER)


def needs_conversion(v: Value, axis: MeshAxis, have: Placement, need: Placement) -> bool:
    """Whether an operand placed ``have`` along ``axis`` needs communication (or, along
    ``mb``, accumulation) to become ``need``. Free: the same placement; cutting a
    replicated value (a local slice); re-placing a source that is not partial along
    a rank axis (inputs and weights are loaded as each rank needs them), unless it is
    a ZeRO shard (``stored_shard``)."""
    if have == need:
        return False
    if isinstance(have, Replicated) and isinstance(need, Split):
        return False
    if stored_shard(v, axis, have):
        return True
    return not (axis is not MeshAxis.MB and from_source(v) and not isinstance(have, Partial))


def updates_param(v: Value) -> bool:
    """Whether ``v`` is a parameter's new value: made by optimizer ops (phase ``opt``)
    that read the parameter itself (an optimizer's new moments read only gradients
    and state). ZeRO-1 / 2 gather these over ``dp`` at the end of the step."""
    from waferflow.ir.graph import Phase  # graph.py imports this module

    stack, seen = [v], set()
    while stack:
        x = stack.pop()
        op = x.producer
        if op is None or id(x) in seen:
            continue
        seen.add(id(x))
        if op.kind is K.PARAM:
            return True
        if op.phase is Phase.OPT or op.kind in VIEWISH:
            stack.extend(op.operands)
    return False


def op_label(op: Op) -> str:
    """An op in the user's terms: its results, kind, module path and ATen op, as in
    ``%12 = matmul in fc2 (aten.mm.default)``."""
    names = ", ".join(f"%{r.name}" for r in op.results)
    head = f"{names} = {op.kind.value}" if names else op.kind.value
    where = f" in {op.prov.module}" if op.prov.module else " at the top level"
    aten = f" ({op.prov.aten})" if op.prov.aten else ""
    return f"{head}{where}{aten}"


def placement_word(p: Placement) -> str:
    """A placement in messages: ``replicated``, ``partial``, ``split(0/4)``."""
    if isinstance(p, Split):
        return f"split({p.dim}/{p.block})"
    return "partial" if isinstance(p, Partial) else "replicated"


__all__ = [
    "AXES",
    "RANK_AXES",
    "VIEWISH",
    "GraphParallel",
    "MbMode",
    "OpParallel",
    "ParallelLevel",
    "from_source",
    "needs_conversion",
    "op_label",
    "placement_word",
    "reads_value",
    "root_value",
    "sorted_axes",
    "stored_shard",
    "updates_param",
]
