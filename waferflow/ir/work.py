"""An op's datapath passes (``OpWork``): what a core model times, op by op.

Most ops are one pass: read every operand, compute, write every result. Two kinds
differ from that, because of what their kernels actually touch:

* ``conv_backward`` computes its input gradient (reading the output gradient and the
  weight) and its weight gradient (reading the input and the output gradient) as two
  passes, and the bias gradient (reading the output gradient) as a third; the FLOPs
  (PyTorch's counter gives the input and weight gradients) are split evenly between
  the first two. The seed machine runs them as separate ALU ops (CONV bp, divw).
* ``avg_pool_backward`` reads only the output gradient: its second operand, the
  forward input, gives the shape and is never read (nor does a ``fill`` read its
  operand: ``ir.parallel.reads_value``).

A matmul-like pass also carries the matrix products it computes (``OpWork.gemms``,
``ir.gemm``), from the shapes the rank holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from waferflow.ir.gemm import Shape, conv_backward_gemm, matmul_gemms
from waferflow.ir.graph import Op
from waferflow.ir.opkind import MATMUL_LIKE, OpKind
from waferflow.ir.parallel import reads_value
from waferflow.ir.plan import OpWork

K = OpKind

# conv_backward operands: (grad_output, input, weight); results follow output_mask
_CONV_BWD_READS = ((0, 2), (1, 0), (0,))  # grad_input, grad_weight, grad_bias


def op_work(
    op: Op,
    reads: Sequence[int],
    writes: Sequence[int],
    flops: int,
    shapes: tuple[Sequence[Shape], Sequence[Shape]] | None = None,
) -> tuple[OpWork, ...]:
    """The passes of ``op`` on one rank: ``reads[i]`` / ``writes[j]`` are the bytes of
    its operand ``i`` / result ``j`` there, ``flops`` its FLOPs there, ``shapes`` the
    (operand, result) shapes there (default: the op's own types)."""
    if shapes is None and op.kind in MATMUL_LIKE:
        shapes = ([v.type.shape for v in op.operands], [r.type.shape for r in op.results])
    if op.kind is K.CONV_BACKWARD:
        mask = op.attrs.get("output_mask", (True, True, True))
        computed = [i for i, on in enumerate(mask) if on]  # type: ignore[arg-type]
        if len(computed) == len(writes) and len(reads) == 3:
            main = [i for i in computed if i < 2]
            out = []
            for j, i in enumerate(computed):
                share = 0
                if i < 2:  # an even split, the remainder to the first pass
                    k = main.index(i)
                    share = flops // len(main) + (1 if k < flops % len(main) else 0)
                picked = tuple(reads[k] for k in _CONV_BWD_READS[i])
                gemms = conv_backward_gemm(op, shapes[0], i) if shapes else ()
                out.append(OpWork(op.kind, share, picked, (writes[j],), gemms))
            return tuple(out)
    if op.kind is K.AVG_POOL_BACKWARD and reads:
        return (OpWork(op.kind, flops, (reads[0],), tuple(writes)),)
    read = tuple(b for i, b in enumerate(reads) if reads_value(op, i))  # a FILL: the shape
    gemms = matmul_gemms(op, *shapes) if shapes and op.kind in MATMUL_LIKE else ()
    return (OpWork(op.kind, flops, read, tuple(writes), gemms),)


__all__ = ["op_work"]
