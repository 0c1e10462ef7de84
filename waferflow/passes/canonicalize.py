"""canonicalize: remove ops that do nothing, forwarding their uses to an operand.

Removed:
- VIEW and EXPAND whose result type equals the operand's type (a VIEW with a
  ``stride`` attr, i.e. ``as_strided``, only when the strides are the contiguous
  ones and ``storage_offset`` is 0 or absent);
- TRANSPOSE (attrs ``dim0``, ``dim1``) and PERMUTE (attr ``dims`` or ``perm``) that
  keep every non-unit dimension in place, and any of them on a tensor of rank <= 1;
- ALIAS and DETACH (same type as the operand);
- CLONE and COPY whose source has the result's type (COPY's source is its last
  operand: ``copy(dst, src)``);
- ASSERT and METADATA (bookkeeping), unless ``drop-bookkeeping=false``; a used
  result is forwarded to the first operand of the same type;
- GETITEM with an int ``index`` attr whose operands come from one multi-result op:
  its uses go to that op's result ``index`` (when the types agree).

One forward sweep in op order suffices: an op's operands are rewritten before the
op is looked at, and forwarding never changes a type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph, Op, Value
from waferflow.ir.opkind import BOOKKEEPING, OpKind
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass

K = OpKind


@register_pass
@dataclass(frozen=True)
class Canonicalize(Pass):
    """Remove no-op views, copies and bookkeeping ops; resolve static getitems."""

    name: ClassVar[str] = "canonicalize"
    writes: ClassVar[str] = "the ops (no-op views, copies and bookkeeping removed)"
    drop_bookkeeping: bool = option(True, "remove ASSERT and METADATA ops")

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        subst: dict[Value, Value] = {}
        dead: list[Op] = []
        used = {id(v) for op in graph.ops for v in op.operands} | {id(v) for v in graph.outputs}
        for op in graph.ops:
            if any(v in subst for v in op.operands):
                op.operands = tuple(subst.get(v, v) for v in op.operands)
            forwards = self._forwards(ctx, op, used)
            if forwards is None:
                continue
            for old, new in forwards:
                subst[old] = new  # `new` is already rewritten: no chains to follow
            dead.append(op)
        if subst:
            graph.outputs = [subst.get(v, v) for v in graph.outputs]
        graph.erase_ops(dead)
        return graph

    def _forwards(
        self, ctx: PassContext, op: Op, used: set[int]
    ) -> list[tuple[Value, Value]] | None:
        """(result, replacement) pairs if ``op`` can go, else None."""
        kind = op.kind
        if kind in BOOKKEEPING:
            return self._bookkeeping(ctx, op, used) if self.drop_bookkeeping else None
        if len(op.results) != 1 or not op.operands:
            return None
        res = op.result
        if kind is K.GETITEM:
            target = _getitem_target(op)
            return [(res, target)] if target is not None else None
        src = op.operands[-1] if kind is K.COPY else op.operands[0]
        if src.type != res.type:
            return None
        if kind is K.VIEW and not _is_plain_reshape(op):
            return None
        if kind in (K.VIEW, K.EXPAND, K.ALIAS, K.DETACH, K.CLONE, K.COPY):
            return [(res, src)]
        if kind in (K.TRANSPOSE, K.PERMUTE) and _is_identity_permutation(op, src):
            return [(res, src)]
        return None

    def _bookkeeping(
        self, ctx: PassContext, op: Op, used: set[int]
    ) -> list[tuple[Value, Value]] | None:
        pairs: list[tuple[Value, Value]] = []
        for res in op.results:
            if id(res) not in used:
                continue
            same = next((v for v in op.operands if v.type == res.type), None)
            if same is None:
                ctx.warn(
                    self.name,
                    f"kept {op.kind.value} %{res.name}: its result is used and no "
                    f"operand has its type {res.type} to stand in for it",
                )
                return None
            pairs.append((res, same))
        return pairs


def _is_plain_reshape(op: Op) -> bool:
    """False for a strided view (``as_strided``: attrs ``stride`` / ``storage_offset``)
    that may reorder or offset the data while keeping the type."""
    offset = op.attrs.get("storage_offset")
    if offset not in (None, 0):
        return False
    stride = op.attrs.get("stride")
    if stride is None:
        return True
    shape = op.result.type.shape
    contiguous = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        contiguous[i] = contiguous[i + 1] * shape[i + 1]
    return stride == tuple(contiguous)


def _getitem_target(op: Op) -> Value | None:
    index = op.attrs.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        return None
    producers = {id(v.producer) for v in op.operands}
    producer = op.operands[0].producer
    if producer is None or len(producers) != 1 or len(producer.results) < 2:
        return None
    if not 0 <= index < len(producer.results):
        return None
    target = producer.results[index]
    return target if target.type == op.result.type else None


def _permutation(op: Op, rank: int) -> tuple[int, ...] | None:
    """The op's permutation of ``range(rank)``, or None when the attrs do not say."""
    if op.kind is K.TRANSPOSE:
        d0, d1 = op.attrs.get("dim0"), op.attrs.get("dim1")
        if not (isinstance(d0, int) and isinstance(d1, int)):
            return None
        if not (-rank <= d0 < rank and -rank <= d1 < rank):
            return None
        perm = list(range(rank))
        a, b = d0 % rank, d1 % rank
        perm[a], perm[b] = perm[b], perm[a]
        return tuple(perm)
    dims = op.attrs.get("dims", op.attrs.get("perm"))
    if not isinstance(dims, tuple) or len(dims) != rank:
        return None
    if not all(isinstance(d, int) and -rank <= d < rank for d in dims):
        return None
    perm_t = tuple(int(d) % rank for d in dims)  # type: ignore[arg-type]
    return perm_t if sorted(perm_t) == list(range(rank)) else None


def _is_identity_permutation(op: Op, src: Value) -> bool:
    """True when the data layout does not change: dims of size 1 may move freely,
    the others must stay in their order."""
    rank = src.type.rank
    if rank <= 1:
        return True
    perm = _permutation(op, rank)
    if perm is None:
        return False
    moved = [d for d in perm if src.type.shape[d] != 1]
    return moved == sorted(moved)
