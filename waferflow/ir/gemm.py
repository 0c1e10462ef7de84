"""The matrix products (``Gemm``) a matmul-like op computes, from its operand and result
shapes: what a MAC array model needs beyond FLOPs (``backend_sim.core_model``).

Shapes are those one rank holds (shard shapes) when a parallel plan divides the op,
else the op's own types. Each form matches PyTorch's FLOP counter
(``torch.utils.flop_counter``), so ``2 * sum(g.macs)`` is the op's FLOPs:

* ``mm`` ``[m, k] x [k, n]``; ``addmm`` the same after its bias; ``bmm`` / ``baddbmm``
  batched over the leading dimension;
* a convolution (not transposed) as im2col: m = images x output pixels, n = output
  channels per group, k = input channels per group x kernel elements, batch = groups;
* its backward, per result: the input gradient as ``grad_out[m, k] x weight[k, n]``
  with m = images x output pixels, n = input channels per group x kernel elements,
  k = output channels per group (a col2im scatter-add follows, on the vector unit's
  side of the ledger: not timed apart); the weight gradient as
  ``grad_out^T x im2col(input)``: m = output channels per group, n = input channels
  per group x kernel elements, k = images x output pixels; the bias gradient is a
  reduction (no product);
* attention (``sdpa``): scores ``q k^T`` and ``p v`` per batch x head; its backward the
  five products PyTorch counts (scores recomputed, dP, dV, dQ, dK).

Anything else (a transposed convolution, an unexpected rank) has no products: a core
model then times it from its FLOPs alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from waferflow.ir.graph import Op
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan_parts import Gemm

K = OpKind
Shape = tuple[int, ...]

# conv_backward results, in output_mask order
GRAD_INPUT, GRAD_WEIGHT, GRAD_BIAS = 0, 1, 2


def _ok(*dims: int) -> bool:
    return all(d >= 1 for d in dims)


def matmul_gemms(op: Op, operands: Sequence[Shape], results: Sequence[Shape]) -> tuple[Gemm, ...]:
    """The products of a matmul-like op other than a convolution's backward (whose
    passes ``conv_backward_gemm`` gives one by one); () when the shapes do not fit."""
    kind = op.kind
    if kind in (K.MATMUL, K.ADDMM, K.BMM, K.BADDBMM):
        batched = kind in (K.BMM, K.BADDBMM)
        a = operands[1 if kind in (K.ADDMM, K.BADDBMM) else 0] if operands else ()
        out = results[0] if results else ()
        rank = 3 if batched else 2
        if len(a) != rank or len(out) != rank:
            return ()
        g = Gemm(m=out[-2], n=out[-1], k=a[-1], batch=out[0] if batched else 1)
        return (g,) if _ok(g.m, g.n, g.k, g.batch) else ()
    if kind is K.CONV:
        return _conv(op, operands, results)
    if kind is K.SDPA and len(operands) >= 3:
        q, k_, v = operands[:3]
        if len(q) < 3 or len(k_) != len(q) or len(v) != len(q):
            return ()
        bh, lq, d, s, dv = math.prod(q[:-2]), q[-2], q[-1], k_[-2], v[-1]
        if not _ok(bh, lq, d, s, dv):
            return ()
        return (Gemm(lq, s, d, bh), Gemm(lq, dv, s, bh))
    if kind is K.SDPA_BACKWARD and len(operands) >= 4:
        q, k_, v = operands[1:4]
        if len(q) < 3 or len(k_) != len(q) or len(v) != len(q):
            return ()
        bh, sq, dq, sk, dv = math.prod(q[:-2]), q[-2], q[-1], k_[-2], v[-1]
        if not _ok(bh, sq, dq, sk, dv):
            return ()
        return (
            Gemm(sq, sk, dq, bh),  # scores recomputed: q k^T
            Gemm(sq, sk, dv, bh),  # dP = dO v^T
            Gemm(sk, dv, sq, bh),  # dV = P^T dO
            Gemm(sq, dq, sk, bh),  # dQ = dS k
            Gemm(dq, sk, sq, bh),  # dK^T = q^T dS
        )
    return ()


def _groups(op: Op, channels: int, full: int) -> int:
    """Groups on this rank: a grouped convolution split along its channels keeps
    ``channels / full`` of its groups."""
    groups = op.attrs.get("groups", 1)
    if not isinstance(groups, int) or groups <= 1:
        return 1
    return max(1, groups * channels // full) if full else groups


def _conv(op: Op, operands: Sequence[Shape], results: Sequence[Shape]) -> tuple[Gemm, ...]:
    if op.attrs.get("transposed", False) or len(operands) < 2 or not results:
        return ()
    x, w, out = operands[0], operands[1], results[0]
    if len(x) < 3 or len(w) != len(x) or len(out) != len(x):
        return ()
    g = _groups(op, out[1], op.operands[1].type.shape[0])
    m = out[0] * math.prod(out[2:])
    k = w[1] * math.prod(w[2:])
    if out[1] % g or not _ok(m, k, out[1]):
        return ()
    return (Gemm(m=m, n=out[1] // g, k=k, batch=g),)


def conv_backward_gemm(op: Op, operands: Sequence[Shape], result: int) -> tuple[Gemm, ...]:
    """The product of one result of a convolution's backward (``GRAD_INPUT``,
    ``GRAD_WEIGHT``; none for ``GRAD_BIAS``); operands are (grad_out, input, weight)."""
    if result == GRAD_BIAS or op.attrs.get("transposed", False) or len(operands) < 3:
        return ()
    dy, w = operands[0], operands[2]
    if len(dy) < 3 or len(w) != len(dy):
        return ()
    g = _groups(op, w[0], op.operands[2].type.shape[0])
    pixels = dy[0] * math.prod(dy[2:])
    cols = w[1] * math.prod(w[2:])  # input channels per group x kernel elements
    if w[0] % g or not _ok(pixels, cols, w[0]):
        return ()
    per_group = w[0] // g
    if result == GRAD_INPUT:
        return (Gemm(m=pixels, n=cols, k=per_group, batch=g),)
    return (Gemm(m=per_group, n=cols, k=pixels, batch=g),)


__all__ = ["GRAD_BIAS", "GRAD_INPUT", "GRAD_WEIGHT", "conv_backward_gemm", "matmul_gemms"]
