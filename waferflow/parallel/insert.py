"""Turn the conversions of a sharding into collective ops in the graph.

Every conversion found by propagation (an operand that must change placement along
``dp`` or ``tp``) becomes an op right after the value's producer:

======================  ==================  ===========================================
from -> to              op                  note
======================  ==================  ===========================================
partial -> replicated   ``all_reduce``      ``reduce`` to replica 0 for gradients when
                                            ``grad-reduce=root``
split -> replicated     ``all_gather``
partial -> split        ``reduce_scatter``
split -> other split    ``all_to_all``
======================  ==================  ===========================================

In a per-layer plan (``cut=layer``) a conversion between two stages gets no op: each
rank of the consuming stage receives the pieces it needs straight from the ranks
that hold them (``waferflow.parallel.redistribute``), summing partial sums itself.

Attributes: ``axis`` (dp / tp), ``src`` / ``dst`` (the placements, as text) and, for
``reduce``, ``root=0``. Consumers that need the same conversion of the same value
share one collective; a consumer needing several axes gets a chain (dp first, then
tp). Along ``mb`` there is no op: a partial sum over micro-batches is accumulated
in place, and its consumer simply runs after the last micro-batch.

A softmax over a split dimension is followed by an ``all_reduce`` with
``stats_dim`` set: the ranks exchange the per-row max and sum, not the tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.ir.graph import Attrs, Cost, Graph, Op, Phase, Provenance, Value
from waferflow.ir.opkind import COLLECTIVE, OpKind
from waferflow.ir.parallel import (
    AXES,
    RANK_AXES,
    ParallelLevel,
    needs_conversion,
    reads_value,
    stored_shard,
    updates_param,
)
from waferflow.ir.sharding import (
    PARTIAL,
    REPLICATED,
    MeshAxis,
    Partial,
    Placement,
    Replicated,
    Sharding,
    Split,
    map_split_permute,
)
from waferflow.parallel.plan_spec import GradReduce, ParallelPlan, StageCut
from waferflow.parallel.propagate import Conversion, OpSharding, ShardingResult
from waferflow.parallel.rules_basic import permutation
from waferflow.parallel.stages import StageAssignment, layer_key, root_value

K = OpKind
_AXIS_ORDER = AXES
_RANK_AXES = RANK_AXES


@dataclass(frozen=True)
class InsertedCollective:
    op: Op
    axis: MeshAxis
    src: Placement
    dst: Placement
    stats_dim: int | None = None


def placement_text(p: Placement) -> str:
    if isinstance(p, Split):
        return f"S{p.dim}/{p.block}"
    return "P" if isinstance(p, Partial) else "R"


def _kind(src: Placement, dst: Placement, axis: MeshAxis, to_root: bool) -> OpKind:
    if isinstance(src, Partial) and isinstance(dst, Replicated):
        return K.REDUCE if to_root else K.ALL_REDUCE
    if isinstance(src, Split) and isinstance(dst, Replicated):
        return K.ALL_GATHER
    if isinstance(src, Partial) and isinstance(dst, Split):
        return K.REDUCE_SCATTER
    return K.ALL_TO_ALL


def conversions_from_ir(graph: Graph) -> list[Conversion]:
    """The conversions the annotations imply: every operand whose sharding differs
    from what its op needs (``needs_conversion``), in op order, and every graph output
    that is a partial sum along ``dp`` or ``tp`` (``op`` None, ``operand`` the output's
    index: an output is always reduced). A partial sum already reduced for an earlier
    use is reduced once: later uses share that all-reduce (and slice it locally)."""
    gp = graph.parallel
    if gp is None:
        return []
    axes = gp.axes
    out: list[Conversion] = []
    reduced: set[tuple[int, MeshAxis]] = set()
    for op in graph.ops:
        par = op.par
        if par is None or op.kind in COLLECTIVE or len(par.inputs) != len(op.operands):
            continue
        for i, (v, need) in enumerate(zip(op.operands, par.inputs, strict=True)):
            if not reads_value(op, i):
                continue
            for a in axes:
                have, want = v.sharding.get(a), need.get(a)
                shared = (id(v), a) in reduced and not isinstance(want, Partial)
                if shared and isinstance(have, Partial):
                    out.append(Conversion(op, i, a, PARTIAL, REPLICATED))
                    continue
                if not needs_conversion(v, a, have, want):
                    continue
                out.append(Conversion(op, i, a, have, want))
                if isinstance(have, Partial) and isinstance(want, Replicated):
                    reduced.add((id(v), a))
    for k, v in enumerate(graph.outputs):
        for a in axes:
            have = v.sharding.get(a)
            if a in _RANK_AXES and isinstance(have, Partial):
                out.append(Conversion(None, k, a, PARTIAL, REPLICATED))
            elif (
                a is MeshAxis.DP
                and gp.zero in (1, 2)
                and isinstance(have, Split)
                and updates_param(v)
            ):  # ZeRO-1/2: every replica starts the next step with the whole parameter
                out.append(Conversion(None, k, a, have, REPLICATED))
    return out


def crosses_stages(c: Conversion, stages: StageAssignment, plan: ParallelPlan) -> bool:
    """Whether conversion ``c`` (of an op's operand) is between two stages of a per-layer
    plan, where no collective spans both and the messages reshard the value."""
    if plan.cut is not StageCut.LAYER or c.op is None:
        return False
    return stages.stage_of.get(c.op) != _stage_of_value(stages, c.op.operands[c.operand])


def insert_collectives(
    graph: Graph, sharding: ShardingResult, stages: StageAssignment, plan: ParallelPlan
) -> list[InsertedCollective]:
    """Insert the collectives the annotated graph needs (mutating ``graph``,
    ``sharding`` and ``stages``) and re-annotate it at level ``collectives``."""
    from waferflow.parallel.annotate import annotate  # annotate imports this module

    by_use: dict[tuple[Op | None, int], list[Conversion]] = {}
    for c in conversions_from_ir(graph):
        if c.op is not None and crosses_stages(c, stages, plan):
            continue  # between the stages of a per-layer plan: the transfer itself reshards
        by_use.setdefault((c.op, c.operand), []).append(c)
    made: dict[tuple, Value] = {}
    inserted: list[InsertedCollective] = []
    for (consumer, i), convs in by_use.items():
        convs.sort(key=lambda c: _AXIS_ORDER.index(c.axis))
        v = consumer.operands[i] if consumer is not None else graph.outputs[i]
        to_opt = consumer is not None and consumer.phase is Phase.OPT
        mb = next((c.dst for c in convs if c.axis is MeshAxis.MB), None)
        if consumer is None and isinstance(sharding.of(v).get(MeshAxis.MB), Partial):
            mb = REPLICATED  # a returned sum is accumulated over the micro-batches first
        for c in convs:
            if c.axis is MeshAxis.MB:
                continue  # accumulated in place across micro-batches
            gather = consumer is not None and stored_shard(v, c.axis, c.src)
            # ZeRO-2/3 reduce-scatter each micro-batch's gradient; the shard accumulates
            per_mb = to_opt and plan.zero >= 2 and isinstance(c.dst, Split)
            seen_mb = None if per_mb else mb
            key: tuple = (id(v), c.axis, c.src, c.dst, seen_mb)
            if gather:  # ZeRO-3: gathered again for each phase and layer that uses it
                assert consumer is not None
                key += (consumer.phase, layer_key(consumer.prov.module))
            new = made.get(key)
            if new is None and consumer is not None:
                new = _view_of_resplit(graph, sharding, stages, v, c, made, seen_mb, consumer)
            if new is None:
                to_root = to_opt and c.axis is MeshAxis.DP and plan.grad_reduce is GradReduce.ROOT
                new = _add(graph, sharding, stages, v, c, seen_mb, to_root, inserted)
                if gather:
                    assert consumer is not None
                    _before_user(graph, new.producer, consumer, stages)
                made[key] = new
            v = new
            mb = None  # accumulated once, before the first collective of the chain
        if consumer is None:
            graph.outputs[i] = v
        elif v is not consumer.operands[i]:
            ops = list(consumer.operands)
            ops[i] = v
            consumer.operands = tuple(ops)
    for op in list(graph.ops):
        info = sharding.ops.get(op)
        if info is None:
            continue
        for axis, dim in info.stats:
            _add_stats(graph, sharding, stages, op, axis, dim, inserted)
    out = _bucket(graph, sharding, stages, inserted)
    view = graph.parallel.wafer if graph.parallel is not None else ""
    annotate(graph, plan, view, sharding, stages, ParallelLevel.COLLECTIVES)
    return out


def _bucket(
    graph: Graph,
    sharding: ShardingResult,
    stages: StageAssignment,
    inserted: list[InsertedCollective],
) -> list[InsertedCollective]:
    """Merge the gradient collectives of one layer into one op (a bucket, as DDP
    does): one collective moves the layer's gradients together, paying the start-up
    latency once. Only collectives whose every user is an optimizer op are merged."""
    users = graph.users()
    groups: dict[tuple, list[InsertedCollective]] = {}
    for ic in inserted:
        op = ic.op
        r = op.results[0]
        if ic.stats_dim is not None or not users.get(r):
            continue
        if not all(u.phase is Phase.OPT for u in users[r]):
            continue
        key = (stages.stage_of[op], layer_key(op.prov.module), op.kind, ic.axis, ic.src, ic.dst,
               op.attrs.get("root"), str(sharding.ops[op].inputs[0].get(MeshAxis.MB)))  # fmt: skip
        groups.setdefault(key, []).append(ic)
    out = [ic for ic in inserted if not any(ic in g for g in groups.values() if len(g) > 1)]
    position = {id(op): i for i, op in enumerate(graph.ops)}
    for members in groups.values():
        if len(members) < 2:
            continue
        old = [m.op for m in members]
        names = [o.results[0].name for o in old]
        olds = [o.results[0] for o in old]
        inputs = [o.operands[0] for o in old]
        infos = [sharding.ops.pop(o) for o in old]
        stage = stages.stage_of[old[0]]
        for o in old:
            del stages.stage_of[o]
        last = max(old, key=lambda o: position[id(o)])
        anchor_at = graph.ops.index(last)
        new = graph.add_op(
            old[0].kind, inputs, [v.type for v in olds], attrs=old[0].attrs,
            cost=sum((o.cost for o in old), Cost()), phase=old[0].phase, prov=old[0].prov,
            names=[f"{n}.bucket" for n in names],
        )  # fmt: skip
        graph.ops.remove(new)
        graph.ops.insert(anchor_at + 1, new)
        for a, b in zip(olds, new.results, strict=True):
            graph.replace_all_uses(a, b)
            sharding.values[b.name] = sharding.values.pop(a.name)
        graph.erase_ops(old)
        sharding.ops[new] = OpSharding(
            inputs=tuple(i.inputs[0] for i in infos), divided=frozenset()
        )
        stages.stage_of[new] = stage
        m0 = members[0]
        out.append(InsertedCollective(new, m0.axis, m0.src, m0.dst))
    return out


def _after_producer(graph: Graph, new: Op, v: Value) -> None:
    """Move ``new`` right after the op producing ``v`` (the graph stays topological)."""
    prod = v.producer
    pos = graph.ops.index(prod) + 1 if prod is not None else 0
    graph.ops.remove(new)
    graph.ops.insert(pos, new)


def _view_of_resplit(
    graph: Graph,
    sharding: ShardingResult,
    stages: StageAssignment,
    v: Value,
    c: Conversion,
    made: dict[tuple, Value],
    mb: Placement | None,
    consumer: Op,
) -> Value | None:
    """A transpose of a value that an earlier use already re-split the matching way
    (the backward's transpose of an experts' input, split by expert in the forward):
    the transpose of that re-split value, instead of a second all-to-all."""
    view = v.producer
    if (
        view is None or view.kind not in (K.TRANSPOSE, K.PERMUTE) or len(view.operands) != 1
        or not isinstance(c.src, Split) or not isinstance(c.dst, Split)
    ):  # fmt: skip
        return None
    x = view.operands[0]
    perm = permutation(view)
    for key, w in made.items():
        if len(key) != 5 or key[0] != id(x) or key[1] is not c.axis or key[4] != mb:
            continue
        src, dst = key[2], key[3]
        if not (isinstance(src, Split) and isinstance(dst, Split)):
            continue
        if map_split_permute(src, perm) != c.src or map_split_permute(dst, perm) != c.dst:
            continue
        new = graph.add_op(
            view.kind, [w], [v.type], attrs=view.attrs, phase=consumer.phase, prov=view.prov,
            names=[f"{v.name}.{c.axis.value}"],
        )  # fmt: skip
        graph.ops.remove(new)
        graph.ops.insert(graph.ops.index(consumer), new)
        sharding.values[new.results[0].name] = sharding.of(v).with_(c.axis, c.dst)
        sharding.ops[new] = OpSharding((sharding.of(w),), sharding.ops[view].divided)
        stages.stage_of[new] = stages.stage_of.get(view, stages.stage_of.get(consumer, 0))
        made[(id(v), c.axis, c.src, c.dst, mb)] = new.results[0]
        return new.results[0]
    return None


def _before_user(graph: Graph, new: Op | None, user: Op, stages: StageAssignment) -> None:
    """Move a ZeRO-3 gather right before the first op that needs the parameter
    whole, in that op's phase and stage: gathered just in time, freed after."""
    assert new is not None
    graph.ops.remove(new)
    graph.ops.insert(graph.ops.index(user), new)
    new.phase = user.phase
    new.prov = Provenance(user.prov.module, new.prov.aten)
    stages.stage_of[new] = stages.stage_of.get(user, stages.stage_of.get(new, 0))


def _stage_of_value(stages: StageAssignment, v: Value) -> int:
    prod = root_value(v).producer
    if prod is None or prod.is_source:
        prod = v.producer
    return stages.stage_of.get(prod, 0) if prod is not None else 0


def _add(
    graph: Graph,
    sharding: ShardingResult,
    stages: StageAssignment,
    v: Value,
    c: Conversion,
    mb: Placement | None,
    to_root: bool,
    inserted: list[InsertedCollective],
) -> Value:
    kind = _kind(c.src, c.dst, c.axis, to_root)
    attrs = {"axis": c.axis.value, "src": placement_text(c.src), "dst": placement_text(c.dst)}
    if kind is K.REDUCE:
        attrs["root"] = 0
    prod = v.producer
    phase = prod.phase if prod is not None else Phase.FWD
    op = graph.add_op(
        kind,
        [v],
        [v.type],
        attrs=Attrs.of(attrs),
        cost=Cost(0, v.type.nbytes, v.type.nbytes),
        phase=phase,
        prov=prod.prov if prod is not None else None,
        names=[f"{v.name}.{c.axis.value}_{kind.value}"],
    )
    _after_producer(graph, op, v)
    before = sharding.of(v)
    # the input as the collective sees it: accumulated over micro-batches if asked
    seen = before.with_(MeshAxis.MB, mb) if mb is not None else before
    seen = seen.with_(c.axis, c.src)
    sharding.values[op.results[0].name] = seen.with_(c.axis, c.dst)
    sharding.ops[op] = OpSharding(inputs=(seen,), divided=frozenset())
    stages.stage_of[op] = _stage_of_value(stages, v)
    inserted.append(InsertedCollective(op, c.axis, c.src, c.dst))
    return op.results[0]


def _add_stats(
    graph: Graph,
    sharding: ShardingResult,
    stages: StageAssignment,
    op: Op,
    axis: MeshAxis,
    dim: int,
    inserted: list[InsertedCollective],
) -> None:
    v = op.results[0]
    users = [u for u in graph.ops if any(x is v for x in u.operands)]
    here = placement_text(sharding.of(v).get(axis))
    attrs = {"axis": axis.value, "src": here, "dst": here, "stats_dim": dim}
    new = graph.add_op(
        K.ALL_REDUCE,
        [v],
        [v.type],
        attrs=Attrs.of(attrs),
        phase=op.phase,
        prov=op.prov,
        names=[f"{v.name}.{axis.value}_stats"],
    )
    _after_producer(graph, new, v)
    for u in users:
        u.operands = tuple(new.results[0] if x is v else x for x in u.operands)
    graph.outputs = [new.results[0] if x is v else x for x in graph.outputs]
    s: Sharding = sharding.of(v)
    sharding.values[new.results[0].name] = s
    sharding.ops[new] = OpSharding(inputs=(s,), divided=frozenset())
    stages.stage_of[new] = stages.stage_of.get(op, 0)
    inserted.append(InsertedCollective(new, axis, s.get(axis), s.get(axis), dim))


__all__ = ["InsertedCollective", "conversions_from_ir", "insert_collectives", "placement_text"]
