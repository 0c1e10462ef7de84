"""Assemble the actor program (``Plan``) from a scheduled ``Program``.

* compute actors get their rank's share of their ops' cost (``shardcost``), plus the
  accumulation of partial gradients over micro-batches and, with recompute, the
  forward FLOPs of their micro-batch on the first backward actor of a stage;
* collectives become step actors and transfers (``collective_lowering``);
* a value used on another core is one message per (producer, value, core), to the
  first actor of that core that uses it; uses on the same core are zero-cost local
  messages (they order nothing the core order does not, but let the simulator keep
  the producer's buffer until its last local use);
* sources (weights, optimizer state, inputs) are resident: counted once per core, in
  ``mem_bytes`` of the first actor there that uses them. On a wafer with a host
  (``Wafer.host``) the host streams each of them to that actor (``Plan.host``, with
  its last reader on the core), and receives the step's results;
* in a per-layer plan a value crossing from one stage to the next is resharded by
  the transfers themselves (``redistribute``): a piece sent to several cores is a
  broadcast (``Message.bcast``), partial sums are added by the consumer (an ADD pass
  before its own work); a received value is kept until its last reader on the core
  (``Message.last_use``).

``ActorMeta`` keeps, per actor, the buffers it produces and uses, for
``plan-memory``.

Only the collectives (their algorithms and step actors), the cores and the per-core
orders depend on where the ranks run. A program retargeted to another layout
(``build.retarget``) shares an ``AssemblyMemo`` with the program it came from: the
compute actors with their buffers, work and residency, the messages into them and the
host's transfers (their sources as references to items, resolved per layout) are
worked out once and reused; the result is the same plan, byte for byte, as a fresh
assembly on that layout.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Op, Phase, Value
from waferflow.ir.opkind import VIEWS, OpKind
from waferflow.ir.parallel import reads_value, stored_shard
from waferflow.ir.plan import Actor, HostTransfer, Message, OpWork, Plan
from waferflow.ir.sharding import MeshAxis, Replicated, shard_shape
from waferflow.ir.target.wafer import Wafer
from waferflow.ir.work import op_work
from waferflow.mapper.collectives import Algorithm
from waferflow.parallel.build import ActorSpec, CollInstance, Item, MbMode, Program
from waferflow.parallel.collective_lowering import KIND_OF, ScheduleCache, expand, wire
from waferflow.parallel.lowering_extras import ShiftAndSwitch
from waferflow.parallel.plan_spec import CollectiveAlgo
from waferflow.parallel.redistribute import Region
from waferflow.parallel.shardcost import division, instance_degrees, share, value_bytes
from waferflow.parallel.shift import is_shift, reads_shift
from waferflow.parallel.stages import layer_key, root_value
from waferflow.parallel.transfers import BufKey, Transfers

K = OpKind


@dataclass
class ActorMeta:
    """Buffers of one actor, for liveness: what it creates, what it reads, what it
    needs resident (sources), and the block it runs in."""

    block: str
    produces: list[tuple[BufKey, int, str]] = field(default_factory=list)
    uses: list[BufKey] = field(default_factory=list)
    received: dict[BufKey, int] = field(default_factory=dict)
    resident: list[tuple[str, int, str]] = field(default_factory=list)
    recompute: bool = False  # a backward actor that recomputes its forward


@dataclass(frozen=True)
class CollectiveRecord:
    name: str
    kind: str
    axis: str
    algorithm: str
    ranks: int
    bytes: int
    instances: int


@dataclass
class Assembled:
    plan: Plan
    meta: list[ActorMeta]
    collectives: list[CollectiveRecord]
    diagnostics: list[str]


@dataclass(slots=True)
class _A:
    name: str
    core: int
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    dtype: DType = DType.F32
    phase: Phase = Phase.FWD
    op_kind: OpKind = OpKind.OPAQUE
    module: str = ""
    mem_bytes: int = 0
    out_bytes: int = 0
    stage: int = 0
    microbatch: int = 0
    layer: str = ""
    work: list[OpWork] = field(default_factory=list)
    own_work: list[OpWork] = field(default_factory=list)  # its ops' passes (no accumulation)


# A reference to the actor that holds an item's result, resolved per layout:
# >= 0 a compute actor id; < 0 the final actor of member k of collective i, -1 - slot
Ref = int
# a data message before de-duplication: (source, actor, bytes, value, remote, region)
_Data = tuple[Ref, int, int, str, bool, Region]


@dataclass
class AssemblyMemo:
    """The layout-independent results of assembling one program (module docstring),
    filled by the first assembly and reused by every layout the program is retargeted
    to. ``remote`` in ``data`` records which messages crossed cores: the reuse relies on
    it holding on every layout (ranks never share a core), and a layout where it does
    not is assembled afresh."""

    acts: list[_A] | None = None  # compute actors, final (their cores are replaced)
    meta: list[ActorMeta] | None = None  # compute actors' buffers (shared, read-only)
    # per collective instance: kind, total bytes, result bytes, root, the operand made
    # last, and per member per operand the (producer, buffer) it reads
    coll_in: dict[
        int, tuple[Any, int, list[int], int, int, list[list[list[tuple[Ref, BufKey]]]]]
    ] = field(default_factory=dict)
    # per core slot (the program's items, in (stage, rank) order): the data messages into
    # its actors, and the host's transfers to them
    data: list[list[_Data]] | None = None
    host: list[list[HostTransfer]] | None = None
    # per compute actor, the roofline seconds the per-core orders were made with (an
    # ADD pass the data messages add later does not count)
    seconds: dict[int, float] = field(default_factory=dict)
    # the collectives' choices and schedules for one wafer and algorithm
    schedules: tuple[Any, Any, dict, dict, dict] | None = None


def assemble(prog: Program, wafer: Wafer, algo: CollectiveAlgo | None = None) -> Assembled:
    memo = prog.memo.get("assembly")
    if not isinstance(memo, AssemblyMemo):
        memo = prog.memo["assembly"] = AssemblyMemo()
    done = _Assembler(prog, wafer, algo or prog.plan.algo, memo).run()
    if done is None:  # the memo does not hold on this layout
        done = _Assembler(prog, wafer, algo or prog.plan.algo, AssemblyMemo()).run()
    assert done is not None
    return done


class _Assembler(Transfers, ShiftAndSwitch):
    def __init__(
        self, prog: Program, wafer: Wafer, algo: CollectiveAlgo, memo: AssemblyMemo
    ) -> None:
        self.p = prog
        self.wafer = wafer
        self.memo = memo
        self.cache = ScheduleCache(wafer, algo)
        shared = memo.schedules
        if shared is not None and shared[0] is wafer and shared[1] is algo:
            self.cache._choice, self.cache._sched, self.cache._routes = shared[2:]
        else:
            memo.schedules = (wafer, algo, self.cache._choice, self.cache._sched,
                              self.cache._routes)  # fmt: skip
        self.expanded: dict[int, Any] = {}  # id(schedule) -> expand(schedule)
        self.acts: list[_A] = []
        self.meta: list[ActorMeta] = []
        self.msgs: list[tuple[int, int, int, bool]] = []  # src, dst, bytes, holds
        self.bcast: dict[int, int] = {}  # message -> broadcast group (same data, many cores)
        self.last_use: dict[int, int] = {}  # message -> last actor on its core reading it
        self.host: list[HostTransfer] = []
        self.compute_id: list[int] = []
        # per collective instance: per member: its step actors, and its final actor
        self.coll_steps: dict[int, list[list[int]]] = {}
        self.coll_final: dict[int, list[int]] = {}
        self.records: dict[tuple[str, str, str, str, int, int], int] = {}
        # ``_order`` releases a spread collective's steps alike on every rank of a stage:
        # per (op, stage, block, micro-batch), each step's estimated transfer seconds
        # (the most any group of the stage receives in it); per collective instance, its
        # key there and, per member, its step actors by step
        self.stage_need: dict[tuple[int, int, str, int], dict[int, float]] = {}
        self.coll_key: dict[int, tuple[int, int, str, int]] = {}
        self.coll_at: dict[int, list[dict[int, int]]] = {}
        self.acc_flops: dict[int, int] = {}  # compute actor -> FLOPs adding into accumulators
        self.m = prog.microbatches
        self.init_extras()
        self.coll_base: list[int] = []  # first reference slot of each collective's members
        # layout-independent figures, cached per op / value / rank for the first pass
        self._op_static: dict[tuple[int, bool], tuple] = {}
        self._value_static: dict[int, tuple] = {}
        self._users_of: dict[int, tuple[bool, tuple[int, ...]]] = {}
        self._division: dict[tuple, tuple[int, int]] = {}
        # a step's passes, one tuple per distinct step (so the simulator times each once)
        self._step_work: dict[tuple, tuple[OpWork, ...]] = {}
        self._works: dict[tuple, dict[tuple[int, int, int, int], tuple[OpWork, ...]]] = {}

    def run(self) -> Assembled | None:
        memo = self.memo
        base = 0
        for ci in self.p.collectives:
            self.coll_base.append(base)
            base += len(ci.ranks)
        first = memo.acts is None
        if first:
            for spec in self.p.actors:
                self.compute_id.append(self._compute(spec))
            if self.p.plan.recompute:
                self._recompute()
        else:
            assert memo.acts is not None and memo.meta is not None
            self.compute_id = list(range(len(memo.acts)))
            self.acts = [_relocated(a, spec.core) for a, spec in
                         zip(memo.acts, self.p.actors, strict=True)]  # fmt: skip
            self.meta = list(memo.meta)
        for i in range(len(self.p.collectives)):
            self._ensure(i)
        order = self._order()
        # the recorded layout does not hold for compute-shift pieces (several actors per
        # item) or switch units (in-network steps): those programs are assembled afresh
        if first:
            n = len(self.compute_id)
            reusable = self._data_messages(order)
            self._residency(order)
            if reusable and not self.shift_parts and not self.unit_order:
                memo.acts, memo.meta = self.acts[:n], self.meta[:n]
        elif self.unit_order or not self._replay(order):
            return None
        order.update(self.unit_order)  # in-network steps, each on a switch unit of its own
        actors = [
            Actor(i, a.name, a.core, a.flops, a.bytes_read, a.bytes_written, a.dtype, a.phase,
                  a.op_kind, a.module, a.mem_bytes, a.out_bytes, a.stage, a.microbatch, a.layer,
                  tuple(a.work))
            for i, a in enumerate(self.acts)
        ]  # fmt: skip
        route, bcast, last = self.routes.get, self.bcast.get, self.last_use.get
        messages = [
            Message(i, s, d, b, route(i), h, bcast(i, -1), last(i, -1))
            for i, (s, d, b, h) in enumerate(self.msgs)
        ]
        notes = [f"parallel plan {self.p.plan} of @{self.p.graph.name}",
                 f"layout: {self.p.layout.kind}"]  # fmt: skip
        plan = Plan.build(
            f"{self.p.graph.name}[{self.p.plan}]", self.wafer.name, actors, messages, order,
            notes=notes, source="parallel-lowering", host=self.host,
        )  # fmt: skip
        recs = [
            CollectiveRecord(n, k, ax, al, r, b, c)
            for (n, k, ax, al, r, b), c in self.records.items()
        ]
        return Assembled(plan, self.meta, recs, [*self.p.diagnostics, *self.cache.notes])

    # -- compute actors -------------------------------------------------------------
    def _compute(self, spec: ActorSpec) -> int:
        p = self.p
        a = _A(spec.name, spec.core, stage=spec.stage, microbatch=max(spec.instance, 0))
        meta = ActorMeta(str(spec.block))
        heaviest: Op | None = None
        ops = spec.group.ops
        in_group = {id(op) for op in ops}
        for op in ops:
            per_mb = p.info[op].mode is MbMode.PER_MB
            static = self._static(op, per_mb)
            osh, reads, writes, results, full_in, part_in, full_out, part_out, shapes, works = (
                static
            )
            parts, index = self._divide(osh, spec.rank, spec.instance, per_mb)
            cost = op.cost
            f = share(cost.flops, parts, index)
            br = cost.bytes_read * part_in // full_in if full_in else cost.bytes_read // parts
            bw = (
                cost.bytes_written * part_out // full_out
                if full_out
                else cost.bytes_written // parts
            )
            work = works.get(f)
            if work is None:
                work = works[f] = op_work(op, reads, writes, f, shapes)
            a.work.extend(work)
            a.own_work.extend(work)
            for r, nbytes, acc, grad in results:
                key: BufKey = (r.name, spec.rank, -2 if acc else spec.instance)
                meta.produces.append((key, nbytes, "gradients" if grad else "activations"))
                if acc and spec.instance > 0:  # add into the accumulated sum
                    f += nbytes // r.type.dtype.itemsize
                    self.acc_flops[len(self.acts)] = (
                        self.acc_flops.get(len(self.acts), 0) + nbytes // r.type.dtype.itemsize
                    )
                    br += 2 * nbytes
                    bw += nbytes
                    a.work.append(OpWork(K.ADD, nbytes // r.type.dtype.itemsize,
                                         (nbytes, nbytes), (nbytes,)))  # fmt: skip
                if self._used_outside(r, in_group):
                    a.out_bytes += nbytes
            a.flops += f
            a.bytes_read += br
            a.bytes_written += bw
            if heaviest is None or op.cost.flops > heaviest.cost.flops:
                heaviest = op
        assert heaviest is not None
        a.dtype = _dtype(heaviest)
        a.phase = heaviest.phase
        a.op_kind = heaviest.kind
        a.module = ops[0].prov.module
        a.layer = layer_key(a.module)
        gather = reads_shift(ops[0]) if len(ops) == 1 else None
        if gather is not None:
            return self._shift_pieces(a, meta, gather, spec)
        self.acts.append(a)
        self.meta.append(meta)
        return len(self.acts) - 1

    def _static(self, op: Op, per_mb: bool) -> tuple:
        """The rank-independent figures of one instance of ``op``: its sharding, the
        bytes of its operands and results on a rank, each result's (value, bytes,
        accumulated, gradient), the totals of ``shardcost.op_cost``, the (operand, result)
        shapes on a rank, and its work per FLOP share (filled as shares come up)."""
        key = (id(op), per_mb)
        got = self._op_static.get(key)
        if got is None:
            p = self.p
            osh = p.sharding.ops[op]
            deg = instance_degrees(p.mesh, per_mb)
            res_sh = [p.sharding.of(r) for r in op.results]
            reads = [value_bytes(v, s, deg) for v, s in zip(op.operands, osh.inputs, strict=True)]
            writes = [value_bytes(r, s, deg) for r, s in zip(op.results, res_sh, strict=True)]
            results = []
            for r, nbytes in zip(op.results, writes, strict=True):
                acc = per_mb and r.name in p.accumulators
                # an accumulated sum is a gradient unless the step returns it (the loss)
                grad = (acc and r not in p.graph.outputs) or r.name in p.gradients
                results.append((r, nbytes, acc, grad))
            full_in = sum(v.type.nbytes for v in op.operands)
            full_out = sum(v.type.nbytes for v in op.results)
            shapes = (
                [shard_shape(v.type.shape, s, deg) for v, s in zip(op.operands, osh.inputs, strict=True)],
                [shard_shape(r.type.shape, s, deg) for r, s in zip(op.results, res_sh, strict=True)],
            )  # fmt: skip
            got = (
                osh, reads, writes, results, full_in, sum(reads), full_out, sum(writes), shapes, {}
            )  # fmt: skip
            self._op_static[key] = got
        return got

    def _divide(self, osh: Any, rank: int, instance: int, per_mb: bool) -> tuple[int, int]:
        key = (osh.divided, rank, instance, per_mb)
        got = self._division.get(key)
        if got is None:
            got = self._division[key] = division(osh, self.p.mesh, rank, instance, per_mb)
        return got

    def _used_outside(self, v: Value, in_group: set[int]) -> bool:
        got = self._users_of.get(id(v))
        if got is None:  # whether v (through views) is an output, and its other users
            out, found = False, []
            stack = [v]
            users = self.p.users
            outputs = self.p.graph.outputs
            while stack:
                x = stack.pop()
                if x in outputs:
                    out = True
                for u in users.get(x, []):
                    if u.kind in VIEWS:
                        stack.extend(u.results)
                    else:
                        found.append(id(u))
            got = self._users_of[id(v)] = (out, tuple(found))
        return got[0] or any(u not in in_group for u in got[1])

    def _recompute(self) -> None:
        fwd: dict[tuple[int, int, int], int] = {}
        fwd_work: dict[tuple[int, int, int], list[OpWork]] = {}
        first_b: dict[tuple[int, int, int], int] = {}
        for spec, aid in zip(self.p.actors, self.compute_id, strict=True):
            key = (spec.stage, spec.rank, spec.block.mb)
            if spec.block.kind == "F" and spec.instance >= 0:
                # the forward's own work; adding into an accumulated sum is not redone
                fwd[key] = fwd.get(key, 0) + self.acts[aid].flops - self.acc_flops.get(aid, 0)
                fwd_work.setdefault(key, []).extend(self.acts[aid].own_work)
            elif spec.block.kind == "B" and key not in first_b:
                first_b[key] = aid
        for key, aid in first_b.items():
            self.acts[aid].flops += fwd.get(key, 0)
            self.acts[aid].work[:0] = fwd_work.get(key, [])  # recomputed before its own work
            self.meta[aid].recompute = True

    # -- collectives -----------------------------------------------------------------
    def _ensure(self, i: int) -> None:
        """Lower collective instance ``i`` (after the collectives it reads from)."""
        if i not in self.coll_final:
            self._collective(i, self.p.collectives[i])

    def _inputs(self, index: int, ci: CollInstance) -> tuple:
        """What collective instance ``index`` moves and reads, for every layout."""
        got = self.memo.coll_in.get(index)
        if got is not None:
            return got
        p = self.p
        op = ci.op
        per_mb = p.info[op].mode is MbMode.PER_MB
        deg = instance_degrees(p.mesh, per_mb)
        ins = p.sharding.ops[op].inputs
        total = 0
        out_bytes: list[int] = []
        stats = op.attrs.get("stats_dim")
        for v, in_sh, r in zip(op.operands, ins, op.results, strict=True):
            in_bytes = value_bytes(v, in_sh, deg)
            out_bytes.append(value_bytes(r, p.sharding.of(r), deg))
            if isinstance(stats, int):
                shard = shard_shape(v.type.shape, in_sh, deg)
                rows = (in_bytes // v.type.dtype.itemsize) // max(1, shard[stats])
                total += rows * 2 * 4  # a max and a sum per row
            elif op.kind is K.ALL_GATHER:
                total += out_bytes[-1]
            else:
                total += in_bytes
        root = int(op.attrs.get("root", 0) or 0)  # type: ignore[arg-type]
        if is_shift(op):  # two blocks live at a time, never the whole operand
            out_bytes = [min(b, 2 * -(-b // len(ci.ranks))) for b in out_bytes]
        # the input actor of each member: the latest producer of any operand
        latest = max(
            range(len(op.operands)), key=lambda i: self._position(root_value(op.operands[i]))
        )
        reads = [
            [[(ref, k) for ref, k, _ in self._producers(op, v, rank, ci.instance, per_mb)]
             for v in op.operands]
            for rank in ci.ranks
        ]  # fmt: skip
        done = (KIND_OF[op.kind], total, out_bytes, root, latest, reads)
        self.memo.coll_in[index] = done
        return done

    def _collective(self, index: int, ci: CollInstance) -> None:
        p = self.p
        op = ci.op
        per_mb = p.info[op].mode is MbMode.PER_MB
        ins = p.sharding.ops[op].inputs
        kind, total, out_bytes, root, latest, reads = self._inputs(index, ci)
        # resolving a reference lowers the collective it names first, operand by operand
        entries: list[int | None] = []
        deps: list[list[tuple[int, BufKey]]] = []
        for per_operand in reads:
            resolved = [[(self._resolve(r), k) for r, k in refs] for refs in per_operand]
            got = resolved[latest]
            entries.append(got[-1][0] if got else None)
            deps.append(got + [x for i, xs in enumerate(resolved) if i != latest for x in xs])
        shift = is_shift(op)  # the blocks rotate around the ring while the matmul runs
        per_rank = total // len(ci.ranks) if op.kind is K.ALL_GATHER else total
        innet = not shift and self.use_innet(op.kind, ci.cores, per_rank, total)
        sched = self.cache.schedule(kind, ci.cores, total, root, Algorithm.RING if shift else None)
        how = "shift" if shift else "innet" if innet else sched.algorithm.value
        key = (op.results[0].name, op.kind.value, ci.axis.value, how, len(ci.ranks), total)
        self.records[key] = self.records.get(key, 0) + 1
        got_ex = self.expanded.get(id(sched))
        if got_ex is None:
            ex = expand(sched)
            pieces: dict[tuple[int, int], list[int]] = {}  # (member, step) -> bytes received
            for step, _, dst, nbytes in ex.transfers:
                pieces.setdefault((dst, step), []).append(nbytes)
            got_ex = self.expanded[id(sched)] = (ex, pieces)
        ex, pieces = got_ex
        steps: list[list[int]] = [[] for _ in ci.ranks]
        v0 = op.operands[0]
        itemsize = v0.type.dtype.itemsize
        dtype = v0.type.dtype if v0.type.dtype.is_float else DType.F32
        name = f"{op.results[0].name}.s{ci.stage}.{ci.block}"
        block = str(ci.block)
        mb = max(ci.instance, 0)
        layer = layer_key(op.prov.module)

        hops = _span(ci.cores, self.wafer.cols)
        link = self.wafer.link
        bw, lat = link.bandwidth, hops * link.latency
        phase, kind, module, stage = op.phase, op.kind, op.prov.module, ci.stage
        dep_keys = [[k for _, k in d] for d in deps]
        acts, metas = self.acts, self.meta
        key = self.coll_key[index] = (id(op), ci.stage, block, ci.instance)
        need = self.stage_need.setdefault(key, {})
        at: list[dict[int, int]] = [{} for _ in ci.ranks]
        self.coll_at[index] = at

        # a step's passes depend on the schedule, the op kind and the item size only: one
        # tuple per (member, step), shared by every instance of the schedule
        works = self._works.setdefault((id(sched), kind, itemsize), {})
        prefixes = [f"{name}.r{rank}." for rank in ci.ranks]
        cores = ci.cores
        append_act, append_meta = acts.append, metas.append

        def new(member: int, step: int, got: int, reduced: int, label: str = "") -> int:
            aid = len(acts)
            t = got / bw + lat
            old = need.get(step)
            if old is None or t > old:
                need[step] = t
            at[member][step] = aid
            actor = prefixes[member] + (label or f"t{step}")
            a = _A(actor, cores[member], reduced // itemsize, 2 * reduced + (got - reduced),
                   got, dtype, phase, kind, module, 0, 0, stage, mb, layer)  # fmt: skip
            wk = (member, step, got, reduced)
            work = works.get(wk)
            if work is None:
                work = works[wk] = self._step_passes(pieces, wk, kind, a.flops)
            if work:
                a.work = work  # type: ignore[assignment]  # shared, never extended
            append_act(a)
            append_meta(ActorMeta(block, [((f"{actor}.tmp", ci.ranks[member], 0), got,
                                           "activations")], list(dep_keys[member])))  # fmt: skip
            steps[member].append(aid)
            return aid

        if innet:  # the switches add and copy: each rank sends its input and receives
            ins_ = [
                e if e is not None else new(i, -1, 0, 0, "start") for i, e in enumerate(entries)
            ]
            final = self.wire_in_network(
                op.kind, ci.cores, per_rank, ins_,
                lambda i, got: new(i, 1 << 30, 0, 0, "recv"),  # streamed into place
                lambda node, label, got: _A(
                    f"{name}.{label}", node, phase=op.phase, op_kind=op.kind,
                    module=op.prov.module, stage=ci.stage, microbatch=mb,
                    layer=layer_key(op.prov.module)),
            )  # fmt: skip
        else:
            final = wire(
                ex,
                entries,
                new,  # step j's actor is named tj
                lambda i: new(i, -1, 0, 0, "start"),
                lambda s, d, b: self.msgs.append((s, d, b, True)),
            )
        gathers_param = op.kind is K.ALL_GATHER and stored_shard(
            v0, ci.axis, ins[0].get(ci.axis)
        )  # ZeRO-3: the whole parameter, freed after its last reader
        for member, rank in enumerate(ci.ranks):
            if not steps[member]:
                continue
            f = final[member]
            if f == steps[member][-1]:
                self.acts[f].out_bytes = sum(out_bytes)
                for r, nbytes in zip(op.results, out_bytes, strict=True):
                    cat = "gradients" if r.name in p.gradients else "activations"
                    cat = "weights" if gathers_param else cat
                    acc = per_mb and r.name in p.accumulators  # ZeRO-2/3: summed shards
                    if acc and ci.instance > 0:  # add into the accumulated shard
                        elems = nbytes // r.type.dtype.itemsize
                        self.acts[f].flops += elems
                        self.acts[f].bytes_read += 2 * nbytes
                        self.acts[f].bytes_written += nbytes
                    key = (r.name, rank, -2 if acc else ci.instance)
                    self.meta[f].produces.append((key, nbytes, cat))
            for src, _ in deps[member]:
                self.msgs.append((src, steps[member][0], 0, True))
        self.coll_steps[index] = steps
        self.coll_final[index] = final

    def _step_passes(
        self, pieces: dict[tuple[int, int], list[int]], wk: tuple[int, int, int, int],
        kind: K, flops: int,
    ) -> tuple[OpWork, ...]:  # fmt: skip
        """A step's passes: copy what arrived, or add it into this rank's own buffer
        (empty for a start actor, which receives nothing)."""
        member, step, got, reduced = wk
        got_pieces = pieces.get((member, step))
        if not got_pieces:
            return ()
        own = max(got_pieces)
        reads = (*got_pieces, own) if reduced else tuple(got_pieces)
        key = (kind, flops, reads, (own,) if reduced else (got,))
        work = self._step_work.get(key)
        if work is None:
            work = self._step_work[key] = (OpWork(*key),)
        return work

    def _position(self, v: Value) -> int:
        prod = v.producer
        if prod is None:
            return -1
        pos = self.p.position.get(id(prod))
        return -1 if pos is None else pos

    # -- orders and messages ---------------------------------------------------------
    def _order(self) -> dict[int, list[int]]:
        """Each core's actors. The steps of a spread (gradient) collective wait in a
        queue: a step joins the order once the compute actors placed since the
        previous step are estimated to take as long as the step's transfer (so the
        core does not stall on it); whatever is left runs before block L.

        Every member of a group must place a spread step alike relative to the
        group's other collectives, or two members wait on each other (a deadlock).
        Groups overlap (a rank's tensor- and data-parallel groups), so every rank of a
        stage must decide alike: the queue holds the steps of the collective across
        the stage, not the member's, each with the most any rank of the stage receives
        in it (a rank with no actor in a step lets it pass), and a compute actor counts
        the most any rank of its stage takes for it (uneven shards). Every rank of a
        stage sees the same items, so all decide alike."""
        order: dict[int, list[int]] = {}
        seconds = self._credit_seconds()
        steps = {k: sorted(v.items()) for k, v in self.stage_need.items()}
        key, at = self.coll_key, self.coll_at
        for core, items in self.p.items.items():
            ids: list[int] = []
            queue: deque[tuple[float, int, dict[int, int]]] = deque()
            credit = 0.0
            for it in items:
                if it.spread:
                    if not queue:
                        credit = 0.0
                    mine = at[it.coll][it.member]
                    queue.extend((t, j, mine) for j, t in steps[key[it.coll]])
                    continue
                if it.late:
                    ids.extend(_released(queue))
                    queue.clear()
                if it.actor >= 0:
                    aid = self.compute_id[it.actor]
                    if aid in self._placed:
                        continue
                    ids.append(aid)
                    credit += seconds[aid]
                    while queue and credit >= queue[0][0]:
                        _, j, mine = queue.popleft()
                        if j in mine:
                            ids.append(mine[j])
                        credit = 0.0
                else:
                    ids.extend(self._steps_of(it))
            ids.extend(_released(queue))
            order[core] = ids
        return order

    def _credit_seconds(self) -> dict[int, float]:
        """Per compute actor, the roofline seconds ``_order`` counts for it: the most
        any rank of its stage takes for the same work (kept in the memo: the same for
        every layout)."""
        seconds = self.memo.seconds
        if seconds:
            return seconds
        most: dict[tuple[int, int, str, int], float] = {}
        keys = []
        for spec, aid in zip(self.p.actors, self.compute_id, strict=True):
            key = (spec.stage, id(spec.group), str(spec.block), spec.instance)
            t = self._seconds(aid)
            if t > most.get(key, -1.0):
                most[key] = t
            keys.append((aid, key))
        for aid, key in keys:
            seconds[aid] = most[key]
        return seconds

    def _seconds(self, aid: int) -> float:
        """Roofline estimate of a compute actor (for placing overlapped steps)."""
        a = self.acts[aid]
        w = self.wafer
        return max(a.flops / w.peak(a.dtype), (a.bytes_read + a.bytes_written) / w.sram_bandwidth)

    def _item_ref(self, it: Item) -> Ref:
        if it.actor >= 0:
            return it.actor
        return -1 - (self.coll_base[it.coll] + it.member)

    def _resolve(self, ref: Ref) -> int:
        if ref >= 0:
            return self.compute_id[ref]
        slot = -1 - ref
        i = bisect_right(self.coll_base, slot) - 1
        self._ensure(i)
        return self.coll_final[i][slot - self.coll_base[i]]

    def _item_actor(self, it: Item) -> int:
        return self._resolve(self._item_ref(it))

    def _producers(
        self, consumer: Op, v: Value, rank: int, inst: int, consumer_per_mb: bool
    ) -> list[tuple[Ref, BufKey, int]]:
        """(reference, buffer, bytes) of every instance of ``v`` the consumer reads."""
        st = self._value_static.get(id(v))
        if st is None:
            root = root_value(v)
            prod = root.producer
            if prod is None or prod.is_source:
                st = (root, None, False, 0, False)
            else:
                per_mb = self.p.info[prod].mode is MbMode.PER_MB
                sh = self.p.sharding.of(root)
                nbytes = value_bytes(root, sh, instance_degrees(self.p.mesh, per_mb))
                acc = per_mb and root.name in self.p.accumulators
                st = (root, prod, per_mb, nbytes, acc)
            self._value_static[id(v)] = st
        root, prod, per_mb, nbytes, acc = st
        if prod is None:
            return []
        if per_mb:
            insts = [inst] if (consumer_per_mb and inst >= 0) else list(range(self.m))
        else:
            insts = [-1]
        out = []
        producer = self.p.producer
        for k in insts:
            it = producer.get((prod, rank, k))
            if it is None:
                raise PlanError(
                    f"internal: no instance {k} of %{root.name} on rank {rank} for "
                    f"{consumer.kind.value} %{consumer.results[0].name if consumer.results else ''}"
                )
            out.append((self._item_ref(it), (root.name, rank, -2 if acc else k), nbytes))
        if acc and len(out) > 1:
            out = out[-1:]  # accumulated in place: the last instance holds the sum
        return out

    def _data_messages(self, order: dict[int, list[int]]) -> bool:
        """The messages into compute actors, core by core. Records them (sources as
        references, before de-duplication) per core slot for the other layouts; False
        when a source is its own consumer (then the record is not reusable)."""
        spec_of = {aid: spec for spec, aid in zip(self.p.actors, self.compute_id, strict=True)}
        slot_of = {core: i for i, core in enumerate(self.p.items)}
        data: list[list[_Data]] = [[] for _ in slot_of]
        core_of = [a.core for a in self.acts]
        reusable = True
        for core in sorted(order):
            rec = data[slot_of[core]]
            for aid in order[core]:
                spec = spec_of.get(aid)
                if spec is None:
                    continue
                meta = self.meta[aid]
                in_group = {id(op) for op in spec.group.ops}
                for op in spec.group.ops:
                    per_mb = self.p.info[op].mode is MbMode.PER_MB
                    for i, v in enumerate(op.operands):
                        if not reads_value(op, i):
                            continue  # a FILL takes the shape only: nothing to wait for
                        prod = root_value(v).producer
                        if prod is not None and id(prod) in in_group:
                            continue
                        found = self._pieces(op, i, spec, per_mb)
                        sums: dict[Region, list[int]] = {}
                        for ref, key, nbytes, region, partial in found:
                            src = self._resolve(ref)
                            if src == aid:
                                reusable = False
                                continue
                            meta.uses.append(key)
                            if partial:
                                sums.setdefault(region, []).append(nbytes)
                            remote = core_of[src] != core
                            if remote:
                                meta.received.setdefault(key, nbytes)
                            rec.append((ref, aid, nbytes, key[0], remote, region))
                        for parts in sums.values():
                            if len(parts) > 1:  # the consumer adds the partial sums first
                                self._add_pass(aid, v, parts)
        self._emit_data(data, slot_of)
        self.memo.data = data if reusable else None
        return reusable

    def _replay(self, order: dict[int, list[int]]) -> bool:
        """The recorded data messages and host transfers on this layout; False when a
        message does not cross cores as it did where it was recorded."""
        data, host = self.memo.data, self.memo.host
        if data is None or host is None:
            return False
        slot_of = {core: i for i, core in enumerate(self.p.items)}
        core_of = [a.core for a in self.acts]
        for core in order:
            for ref, aid, _, _, remote, _ in data[slot_of[core]]:
                src = self._resolve(ref)
                if src == aid or (core_of[src] != core) != remote:
                    return False
        self._emit_data(data, slot_of)
        for core in sorted(order):
            self.host.extend(host[slot_of[core]])
        if self.wafer.host is not None:
            self._host_outputs()
        return True

    def _emit_data(self, data: list[list[_Data]], slot_of: dict[int, int]) -> None:
        sent: dict[tuple[int, str, int], int] = {}  # (src, value, core) -> message
        local: set[tuple[int, int]] = set()
        groups: dict[tuple[int, str, Region], list[int]] = {}  # same piece to many cores
        recompute = self.p.plan.recompute
        meta = self.meta
        for core in sorted(slot_of):
            for ref, aid, nbytes, value, remote, region in data[slot_of[core]]:
                src = self._resolve(ref)
                if remote:
                    m = sent.get((src, value, core))
                    if m is not None:
                        self.last_use[m] = aid
                        continue
                    m = sent[(src, value, core)] = len(self.msgs)
                    self.msgs.append((src, aid, nbytes, True))
                    if region:
                        groups.setdefault((src, value, region), []).append(m)
                elif (src, aid) not in local:
                    local.add((src, aid))
                    # with recompute a backward actor rebuilds the forward values it
                    # reads: the forward buffer is not kept for it
                    holds = not (
                        recompute
                        and meta[src].block.startswith("F")
                        and meta[aid].block.startswith("B")
                    )
                    self.msgs.append((src, aid, 0, holds))
        for ids in groups.values():
            if len(ids) > 1:
                for m in ids:
                    self.bcast[m] = ids[0]

    def _residency(self, order: dict[int, list[int]]) -> None:
        spec_of = {aid: spec for spec, aid in zip(self.p.actors, self.compute_id, strict=True)}
        host = self.wafer.host is not None
        slot_of = {core: i for i, core in enumerate(self.p.items)}
        recorded: list[list[HostTransfer]] = [[] for _ in slot_of]
        for core in sorted(order):
            first: dict[str, tuple[int, int, str]] = {}
            # what the host streams in: per source, or per micro-batch of a source split
            # along mb (a batch input): (first reader, bytes), and the last reader
            sent: dict[tuple[str, int], tuple[int, int]] = {}
            last_user: dict[tuple[str, int], int] = {}
            for aid in order[core]:
                spec = spec_of.get(aid)
                if spec is None:
                    continue
                for op in spec.group.ops:
                    osh = self.p.sharding.ops[op]
                    per_mb = self.p.info[op].mode is MbMode.PER_MB
                    for v, s in zip(op.operands, osh.inputs, strict=True):
                        root = root_value(v)
                        src = root.producer
                        if src is None or not src.is_source:
                            continue
                        nbytes = value_bytes(v, s, instance_degrees(self.p.mesh, False))
                        cat = _category(src, op)
                        have = first.get(root.name)
                        if have is None or have[1] < nbytes:
                            first[root.name] = (have[0] if have else aid, nbytes, cat)
                        if not host:
                            continue
                        inst = -1
                        if per_mb and not isinstance(s.get(MeshAxis.MB), Replicated):
                            inst = spec.instance
                            nbytes = value_bytes(v, s, instance_degrees(self.p.mesh, True))
                        key = (root.name, inst)
                        last_user[key] = aid
                        got = sent.get(key)
                        if got is None or got[1] < nbytes:
                            sent[key] = (got[0] if got else aid, nbytes)
            for name, (aid, nbytes, cat) in first.items():
                self.acts[aid].mem_bytes += nbytes
                self.meta[aid].resident.append((name, nbytes, cat))
            for (name, _), (aid, nbytes) in sent.items():
                last = last_user[(name, _)]
                recorded[slot_of[core]].append(
                    HostTransfer(aid, nbytes, name, last_use=-1 if last == aid else last)
                )
            self.host.extend(recorded[slot_of[core]])
        self.memo.host = recorded
        if host:
            self._host_outputs()


def _relocated(a: _A, core: int) -> _A:
    return _A(a.name, core, a.flops, a.bytes_read, a.bytes_written, a.dtype, a.phase,
              a.op_kind, a.module, a.mem_bytes, a.out_bytes, a.stage, a.microbatch, a.layer,
              list(a.work))  # fmt: skip


def _released(queue: deque[tuple[float, int, dict[int, int]]]) -> list[int]:
    """The step actors of a queue of group steps that this member has."""
    return [mine[j] for _, j, mine in queue if j in mine]


def _span(cores: tuple[int, ...], cols: int) -> int:
    """Largest Manhattan distance between two cores of a group (hops, roughly)."""
    coords = [divmod(c, cols) for c in cores]
    return max((abs(a[0] - b[0]) + abs(a[1] - b[1]) for a in coords for b in coords), default=0)


def _category(src: Op, user: Op) -> str:
    if src.kind is K.PARAM:
        return "weights"
    if src.kind is K.BUFFER and user.phase is Phase.OPT:
        return "optimizer"
    return "inputs"


def _dtype(op: Op) -> DType:
    for r in op.results:
        if r.type.dtype.is_float:
            return r.type.dtype
    for v in op.operands:
        if v.type.dtype.is_float:
            return v.type.dtype
    return DType.F32


__all__ = ["ActorMeta", "Assembled", "CollectiveRecord", "assemble"]
