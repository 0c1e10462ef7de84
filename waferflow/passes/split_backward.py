"""split-backward: a convolution's backward as two ops, input gradient first.

PyTorch's autograd records one ``convolution_backward`` that returns the input
gradient and the weight (and bias) gradients together. They are independent
computations with different consumers: the input gradient goes to the layer
before, and is on the backward critical path; the parameter gradients only feed
the optimizer. As one op, the input gradient could leave only after both were
computed. This pass splits such an op into ``conv_backward`` with
``output_mask=[true, false, false]`` (reading the output gradient and the weight)
followed by one with the remaining mask (reading the output gradient and the
input), keeping every result value. A matmul layer's backward is traced as two
``mm`` ops already; after this pass convolutions look alike, and a pipeline stage
can send its input gradient before it computes its weight gradient, as the seed
machine's programs do (CONV bp, then CONV divw).

Costs are split, not duplicated, so that the step costs what it cost before: FLOPs in
proportion to the products computed (PyTorch's counter gives the input and weight
gradients the same count), bytes read as the input gradient's part (the output
gradient and the weight) and the rest, bytes written as each part's results. A core
model times each part from its own operands (``ir.work.op_work``), which is where
reading the output gradient twice shows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from waferflow.ir.graph import Cost, Graph, Op
from waferflow.ir.opkind import OpKind
from waferflow.passes.base import Pass, PassContext
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class SplitBackward(Pass):
    """Split a convolution backward into its input gradient and its parameter gradients."""

    name: ClassVar[str] = "split-backward"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        for op in [o for o in graph.ops if _splittable(o)]:
            _split(graph, op)
        return graph


def _mask(op: Op) -> tuple[bool, bool, bool]:
    mask = op.attrs.get("output_mask", (True, True, True))
    if not isinstance(mask, tuple) or len(mask) != 3:
        return (False, False, False)
    return (bool(mask[0]), bool(mask[1]), bool(mask[2]))


def _splittable(op: Op) -> bool:
    if op.kind is not OpKind.CONV_BACKWARD or len(op.operands) != 3:
        return False
    mask = _mask(op)
    return mask[0] and (mask[1] or mask[2]) and len(op.results) == sum(mask)


def _split(graph: Graph, op: Op) -> None:
    grad_out, _, w = op.operands
    mask = _mask(op)
    grad_in, *params = op.results
    main = 1 + int(mask[1])  # products the op's FLOPs count: grad_in, and grad_w if asked
    f_in = op.cost.flops // main
    read_in = min(op.cost.bytes_read, grad_out.type.nbytes + w.type.nbytes)
    first = replace(
        op,
        results=(grad_in,),
        attrs=op.attrs.with_(output_mask=(True, False, False)),
        cost=Cost(f_in, read_in, grad_in.type.nbytes),
    )
    grad_in.producer = first
    graph.replace_op(
        op,
        results=tuple(params),
        attrs=op.attrs.with_(output_mask=(False, mask[1], mask[2])),
        cost=Cost(
            op.cost.flops - f_in,
            op.cost.bytes_read - read_in,
            op.cost.bytes_written - min(op.cost.bytes_written, grad_in.type.nbytes),
        ),
    )
    rest = next(o for o in graph.ops if o.results and o.results[0] is params[0])
    graph.ops.insert(graph.ops.index(rest), first)


__all__ = ["SplitBackward"]
