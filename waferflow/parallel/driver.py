"""``build_parallel_plan``: a traced step + a wafer + a plan -> an actor program.

The steps, each also a pass (``waferflow.passes``): ``parallelize`` (shardings,
stages), ``insert-collectives``, ``schedule`` (actors, per-core order),
``lower-collectives`` (point-to-point messages: the ``Plan``), ``plan-memory``
(liveness; refuse what does not fit). Each step writes its decisions onto the graph
(``waferflow.parallel.annotate``: the plan, shardings, stages, micro-batch modes,
collectives, regions); ``read_state`` rebuilds the ``ParallelState`` the later steps
work on from the graph alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph, Op
from waferflow.ir.opkind import OpKind
from waferflow.ir.parallel import ParallelLevel
from waferflow.ir.plan import Plan, verify_plan
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel import per_layer
from waferflow.parallel.annotate import (
    annotate,
    annotate_layout,
    collective_ops,
    layout_from_ir,
    plan_of,
    resolve_view,
    sharding_from_ir,
    stages_from_ir,
)
from waferflow.parallel.assemble import ActorMeta, CollectiveRecord, assemble
from waferflow.parallel.build import Program, build_program
from waferflow.parallel.insert import InsertedCollective, insert_collectives
from waferflow.parallel.layout import Layout, strip_layout
from waferflow.parallel.memory import MemoryReport, check_fits, plan_memory
from waferflow.parallel.plan_spec import (
    CollectiveAlgo,
    ParallelPlan,
    PipelineSchedule,
    parse_plan,
)
from waferflow.parallel.propagate import ShardingResult, propagate
from waferflow.parallel.shift import decide_shifts
from waferflow.parallel.span import SpanChoice, choose_span
from waferflow.parallel.stages import StageAssignment, assign_stages, layer_modes
from waferflow.parallel.zero import apply_zero
from waferflow.perf import gc_paused


@dataclass
class ParallelState:
    """What the parallel steps work on: the plan's decisions (also on the graph, from
    which ``read_state`` rebuilds it) and what is derived from them (the program,
    the actor plan, the memory report)."""

    plan: ParallelPlan  # span resolved
    wafer: Wafer  # the view the plan runs on: the given wafer coarsened by the span
    batch: int
    sharding: ShardingResult
    stages: StageAssignment
    span: SpanChoice | None = None
    collectives: list[InsertedCollective] | None = None
    layout: Layout | None = None
    program: Program | None = None
    actor_plan: Plan | None = None
    meta: list[ActorMeta] | None = None
    records: list[CollectiveRecord] = field(default_factory=list)
    memory: MemoryReport | None = None
    diagnostics: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        """Cores the plan runs on (stages of different widths counted exactly)."""
        return sum(self.stages.widths) if self.stages.widths else self.plan.num_ranks


@dataclass(frozen=True)
class ParallelResult:
    """The actor program and what the lead needs to report on it."""

    plan: Plan
    memory: MemoryReport
    spec: ParallelPlan
    layout: Layout
    graph: Graph  # the sharded graph, collectives inserted
    stage_of_op: dict[str, int]  # first result name (or op kind#index) -> stage
    shardings: dict[str, str]  # value name -> sharding, as text
    collectives: tuple[CollectiveRecord, ...]
    diagnostics: tuple[str, ...]
    model_flops: int  # FLOPs of the unsharded step (the graph's total)
    wafer: Wafer | None = None  # the view the plan runs on (span applied)
    span_note: str = ""  # how many nodes a rank runs on (``SpanChoice.describe``)

    def _cores(self) -> int:
        n = len(self.plan.cores)
        return n if self.wafer is None else self.wafer.count_cores(self.plan.cores)

    def summary(self) -> str:
        lines = [
            f"parallel plan {self.spec}: {len(self.plan.actors):,} actors on "
            + (
                self.wafer.units(self._cores())
                if self.wafer is not None
                else f"{self._cores():,} cores"
            )
            + f", {len(self.plan.messages):,} messages",
            *([self.span_note] if self.span_note else []),
            self.memory.summary(),
        ]
        if self.collectives:
            by_kind: dict[str, int] = {}
            for c in self.collectives:
                by_kind[f"{c.kind}/{c.axis}/{c.algorithm}"] = (
                    by_kind.get(f"{c.kind}/{c.axis}/{c.algorithm}", 0) + c.instances
                )
            lines.append(
                "collectives: " + ", ".join(f"{k} x{n}" for k, n in sorted(by_kind.items()))
            )
        if self.diagnostics:
            lines.append(f"{len(self.diagnostics)} diagnostic(s); first: {self.diagnostics[0]}")
        return "\n".join(lines)


def clone_graph(graph: Graph) -> Graph:
    """A deep copy (new ops and values, same names): passes may then mutate it."""
    return graph.clone()


def batch_size(graph: Graph, plan: ParallelPlan) -> int:
    inputs = [op for op in graph.ops if op.kind is OpKind.INPUT and op.results[0].type.rank]
    if not inputs:
        if plan.dp > 1 or plan.microbatches > 1 or plan.layers:
            raise PlanError(
                f"@{graph.name} has no batched input; dp, micro-batches and per-layer "
                "patterns need one (a tensor input whose dimension 0 is the batch)"
            )
        return 1
    return inputs[0].results[0].type.shape[0]


def parallelize(graph: Graph, wafer: Wafer, spec: ParallelPlan | str) -> ParallelState:
    """Shardings and stages of ``spec`` on ``wafer``, written onto ``graph`` (level
    ``sharded``); the state's wafer is the view the plan runs on
    (``wafer.coarsen(span)``, ``waferflow.parallel.span``)."""
    if graph.parallel is not None:
        raise PlanError(
            f"graph @{graph.name} is already parallelised for plan {graph.parallel.plan!r}; "
            "parallelize a graph without a parallel(...) header"
        )
    plan = per_layer.resolve(graph, parse_plan(spec))
    ranks, shape = per_layer.needed_ranks(graph, plan)
    if ranks > wafer.num_alive:
        raise PlanError(
            f"plan {plan} needs {ranks} cores ({shape}) but wafer {wafer.name!r} has "
            f"{wafer.num_alive} alive cores"
        )
    span = choose_span(wafer, plan, ranks)
    wafer, plan = span.view, replace(plan, span=span.span)
    if ranks > wafer.num_alive:
        raise PlanError(
            f"plan {plan} needs {ranks} cores ({shape}) but wafer {wafer.name!r} has "
            f"{wafer.num_alive} alive cores"
        )
    batch = batch_size(graph, plan)
    if plan.layers and batch % plan.ways:
        raise PlanError(f"ways={plan.ways} does not divide the batch {batch}")
    modes = {**layer_modes(graph, plan), **per_layer.layer_ops(graph, plan)}
    if plan.ep > 1 and not any(op.kind is OpKind.MOE_DISPATCH for op in graph.ops):
        raise PlanError(
            f"plan {plan}: ep={plan.ep} deals out the experts of a mixture-of-experts model, "
            f"and @{graph.name} has none (no moe_dispatch op); use dp={plan.dp * plan.ep} "
            "for data parallelism"
        )
    sharding = propagate(graph, plan.mesh(), batch=batch, modes=modes)
    sharding.notes += apply_zero(graph, sharding, plan)
    stages = assign_stages(graph, wafer, plan)
    annotate(graph, plan, wafer.name, sharding, stages, ParallelLevel.SHARDED)
    return ParallelState(
        plan,
        wafer,
        batch,
        sharding,
        stages,
        span=span,
        diagnostics=[*span.notes, *sharding.notes],
    )


def read_state(graph: Graph, wafer: Wafer) -> ParallelState:
    """The state of a parallelised graph, from its annotations alone; ``wafer`` is the
    wafer the plan was made for or its view. PlanError for a graph that is not
    parallelised or whose header disagrees with its plan."""
    plan = plan_of(graph)
    assert graph.parallel is not None
    view = resolve_view(wafer, plan, graph.parallel.wafer)
    state = ParallelState(
        plan, view, batch_size(graph, plan), sharding_from_ir(graph, plan),
        stages_from_ir(graph, plan), span=SpanChoice(plan.span, view, wafer, auto=False),
    )  # fmt: skip
    if graph.parallel.level is ParallelLevel.COLLECTIVES:
        state.collectives = collective_ops(graph)
    layout = layout_from_ir(graph, "placed")
    if layout is not None:
        default = default_layout(state)
        state.layout = default if default.cores == layout.cores else layout
    return state


def insert(graph: Graph, state: ParallelState) -> None:
    """Insert the collectives (``insert-collectives``), unless they are in already."""
    if state.collectives is None:
        state.collectives = insert_collectives(graph, state.sharding, state.stages, state.plan)


def default_layout(state: ParallelState) -> Layout:
    plan = state.plan
    return strip_layout(
        state.wafer, plan.pp, plan.ranks_per_stage, plan.mesh().dims[-1],
        widths=state.stages.widths,
    )  # fmt: skip


def schedule(graph: Graph, state: ParallelState, layout: Layout | None = None) -> Program:
    """Actors and per-core orders on ``layout`` (default: the strips), whose cores are
    written onto the ops' regions."""
    plan = state.plan
    widths = state.stages.widths
    if layout is None:
        layout = default_layout(state)
    layout.check(state.wafer, plan.pp, plan.ranks_per_stage, widths=widths)
    state.layout = layout
    annotate_layout(graph, layout)
    for note in decide_shifts(graph, plan, state.sharding, state.wafer, layout):
        if note not in state.diagnostics:
            state.diagnostics.append(note)
    prog = build_program(graph, state.sharding, state.stages, plan, layout)
    state.program = prog
    return prog


def lower(state: ParallelState, algo: CollectiveAlgo | None = None, *, verify: bool = True) -> Plan:
    assert state.program is not None
    done = assemble(state.program, state.wafer, algo)
    if verify:
        verify_plan(done.plan, state.wafer)
    state.actor_plan, state.meta, state.records = done.plan, done.meta, done.collectives
    state.diagnostics += [d for d in done.diagnostics if d not in state.diagnostics]
    return done.plan


def memory(state: ParallelState, *, check: bool = True) -> MemoryReport:
    assert state.actor_plan is not None and state.meta is not None
    plan = state.plan
    report = plan_memory(
        state.actor_plan, state.meta, state.wafer, recompute=plan.recompute,
        plan_name=str(plan), gpipe=plan.schedule is PipelineSchedule.GPIPE,
        microbatches=plan.microbatches,
    )  # fmt: skip
    state.memory = report
    if check:
        check_fits(report)
    return report


def build_parallel_plan(
    graph: Graph,
    wafer: Wafer,
    spec: ParallelPlan | str,
    *,
    seed: int = 0,
    layout: Layout | None = None,
    check_memory: bool = True,
) -> ParallelResult:
    """Shard ``graph`` (a traced step; left untouched) over ``wafer`` as ``spec`` says.

    Raises ``PlanError`` for a plan the model or wafer cannot take (a degree that
    does not divide the batch / heads / hidden size / channels, more ranks than
    alive cores, a pattern of the wrong length) and, unless ``check_memory=False``,
    for a plan that does not fit in SRAM (with needed vs available bytes of the
    worst cores). ``seed`` is accepted for interface stability: the construction is
    deterministic and uses no randomness.
    """
    del seed
    return run_in_place(clone_graph(graph), wafer, spec, layout=layout, check_memory=check_memory)


def run_in_place(
    g: Graph,
    wafer: Wafer,
    spec: ParallelPlan | str,
    *,
    layout: Layout | None = None,
    check_memory: bool = True,
) -> ParallelResult:
    """``build_parallel_plan`` on ``g`` itself (collectives are inserted into it)."""
    model_flops = g.total_cost().flops
    state = build_state(g, wafer, spec, layout=layout, check_memory=check_memory)
    assert state.layout is not None and state.actor_plan is not None
    assert state.memory is not None
    return make_result(
        g, state, plan=state.actor_plan, memory=state.memory, layout=state.layout,
        records=state.records, model_flops=model_flops,
    )  # fmt: skip


def build_state(
    g: Graph,
    wafer: Wafer,
    spec: ParallelPlan | str,
    *,
    layout: Layout | None = None,
    check_memory: bool = True,
    verify: bool = True,
) -> ParallelState:
    """Every step on ``g`` itself, keeping the state (``place_state`` takes it on
    without scheduling again, and verifies the plan it keeps)."""
    with gc_paused():
        state = parallelize(g, wafer, spec)
        finish_state(g, state, layout=layout, check_memory=check_memory, verify=verify)
    return state


def finish_state(
    g: Graph,
    state: ParallelState,
    *,
    layout: Layout | None = None,
    check_memory: bool = True,
    verify: bool = True,
) -> None:
    """``build_state``'s steps after ``parallelize``: collectives, schedule, lowering,
    memory (the plan search looks at the parallelised state before it pays for them)."""
    with gc_paused():
        insert(g, state)
        schedule(g, state, layout)
        lower(state, verify=verify)
        memory(state, check=check_memory)


def make_result(
    g: Graph,
    state: ParallelState,
    *,
    plan: Plan,
    memory: MemoryReport,
    layout: Layout,
    records: list[CollectiveRecord],
    model_flops: int,
) -> ParallelResult:
    """The ``ParallelResult`` of a state whose plan is built (by the driver or ``place``)."""
    stage_of_op = {
        _op_name(op, i): s
        for i, op in enumerate(g.ops)
        if (s := state.stages.stage_of.get(op)) is not None
    }
    return ParallelResult(
        plan=plan,
        memory=memory,
        spec=state.plan,
        layout=layout,
        graph=g,
        stage_of_op=stage_of_op,
        shardings={k: str(v) for k, v in state.sharding.values.items()},
        collectives=tuple(records),
        diagnostics=tuple(state.diagnostics),
        model_flops=model_flops,
        wafer=state.wafer,
        span_note=state.span.describe(state.ranks) if state.span else "",
    )


def _op_name(op: Op, i: int) -> str:
    return op.results[0].name if op.results else f"{op.kind.value}#{i}"


__all__ = [
    "ParallelResult",
    "ParallelState",
    "batch_size",
    "build_parallel_plan",
    "build_state",
    "clone_graph",
    "default_layout",
    "finish_state",
    "insert",
    "lower",
    "make_result",
    "memory",
    "parallelize",
    "read_state",
    "run_in_place",
    "schedule",
]
