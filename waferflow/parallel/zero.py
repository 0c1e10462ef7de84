"""ZeRO: shard the model state over the data-parallel replicas (``zero=1|2|3``).

Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models" (SC'20): with ``dp = N`` replicas, stage 1 keeps 1/N of the optimizer state
on each replica, stage 2 also 1/N of the gradients, stage 3 also 1/N of the
parameters. Here it is a rewrite of the sharding along ``dp``, applied after
propagation (``apply_zero``), so that every decision is in the IR and the usual
conversions make the communication:

* every optimizer op (phase ``opt``) of a parameter runs on a ``dp`` shard of it:
  its operands of the parameter's shape are needed ``split`` along ``dp``, its
  results are ``split``. The gradient, a partial sum along ``dp``, becomes a
  ``reduce_scatter`` (instead of an ``all_reduce``); the parameter and the state
  are cut locally (free);
* the optimizer state (buffers only the optimizer reads: AdamW's moments) is stored
  ``split`` along ``dp``: a rank keeps only its shard (``plan-memory`` counts 1/N);
* stages 1 and 2: each updated parameter, ``split`` along ``dp``, is all-gathered at
  the end of the step, so that every replica starts the next step with the whole
  parameter (``insert-collectives``; ``updates_param``);
* stage 3: each parameter is stored ``split`` along ``dp`` (``stored_shard``): every
  use needing it whole gets an ``all_gather`` placed right before its first user of
  one phase and layer, and freed after its last (``insert-collectives``), so the
  forward gathers a layer's parameters before the layer and the backward gathers
  them again; the updated parameter stays a shard.

Where the reductions run (``schedule``): stage 1 keeps the whole gradients through
the backward (accumulated over micro-batches) and reduce-scatters them after the
last micro-batch, in the optimizer block, never overlapped (DeepSpeed's stage 1
reduces at the accumulation boundary); stages 2 and 3 reduce-scatter each
micro-batch's gradients as the backward makes them and accumulate the shard.

Which dimension a parameter is cut on: the first dimension that ``tp`` does not
split and ``dp`` divides; else the ``tp``-split dimension when each ``tp`` block
divides by ``dp`` (a periodic split inside the block); else the largest dimension,
padded (the last replicas hold less), as ZeRO pads its flat buffers. A scalar
parameter stays replicated.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.ir.graph import Graph, Op, Phase, Value
from waferflow.ir.opkind import COLLECTIVE, OpKind
from waferflow.ir.parallel import VIEWISH
from waferflow.ir.sharding import REPLICATED, MeshAxis, Placement, Split
from waferflow.parallel.plan_spec import ParallelPlan
from waferflow.parallel.propagate import RULES, OpSharding, ShardingResult
from waferflow.parallel.rule_base import AxisCtx

K = OpKind
DP = MeshAxis.DP


@dataclass
class _Group:
    """The optimizer ops of one parameter, joined by the values they pass on."""

    ops: list[Op]
    shape: tuple[int, ...]


def apply_zero(graph: Graph, sharding: ShardingResult, plan: ParallelPlan) -> list[str]:
    """Rewrite ``sharding`` along ``dp`` for ZeRO stage ``plan.zero`` (module
    docstring); returns notes for what stays replicated."""
    n = sharding.mesh.degree(DP)
    if plan.zero == 0 or n < 2:
        return []
    notes: list[str] = []
    tp_n = sharding.mesh.degree(MeshAxis.TP)
    stored: set[int] = set()  # ids of the sources now kept as dp shards
    for grp in _groups(graph):
        if not grp.shape:
            notes.append(
                f"zero: the scalar parameter of {grp.ops[0].prov.module or 'the top level'} "
                "stays replicated"
            )
            continue
        first = grp.ops[0]
        tp = sharding.of(first.results[0]).get(MeshAxis.TP)
        split = choose_split(grp.shape, tp if isinstance(tp, Split) else None, tp_n, n)
        for op in grp.ops:
            _shard_op(op, split, grp.shape, sharding)
            for v in op.operands:
                src = _source(v)
                if src is None or v.type.shape != grp.shape:
                    continue
                if src.kind is K.BUFFER or (src.kind is K.PARAM and plan.zero >= 3):
                    _store(src.results[0], split, sharding)
                    stored.add(id(src.results[0]))
    if plan.zero >= 3:
        _views_of_stored(graph, sharding, stored, n)
    return notes


@dataclass(frozen=True)
class ZeroRough:
    """The plan search's closed form of ZeRO for one rank (``search.rough_row``)."""

    exposed: float  # seconds of dp communication nothing hides
    hideable: float  # seconds of gradient reduction the backward can hide (overlap)
    state_bytes: float  # weights + gradients + optimizer state held


def zero_stages(dp: int, training: bool) -> tuple[int, ...]:
    """The ZeRO stages the plan search tries for ``dp`` replicas."""
    return (0, 1, 2, 3) if training and dp > 1 else (0,)


def zero_rough(
    plan: ParallelPlan,
    weights: float,
    grads: float,
    opt: float,
    matmuls: int,
    bandwidth: float,
    latency: float,
) -> ZeroRough:
    """Per rank, with W, G, O the model's weights, gradients and optimizer state over
    ``tp x pp`` and f = (dp - 1) / dp (ring collectives): stage 1 keeps W + G + O / dp
    and moves f (G + W) after the backward (a reduce-scatter, then the updated
    parameters' all-gather); stage 2 keeps W + (G + O) / dp, reduce-scatters f G per
    micro-batch during the backward, gathers f W after; stage 3 keeps (W + G + O) / dp
    plus the gathered parameters of about two matmuls (W / matmuls each), gathers
    f W twice per micro-batch (forward, backward; not prefetched, so exposed) and
    reduce-scatters f G per micro-batch."""
    dp, m, share = plan.dp, plan.microbatches, plan.tp * plan.pp
    w, g, o = weights / share, grads / share, opt / share
    f = (dp - 1) / dp
    hop = (dp - 1) * latency
    if plan.zero == 1:
        return ZeroRough(f * (g + w) / bandwidth + 2 * hop, 0.0, w + g + o / dp)
    if plan.zero == 2:
        return ZeroRough(f * w / bandwidth + hop, m * (f * g / bandwidth + hop), w + (g + o) / dp)
    layer = 2 * weights / max(1, matmuls) / plan.tp
    return ZeroRough(
        2 * m * (f * w / bandwidth + hop), m * (f * g / bandwidth + hop), (w + g + o) / dp + layer
    )


def choose_split(shape: tuple[int, ...], tp: Split | None, tp_n: int, n: int) -> Split:
    """The ``dp`` split of a parameter of ``shape`` (module docstring)."""
    tp_dim = tp.dim if tp is not None and tp_n > 1 else -1
    for d, size in enumerate(shape):
        if d != tp_dim and size % n == 0:
            return Split(d, size // n)
    if tp is not None and tp_dim >= 0 and tp.block % n == 0:
        return Split(tp_dim, tp.block // n)
    free = [d for d in range(len(shape)) if d != tp_dim] or [tp_dim]
    d = max(free, key=lambda x: (shape[x], -x))
    return Split(d, -(-shape[d] // n))


def _groups(graph: Graph) -> list[_Group]:
    """The optimizer ops, grouped per parameter (connected through their values)."""
    opt = [op for op in graph.ops if op.phase is Phase.OPT and op.kind not in COLLECTIVE]
    parent = {id(op): id(op) for op in opt}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for op in opt:
        for v in op.operands:
            p = v.producer
            if p is not None and id(p) in parent:
                parent[find(id(op))] = find(id(p))
    members: dict[int, list[Op]] = {}
    for op in opt:
        members.setdefault(find(id(op)), []).append(op)
    out = []
    for ops in members.values():
        shape = next(
            (v.type.shape for op in ops for v in op.operands
             if (s := _source(v)) is not None and s.kind is K.PARAM),
            ops[-1].results[0].type.shape,
        )  # fmt: skip
        out.append(_Group(ops, shape))
    return out


def _source(v: Value) -> Op | None:
    """The parameter or buffer ``v`` is (seen through views), else None."""
    while v.producer is not None and v.producer.kind in VIEWISH and v.producer.operands:
        v = v.producer.operands[0]
    p = v.producer
    return p if p is not None and p.kind in (K.PARAM, K.BUFFER) else None


def _shard_op(op: Op, split: Split, shape: tuple[int, ...], sharding: ShardingResult) -> None:
    info = sharding.ops[op]
    inputs = tuple(
        s.with_(DP, split) if v.type.shape == shape else s
        for v, s in zip(op.operands, info.inputs, strict=True)
    )
    for r in op.results:
        if r.type.shape == shape:
            sharding.values[r.name] = sharding.of(r).with_(DP, split)
    sharding.ops[op] = OpSharding(inputs, info.divided | {DP}, info.stats)


def _store(v: Value, split: Split, sharding: ShardingResult) -> None:
    sharding.values[v.name] = sharding.of(v).with_(DP, split)


def _views_of_stored(graph: Graph, sharding: ShardingResult, stored: set[int], n: int) -> None:
    """Carry a stored shard through the views of a parameter (``W.t()``): a view
    whose split cannot follow reads the parameter whole (gathered before it)."""
    sharded = set(stored)
    for op in graph.ops:
        if op.kind not in VIEWISH or not op.operands or id(op.operands[0]) not in sharded:
            continue
        have = sharding.of(op.operands[0]).get(DP)
        ctx = AxisCtx(DP, n, 0)
        ins: list[Placement] = [have, *([REPLICATED] * (len(op.operands) - 1))]
        res = RULES[op.kind](op, ins, ctx)
        out = res.out[0] if res.out else REPLICATED
        info = sharding.ops[op]
        if isinstance(out, Split) and not any(x is not None for x in res.need):
            need = (info.inputs[0].with_(DP, have), *info.inputs[1:])
            sharding.values[op.results[0].name] = sharding.of(op.results[0]).with_(DP, out)
            sharded.add(id(op.results[0]))
        else:  # gathered before the view
            need = (info.inputs[0].with_(DP, REPLICATED), *info.inputs[1:])
        sharding.ops[op] = OpSharding(need, info.divided, info.stats)


__all__ = ["ZeroRough", "apply_zero", "choose_split", "zero_rough", "zero_stages"]
