"""Sharding rules of the neural-network ops (one mesh axis): matmuls, convolutions,
attention, normalisations, pooling, embeddings and losses.

Matmul-like ops are described by dimension labels: ``M`` / ``K`` / ``N`` for
``[M, K] x [K, N]``, ``b<i>`` for batch dimensions (result dimension ``i``). The
Megatron pattern falls out of two decisions taken when a weight is first used:
a weight multiplied by a replicated input is split on its output dimension
(column parallel, the result is split); a weight multiplied by an input split on
the contraction dimension is split on its input dimension (row parallel, the
result is a partial sum, reduced by an all-reduce before the next non-linear op).
"""

from __future__ import annotations

from collections.abc import Sequence

from waferflow.ir.graph import Op, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.sharding import PARTIAL, REPLICATED, MeshAxis, Placement, Split
from waferflow.parallel.rule_base import (
    AnyPlacement,
    AxisCtx,
    RuleOut,
    is_p,
    is_r,
    is_s,
    is_u,
    keep,
    norm_dim,
    replicate_all,
    shape,
)
from waferflow.parallel.rules_basic import elementwise

K = OpKind
Labeled = tuple[str, int]  # (label, block) of a split, or ("R"|"P"|"U", 0)


# --- matmul family --------------------------------------------------------------------


def _mm_labels(op: Op) -> tuple[int, int, list[str], list[str], list[str]]:
    """Operand indices of A and B and the labels of A's, B's and the result's dims."""
    ia, ib = (1, 2) if op.kind in (K.ADDMM, K.BADDBMM) else (0, 1)
    sa, sb, so = shape(op.operands[ia]), shape(op.operands[ib]), shape(op.results[0])
    ta, tb = bool(op.attrs.get("transpose_a", False)), bool(op.attrs.get("transpose_b", False))
    nb = len(so) - 2

    def batch(s: tuple[int, ...]) -> list[str]:
        k = len(s) - 2
        return [
            f"b{i + nb - k}" if s[i] == so[i + nb - k] else "-" for i in range(k)
        ]  # "-": a broadcast batch dimension, never split

    la = [*batch(sa), *(["K", "M"] if ta else ["M", "K"])]
    lb = [*batch(sb), *(["N", "K"] if tb else ["K", "N"])]
    lo = [f"b{i}" for i in range(nb)] + ["M", "N"]
    return ia, ib, la, lb, lo


def _lab(p: AnyPlacement, labels: list[str]) -> Labeled:
    if isinstance(p, Split):
        return (labels[p.dim], p.block)
    return ("U" if is_u(p) else "P" if is_p(p) else "R", 0)


def _combine(
    a: Labeled, b: Labeled, la: list[str], lb: list[str], lo: list[str]
) -> tuple[Placement, bool, Placement | None, Placement | None] | None:
    """(result, divided, slice of A, slice of B) for placements that multiply without
    communication (a replicated side may be sliced for free), else None."""
    (x, bx), (y, by) = a, b
    if x == "R" and y == "R":
        return REPLICATED, False, None, None
    if (x, y) in (("P", "R"), ("R", "P")):
        return PARTIAL, False, None, None
    if x == "K" and y == "K":
        return (PARTIAL, True, None, None) if bx == by else None
    if x == "K" and y == "R":
        return PARTIAL, True, None, Split(lb.index("K"), bx)
    if x == "R" and y == "K":
        return PARTIAL, True, Split(la.index("K"), by), None
    if x.startswith("b") and y == x:
        return (Split(lo.index(x), bx), True, None, None) if bx == by else None
    if (x == "M" or x.startswith("b")) and y == "R":
        sb = Split(lb.index(x), bx) if x in lb else None
        return Split(lo.index(x), bx), True, None, sb
    if x == "R" and (y == "N" or y.startswith("b")):
        sa = Split(la.index(y), by) if y in la else None
        return Split(lo.index(y), by), True, sa, None
    return None


def matmul(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    ia, ib, la, lb, lo = _mm_labels(op)
    need: list[AnyPlacement | None] = keep(ins)
    pa, pb = ins[ia], ins[ib]
    va, vb = op.operands[ia], op.operands[ib]
    note = ""
    if ctx.axis is MeshAxis.EP:
        pa, pb = _by_expert(pa, pb, la, lb)
    if is_u(pb) and is_u(pa):
        pa = pb = REPLICATED
    elif is_u(pb) or is_u(pa):
        pa, pb, err = _decide_mm(op, pa, pb, la, lb, lo, va, vb, ctx)
        if err:
            return RuleOut(need, [REPLICATED], error=err)
    combo = _combine(_lab(pa, la), _lab(pb, lb), la, lb, lo)
    if combo is None:
        # gather the operand(s) that cost least to gather
        best = None
        for ca, cb in ((pa, REPLICATED), (REPLICATED, pb), (REPLICATED, REPLICATED)):
            c = _combine(_lab(ca, la), _lab(cb, lb), la, lb, lo)
            if c is None:
                continue
            cost = (va.type.nbytes if ca != pa else 0) + (vb.type.nbytes if cb != pb else 0)
            if best is None or cost < best[0]:
                best = (cost, ca, cb, c)
        assert best is not None  # (R, R) always combines
        _, pa, pb, combo = best
        note = f"{op.kind.value}: operands gathered to multiply"
    out, divided, sa, sb = combo
    need[ia] = _need(ins[ia], sa or pa)
    need[ib] = _need(ins[ib], sb or pb)
    if op.kind in (K.ADDMM, K.BADDBMM):
        need[0] = _bias_need(op.operands[0], ins[0], out, shape(op.results[0]))
    return RuleOut(need, [out], divided, note=note)


def _by_expert(
    pa: AnyPlacement, pb: AnyPlacement, la: list[str], lb: list[str]
) -> tuple[AnyPlacement, AnyPlacement]:
    """Along ``ep`` an experts' matmul runs where its experts are: an operand split by
    expert (a batch dimension) asks the other, split another way (the tokens' capacity
    slots), to be split by expert too, which is an all-to-all (not a gather)."""
    for first in (True, False):
        x, y = (pa, pb) if first else (pb, pa)
        lx, ly = (la, lb) if first else (lb, la)
        if isinstance(x, Split) and lx[x.dim].startswith("b") and isinstance(y, Split):
            label = lx[x.dim]
            if not ly[y.dim].startswith("b") and label in ly:
                y = Split(ly.index(label), x.block)
                return (x, y) if first else (y, x)
    return pa, pb


def _need(cur: AnyPlacement, want: AnyPlacement) -> AnyPlacement | None:
    return None if cur == want else want


def _bias_need(
    bias: Value, cur: AnyPlacement, out: Placement, out_shape: tuple[int, ...]
) -> AnyPlacement | None:
    """A bias (broadcast onto the result) follows the result's split; with a partial
    result it is added once, so it stays replicated."""
    want: Placement = REPLICATED
    if isinstance(out, Split):
        d = out.dim - (len(out_shape) - len(shape(bias)))
        if d >= 0 and shape(bias)[d] == out_shape[out.dim]:
            want = Split(d, out.block)
    return _need(cur, want)


def _decide_mm(
    op: Op,
    pa: AnyPlacement,
    pb: AnyPlacement,
    la: list[str],
    lb: list[str],
    lo: list[str],
    va: Value,
    vb: Value,
    ctx: AxisCtx,
) -> tuple[AnyPlacement, AnyPlacement, str]:
    """Choose the split of the undecided (weight) operand: column / row parallel."""
    weight_is_b = is_u(pb)
    other = pa if weight_is_b else pb
    labels_w = lb if weight_is_b else la
    labels_o = la if weight_is_b else lb
    w = vb if weight_is_b else va
    x = _lab(other, labels_o)[0]
    if x == "K":
        chosen: AnyPlacement = Split(labels_w.index("K"), other.block)  # type: ignore[union-attr]
    elif x in ("R", "P") and ctx.axis.value == "tp":
        out_label = "N" if weight_is_b else "M"
        wd = labels_w.index(out_label)
        size = shape(w)[wd]
        block = ctx.choose_block(op, lo.index(out_label)) if ctx.choose_block else 0
        if block < 0:
            return (
                pa,
                pb,
                (
                    f"tp={ctx.n} does not divide the {-block}-wide pieces that the output of "
                    f"weight %{w.name} {list(shape(w))} is cut into (e.g. query / key / value: "
                    "tp must divide the number of heads)"
                ),
            )
        if not block or size % (block * ctx.n):
            block = size // ctx.n if size % ctx.n == 0 else 0
        kd = labels_w.index("K")
        if block:
            chosen = Split(wd, block)
        elif shape(w)[kd] % ctx.n == 0:
            # an output too small to split (a classifier head): split the input dim
            chosen = Split(kd, shape(w)[kd] // ctx.n)
        else:
            return (
                pa,
                pb,
                (
                    f"tp={ctx.n} divides neither the output size {size} nor the input size "
                    f"{shape(w)[kd]} of weight %{w.name} {list(shape(w))} "
                    f"({op.prov.module or op.kind.value}); choose tp dividing the hidden / MLP / "
                    "vocabulary sizes"
                ),
            )
        if x == "P":
            other = REPLICATED  # reduce the partial input first, then split the weight
    else:
        chosen = REPLICATED
    if weight_is_b:
        return other, chosen, ""
    return chosen, other, ""


# --- convolutions ---------------------------------------------------------------------


def _conv_labels(op: Op) -> tuple[list[str], list[str]]:
    """Labels of x and w: B batch, C input channels, O output channels."""
    rx = len(shape(op.operands[0]))
    rw = len(shape(op.operands[1]))
    lx = ["B", "C"] + ["s"] * (rx - 2)
    transposed = bool(op.attrs.get("transposed", False))
    lw = (["C", "O"] if transposed else ["O", "C"]) + ["k"] * (rw - 2)
    return lx, lw


def conv(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    lx, lw = _conv_labels(op)
    px, pw = ins[0], ins[1]
    groups = op.attrs.get("groups", 1)
    need: list[AnyPlacement | None] = keep(ins)
    if groups not in (1, None):
        if isinstance(px, Split) and px.dim == 0:
            need[1] = _need(pw, REPLICATED)
            if len(ins) > 2:
                need[2] = _need(ins[2], REPLICATED)
            return RuleOut(need, [Split(0, px.block)], True)
        return replicate_all(op, ins, note="grouped convolution: only the batch is split")
    if is_u(pw):
        if isinstance(px, Split) and lx[px.dim] == "B":
            pw = REPLICATED
        else:
            o = lw.index("O")
            size = shape(op.operands[1])[o]
            if size % ctx.n:
                return RuleOut(need, [REPLICATED], error=(
                    f"tp={ctx.n} does not divide the {size} output channels of "
                    f"{op.prov.module or 'a convolution'}; choose a degree dividing {size}"
                ))  # fmt: skip
            pw = Split(o, size // ctx.n)
            px = REPLICATED  # the seed's channel split: inputs broadcast to every rank
    x = _lab(px, lx)
    wl = _lab(pw, lw)
    out: Placement
    if x[0] == "B" and wl[0] == "R":
        out, divided = Split(0, x[1]), True
    elif x[0] == "R" and wl[0] == "O":
        out, divided = Split(1, wl[1]), True
    elif x[0] == "C" and wl[0] == "C" and x[1] == wl[1]:
        out, divided = PARTIAL, True
    elif x[0] == "R" and wl[0] == "C":
        out, divided = PARTIAL, True
        px = Split(lx.index("C"), wl[1])
    elif x[0] in ("R", "P") and wl[0] == "R":
        out, divided = (PARTIAL if x[0] == "P" else REPLICATED), False
    elif wl[0] == "O":
        px, out, divided = REPLICATED, Split(1, wl[1]), True
    else:
        return replicate_all(op, ins, note="convolution: operands gathered")
    need[0] = _need(ins[0], px)
    need[1] = _need(ins[1], pw)
    if len(ins) > 2:
        want = Split(0, out.block) if isinstance(out, Split) and out.dim == 1 else REPLICATED
        need[2] = _need(ins[2], want)
    return RuleOut(need, [out], divided)


def _mask(op: Op, n: int) -> list[bool]:
    m = op.attrs.get("output_mask")
    if isinstance(m, tuple) and len(m) == n:
        return [bool(x) for x in m]
    return [True] * n


def conv_backward(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """(grad_out, x, w) -> the masked subset of (grad_in, grad_w, grad_b)."""
    pg, px, pw = ins[0], ins[1], ins[2]
    lx, lw = _conv_labels(op)
    need: list[AnyPlacement | None] = keep(ins)
    w_lab = _lab(pw, lw)
    full: list[Placement]
    if w_lab[0] == "O":
        blk = w_lab[1]
        need[0], need[1] = _need(pg, Split(1, blk)), _need(px, REPLICATED)
        full = [PARTIAL, Split(0, blk), Split(0, blk)]
    elif w_lab[0] == "C":
        blk = w_lab[1]
        need[0], need[1] = _need(pg, REPLICATED), _need(px, Split(lx.index("C"), blk))
        full = [Split(1, blk), Split(1, blk), REPLICATED]
    else:
        split = next((p for p in (pg, px) if isinstance(p, Split) and p.dim == 0), None)
        if split is None:
            return replicate_all(op, ins)
        need[0], need[1] = _need(pg, split), _need(px, split)
        need[2] = _need(pw, REPLICATED)
        full = [Split(0, split.block), PARTIAL, PARTIAL]
    out = [p for p, on in zip(full, _mask(op, 3), strict=True) if on]
    if len(out) != len(op.results):
        return replicate_all(op, ins, note="convolution backward with unexpected results")
    return RuleOut(need, out, True)


# --- attention ------------------------------------------------------------------------


def attention(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Fused attention (and its backward) on [batch, heads, seq, dim] tensors: a split
    of the batch or the heads carries through; anything else is gathered."""
    target: Split | None = None
    src_size = 0
    for v, p in zip(op.operands, ins, strict=True):
        if isinstance(p, Split) and len(shape(v)) == 4 and p.dim in (0, 1):
            target, src_size = p, shape(v)[p.dim]
            break
    if target is None:
        if any(is_s(p) or is_p(p) for p in ins):
            return replicate_all(op, ins, note="attention split along seq / head dim")
        return RuleOut(keep(ins), [REPLICATED] * len(op.results))
    need: list[AnyPlacement | None] = []
    for v, p in zip(op.operands, ins, strict=True):
        s = shape(v)
        want: Placement = target if len(s) == 4 and s[target.dim] == src_size else REPLICATED
        need.append(_need(p, want))
    out: list[Placement] = [
        target if len(shape(r)) > target.dim and shape(r)[target.dim] == src_size else REPLICATED
        for r in op.results
    ]
    return RuleOut(need, out, True)


# --- normalisations -------------------------------------------------------------------


def softmax(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Softmax (and its backward) keeps any split; over a split dimension the ranks
    exchange per-row max / sum (``stats_dim``)."""
    rank = len(shape(op.results[0]))
    dim = norm_dim(int(op.attrs.get("dim", -1) or 0), rank)  # type: ignore[arg-type]
    split = next((p for p in ins if isinstance(p, Split)), None)
    if split is None:
        if any(is_p(p) for p in ins):
            return replicate_all(op, ins)
        return RuleOut(keep(ins), [REPLICATED] * len(op.results))
    need = [_need(p, split) if len(shape(v)) == rank else _need(p, REPLICATED)
            for v, p in zip(op.operands, ins, strict=True)]  # fmt: skip
    stats = dim if split.dim == dim else None
    return RuleOut(need, [split] * len(op.results), True, stats_dim=stats)


def _norm_dims(op: Op, rank: int) -> set[int]:
    ns = op.attrs.get("normalized_shape")
    k = len(ns) if isinstance(ns, tuple) else 1
    return set(range(rank - k, rank))


def layer_norm(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    x = op.operands[0]
    rank = len(shape(x))
    normed = _norm_dims(op, rank)
    px = ins[0]
    if isinstance(px, Split) and px.dim not in normed:
        need = [None if i == 0 else _need(p, REPLICATED) for i, p in enumerate(ins)]
        return RuleOut(need, [px] * len(op.results), True)
    if is_s(px):
        return replicate_all(op, ins, note="layer norm over a split dimension")
    return replicate_all(op, ins)  # a partial sum is reduced first


def layer_norm_backward(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """(grad, x, mean, rstd, w, b) -> masked (grad_x, grad_w, grad_b)."""
    rank = len(shape(op.operands[0]))
    normed = _norm_dims(op, rank)
    split = next((p for p in ins[:2] if isinstance(p, Split) and p.dim not in normed), None)
    if split is None:
        if any(is_s(p) for p in ins):
            return replicate_all(op, ins, note="layer norm backward over a split dimension")
        return replicate_all(op, ins)
    need: list[AnyPlacement | None] = []
    for i, (v, p) in enumerate(zip(op.operands, ins, strict=True)):
        full = i < 4 and len(shape(v)) == rank
        need.append(_need(p, split if full else REPLICATED))
    out = [p for p, on in zip([split, PARTIAL, PARTIAL], _mask(op, 3), strict=True) if on]
    if len(out) != len(op.results):
        out = [split] + [PARTIAL] * (len(op.results) - 1)
    return RuleOut(need, out, True)


def batch_norm(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Batch split: each replica normalises its own samples (no sync); channel
    split: statistics and parameters follow the channels."""
    px = ins[0]
    backward = op.kind is K.BATCH_NORM_BACKWARD
    split = px if isinstance(px, Split) else (ins[1] if backward and is_s(ins[1]) else None)
    if not isinstance(split, Split) or split.dim not in (0, 1):
        if any(is_s(p) or is_p(p) for p in ins):
            return replicate_all(op, ins, note="batch norm over a split spatial dimension")
        return RuleOut(keep(ins), [REPLICATED] * len(op.results))
    rank = len(shape(op.operands[0]))
    chan = Split(0, split.block) if split.dim == 1 else REPLICATED
    need = [
        _need(p, split if len(shape(v)) == rank else chan)
        for v, p in zip(op.operands, ins, strict=True)
    ]
    if backward:
        small: Placement = PARTIAL if split.dim == 0 else chan
        full = [split, small, small]
        out = [p for p, on in zip(full, _mask(op, 3), strict=True) if on]
        if len(out) != len(op.results):
            out = [split] + [small] * (len(op.results) - 1)
    else:
        out = [split] + [chan] * (len(op.results) - 1)
    return RuleOut(need, out, True)


# --- pooling --------------------------------------------------------------------------


def pooling(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Pooling and its backward: batch and channel splits carry through."""
    split = next((p for p in ins if isinstance(p, Split)), None)
    rank = len(shape(op.operands[0]))
    if split is not None and split.dim in (0, 1):
        need = [_need(p, split) if len(shape(v)) == rank else _need(p, REPLICATED)
                for v, p in zip(op.operands, ins, strict=True)]  # fmt: skip
        return RuleOut(need, [split] * len(op.results), True)
    avg = op.kind in (K.AVG_POOL, K.AVG_POOL_BACKWARD, K.ADAPTIVE_AVG_POOL)
    if split is None and is_p(ins[0]) and avg and all(is_r(p) for p in ins[1:]):
        return RuleOut(keep(ins), [PARTIAL] * len(op.results))
    if split is not None or any(is_p(p) for p in ins):
        return replicate_all(op, ins, note="pooling over a split spatial dimension")
    return RuleOut(keep(ins), [REPLICATED] * len(op.results))


# --- embeddings -----------------------------------------------------------------------


def embedding(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """(weight [V, D], indices) -> indices.shape + [D]. Batch split follows the
    indices; tensor parallel splits the vocabulary (partial result) or the hidden."""
    pw, pi = ins[0], ins[1]
    w = op.operands[0]
    rank_out = len(shape(op.results[0]))
    if isinstance(pi, Split):
        return RuleOut([_need(pw, REPLICATED), None], [Split(pi.dim, pi.block)], True)
    if is_u(pw):
        # vocabulary parallel, padded when the degree does not divide the vocabulary
        # (as Megatron pads it): the last rank holds the remainder
        v = shape(w)[0]
        pw = Split(0, -(-v // ctx.n))
    if isinstance(pw, Split):
        out: Placement = PARTIAL if pw.dim == 0 else Split(rank_out - 1, pw.block)
        return RuleOut([_need(ins[0], pw), _need(pi, REPLICATED)], [out], True)
    return RuleOut(keep(ins), [REPLICATED])


def embedding_backward(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """(grad, indices) -> grad of the weight [V, D]: partial over split samples; along
    ``tp`` each rank scatters only the rows of its vocabulary shard."""
    pg, pi = ins[0], ins[1]
    rank = len(shape(op.operands[0]))
    if isinstance(pg, Split) and pg.dim < rank - 1:
        return RuleOut([None, _need(pi, Split(pg.dim, pg.block))], [PARTIAL], True)
    if isinstance(pg, Split):
        return RuleOut([None, _need(pi, REPLICATED)], [Split(1, pg.block)], True)
    if ctx.axis is MeshAxis.TP and not is_p(pg) and (is_r(pi) or is_u(pi)):
        v = shape(op.results[0])[0]
        return RuleOut(keep(ins), [Split(0, -(-v // ctx.n))], True)
    if is_p(pg) and is_r(pi):
        return RuleOut(keep(ins), [PARTIAL])
    if any(is_s(p) or is_p(p) for p in ins):
        return replicate_all(op, ins)
    return RuleOut(keep(ins), [REPLICATED])


# --- losses ---------------------------------------------------------------------------


def nll_loss(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """(log-probs [N, C], target [N]) -> (loss, total weight): split samples or
    classes give partial sums."""
    p = ins[0]
    rank = len(shape(op.operands[0]))
    if is_p(p):
        return replicate_all(op, ins)
    if isinstance(p, Split):
        need: list[AnyPlacement | None] = [None]
        for i in range(1, len(ins)):
            target_like = i == 1
            want: Placement = REPLICATED
            if target_like and p.dim == 0 and rank > 1:
                want = Split(0, p.block)
            elif not target_like and p.dim == rank - 1:
                want = Split(0, p.block)  # class weights follow the classes
            need.append(_need(ins[i], want))
        return RuleOut(need, [PARTIAL] * len(op.results), True)
    return RuleOut(keep(ins), [REPLICATED] * len(op.results))


def nll_loss_backward(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """(grad, log-probs, target, total weight[, weight]): the gradient follows the
    log-probs; the incoming scalar gradient and the total weight are taken as they
    are (normalisation constants: no exchange needed)."""
    p = ins[1]
    rank = len(shape(op.operands[1]))
    if is_p(p):
        return replicate_all(op, ins)
    need: list[AnyPlacement | None] = [None] * len(ins)
    need[0] = REPLICATED if is_u(ins[0]) else None
    need[3] = REPLICATED if is_u(ins[3]) else None
    if isinstance(p, Split):
        want: Placement = Split(0, p.block) if p.dim == 0 and rank > 1 else REPLICATED
        need[2] = _need(ins[2], want)
        for i in range(4, len(ins)):
            need[i] = _need(ins[i], Split(0, p.block) if p.dim == rank - 1 else REPLICATED)
        return RuleOut(need, [p], True)
    for i in (2, *range(4, len(ins))):
        need[i] = _need(ins[i], REPLICATED)
    return RuleOut(need, [REPLICATED])


def mse_loss(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    if op.attrs.get("reduction", 1) in (0, "none"):
        return elementwise(op, ins, ctx)
    split = next((p for p in ins if isinstance(p, Split)), None)
    if split is not None:
        return RuleOut([_need(p, split) for p in ins], [PARTIAL], True)
    if any(is_p(p) for p in ins):
        return replicate_all(op, ins)
    return RuleOut(keep(ins), [REPLICATED])


def mse_loss_backward(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    split = next((p for p in ins[1:] if isinstance(p, Split)), None)
    if split is not None:
        need = [REPLICATED if is_u(ins[0]) else None] + [_need(p, split) for p in ins[1:]]
        return RuleOut(need, [split], True)
    if any(is_p(p) for p in ins[1:]):
        return replicate_all(op, ins)
    return RuleOut(keep(ins), [REPLICATED])


__all__ = [
    "attention",
    "batch_norm",
    "conv",
    "conv_backward",
    "embedding",
    "embedding_backward",
    "layer_norm",
    "layer_norm_backward",
    "matmul",
    "mse_loss",
    "mse_loss_backward",
    "nll_loss",
    "nll_loss_backward",
    "pooling",
    "softmax",
]
