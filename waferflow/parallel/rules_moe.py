"""Sharding rules of the routing ops (mixture of experts; ``frontend/moe.py``).

``moe_dispatch(x[T, k, H], idx[T, k]) -> [E, C, H]`` puts each token's k copies in
their experts' capacity slots; ``moe_combine(y[E, C, H], idx[T, k]) -> [T, k, H]``
reads them back. Along a batch axis (``dp``, ``ep``, ``mb``) the tokens are split,
and so are the capacity slots: ranks holding 1/n of the tokens fill 1/n of every
expert's slots (GShard's local dispatch), ``split(1)`` of the ``[E, C, H]`` value.
Along ``ep`` the experts' matmuls then need the slots split by expert instead,
``split(0)``: the difference is an ``all_to_all`` (``rules_nn.matmul``), and so is
the way back before ``moe_combine``. Both ops are linear in their data: a partial
sum passes through; a hidden dimension split along ``tp`` stays split.

``topk`` (the router's choice) works per row of its last dimension: a split on
another dimension carries through.
"""

from __future__ import annotations

from collections.abc import Sequence

from waferflow.ir.graph import Graph, Op, Value
from waferflow.ir.opkind import ELEMENTWISE, MATMUL_LIKE, OpKind
from waferflow.ir.parallel import VIEWISH
from waferflow.ir.sharding import PARTIAL, REPLICATED, Placement, Split
from waferflow.parallel.rule_base import (
    AnyPlacement,
    AxisCtx,
    RuleOut,
    is_p,
    is_r,
    is_u,
    keep,
    replicate_all,
    shape,
)


def _slots(tokens: int, slots: int, block: int) -> int:
    """Capacity slots of a rank holding ``block`` of ``tokens`` tokens."""
    return -(-slots * block // tokens)


def dispatch(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    px, pi = ins[0], ins[1]
    tokens, slots = shape(op.operands[0])[0], shape(op.results[0])[1]
    if isinstance(px, Split) and px.dim == 0 and ctx.is_batch:
        need = [None, None if pi == px else px]
        return RuleOut(need, [Split(1, _slots(tokens, slots, px.block))], True)
    if isinstance(px, Split) and px.dim == 2 and (is_r(pi) or is_u(pi)):
        return RuleOut(keep(ins), [Split(2, px.block)], True)
    if is_p(px) and (is_r(pi) or is_u(pi)):
        return RuleOut(keep(ins), [PARTIAL], False)
    if all(is_r(p) or is_u(p) for p in ins):
        return RuleOut(keep(ins), [REPLICATED], False)
    return replicate_all(op, ins, note="moe_dispatch: tokens gathered")


def combine(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    py, pi = ins[0], ins[1]
    tokens, slots = shape(op.results[0])[0], shape(op.operands[0])[1]
    if isinstance(pi, Split) and pi.dim == 0 and ctx.is_batch:
        want = Split(1, _slots(tokens, slots, pi.block))
        return RuleOut([None if py == want else want, None], [Split(0, pi.block)], True)
    if isinstance(py, Split) and py.dim == 2 and (is_r(pi) or is_u(pi)):
        return RuleOut(keep(ins), [Split(2, py.block)], True)
    if is_p(py) and (is_r(pi) or is_u(pi)):
        return RuleOut(keep(ins), [PARTIAL], False)
    return replicate_all(op, ins)


def topk(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    p = ins[0]
    last = len(shape(op.operands[0])) - 1
    if isinstance(p, Split) and p.dim != last:
        out: list[Placement] = [Split(p.dim, p.block)] * len(op.results)
        return RuleOut(keep(ins), out, True)
    return replicate_all(op, ins)


def expert_params(graph: Graph) -> dict[int, int]:
    """id of each expert weight -> its number of experts: the parameters a matmul of
    a ``moe_dispatch``'s module reads (through views) whose dimension 0 is that
    dispatch's ``experts``."""
    out: dict[int, int] = {}
    experts_of = {
        op.prov.module: int(op.attrs.get("experts", 0) or 0)  # type: ignore[arg-type]
        for op in graph.ops
        if op.kind is OpKind.MOE_DISPATCH
    }
    for op in graph.ops:
        e = experts_of.get(op.prov.module)
        if not e or op.kind not in MATMUL_LIKE:
            continue
        for v in op.operands:
            root = v
            while root.producer is not None and root.producer.kind in VIEWISH:
                root = root.producer.operands[0]
            p = root.producer
            if p is not None and p.kind is OpKind.PARAM and shape(root)[:1] == (e,):
                out[id(root)] = e
    return out


def dispatched(v: Value) -> bool:
    """Whether ``v`` holds capacity slots (``[E, C, H]`` made by ``moe_dispatch``),
    seen through elementwise ops and views (the experts' activations between their
    two matmuls)."""
    seen = 0
    while v.producer is not None and seen < 8:
        p = v.producer
        if p.kind is OpKind.MOE_DISPATCH:
            return True
        if p.kind not in VIEWISH and p.kind not in ELEMENTWISE and p.kind is not OpKind.SPLIT:
            return False
        v, seen = p.operands[0], seen + 1
    return False


__all__ = ["combine", "dispatch", "dispatched", "expert_params", "topk"]
