"""Cost of one traced op: FLOPs and bytes.

FLOPs come from PyTorch's own counter (``torch.utils.flop_counter.flop_registry``,
the formulas ``FlopCounterMode`` uses for matmuls, convolutions and attention).
PyTorch counts nothing else, so for the rest one rule applies, without a
per-op table:

- elementwise ops: 1 FLOP per output element (not counted by torch);
- reductions, normalisations, pooling and losses: 1 FLOP per element of the
  largest tensor the op reads or writes (each input element is combined once);
- embedding backward: 1 FLOP (an add) per element of the incoming gradient;
- unknown (opaque) ops: the total number of output elements, a conservative guess;
- views, copies, sources and bookkeeping: 0 FLOPs.

Bytes read are the operands' bytes and bytes written the results' bytes, except
that pure views (and sources and bookkeeping) move nothing, and an embedding
lookup reads its indices and only the rows it gathers, not the whole table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

from waferflow.ir.dtypes import TensorType
from waferflow.ir.graph import Cost
from waferflow.ir.opkind import (
    BOOKKEEPING,
    ELEMENTWISE,
    LOSS,
    MOVEMENT,
    NORMALIZATION,
    POOLING,
    REDUCTION,
    SOURCES,
    VIEWS,
    OpKind,
)

_FREE = VIEWS | SOURCES | BOOKKEEPING
_PER_LARGEST_ELEMENT = REDUCTION | NORMALIZATION | POOLING | LOSS | {OpKind.TOPK}
_MOVES_ONLY = MOVEMENT | {OpKind.EMBEDDING, OpKind.MOE_DISPATCH, OpKind.MOE_COMBINE}

# Attention ops that torch's registry lacks (the CPU flash variant) share the
# argument order of the flash-attention formula it has.
_SDPA_FALLBACK: Mapping[OpKind, object] = {
    OpKind.SDPA: torch.ops.aten._scaled_dot_product_flash_attention,
    OpKind.SDPA_BACKWARD: torch.ops.aten._scaled_dot_product_flash_attention_backward,
}


def flop_formula(packet: object, kind: OpKind) -> Callable[..., Any] | None:
    """Torch's FLOP formula for this op, or None when torch has none.

    Call it as ``FlopCounterMode`` does: ``formula(*args, **kwargs, out_val=out)``
    with fake tensors in place of fx nodes.
    """
    formula: Callable[..., Any] | None = flop_registry.get(packet)
    if formula is None and kind in _SDPA_FALLBACK:
        formula = flop_registry.get(_SDPA_FALLBACK[kind])
    return formula


def op_cost(
    kind: OpKind,
    operands: Sequence[TensorType],
    results: Sequence[TensorType],
    flops_from_torch: int | None,
) -> Cost:
    """The cost of an op of ``kind`` (see the module docstring for the rules)."""
    if kind in _FREE:
        return Cost()
    read = sum(t.nbytes for t in operands)
    written = sum(t.nbytes for t in results)
    if kind is OpKind.EMBEDDING and len(operands) >= 2:
        # weight, indices: the lookup touches the indices and the gathered rows only
        read = operands[1].nbytes + written
    if flops_from_torch is not None:
        flops = flops_from_torch
    elif kind in ELEMENTWISE:
        flops = max((t.numel for t in results), default=0)
    elif kind in _PER_LARGEST_ELEMENT:
        flops = max((t.numel for t in (*operands, *results)), default=0)
    elif kind is OpKind.EMBEDDING_BACKWARD:
        flops = operands[0].numel if operands else 0
    elif kind is OpKind.OPAQUE:
        flops = sum(t.numel for t in results)
    elif kind in _MOVES_ONLY:
        flops = 0
    else:
        flops = sum(t.numel for t in results)
    return Cost(flops=flops, bytes_read=read, bytes_written=written)
