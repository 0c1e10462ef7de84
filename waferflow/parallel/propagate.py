"""Sharding propagation: choose a placement for every value along every mesh axis.

One sweep in op order, one axis at a time (``mb``, then ``dp``, then ``tp``):

* sources start placed: inputs split on their batch dimension along ``dp`` and
  ``mb`` (replicated along ``tp``); parameters and buffers replicated along the batch
  axes and *undecided* along ``tp``;
* each op's rule (``rules_basic`` / ``rules_nn``) says what its operands must be and
  what its results are. An undecided parameter takes the placement asked of it
  (mapped back through the views between it and the op: ``W.t()``); a replicated
  operand asked to be split is sliced locally for free; any other difference is a
  *conversion*, which ``insert-collectives`` turns into a collective;
* in per-layer patterns (``layers=ddt``) the ops of a ``d`` layer are replicated
  along ``tp`` and split along ``dp``, those of a ``t`` layer the other way round,
  those of an ``r`` or ``s`` layer replicated along both (``dp`` and ``tp`` are then one
  physical axis: an op may use it one way only).

Parameters still undecided at the end are replicated. The result is plain data
keyed by value name and op index (``ShardingResult``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph, Op, Value
from waferflow.ir.opkind import (
    COLLECTIVE,
    COMM,
    ELEMENTWISE,
    OPTIMIZER,
    POOLING,
    REDUCTION,
    OpKind,
)
from waferflow.ir.parallel import AXES, VIEWISH, from_source, op_label
from waferflow.ir.sharding import (
    PARTIAL,
    REPLICATED,
    MeshAxis,
    Partial,
    Placement,
    Replicated,
    Sharding,
    Split,
    map_split_view,
    view_groups,
)
from waferflow.parallel import rules_basic as rb
from waferflow.parallel import rules_moe as rm
from waferflow.parallel import rules_nn as rn
from waferflow.parallel.plan_spec import LayerMode, Mesh
from waferflow.parallel.rule_base import (
    UNDECIDED,
    AnyPlacement,
    AxisCtx,
    RuleOut,
    is_u,
    replicate_all,
    shape,
)
from waferflow.parallel.rules_moe import expert_params

K = OpKind
Rule = Callable[[Op, Sequence[AnyPlacement], AxisCtx], RuleOut]

# VIEWISH (ir.parallel): ops whose result is a rearranged view of their first operand
# (an undecided parameter stays undecided through them, a decision maps back through them)


DEFERRABLE = ELEMENTWISE | OPTIMIZER


def _rules() -> dict[OpKind, Rule]:
    table: dict[OpKind, Rule] = {}
    for k in ELEMENTWISE | OPTIMIZER:
        table[k] = rb.elementwise
    for k in REDUCTION:
        table[k] = rb.reduction
    for k in POOLING:
        table[k] = rn.pooling
    table.update(
        {
            K.VIEW: rb.view, K.SQUEEZE: rb.view, K.UNSQUEEZE: rb.view,
            K.TRANSPOSE: rb.permute, K.PERMUTE: rb.permute, K.EXPAND: rb.expand,
            K.ALIAS: rb.identity, K.DETACH: rb.identity, K.CLONE: rb.identity,
            K.COPY: rb.identity, K.GETITEM: rb.identity, K.SELECT: rb.select,
            K.SLICE: rb.same_rank, K.PAD: rb.same_rank, K.SCATTER: rb.scatter,
            K.CAT: rb.cat, K.SPLIT: rb.split, K.STACK: rb.stack,
            K.MATMUL: rn.matmul, K.BMM: rn.matmul, K.ADDMM: rn.matmul, K.BADDBMM: rn.matmul,
            K.CONV: rn.conv, K.CONV_BACKWARD: rn.conv_backward,
            K.SDPA: rn.attention, K.SDPA_BACKWARD: rn.attention,
            K.SOFTMAX: rn.softmax, K.LOG_SOFTMAX: rn.softmax, K.SOFTMAX_BACKWARD: rn.softmax,
            K.LAYER_NORM: rn.layer_norm, K.LAYER_NORM_BACKWARD: rn.layer_norm_backward,
            K.BATCH_NORM: rn.batch_norm, K.BATCH_NORM_BACKWARD: rn.batch_norm,
            K.EMBEDDING: rn.embedding, K.EMBEDDING_BACKWARD: rn.embedding_backward,
            K.NLL_LOSS: rn.nll_loss, K.NLL_LOSS_BACKWARD: rn.nll_loss_backward,
            K.MSE_LOSS: rn.mse_loss, K.MSE_LOSS_BACKWARD: rn.mse_loss_backward,
            K.MOE_DISPATCH: rm.dispatch, K.MOE_COMBINE: rm.combine, K.TOPK: rm.topk,
        }
    )  # fmt: skip
    return table


RULES: Mapping[OpKind, Rule] = _rules()


@dataclass(frozen=True, slots=True, eq=False)
class Conversion:
    """Operand ``operand`` of op ``op`` must go from ``src`` to ``dst`` along ``axis``
    (``op`` None: graph output ``operand``)."""

    op: Op | None
    operand: int
    axis: MeshAxis
    src: Placement
    dst: Placement


@dataclass(frozen=True, slots=True)
class OpSharding:
    """How one op runs: operand placements after conversions, the axes that divide
    its work, and the axes along which it exchanges softmax statistics (with the
    softmax dimension)."""

    inputs: tuple[Sharding, ...]
    divided: frozenset[MeshAxis]
    stats: tuple[tuple[MeshAxis, int], ...] = ()


@dataclass
class ShardingResult:
    mesh: Mesh
    values: dict[str, Sharding]
    ops: dict[Op, OpSharding]
    conversions: list[Conversion]
    notes: list[str] = field(default_factory=list)

    def degrees(self) -> dict[MeshAxis, int]:
        return self.mesh.degrees()

    def of(self, v: Value) -> Sharding:
        return self.values.get(v.name, Sharding())


def propagate(
    graph: Graph,
    mesh: Mesh,
    *,
    batch: int,
    modes: Mapping[int, LayerMode] | None = None,
) -> ShardingResult:
    """Place every value of ``graph`` on ``mesh`` (see the module docstring)."""
    return _Engine(graph, mesh, batch, modes or {}).run()


class _Engine:
    def __init__(
        self, graph: Graph, mesh: Mesh, batch: int, modes: Mapping[int, LayerMode]
    ) -> None:
        self.graph = graph
        self.mesh = mesh
        self.batch = batch
        self.modes = modes
        self.axes = [a for a in AXES if mesh.degree(a) > 1]
        # along ep the experts' weights start dealt out by expert (dimension 0)
        self.experts = expert_params(graph) if mesh.degree(MeshAxis.EP) > 1 else {}
        self.pl: dict[Value, dict[MeshAxis, AnyPlacement]] = {}
        self.users = graph.users()
        self.index = {id(op): i for i, op in enumerate(graph.ops)}
        self.ops: dict[Op, OpSharding] = {}
        self.conversions: list[Conversion] = []
        self.notes: list[str] = []
        self.deferred: list[int] = []  # views of undecided values: refreshed at the end
        # partial sums already reduced for an earlier consumer: later ones share the sum
        self.reduced: set[tuple[int, MeshAxis]] = set()

    # -- driver -------------------------------------------------------------------------
    def run(self) -> ShardingResult:
        for idx, op in enumerate(self.graph.ops):
            if op.is_source:
                self._source(op)
            elif op.kind in COLLECTIVE or op.kind in COMM:
                raise PlanError(
                    f"parallelize: the graph already contains a {op.kind.value} op "
                    f"({_where(op)}); parallelize a graph without communication"
                )
            else:
                self._op(idx, op)
        for v in list(self.pl):
            for a in self.axes:
                if is_u(self._get(v, a)):
                    self._decide(v, a, REPLICATED)
        for idx in self.deferred:
            self._op(idx, self.graph.ops[idx])  # their operands are decided now
        values = {
            v.name: Sharding.of({a: self._get(v, a) for a in self.axes})  # type: ignore[misc]
            for v in self.pl
        }
        return ShardingResult(self.mesh, values, self.ops, self.conversions, self.notes)

    def _source(self, op: Op) -> None:
        for v in op.results:
            pl: dict[MeshAxis, AnyPlacement] = {}
            for a in self.axes:
                if a is MeshAxis.TP:
                    pl[a] = REPLICATED if op.kind is K.INPUT else UNDECIDED
                elif a is MeshAxis.EP and id(v) in self.experts:
                    pl[a] = self._expert_split(v)
                elif op.kind is K.INPUT and shape(v):
                    pl[a] = self._batch_split(v, a)
                else:
                    pl[a] = REPLICATED
            self.pl[v] = pl

    def _batch_split(self, v: Value, axis: MeshAxis) -> Split:
        """The batch is cut over dp, then ep (both data parallel for it), then the
        micro-batches."""
        size = shape(v)[0]
        dp = self.mesh.degree(MeshAxis.DP)
        ep = self.mesh.degree(MeshAxis.EP)
        m = self.mesh.degree(MeshAxis.MB)
        if size % dp:
            raise PlanError(
                f"dp={dp} does not divide the batch {size} of input %{v.name}; choose dp "
                f"dividing {size}"
            )
        if (size // dp) % ep:
            raise PlanError(
                f"ep={ep} does not divide the per-replica batch {size // dp} of input "
                f"%{v.name} (batch {size} / dp {dp}): the expert-parallel ranks split the "
                "batch too"
            )
        if (size // (dp * ep)) % m:
            raise PlanError(
                f"microbatches={m} does not divide the per-replica batch {size // (dp * ep)} "
                f"of input %{v.name} (batch {size} / dp {dp}" + (f" / ep {ep})" if ep > 1 else ")")
            )
        if axis is MeshAxis.DP:
            return Split(0, size // dp)
        if axis is MeshAxis.EP:
            return Split(0, size // (dp * ep))
        return Split(0, size // (dp * ep * m))

    def _expert_split(self, v: Value) -> Split:
        experts, ep = self.experts[id(v)], self.mesh.degree(MeshAxis.EP)
        if experts % ep:
            raise PlanError(
                f"ep={ep} does not divide the {experts} experts of %{v.name}; choose ep "
                f"dividing {experts}"
            )
        return Split(0, experts // ep)

    def _op(self, idx: int, op: Op) -> None:
        mode = self.modes.get(idx)
        inputs: dict[MeshAxis, list[Placement]] = {}
        outs: dict[MeshAxis, list[Placement]] = {}
        divided: set[MeshAxis] = set()
        stats: list[tuple[MeshAxis, int]] = []
        for a in self.axes:
            forced = self._forced(mode, a)
            res = self._apply(idx, op, a, mode, forced)
            if res is None:  # undecided view: resolved lazily, refreshed at the end
                inputs[a] = [REPLICATED] * len(op.operands)
                outs[a] = []
                if not self.deferred or self.deferred[-1] != idx:
                    self.deferred.append(idx)
                continue
            inputs[a], outs[a], div, sd = res
            if div:
                divided.add(a)
            if sd is not None:
                stats.append((a, sd))
        if self.mesh.aliased and self._conflict(outs, divided):
            # dp and tp share the ranks: an op may use them one way only
            res = self._apply(idx, op, MeshAxis.TP, mode, forced=True)
            assert res is not None
            inputs[MeshAxis.TP], outs[MeshAxis.TP], _, _ = res
            divided.discard(MeshAxis.TP)
            stats = [s for s in stats if s[0] is not MeshAxis.TP]
        for a in self.axes:
            for v, p in zip(op.results, outs[a], strict=False):
                self.pl.setdefault(v, {})[a] = p
        for v in op.results:
            for a in self.axes:
                self.pl.setdefault(v, {}).setdefault(a, UNDECIDED)
        self.ops[op] = OpSharding(
            inputs=tuple(
                Sharding.of({a: inputs[a][i] for a in self.axes}) for i in range(len(op.operands))
            ),
            divided=frozenset(divided),
            stats=tuple(stats),
        )

    @staticmethod
    def _defers(op: Op, ins: Sequence[AnyPlacement]) -> bool:
        """Ops on undecided parameters only (a transpose of a weight, the scaling of
        an optimizer moment) wait until a later op decides the parameter."""
        if not ins or not any(is_u(p) for p in ins):
            return False
        if op.kind in VIEWISH:
            return is_u(ins[0])
        return op.kind in DEFERRABLE and all(is_u(p) for p in ins)

    @staticmethod
    def _forced(mode: LayerMode | None, axis: MeshAxis) -> bool:
        if mode is LayerMode.REPLICATE or mode is LayerMode.SINGLE:
            return axis is not MeshAxis.MB
        if mode is LayerMode.DATA:
            return axis is MeshAxis.TP
        if mode is LayerMode.TENSOR:
            return axis is MeshAxis.DP
        return False

    def _conflict(self, outs: dict[MeshAxis, list[Placement]], divided: set[MeshAxis]) -> bool:
        dp, tp = outs.get(MeshAxis.DP, []), outs.get(MeshAxis.TP, [])
        used_dp = MeshAxis.DP in divided or any(not isinstance(p, Replicated) for p in dp)
        used_tp = MeshAxis.TP in divided or any(not isinstance(p, Replicated) for p in tp)
        return used_dp and used_tp

    # -- one op along one axis ----------------------------------------------------------
    def _apply(
        self, idx: int, op: Op, axis: MeshAxis, mode: LayerMode | None, forced: bool
    ) -> tuple[list[Placement], list[Placement], bool, int | None] | None:
        ins = [self._get(v, axis) for v in op.operands]
        if self._defers(op, ins):
            for v in op.results:
                self.pl.setdefault(v, {})[axis] = UNDECIDED
            return None
        n = self.mesh.degree(axis)
        ctx = AxisCtx(axis, n, self.batch, mode, self._choose_block)
        pre: list[AnyPlacement | None] = [None] * len(ins)
        shared = [False] * len(ins)
        for i, v in enumerate(op.operands):
            if isinstance(ins[i], Partial) and (id(v), axis) in self.reduced:
                ins[i], shared[i] = REPLICATED, True
        if mode is LayerMode.DATA and axis is MeshAxis.DP:
            # a data-parallel layer cuts a replicated batch locally
            for i, (v, p) in enumerate(zip(op.operands, ins, strict=True)):
                if (isinstance(p, Replicated) and v.producer is not None
                        and not v.producer.is_source and shape(v)
                        and shape(v)[0] == self.batch and self.batch % n == 0):  # fmt: skip
                    pre[i] = ins[i] = Split(0, self.batch // n)
        if forced:
            res = replicate_all(op, ins)
        else:
            rule = RULES.get(op.kind)
            if rule is None:
                res = rb.batch_fallback(op, ins, ctx, f"no sharding rule for {op.kind.value}")
            else:
                res = rule(op, ins, ctx)
        if res.error:
            raise PlanError(f"{res.error} (at {_where(op)})")
        if res.note:
            self.notes.append(f"{axis.value}: {res.note} (at {_where(op)})")
        effective: list[Placement] = []
        for i, (v, cur, need) in enumerate(zip(op.operands, ins, res.need, strict=True)):
            if need is None and pre[i] is not None:
                need = pre[i]
            if shared[i]:
                self.conversions.append(Conversion(op, i, axis, PARTIAL, REPLICATED))
            effective.append(self._realise(idx, op, i, v, axis, cur, need))
        return effective, list(res.out), res.divided, res.stats_dim

    def _realise(
        self,
        idx: int,
        op: Op,
        i: int,
        v: Value,
        axis: MeshAxis,
        cur: AnyPlacement,
        need: AnyPlacement | None,
    ) -> Placement:
        if is_u(need):
            need = REPLICATED
        if is_u(cur):
            want: Placement = need if need is not None else REPLICATED  # type: ignore[assignment]
            got = self._decide(v, axis, want)
            return want if got == want or isinstance(got, Replicated) else got
        if need is None or need == cur:
            return cur  # type: ignore[return-value]
        if isinstance(cur, Replicated) and isinstance(need, Split):
            return need  # a local slice, no communication
        if axis is not MeshAxis.MB and from_source(v) and not isinstance(cur, Partial):
            return need  # inputs and weights are loaded as each rank needs them
        if axis is MeshAxis.MB and isinstance(cur, Split):
            raise PlanError(
                f"{_where(op)} needs whole samples across micro-batches of %{v.name} "
                f"({cur} along mb); use microbatches=1 for this model"
            )
        self.conversions.append(Conversion(op, i, axis, cur, need))  # type: ignore[arg-type]
        if isinstance(cur, Partial) and isinstance(need, Replicated):
            self.reduced.add((id(v), axis))
        return need  # type: ignore[return-value]

    # -- undecided parameters ----------------------------------------------------------
    def _get(self, v: Value, axis: MeshAxis) -> AnyPlacement:
        pl = self.pl.setdefault(v, {})
        p = pl.get(axis, REPLICATED)
        op = v.producer
        if not is_u(p) or op is None or op.is_source or not op.operands:
            return p
        if op.kind in VIEWISH:
            ins = [self._get(op.operands[0], axis), *([REPLICATED] * (len(op.operands) - 1))]
        elif op.kind in DEFERRABLE:
            ins = [self._get(u, axis) for u in op.operands]
        else:
            return p
        if any(is_u(x) for x in ins):
            return p
        res = RULES[op.kind](op, ins, AxisCtx(axis, self.mesh.degree(axis), self.batch))
        p = res.out[op.results.index(v)] if res.out else REPLICATED
        pl[axis] = p
        return p

    def _decide(self, v: Value, axis: MeshAxis, want: Placement) -> Placement:
        """Fix the undecided sources under ``v`` (through views and ops waiting on
        them) so that ``v`` gets ``want``; returns what ``v`` actually gets."""
        op = v.producer
        pl = self.pl.setdefault(v, {})
        if op is None or op.is_source:
            pl[axis] = want
            return want
        if not is_u(pl.get(axis)):
            return self._get(v, axis)  # type: ignore[return-value]
        if op.kind in VIEWISH:
            inv = _inverse(v, want, self.mesh.degree(axis))
            if inv is None:
                inv = REPLICATED
                self.notes.append(
                    f"{axis.value}: %{op.operands[0].name} kept whole: its split cannot be "
                    "mapped back through its views"
                )
            self._decide(op.operands[0], axis, inv)
        else:
            out_shape = shape(v)
            for u in op.operands:
                if is_u(self._get(u, axis)):
                    self._decide(u, axis, _aligned_placement(want, shape(u), out_shape))
        got = self._get(v, axis)
        return REPLICATED if is_u(got) else got  # type: ignore[return-value]

    def _choose_block(self, op: Op, out_dim: int) -> int:
        """Column split of ``op``'s result: if the result is chunked along the split
        dimension (a fused q-k-v projection), use the chunks' heads as the block
        (``-c`` when the degree does not divide the chunks of size c; 0: none)."""
        n = self.mesh.degree(MeshAxis.TP)
        frontier = [(op.results[0], out_dim)]
        for _ in range(4):
            nxt = []
            for v, d in frontier:
                for u in self.users.get(v, []):
                    if u.kind is K.SPLIT:
                        rank = len(shape(v))
                        dim = int(u.attrs.get("dim", 0) or 0) % rank  # type: ignore[arg-type]
                        sizes = {shape(r)[dim] for r in u.results}
                        if dim == d and len(sizes) == 1:
                            c = sizes.pop()
                            if c < shape(v)[d]:
                                return c // n if c % n == 0 else -c
                    elif u.kind in (K.VIEW, K.ALIAS, K.DETACH, K.CLONE):
                        nd = _follow_dim(shape(v), shape(u.results[0]), d)
                        if nd is not None:
                            nxt.append((u.results[0], nd))
            frontier = nxt
        return 0


def _aligned_placement(
    want: Placement, operand: tuple[int, ...], out: tuple[int, ...]
) -> Placement:
    """An elementwise operand's share of a result placed ``want`` (broadcasting)."""
    if not isinstance(want, Split):
        return want
    d = want.dim - (len(out) - len(operand))
    if d >= 0 and operand[d] == out[want.dim]:
        return Split(d, want.block)
    return REPLICATED


def _follow_dim(src: tuple[int, ...], dst: tuple[int, ...], d: int) -> int | None:
    groups = view_groups(src, dst)
    if groups is None:
        return None
    for ga, gb in groups:
        if d in ga:
            big = [k for k in gb if dst[k] > 1]
            if [x for x in ga if src[x] > 1] == [d] and len(big) == 1:
                return big[0]
            return None
    return None


def _inverse(v: Value, p: Placement, n: int) -> Placement | None:
    """The placement of a view's operand that gives its result ``p``."""
    op = v.producer
    assert op is not None
    if not isinstance(p, Split):
        return p
    src, dst = shape(op.operands[0]), shape(v)
    if op.kind in (K.VIEW, K.SQUEEZE, K.UNSQUEEZE):
        return map_split_view(dst, src, p, n)
    if op.kind in (K.TRANSPOSE, K.PERMUTE):
        perm = rb.permutation(op)
        return Split(perm[p.dim], p.block)
    if op.kind is K.EXPAND:
        d = p.dim - (len(dst) - len(src))
        return Split(d, p.block) if d >= 0 and src[d] == dst[p.dim] else None
    return p


def _where(op: Op) -> str:
    return op_label(op)


__all__ = ["RULES", "VIEWISH", "Conversion", "OpSharding", "ShardingResult", "propagate"]
