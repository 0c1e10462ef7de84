"""IR-level cost rules: FLOPs and bytes of an op from its shapes alone.

The frontend costs traced ops with PyTorch's FLOP counter; these rules are for
ops it did not cost, such as the ones passes create. Used by ``annotate-cost``
and by ``fuse-elementwise`` (for members that carry no cost yet).
"""

from __future__ import annotations

import math

from waferflow.errors import PassError
from waferflow.ir.dtypes import TensorType
from waferflow.ir.graph import Cost, Op
from waferflow.ir.opkind import (
    BOOKKEEPING,
    ELEMENTWISE,
    NORMALIZATION,
    REDUCTION,
    SOURCES,
    VIEWS,
    OpKind,
)

# A rule-of-thumb count of arithmetic ops per element for a normalisation
# (layer norm: mean, subtract, square, mean, rsqrt-scale, ...; softmax: max,
# subtract, exp, sum, divide). Not fitted to any measurement.
NORMALIZATION_FLOPS_PER_ELEMENT = 5


def _where(op: Op) -> str:
    res = ", ".join(f"%{v.name}" for v in op.results) or "(no results)"
    return f"{op.kind.value} {res}"


def _operand(op: Op, index: int) -> TensorType:
    if len(op.operands) <= index:
        raise PassError(
            f"cannot cost {_where(op)}: it has {len(op.operands)} operand(s), "
            f"the rule for {op.kind.value} needs operand {index}; run the verifier "
            "(--verify-each) to find how the graph was broken"
        )
    return op.operands[index].type


def _contracted_dim(op: Op, a: TensorType, transposed: bool) -> int:
    """K of a matmul from its left operand ``a`` (shape [..., M, K], or [..., K, M]
    when transposed; a vector is [K])."""
    if a.rank == 0:
        raise PassError(f"cannot cost {_where(op)}: its left operand is a scalar")
    if a.rank == 1:
        return a.shape[0]
    return a.shape[-2] if transposed else a.shape[-1]


def _out_numel(op: Op) -> int:
    return op.results[0].type.numel if op.results else 0


def ir_flops(op: Op) -> int:
    """FLOPs of ``op`` by the IR-level rules (a multiply-add counts 2).

    - MATMUL, BMM: 2 * numel(out) * K (out is [..., M, N], so 2*M*N*K per batch);
      a ``transpose_a`` attribute moves K to the left operand's second-last dim.
    - ADDMM, BADDBMM: the same from operands 1 and 2 (the bias add is not counted,
      as in PyTorch's FLOP counter).
    - CONV: 2 * numel(out) * prod(weight.shape[1:]); with ``transposed`` set,
      2 * numel(in) * prod(weight.shape[1:]).
    - ELEMENTWISE: numel(out); a FUSED op counts numel(out) per fused kind.
    - REDUCTION: numel(in).
    - NORMALIZATION: NORMALIZATION_FLOPS_PER_ELEMENT * numel(out).
    - everything else: 0.
    """
    kind = op.kind
    transpose_a = op.attrs.get("transpose_a") is True
    if kind in (OpKind.MATMUL, OpKind.BMM):
        _operand(op, 1)
        return 2 * _out_numel(op) * _contracted_dim(op, _operand(op, 0), transpose_a)
    if kind in (OpKind.ADDMM, OpKind.BADDBMM):
        _operand(op, 2)
        return 2 * _out_numel(op) * _contracted_dim(op, _operand(op, 1), transpose_a)
    if kind is OpKind.CONV:
        weight = _operand(op, 1)
        per_point = math.prod(weight.shape[1:])
        if op.attrs.get("transposed") is True:
            return 2 * _operand(op, 0).numel * per_point
        return 2 * _out_numel(op) * per_point
    if kind is OpKind.FUSED:
        fused = op.attrs.get("ops")
        count = len(fused) if isinstance(fused, tuple) and fused else 1
        return count * _out_numel(op)
    if kind in ELEMENTWISE:
        return _out_numel(op)
    if kind in REDUCTION:
        return _operand(op, 0).numel
    if kind in NORMALIZATION:
        return NORMALIZATION_FLOPS_PER_ELEMENT * _out_numel(op)
    return 0


def ir_cost(op: Op) -> Cost:
    """FLOPs by ``ir_flops``; bytes read = operands' bytes (a value used twice, as
    in ``mul %d, %d``, is read once), bytes written = results' bytes.

    Views (no copy), sources (data already in memory) and bookkeeping ops move no
    bytes and cost nothing.
    """
    if op.kind in VIEWS or op.kind in SOURCES or op.kind in BOOKKEEPING:
        return Cost()
    distinct = {id(v): v for v in op.operands}.values()
    return Cost(
        flops=ir_flops(op),
        bytes_read=sum(v.type.nbytes for v in distinct),
        bytes_written=sum(v.type.nbytes for v in op.results),
    )
