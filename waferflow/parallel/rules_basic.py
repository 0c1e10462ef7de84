"""Sharding rules of elementwise, movement and reduction ops (one mesh axis).

Conventions shared by every rule (see ``rule_base``): a rule never raises, it
returns what the operands must become and what the results are; a fallback that
replicates the op carries a ``note`` for the diagnostics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from waferflow.ir.graph import Op
from waferflow.ir.opkind import OpKind
from waferflow.ir.sharding import (
    PARTIAL,
    REPLICATED,
    MeshAxis,
    Placement,
    Split,
    map_split_permute,
    map_split_view,
    transpose_perm,
    view_groups,
)
from waferflow.parallel.rule_base import (
    AnyPlacement,
    AxisCtx,
    RuleOut,
    dims_attr,
    fits,
    is_p,
    is_r,
    is_s,
    is_u,
    keep,
    norm_dim,
    replicate_all,
    shape,
)

K = OpKind

# Linear in all operands together (sum of partial sums is a partial sum) ...
_LINEAR_ALL = frozenset({K.ADD, K.SUB})
# ... or in exactly one operand, the others being replicated.
_LINEAR_ONE = frozenset({K.MUL, K.NEG, K.CAST, K.ACT_BACKWARD})
_LINEAR_FIRST = frozenset({K.DIV})
# results do not depend on the operands' values, only on their shapes
_DATA_INDEPENDENT = frozenset({K.FILL, K.DROPOUT})


def _aligned(op_shape: Sequence[int], out_shape: Sequence[int], out_dim: int) -> int | None:
    """The operand dim that broadcasts onto ``out_dim`` at full size, if any."""
    d = out_dim - (len(out_shape) - len(op_shape))
    if d < 0 or op_shape[d] != out_shape[out_dim]:
        return None
    return d


def elementwise(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Broadcasting elementwise ops: follow the first split operand; partial sums
    pass through linear ops and are reduced before anything else."""
    out_shape = shape(op.results[0])
    target: Split | None = None
    for v, p in zip(op.operands, ins, strict=True):
        if isinstance(p, Split):
            od = p.dim + len(out_shape) - len(shape(v))
            if 0 <= od < len(out_shape) and shape(v)[p.dim] == out_shape[od]:
                target = Split(od, p.block)
                break
    nres = len(op.results)
    if op.kind in _DATA_INDEPENDENT:
        out: Placement = target if target is not None else REPLICATED
        return RuleOut(keep(ins), [out] * nres, target is not None)
    if target is not None:
        need: list[AnyPlacement | None] = []
        for v, p in zip(op.operands, ins, strict=True):
            d = _aligned(shape(v), out_shape, target.dim)
            want: Placement = Split(d, target.block) if d is not None else REPLICATED
            need.append(None if p == want else want)
        return RuleOut(need, [target] * nres, True)
    partial = [i for i, p in enumerate(ins) if is_p(p)]
    if partial:
        if _linear(op, ins, partial, ctx):
            return RuleOut(keep(ins), [PARTIAL] * nres, False)
        return RuleOut(
            [REPLICATED if (is_p(p) or is_u(p)) else None for p in ins], [REPLICATED] * nres
        )
    return RuleOut(keep(ins), [REPLICATED] * nres, False)


def _linear(op: Op, ins: Sequence[AnyPlacement], partial: list[int], ctx: AxisCtx) -> bool:
    """Whether the op maps partial sums to a partial sum. Along ``tp`` only sums
    keep partial sums: anything else reduces them first, as Megatron does right after
    a row-parallel matmul, so that one reduced tensor serves every later use."""
    kind = op.kind
    if kind in _LINEAR_ALL:
        return len(partial) == len(ins) and "other" not in op.attrs
    if ctx.axis is MeshAxis.TP:
        return False
    others_r = all(is_r(p) or is_u(p) for i, p in enumerate(ins) if i not in partial)
    if kind in _LINEAR_ONE and len(partial) == 1 and others_r:
        if kind is K.CAST:
            return op.results[0].type.dtype.is_float
        if kind is K.ACT_BACKWARD:
            return partial == [0]
        return True
    return kind in _LINEAR_FIRST and partial == [0] and others_r


def batch_fallback(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx, why: str) -> RuleOut:
    """Ops without a rule. Along a batch axis assume the op works per sample when
    every split operand is split on dimension 0 alike and the results keep that
    dimension; otherwise replicate the op."""
    splits = [p for p in ins if isinstance(p, Split)]
    if ctx.is_batch and splits and not any(is_p(p) for p in ins):
        first = splits[0]
        size = next(shape(v)[0] for v, p in zip(op.operands, ins, strict=True) if p == first)
        if all(p == Split(0, first.block) for p in splits) and first.dim == 0:
            need: list[AnyPlacement | None] = []
            for v, p in zip(op.operands, ins, strict=True):
                full = bool(shape(v)) and shape(v)[0] == size
                want: Placement = Split(0, first.block) if full else REPLICATED
                need.append(None if p == want else want)
            out: list[Placement] = [
                Split(0, first.block) if (shape(r) and shape(r)[0] == size) else REPLICATED
                for r in op.results
            ]
            return RuleOut(need, out, True, note=f"{why}: assumed to work per sample")
    if all(is_r(p) or is_u(p) for p in ins):
        return RuleOut(keep(ins), [REPLICATED] * len(op.results), False)
    return replicate_all(op, ins, note=f"{why}: replicated")


# --- movement -------------------------------------------------------------------------


def identity(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Clone, copy, alias, detach, getitem: the result is (a copy of) the data operand."""
    src = len(ins) - 1 if op.kind is K.COPY else 0
    if not ins:
        return RuleOut([], [REPLICATED] * len(op.results))
    p = ins[src]
    out: Placement = REPLICATED if is_u(p) else p  # type: ignore[assignment]
    need = keep(ins)
    return RuleOut(need, [out] * len(op.results), is_s(p))


def view(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Reshapes (view, squeeze, unsqueeze): move the split through the regrouping."""
    p = ins[0] if ins else REPLICATED
    src, dst = shape(op.operands[0]), shape(op.results[0])
    if isinstance(p, Split):
        moved = map_split_view(src, dst, p, ctx.n)
        if moved is not None:
            return RuleOut(keep(ins), [moved], True)
        why = f"cannot carry {p} of {src} through the view to {dst}"
        error = ""
        if ctx.axis is MeshAxis.TP and _splits_dim(src, dst, p.dim):
            groups = _outer_factor(src, dst, p.dim)
            what = f"the {groups} groups" if groups else "the groups"
            error = (
                f"tp={ctx.n} does not divide {what} that this view cuts dimension {p.dim} "
                f"of {list(src)} into ({list(dst)}): tp must divide the number of "
                "attention heads, and in grouped-query attention the number of key/value "
                "heads"
            )
        return RuleOut([REPLICATED, *keep(ins[1:])], [REPLICATED], False, note=why, error=error)
    return RuleOut(keep(ins), [REPLICATED if is_u(p) else p], False)  # type: ignore[list-item]


def _outer_factor(src: Sequence[int], dst: Sequence[int], dim: int) -> int:
    """How many groups the reshape cuts operand dimension ``dim`` into: the first
    result dimension that starts where ``dim`` starts (0 when none does)."""
    before = math.prod(src[:dim])
    acc = 1
    for d in dst:
        if acc == before:
            return d
        acc *= d
    return 0


def _splits_dim(src: Sequence[int], dst: Sequence[int], dim: int) -> bool:
    """Whether the reshape cuts operand dimension ``dim`` into several dimensions."""
    groups = view_groups(src, dst)
    if groups is None:
        return False
    for ga, gb in groups:
        if dim in ga:
            return len(ga) == 1 and len([d for d in gb if dst[d] > 1]) > 1
    return False


def permutation(op: Op) -> tuple[int, ...]:
    """The result-to-operand dimension map of a transpose or permute."""
    rank = len(shape(op.operands[0]))
    if op.kind is K.PERMUTE:
        dims = dims_attr(op, "dims", rank) or dims_attr(op, "perm", rank)
        if dims is not None and len(dims) == rank:
            return dims
    d0, d1 = op.attrs.get("dim0"), op.attrs.get("dim1")
    if isinstance(d0, int) and isinstance(d1, int) and rank:
        return transpose_perm(rank, d0, d1)
    if rank == 2:
        return (1, 0)
    return tuple(range(rank))


def permute(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    p = ins[0]
    if isinstance(p, Split):
        return RuleOut(keep(ins), [map_split_permute(p, permutation(op))], True)
    return RuleOut(keep(ins), [REPLICATED if is_u(p) else p], False)  # type: ignore[list-item]


def expand(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    p = ins[0]
    off = len(shape(op.results[0])) - len(shape(op.operands[0]))
    if isinstance(p, Split):
        return RuleOut(keep(ins), [Split(p.dim + off, p.block)], True)
    return RuleOut(keep(ins), [REPLICATED if is_u(p) else p], False)  # type: ignore[list-item]


def select(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Select removes dimension ``dim``; a split elsewhere survives."""
    p = ins[0]
    rank = len(shape(op.operands[0]))
    dim = norm_dim(int(op.attrs.get("dim", 0) or 0), rank)  # type: ignore[arg-type]
    if isinstance(p, Split):
        if p.dim == dim:
            return replicate_all(op, ins, note="select along the split dimension")
        return RuleOut(keep(ins), [Split(p.dim - (p.dim > dim), p.block)], True)
    return _pass_partial(op, ins)


def scatter(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """select_backward / slice_backward style: a result one rank higher (a new
    dimension at ``dim``) or of the same rank; other dims keep their split."""
    src, dst = shape(op.operands[0]), shape(op.results[0])
    p = ins[0]
    if len(dst) == len(src) + 1 and len(ins) == 1:
        dim = norm_dim(int(op.attrs.get("dim", 0) or 0), len(dst))  # type: ignore[arg-type]
        if isinstance(p, Split):
            return RuleOut(keep(ins), [Split(p.dim + (p.dim >= dim), p.block)], True)
        return _pass_partial(op, ins)
    return same_rank(op, ins, ctx)


def same_rank(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Slice, pad and other ops that keep the rank and change some sizes: a split on
    an unchanged dimension survives; extra operands (indices) must be replicated."""
    src, dst = shape(op.operands[0]), shape(op.results[0])
    p = ins[0]
    if len(src) != len(dst) or len(op.results) != 1:
        return batch_fallback(op, ins, ctx, f"no rule for {op.kind.value} changing the rank")
    extra_ok = all(is_r(q) or is_u(q) for q in ins[1:])
    if isinstance(p, Split) and src[p.dim] == dst[p.dim] and extra_ok:
        return RuleOut(keep(ins), [p], True)
    if isinstance(p, Split) and not extra_ok:
        return batch_fallback(op, ins, ctx, f"{op.kind.value} with split indices")
    if isinstance(p, Split):
        return batch_fallback(op, ins, ctx, f"{op.kind.value} along the split dimension")
    if is_p(p) and extra_ok and op.kind in (K.SLICE, K.PAD):
        return RuleOut(keep(ins), [PARTIAL], False)
    if all(is_r(q) or is_u(q) for q in ins):
        return RuleOut(keep(ins), [REPLICATED], False)
    return batch_fallback(op, ins, ctx, f"{op.kind.value} with split operands")


def _pass_partial(op: Op, ins: Sequence[AnyPlacement]) -> RuleOut:
    p = ins[0]
    out: Placement = PARTIAL if is_p(p) else REPLICATED
    return RuleOut(keep(ins), [out] * len(op.results), False)


def cat(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Concatenation: a split on another dimension survives; a split on the cat
    dimension survives when every piece holds whole periods (heads of q, k, v)."""
    out_shape = shape(op.results[0])
    rank = len(out_shape)
    dim = norm_dim(int(op.attrs.get("dim", 0) or 0), rank)  # type: ignore[arg-type]
    splits = [p for p in ins if isinstance(p, Split)]
    if splits:
        t = splits[0]
        ok = t.dim != dim or all(fits(t, shape(v)[dim], ctx.n) for v in op.operands)
        if ok and all(len(shape(v)) == rank for v in op.operands):
            need: list[AnyPlacement | None] = [None if p == t else t for p in ins]
            return RuleOut(need, [t], True)
        return replicate_all(op, ins, note="cat of pieces that do not hold whole split periods")
    if ins and all(is_p(p) for p in ins):
        return RuleOut(keep(ins), [PARTIAL], False)
    if any(is_p(p) for p in ins):
        return replicate_all(op, ins)
    return RuleOut(keep(ins), [REPLICATED], False)


def split(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """split / chunk along ``dim``: a split elsewhere survives in every piece; a split
    on ``dim`` survives when every piece holds whole periods."""
    p = ins[0]
    rank = len(shape(op.operands[0]))
    dim = norm_dim(int(op.attrs.get("dim", 0) or 0), rank)  # type: ignore[arg-type]
    if isinstance(p, Split):
        if p.dim != dim or all(fits(p, shape(r)[dim], ctx.n) for r in op.results):
            return RuleOut(keep(ins), [p] * len(op.results), True)
        return replicate_all(op, ins, note="split into pieces that break the split periods")
    return _pass_partial(op, ins)


def stack(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    rank = len(shape(op.results[0]))
    dim = norm_dim(int(op.attrs.get("dim", 0) or 0), rank)  # type: ignore[arg-type]
    splits = [p for p in ins if isinstance(p, Split)]
    if splits and all(p == splits[0] for p in ins):
        s = splits[0]
        return RuleOut(keep(ins), [Split(s.dim + (s.dim >= dim), s.block)], True)
    if splits or any(is_p(p) for p in ins):
        return replicate_all(op, ins, note="stack of differently placed operands")
    return RuleOut(keep(ins), [REPLICATED], False)


# --- reductions -----------------------------------------------------------------------


def reduction(op: Op, ins: Sequence[AnyPlacement], ctx: AxisCtx) -> RuleOut:
    """Sum / mean over a split dimension give a partial sum; other reductions over
    it need the whole dimension; a split on a kept dimension survives; a partial
    operand is reduced first."""
    p = ins[0]
    src = shape(op.operands[0])
    rank = len(src)
    dims = dims_attr(op, "dim", rank)
    scan = bool(op.attrs.get("scan", False))
    reduced = tuple(range(rank)) if dims is None else dims
    keepdim = bool(op.attrs.get("keepdim", False)) or scan
    linear = op.kind in (K.SUM, K.MEAN)
    out_n = len(op.results)
    if isinstance(p, Split):
        if p.dim in reduced:
            if linear and not scan:
                return RuleOut(keep(ins), [PARTIAL] * out_n, True)
            return batch_fallback(op, ins, ctx, f"{op.kind.value} over the split dimension")
        new = p.dim if keepdim else p.dim - sum(1 for d in reduced if d < p.dim)
        return RuleOut(keep(ins), [Split(new, p.block)] * out_n, True)
    if is_p(p):
        # a partial sum is reduced before any reduction reads it (as before a graph
        # output): the verifier refuses a reduction of a partial value
        return replicate_all(op, ins)
    return RuleOut(keep(ins), [REPLICATED] * out_n, False)


__all__ = [
    "batch_fallback",
    "cat",
    "elementwise",
    "expand",
    "identity",
    "permutation",
    "permute",
    "reduction",
    "same_rank",
    "scatter",
    "select",
    "split",
    "stack",
    "view",
]
