"""The ``schedule`` step: per-rank actors for every stage, micro-batch and group of
ops, and the order each core runs them in.

Every non-source op is classified by micro-batches (``MbMode``):

* ``PER_MB``: it touches batch data (split or partial along ``mb``): one instance per
  micro-batch, its work divided by the number of micro-batches;
* ``EARLY``: batch-independent (masks from positions, weight transposes): one
  instance, with micro-batch 0;
* ``LATE``: it needs every micro-batch (accumulated gradients, the optimizer): one
  instance after the last micro-batch.

A stage's ops fall into blocks: ``F k`` (forward of micro-batch k), ``B k``
(backward) and ``L`` (optimizer, gradient reduction, anything late). Within a block
consecutive ops of one module (``group=module``; or one layer / one op) form one
actor, cut where a value arrives from another stage or a collective, and after an
op whose result leaves the stage. A collective op is a block item of its own,
expanded into point-to-point messages by ``lower``. Blocks run per core in the
schedule's order:

* GPipe: ``F0 .. F(m-1), B0 .. B(m-1), L``;
* 1F1B (stage s of p): ``min(p-s-1, m)`` warm-up forwards, then one forward and one
  backward in turn, then the remaining backwards, then ``L``.

Every rank of a stage runs the same sequence (SPMD), which is what makes the
collectives deadlock-free. With ``grad-reduce=root`` only replica 0 runs the ops that
follow a reduction to the root (the optimizer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph, Op, Phase, Value
from waferflow.ir.opkind import COLLECTIVE, VIEWS, OpKind
from waferflow.ir.parallel import MbMode, op_label, reads_value, stored_shard
from waferflow.ir.sharding import MeshAxis, Partial, Replicated, Sharding
from waferflow.parallel.layout import Layout
from waferflow.parallel.plan_spec import Granularity, Mesh, ParallelPlan, PipelineSchedule
from waferflow.parallel.propagate import ShardingResult
from waferflow.parallel.shift import reads_shift
from waferflow.parallel.stages import StageAssignment, layer_key, root_value

K = OpKind


@dataclass(frozen=True)
class OpInfo:
    op: Op
    stage: int
    mode: MbMode
    late: bool  # runs in block L
    root_only: bool  # only replica 0 (dp index 0) runs it
    gradient: bool = False  # a collective whose results only feed the optimizer


@dataclass(frozen=True)
class Block:
    kind: str  # "F", "B" or "L"
    mb: int  # micro-batch (0 for L)

    def __str__(self) -> str:
        return "L" if self.kind == "L" else f"{self.kind}{self.mb}"


@dataclass
class Group:
    """Consecutive ops of one block of one stage that one actor per rank runs."""

    stage: int
    block: Block
    ops: list[Op]
    key: str
    collective: bool = False


@dataclass
class ActorSpec:
    """A compute actor before ids are final (``lower`` assembles the Plan)."""

    name: str
    core: int
    stage: int
    rank: int
    block: Block
    group: Group
    instance: int  # micro-batch of its op instances (-1: a single instance)
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    recompute_flops: int = 0


@dataclass
class CollInstance:
    """One collective op run by one group of ranks for one micro-batch."""

    op: Op
    stage: int
    block: Block
    instance: int
    axis: MeshAxis
    ranks: tuple[int, ...]  # ranks of the group, in axis order
    cores: tuple[int, ...]


@dataclass(frozen=True)
class Item:
    """An entry of a core's order: a compute actor or one rank of a collective."""

    actor: int = -1  # index into Program.actors
    coll: int = -1  # index into Program.collectives
    member: int = -1  # position of this rank in the collective's group
    late: bool = False  # in block L
    spread: bool = False  # a gradient collective overlapped with the backward


@dataclass
class Program:
    graph: Graph
    plan: ParallelPlan
    mesh: Mesh
    sharding: ShardingResult
    stages: StageAssignment
    layout: Layout
    info: dict[Op, OpInfo]
    groups: list[Group]
    actors: list[ActorSpec] = field(default_factory=list)
    collectives: list[CollInstance] = field(default_factory=list)
    items: dict[int, list[Item]] = field(default_factory=dict)  # core -> order
    # (op, rank, instance) -> producing item (compute actor or collective member)
    producer: dict[tuple[Op, int, int], Item] = field(default_factory=dict)
    diagnostics: list[str] = field(default_factory=list)
    users: dict[Value, list[Op]] = field(default_factory=dict)
    position: dict[int, int] = field(default_factory=dict)  # id(op) -> graph position
    gradients: set[str] = field(default_factory=set)  # values that only feed the optimizer
    # partial sums over micro-batches read after the last one: summed in place
    accumulators: set[str] = field(default_factory=set)
    # shared with the program's retargeted copies: the assembly keeps here what it
    # worked out that does not depend on the layout (``assemble.AssemblyMemo``)
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def microbatches(self) -> int:
        return self.mesh.microbatches


def degrees(mesh: Mesh) -> dict[MeshAxis, int]:
    return mesh.degrees()


def _mb_nonrep(s: Sharding) -> bool:
    return not isinstance(s.get(MeshAxis.MB), Replicated)


def _read(op: Op) -> list[Value]:
    """The operands whose values ``op`` reads (a FILL reads its first one's shape only)."""
    return [v for i, v in enumerate(op.operands) if reads_value(op, i)]


def classify_modes(graph: Graph, sharding: ShardingResult) -> dict[Op, MbMode]:
    """How often each non-source op runs (``MbMode``): per micro-batch when it touches
    batch data along ``mb``; else early when everything it reads is early, late
    otherwise. PlanError when an op run per micro-batch reads a late value."""
    mode_of: dict[Op, MbMode] = {}
    for op in graph.ops:
        if op.is_source:
            continue
        sh = sharding.ops.get(op)
        per_mb = sh is not None and (
            MeshAxis.MB in sh.divided
            or any(_mb_nonrep(s) for i, s in enumerate(sh.inputs) if reads_value(op, i))
            or any(_mb_nonrep(sharding.of(r)) for r in op.results)
        )
        mode = MbMode.PER_MB if per_mb else MbMode.EARLY
        if per_mb and sh is not None:
            for i, v in enumerate(op.operands):
                have = sharding.of(v).get(MeshAxis.MB)
                if (
                    reads_value(op, i)
                    and isinstance(have, Partial)
                    and not isinstance(sh.inputs[i].get(MeshAxis.MB), Partial)
                ):
                    raise PlanError(
                        f"{op_label(op)} runs once per micro-batch but reads %{v.name} "
                        f"({op_label(v.producer) if v.producer else 'an input'}) summed over "
                        "every micro-batch; use microbatches=1 for this model"
                    )
        for v in _read(op):
            p = root_value(v).producer
            if p is None or p.is_source:
                continue
            theirs = mode_of[p]
            if not per_mb and theirs is not MbMode.EARLY:
                mode = MbMode.LATE
            if per_mb and theirs is MbMode.LATE:
                raise PlanError(
                    f"{op_label(op)} runs once per micro-batch but reads %{v.name} "
                    f"({op_label(p)}), which needs every micro-batch; use microbatches=1 "
                    "for this model"
                )
        mode_of[op] = mode
    _gathers_per_mb(graph, sharding, mode_of)
    return mode_of


def _gathers_per_mb(graph: Graph, sharding: ShardingResult, mode_of: dict[Op, MbMode]) -> None:
    """A ZeRO-3 gather of a parameter runs once per micro-batch when everything that
    reads it does: the whole parameter is freed after each micro-batch's use."""
    if sharding.mesh.degree(MeshAxis.MB) < 2:
        return
    users = graph.users()
    for op in graph.ops:
        if op.kind is not K.ALL_GATHER or not op.operands:
            continue
        v = op.operands[0]
        if not stored_shard(v, MeshAxis.DP, sharding.of(v).get(MeshAxis.DP)):
            continue
        readers, stack = [], list(op.results)
        while stack:
            for u in users.get(stack.pop(), []):
                if u.kind in VIEWS:
                    stack.extend(u.results)
                else:
                    readers.append(u)
        if readers and all(mode_of.get(u) is MbMode.PER_MB for u in readers):
            mode_of[op] = MbMode.PER_MB


def classify(
    graph: Graph, sharding: ShardingResult, stages: StageAssignment, plan: ParallelPlan
) -> dict[Op, OpInfo]:
    """Each op's stage and micro-batch mode, as annotated on the IR (computed when an op
    carries no annotation), with whether it runs in block L and on the root only."""
    info: dict[Op, OpInfo] = {}
    users = graph.users()
    grad_coll = _gradient_collectives(graph, users)
    computed: dict[Op, MbMode] | None = None
    for op in graph.ops:
        if op.is_source:
            continue
        if op.par is not None:
            mode = op.par.mode
        else:
            computed = computed if computed is not None else classify_modes(graph, sharding)
            mode = computed[op]
        root_only = False
        for v in _read(op):
            p = root_value(v).producer
            if p is not None and not p.is_source and info[p].root_only and p.kind is not K.REDUCE:
                root_only = True
            if p is not None and p.kind is K.REDUCE and p.attrs.get("axis") == MeshAxis.DP.value:
                root_only = True
        # a gradient reduced per micro-batch (ZeRO-2/3) runs in the backward blocks
        grad = op in grad_coll
        late = mode is MbMode.LATE or op.phase is Phase.OPT or (grad and mode is not MbMode.PER_MB)
        info[op] = OpInfo(op, stages.stage_of.get(op, 0), mode, late, root_only, grad)
    return info


def _gradient_collectives(graph: Graph, users: dict[Value, list[Op]]) -> set[Op]:
    """Collectives whose results only feed the optimizer (directly or through views
    and further collectives): they belong with the optimizer in block L."""
    out: set[Op] = set()
    for op in reversed(graph.ops):
        if op.kind not in COLLECTIVE:
            continue
        ok = True
        stack = list(op.results)
        while stack and ok:
            v = stack.pop()
            for u in users.get(v, []):
                if u.phase is Phase.OPT or u in out:
                    continue
                if u.kind in VIEWS:
                    stack.extend(u.results)
                    continue
                ok = False
                break
        if ok and any(users.get(r) for r in op.results):
            out.add(op)
    return out


def _accumulators(graph: Graph, info: dict[Op, OpInfo], sharding: ShardingResult) -> set[str]:
    """Values that are partial sums over micro-batches and read by an op that runs
    once (after the last micro-batch): every micro-batch adds into one buffer."""
    users = graph.users()
    outputs = set(map(id, graph.outputs))  # a returned sum holds every micro-batch
    out: set[str] = set()
    for op in graph.ops:
        oi = info.get(op)
        if oi is None or oi.mode is not MbMode.PER_MB:
            continue
        for r in op.results:
            if not isinstance(sharding.of(r).get(MeshAxis.MB), Partial):
                continue
            stack, once = [r], False
            while stack and not once:
                x = stack.pop()
                once = id(x) in outputs
                for u in users.get(x, []):
                    if u.kind in VIEWS:
                        stack.extend(u.results)
                    elif u in info and info[u].mode is not MbMode.PER_MB:
                        once = True
            if once:
                out.add(r.name)
    return out


def _gradient_values(graph: Graph) -> set[str]:
    """Names of backward values whose every use (through views and collectives)
    is the optimizer's: the gradients, for the memory report."""
    users = graph.users()
    feeds: dict[Value, bool] = {}
    for op in reversed(graph.ops):
        for r in op.results:
            us = users.get(r, [])
            feeds[r] = bool(us) and all(
                u.phase is Phase.OPT
                or ((u.kind in VIEWS or u.kind in COLLECTIVE) and all(feeds.get(x, False) for x in u.results))
                for u in us
            )  # fmt: skip
    return {v.name for v, ok in feeds.items() if ok and v.producer is not None
            and v.producer.phase is Phase.BWD}  # fmt: skip


def _group_key(op: Op, gran: Granularity) -> str:
    if gran is Granularity.LAYER:
        return layer_key(op.prov.module)
    if gran is Granularity.OP:
        return f"{op.kind.value}#{id(op)}"
    return op.prov.module


def _stage_blocks(plan: ParallelPlan, stage: int) -> list[Block]:
    m, p = plan.microbatches, plan.pp
    f = [Block("F", k) for k in range(m)]
    b = [Block("B", k) for k in range(m)]
    if plan.schedule is PipelineSchedule.GPIPE:
        return [*f, *b, Block("L", 0)]
    warm = min(p - stage - 1, m)
    out = f[:warm]
    for k in range(m - warm):
        out += [f[warm + k], b[k]]
    out += b[m - warm :]
    return [*out, Block("L", 0)]


def make_groups(
    graph: Graph, info: dict[Op, OpInfo], plan: ParallelPlan
) -> dict[tuple[int, str, int], list[Group]]:
    """Groups per (stage, block kind, micro-batch); F/B of micro-batch k > 0 hold only
    per-micro-batch ops."""
    users = graph.users()
    out: dict[tuple[int, str, int], list[Group]] = {}
    for s in range(plan.pp):
        ops = [op for op in graph.ops if op in info and info[op].stage == s
               and op.kind not in VIEWS]  # fmt: skip
        for kind in ("F", "B", "L"):
            for k in range(plan.microbatches if kind != "L" else 1):
                sel = [op for op in ops if _in_block(info[op], kind, k)]
                out[(s, kind, k)] = _cut(sel, s, Block(kind, k), info, users, plan)
    return out


def _in_block(oi: OpInfo, kind: str, k: int) -> bool:
    if kind == "L":
        return oi.late
    if oi.late:
        return False
    phase_ok = oi.op.phase is (Phase.FWD if kind == "F" else Phase.BWD)
    if not phase_ok:
        return False
    return oi.mode is MbMode.PER_MB or k == 0


def _cut(
    ops: Sequence[Op],
    stage: int,
    block: Block,
    info: dict[Op, OpInfo],
    users: dict[Value, list[Op]],
    plan: ParallelPlan,
) -> list[Group]:
    groups: list[Group] = []
    cur: Group | None = None
    for op in ops:
        if op.kind in COLLECTIVE:
            groups.append(Group(stage, block, [op], op.prov.module, collective=True))
            cur = None
            continue
        key = _group_key(op, plan.group)
        receives = any(
            (p := root_value(v).producer) is not None and not p.is_source
            and (p.kind in COLLECTIVE or info[p].stage != stage or info[p].root_only != info[op].root_only)
            for v in _read(op)
        )  # fmt: skip
        mode_changes = cur is not None and info[cur.ops[-1]].mode is not info[op].mode
        if cur is None or cur.key != key or receives or mode_changes:
            cur = Group(stage, block, [op], key)
            groups.append(cur)
        else:
            cur.ops.append(op)
        if _leaves_stage(op, stage, info, users) or reads_shift(op) is not None:
            cur = None  # a compute-shift matmul is an actor of its own (cut into steps)
    return groups


def _leaves_stage(op: Op, stage: int, info: dict[Op, OpInfo], users: dict[Value, list[Op]]) -> bool:
    stack = list(op.results)
    while stack:
        v = stack.pop()
        for u in users.get(v, []):
            if u.kind in VIEWS:
                stack.extend(u.results)
            elif u in info and (info[u].stage != stage or u.kind in COLLECTIVE):
                return True
    return False


def build_program(
    graph: Graph,
    sharding: ShardingResult,
    stages: StageAssignment,
    plan: ParallelPlan,
    layout: Layout,
) -> Program:
    mesh = sharding.mesh
    info = classify(graph, sharding, stages, plan)
    per_block = make_groups(graph, info, plan)
    prog = Program(graph, plan, mesh, sharding, stages, layout, info,
                   [g for gs in per_block.values() for g in gs], users=graph.users(),
                   position={id(op): i for i, op in enumerate(graph.ops)},
                   gradients=_gradient_values(graph))  # fmt: skip
    prog.accumulators = _accumulators(graph, info, sharding)
    coll_index: dict[tuple[int, int, str, int, tuple[int, ...]], int] = {}
    for s in range(plan.pp):
        for r in range(stages.width(s, mesh.size)):
            core = layout.core(s, r)
            items = prog.items.setdefault(core, [])
            dp_idx = mesh.index(r, MeshAxis.DP)
            for block in _stage_blocks(plan, s):
                for g in per_block[(s, block.kind, block.mb)]:
                    ops = [op for op in g.ops if not info[op].root_only or dp_idx == 0]
                    if not ops:
                        continue
                    inst = (
                        block.mb
                        if (info[ops[0]].mode is MbMode.PER_MB and block.kind != "L")
                        else -1
                    )
                    if g.collective:
                        spread = plan.overlap and info[ops[0]].gradient and block.kind != "L"
                        items.append(_coll_item(prog, coll_index, g, s, r, inst, block, spread))
                        continue
                    late = block.kind == "L"
                    a = ActorSpec(
                        name=_actor_name(g, s, r, block), core=core, stage=s, rank=r,
                        block=block, group=Group(s, block, ops, g.key), instance=inst,
                    )  # fmt: skip
                    prog.actors.append(a)
                    item = Item(actor=len(prog.actors) - 1, late=late)
                    items.append(item)
                    for op in ops:
                        prog.producer[(op, r, inst)] = item
            # ZeRO-1 reduces at the step's end; ZeRO-2/3 as soon as the gradients exist
            if plan.zero != 1 and (plan.overlap or plan.zero >= 2):
                _hoist(prog, core, r, spread=plan.overlap)
    return prog


def retarget(prog: Program, layout: Layout) -> Program:
    """``prog`` with every (stage, rank) moved to its core in ``layout``. The schedule
    does not depend on where the ranks run, so this is the program ``build_program``
    would make for ``layout``; it shares everything else (and its assembly memo)."""
    old = prog.layout
    move = {
        old.core(s, r): layout.core(s, r)
        for s in range(old.num_stages)
        for r in range(len(old.cores[s]))
    }
    return replace(
        prog,
        layout=layout,
        items={move[c]: items for c, items in prog.items.items()},
        actors=[replace(a, core=move[a.core]) for a in prog.actors],
        collectives=[replace(c, cores=tuple(move[x] for x in c.cores)) for c in prog.collectives],
    )


def input_items(prog: Program, ci: CollInstance, rank: int) -> list[Item]:
    """The items that make the inputs of collective ``ci`` on ``rank`` (every
    micro-batch's, for an input made per micro-batch)."""
    srcs = []
    for v in ci.op.operands:
        p = root_value(v).producer
        if p is None or p.is_source:
            continue
        m = prog.microbatches if prog.info[p].mode is MbMode.PER_MB else 1
        for k in range(m) if m > 1 else [-1]:
            src = prog.producer.get((p, rank, k))
            if src is not None:
                srcs.append(src)
    return srcs


def _hoist(prog: Program, core: int, rank: int, *, spread: bool = True) -> None:
    """Move gradient collectives of block L up to just after their inputs are ready
    (in the last backward block). Marked ``spread`` (with ``overlap``), ``lower``
    runs their steps one per following compute actor, overlapping the reduction
    with the backward; otherwise they run right there (ZeRO-2/3 without overlap).
    Every rank of a group moves the same items the same way (same template).

    A moved item goes right after the latest of its inputs and after the items already
    moved there, so it joins the run of moved items that follows one unmoved item of
    the backward (its *anchor*): runs are kept per anchor, and the order is rebuilt
    once at the end (no list scans per item)."""
    items = prog.items[core]
    start = next((i for i, it in enumerate(items) if it.late), len(items))
    head = items[:start]
    rest: list[Item] = []
    anchor: dict[Item, int] = {it: i for i, it in enumerate(head)}
    runs: dict[int, list[Item]] = {}
    for it in items[start:]:
        if it.coll < 0:
            rest.append(it)
            continue
        ci = prog.collectives[it.coll]
        srcs = input_items(prog, ci, rank)
        where = [anchor[x] for x in srcs if x in anchor]
        if not srcs or len(where) < len(srcs):
            rest.append(it)
            continue
        at = max(where)
        moved = Item(coll=it.coll, member=it.member, spread=spread)
        runs.setdefault(at, []).append(moved)
        anchor[moved] = at
        prog.producer[(ci.op, rank, ci.instance)] = moved
    if runs:
        out: list[Item] = []
        for i, x in enumerate(head):
            out.append(x)
            out.extend(runs.get(i, ()))
        head = out
    prog.items[core] = head + rest


def _coll_item(
    prog: Program,
    coll_index: dict[tuple[int, int, str, int, tuple[int, ...]], int],
    g: Group,
    stage: int,
    rank: int,
    inst: int,
    block: Block,
    spread: bool = False,
) -> Item:
    op = g.ops[0]
    axis = MeshAxis(str(op.attrs.get("axis")))
    group = prog.mesh.group(rank, axis)
    key = (id(op), stage, str(block), inst, group)
    ci = coll_index.get(key)
    if ci is None:
        cores = tuple(prog.layout.core(stage, x) for x in group)
        prog.collectives.append(CollInstance(op, stage, block, inst, axis, group, cores))
        ci = coll_index[key] = len(prog.collectives) - 1
    item = Item(coll=ci, member=group.index(rank), late=block.kind == "L", spread=spread)
    prog.producer[(op, rank, inst)] = item
    return item


def _actor_name(g: Group, stage: int, rank: int, block: Block) -> str:
    what = g.key or g.ops[0].prov.module or g.ops[0].kind.value
    return f"s{stage}.r{rank}.{block}.{what}"


__all__ = [
    "ActorSpec",
    "Block",
    "CollInstance",
    "Group",
    "Item",
    "MbMode",
    "OpInfo",
    "Program",
    "build_program",
    "classify",
    "make_groups",
    "retarget",
]
