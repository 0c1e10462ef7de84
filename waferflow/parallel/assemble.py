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
  ``mem_bytes`` of the first actor there that uses them.

``ActorMeta`` keeps, per actor, the buffers it produces and uses, for
``plan-memory``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Op, Phase, Value
from waferflow.ir.opkind import VIEWS, OpKind
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.sharding import MeshAxis, Partial, shard_shape
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.build import ActorSpec, CollInstance, Item, MbMode, Program
from waferflow.parallel.collective_lowering import KIND_OF, ScheduleCache, expand, wire
from waferflow.parallel.plan_spec import CollectiveAlgo
from waferflow.parallel.shardcost import instance_degrees, op_cost, value_bytes
from waferflow.parallel.stages import layer_key, root_value

K = OpKind
BufKey = tuple[str, int, int]  # (value name, rank, instance); instance -2: an accumulator


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


@dataclass
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


def assemble(prog: Program, wafer: Wafer, algo: CollectiveAlgo | None = None) -> Assembled:
    return _Assembler(prog, wafer, algo or prog.plan.algo).run()


class _Assembler:
    def __init__(self, prog: Program, wafer: Wafer, algo: CollectiveAlgo) -> None:
        self.p = prog
        self.wafer = wafer
        self.cache = ScheduleCache(wafer, algo)
        self.acts: list[_A] = []
        self.meta: list[ActorMeta] = []
        self.msgs: list[tuple[int, int, int]] = []
        self.compute_id: list[int] = []
        self.coll_steps: list[list[list[int]]] = []  # per collective: per member: actor ids
        self.coll_final: list[list[int]] = []
        self.records: dict[tuple[str, str, str, str, int, int], int] = {}
        self.m = prog.microbatches

    def run(self) -> Assembled:
        for spec in self.p.actors:
            self.compute_id.append(self._compute(spec))
        if self.p.plan.recompute:
            self._recompute()
        for ci in self.p.collectives:
            self._collective(ci)
        order = self._order()
        self._data_messages(order)
        self._residency(order)
        actors = [
            Actor(id=i, **{k: getattr(a, k) for k in _FIELDS}) for i, a in enumerate(self.acts)
        ]
        messages = [Message(i, s, d, b) for i, (s, d, b) in enumerate(self.msgs)]
        notes = [f"parallel plan {self.p.plan} of @{self.p.graph.name}",
                 f"layout: {self.p.layout.kind}"]  # fmt: skip
        plan = Plan.build(
            f"{self.p.graph.name}[{self.p.plan}]", self.wafer.name, actors, messages, order,
            notes=notes, source="parallel-lowering",
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
            osh = p.sharding.ops[op]
            res_sh = [p.sharding.of(r) for r in op.results]
            f, br, bw = op_cost(op, osh, res_sh, p.mesh, spec.rank, spec.instance, per_mb)
            deg = instance_degrees(p.mesh, per_mb)
            for r, s in zip(op.results, res_sh, strict=True):
                nbytes = value_bytes(r, s, deg)
                acc = per_mb and isinstance(s.get(MeshAxis.MB), Partial)
                key: BufKey = (r.name, spec.rank, -2 if acc else spec.instance)
                meta.produces.append((key, nbytes, "gradients" if acc else "activations"))
                if acc and spec.instance > 0:  # add into the accumulated gradient
                    f += nbytes // r.type.dtype.itemsize
                    br += 2 * nbytes
                    bw += nbytes
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
        self.acts.append(a)
        self.meta.append(meta)
        return len(self.acts) - 1

    def _used_outside(self, v: Value, in_group: set[int]) -> bool:
        stack = [v]
        users = self.p.users
        while stack:
            x = stack.pop()
            if x in self.p.graph.outputs:
                return True
            for u in users.get(x, []):
                if u.kind in VIEWS:
                    stack.extend(u.results)
                elif id(u) not in in_group:
                    return True
        return False

    def _recompute(self) -> None:
        fwd: dict[tuple[int, int, int], int] = {}
        first_b: dict[tuple[int, int, int], int] = {}
        for spec, aid in zip(self.p.actors, self.compute_id, strict=True):
            key = (spec.stage, spec.rank, spec.block.mb)
            if spec.block.kind == "F" and spec.instance >= 0:
                fwd[key] = fwd.get(key, 0) + self.acts[aid].flops
            elif spec.block.kind == "B" and key not in first_b:
                first_b[key] = aid
        for key, aid in first_b.items():
            self.acts[aid].flops += fwd.get(key, 0)
            self.meta[aid].recompute = True

    # -- collectives -----------------------------------------------------------------
    def _collective(self, ci: CollInstance) -> None:
        p = self.p
        op = ci.op
        v = op.operands[0]
        per_mb = p.info[op].mode is MbMode.PER_MB
        deg = instance_degrees(p.mesh, per_mb)
        in_sh = p.sharding.ops[op].inputs[0]
        out_sh = p.sharding.of(op.results[0])
        in_bytes = value_bytes(v, in_sh, deg)
        out_bytes = value_bytes(op.results[0], out_sh, deg)
        kind = KIND_OF[op.kind]
        stats = op.attrs.get("stats_dim")
        if isinstance(stats, int):
            shard = shard_shape(v.type.shape, in_sh, deg)
            rows = (in_bytes // v.type.dtype.itemsize) // max(1, shard[stats])
            total = rows * 2 * 4
        elif op.kind is K.ALL_GATHER:
            total = out_bytes
        else:
            total = in_bytes
        root = int(op.attrs.get("root", 0) or 0)  # type: ignore[arg-type]
        sched = self.cache.schedule(kind, ci.cores, total, root)
        key = (op.results[0].name, op.kind.value, ci.axis.value, sched.algorithm.value,
               len(ci.ranks), total)  # fmt: skip
        self.records[key] = self.records.get(key, 0) + 1
        ex = expand(sched)
        entries: list[int | None] = []
        in_keys: list[BufKey | None] = []
        for rank in ci.ranks:
            src = self._producers(op, v, rank, ci.instance, per_mb)
            entries.append(src[-1][0] if src else None)
            in_keys.append(src[-1][1] if src else None)
        steps: list[list[int]] = [[] for _ in ci.ranks]
        itemsize = v.type.dtype.itemsize
        name = f"{op.results[0].name}.s{ci.stage}.{ci.block}"
        mb = max(ci.instance, 0)

        def new(member: int, label: str, got: int, reduced: int) -> int:
            rank = ci.ranks[member]
            a = _A(f"{name}.r{rank}.{label}", ci.cores[member], flops=reduced // itemsize,
                   bytes_read=2 * reduced + (got - reduced), bytes_written=got,
                   dtype=v.type.dtype if v.type.dtype.is_float else DType.F32,
                   phase=op.phase, op_kind=op.kind, module=op.prov.module,
                   stage=ci.stage, microbatch=mb, layer=layer_key(op.prov.module))  # fmt: skip
            self.acts.append(a)
            meta = ActorMeta(str(ci.block))
            if in_keys[member] is not None:
                meta.uses.append(in_keys[member])  # type: ignore[arg-type]
            meta.produces.append(((f"{a.name}.tmp", rank, 0), got, "activations"))
            self.meta.append(meta)
            steps[member].append(len(self.acts) - 1)
            return len(self.acts) - 1

        final = wire(
            ex,
            entries,
            lambda i, j, got, red: new(i, f"t{j}", got, red),
            lambda i: new(i, "start", 0, 0),
            lambda s, d, b: self.msgs.append((s, d, b)),
        )
        for member, rank in enumerate(ci.ranks):
            f = final[member]
            if steps[member] and f == steps[member][-1]:
                self.acts[f].out_bytes = out_bytes
            fm = self.meta[f] if steps[member] else None
            if fm is not None:
                fm.produces.append(((op.results[0].name, rank, ci.instance), out_bytes,
                                    "activations"))  # fmt: skip
            e = entries[member]
            if e is not None and steps[member]:
                self.msgs.append((e, steps[member][0], 0))
        self.coll_steps.append(steps)
        self.coll_final.append(final)

    # -- orders and messages ---------------------------------------------------------
    def _order(self) -> dict[int, list[int]]:
        order: dict[int, list[int]] = {}
        for core, items in self.p.items.items():
            ids: list[int] = []
            for it in items:
                if it.actor >= 0:
                    ids.append(self.compute_id[it.actor])
                else:
                    ids.extend(self.coll_steps[it.coll][it.member])
            order[core] = ids
        return order

    def _item_actor(self, it: Item) -> int:
        if it.actor >= 0:
            return self.compute_id[it.actor]
        return self.coll_final[it.coll][it.member]

    def _producers(
        self, consumer: Op, v: Value, rank: int, inst: int, consumer_per_mb: bool
    ) -> list[tuple[int, BufKey, int]]:
        """(actor, buffer, bytes) of every instance of ``v`` the consumer reads."""
        root = root_value(v)
        prod = root.producer
        if prod is None or prod.is_source:
            return []
        pi = self.p.info[prod]
        per_mb = pi.mode is MbMode.PER_MB
        if per_mb:
            insts = [inst] if (consumer_per_mb and inst >= 0) else list(range(self.m))
        else:
            insts = [-1]
        sh = self.p.sharding.of(root)
        nbytes = value_bytes(root, sh, instance_degrees(self.p.mesh, per_mb))
        acc = per_mb and isinstance(sh.get(MeshAxis.MB), Partial)
        out = []
        for k in insts:
            it = self.p.producer.get((prod, rank, k))
            if it is None:
                raise PlanError(
                    f"internal: no instance {k} of %{root.name} on rank {rank} for "
                    f"{consumer.kind.value} %{consumer.results[0].name if consumer.results else ''}"
                )
            out.append((self._item_actor(it), (root.name, rank, -2 if acc else k), nbytes))
        if acc:
            out = out[-1:]  # accumulated in place: the last instance holds the sum
        return out

    def _data_messages(self, order: dict[int, list[int]]) -> None:
        spec_of = {aid: spec for spec, aid in zip(self.p.actors, self.compute_id, strict=True)}
        sent: set[tuple[int, str, int]] = set()
        local: set[tuple[int, int]] = set()
        core_of = [a.core for a in self.acts]
        for core in sorted(order):
            for aid in order[core]:
                spec = spec_of.get(aid)
                if spec is None:
                    continue
                meta = self.meta[aid]
                in_group = {id(op) for op in spec.group.ops}
                for op in spec.group.ops:
                    per_mb = self.p.info[op].mode is MbMode.PER_MB
                    for v in op.operands:
                        prod = root_value(v).producer
                        if prod is not None and id(prod) in in_group:
                            continue
                        for src, key, nbytes in self._producers(op, v, spec.rank, spec.instance, per_mb):
                            if src == aid:
                                continue
                            meta.uses.append(key)
                            if core_of[src] != core:
                                meta.received.setdefault(key, nbytes)
                                if (src, key[0], core) not in sent:
                                    sent.add((src, key[0], core))
                                    self.msgs.append((src, aid, nbytes))
                            elif (src, aid) not in local:
                                local.add((src, aid))
                                self.msgs.append((src, aid, 0))

    def _residency(self, order: dict[int, list[int]]) -> None:
        spec_of = {aid: spec for spec, aid in zip(self.p.actors, self.compute_id, strict=True)}
        for core in sorted(order):
            first: dict[str, tuple[int, int, str]] = {}
            for aid in order[core]:
                spec = spec_of.get(aid)
                if spec is None:
                    continue
                for op in spec.group.ops:
                    osh = self.p.sharding.ops[op]
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
            for name, (aid, nbytes, cat) in first.items():
                self.acts[aid].mem_bytes += nbytes
                self.meta[aid].resident.append((name, nbytes, cat))


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


_FIELDS = ("name", "core", "flops", "bytes_read", "bytes_written", "dtype", "phase", "op_kind",
           "module", "mem_bytes", "out_bytes", "stage", "microbatch", "layer")  # fmt: skip

__all__ = ["ActorMeta", "Assembled", "CollectiveRecord", "assemble"]
