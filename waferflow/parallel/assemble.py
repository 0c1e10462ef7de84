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

The assembler is one class of mixins, a module each: compute actors
(``assemble_compute``), data messages and residency (``assemble_data``), resharding
transfers (``transfers``), compute-shift and in-network collectives
(``lowering_extras``); this module keeps the rank-to-rank collectives, the per-core
orders and the assembly itself. Its working records are in ``draft``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.parallel import stored_shard
from waferflow.ir.plan import Actor, HostTransfer, Message, OpWork, Plan
from waferflow.ir.sharding import shard_shape
from waferflow.ir.target.wafer import Wafer
from waferflow.mapper.collectives import Algorithm
from waferflow.parallel.assemble_compute import ComputeActors
from waferflow.parallel.assemble_data import DataMessages
from waferflow.parallel.build import CollInstance, Item, MbMode, Program
from waferflow.parallel.collective_lowering import KIND_OF, ScheduleCache, expand, wire
from waferflow.parallel.draft import ActorMeta, BufKey, DataRecord, Draft, Ref, relocated
from waferflow.parallel.lowering_extras import ShiftAndSwitch
from waferflow.parallel.plan_spec import CollectiveAlgo
from waferflow.parallel.shardcost import instance_degrees, value_bytes
from waferflow.parallel.shift import is_shift
from waferflow.parallel.stages import layer_key, root_value
from waferflow.parallel.transfers import Transfers

K = OpKind


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
class AssemblyMemo:
    """The layout-independent results of assembling one program (module docstring),
    filled by the first assembly and reused by every layout the program is retargeted
    to. ``remote`` in ``data`` records which messages crossed cores: the reuse relies on
    it holding on every layout (ranks never share a core), and a layout where it does
    not is assembled afresh."""

    acts: list[Draft] | None = None  # compute actors, final (their cores are replaced)
    meta: list[ActorMeta] | None = None  # compute actors' buffers (shared, read-only)
    # per collective instance: kind, total bytes, result bytes, root, the operand made
    # last, and per member per operand the (producer, buffer) it reads
    coll_in: dict[
        int, tuple[Any, int, list[int], int, int, list[list[list[tuple[Ref, BufKey]]]]]
    ] = field(default_factory=dict)
    # per core slot (the program's items, in (stage, rank) order): the data messages into
    # its actors, and the host's transfers to them
    data: list[list[DataRecord]] | None = None
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


class _Assembler(ComputeActors, DataMessages, Transfers, ShiftAndSwitch):
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
        self.acts: list[Draft] = []
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
            self.acts = [relocated(a, spec.core) for a, spec in
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
            a = Draft(actor, cores[member], reduced // itemsize, 2 * reduced + (got - reduced),
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
                lambda node, label, got: Draft(
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


def _released(queue: deque[tuple[float, int, dict[int, int]]]) -> list[int]:
    """The step actors of a queue of group steps that this member has."""
    return [mine[j] for _, j, mine in queue if j in mine]


def _span(cores: tuple[int, ...], cols: int) -> int:
    """Largest Manhattan distance between two cores of a group (hops, roughly)."""
    coords = [divmod(c, cols) for c in cores]
    return max((abs(a[0] - b[0]) + abs(a[1] - b[1]) for a in coords for b in coords), default=0)


__all__ = ["ActorMeta", "Assembled", "CollectiveRecord", "assemble"]
