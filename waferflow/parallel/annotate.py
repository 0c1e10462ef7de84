"""The parallel plan in the IR: write the passes' decisions onto the graph, read them back.

``annotate`` writes what ``parallelize`` / ``insert-collectives`` decided (the plan in
the graph's header, every value's sharding, every op's stage, micro-batch mode,
operand placements, divided axes and softmax statistics); ``annotate_layout`` writes
the core of every rank (``schedule``, ``place``). ``read_state`` rebuilds, from the
IR alone, the ``ParallelState`` the later steps work on, so that a pipeline split
over two runs (through a ``.wf`` file) continues exactly where the first stopped.
"""

from __future__ import annotations

from dataclasses import replace

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import COLLECTIVE
from waferflow.ir.parallel import GraphParallel, OpParallel, ParallelLevel, sorted_axes
from waferflow.ir.sharding import MeshAxis, Partial, Placement, Replicated, Split
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.build import classify_modes
from waferflow.parallel.layout import Layout
from waferflow.parallel.plan_spec import ParallelPlan, StageCut, parse_plan
from waferflow.parallel.propagate import OpSharding, ShardingResult
from waferflow.parallel.stages import StageAssignment


def annotate(
    graph: Graph,
    plan: ParallelPlan,
    view: str,
    sharding: ShardingResult,
    stages: StageAssignment,
    level: ParallelLevel,
) -> None:
    """Write the plan, shardings, stages and micro-batch modes onto ``graph``, whose
    plan runs on the wafer view named ``view`` (regions already on the ops are kept: a re-annotation does not unplace)."""
    mesh = plan.mesh()
    graph.parallel = GraphParallel(
        plan=str(plan), wafer=view, dp=mesh.degree(MeshAxis.DP),
        tp=mesh.degree(MeshAxis.TP), mb=mesh.degree(MeshAxis.MB), pp=plan.pp,
        ranks=plan.ranks_per_stage, level=level, reshard=plan.cut is StageCut.LAYER,
        zero=plan.zero, ep=mesh.degree(MeshAxis.EP),
    )  # fmt: skip
    for v in graph.values():
        v.sharding = sharding.of(v)
    modes = classify_modes(graph, sharding)
    for op in graph.ops:
        if op.is_source:
            op.par = None
            continue
        info = sharding.ops[op]
        region = op.par.region if op.par is not None else ()
        op.par = OpParallel(
            stage=stages.stage_of[op], mode=modes[op], inputs=info.inputs,
            divided=sorted_axes(info.divided), stats=info.stats, region=region,
        )  # fmt: skip


def annotate_layout(graph: Graph, layout: Layout) -> None:
    """Give every op the cores of its stage's ranks (``layout.cores[stage]``)."""
    for op in graph.ops:
        if op.par is not None:
            op.par = replace(op.par, region=layout.cores[op.par.stage])


def layout_from_ir(graph: Graph, kind: str = "from the IR") -> Layout | None:
    """The layout the ops' regions spell, or None when the graph is not placed."""
    gp = graph.parallel
    if gp is None:
        return None
    cores: dict[int, tuple[int, ...]] = {}
    for op in graph.ops:
        if op.par is not None and op.par.region:
            cores.setdefault(op.par.stage, op.par.region)
    if not cores:
        return None
    missing = [s for s in range(gp.pp) if s not in cores]
    if missing:
        raise PlanError(f"the graph places no op of stage(s) {missing}; re-run schedule or place")
    return Layout(tuple(cores[s] for s in range(gp.pp)), kind)


def resolve_view(wafer: Wafer, plan: ParallelPlan, name: str) -> Wafer:
    """The wafer view named in the graph's header, given the wafer or that view."""
    if wafer.name == name:
        return wafer
    if plan.span > 1:
        view = wafer.coarsen(plan.span)
        if view.name == name:
            return view
    raise PlanError(
        f"the graph's plan {plan} was made for wafer {name!r}; {wafer.name!r} is neither it "
        f"nor a wafer whose span-{plan.span} view it is: give the wafer the plan was made for"
    )


def sharding_from_ir(graph: Graph, plan: ParallelPlan) -> ShardingResult:
    """The ``ShardingResult`` the annotations spell (conversions derived from them)."""
    from waferflow.parallel.insert import conversions_from_ir

    ops = {}
    for op in graph.ops:
        par = op.par
        if par is not None:
            ops[op] = OpSharding(par.inputs, frozenset(par.divided), par.stats)
    values = {v.name: v.sharding for v in graph.values()}
    return ShardingResult(plan.mesh(), values, ops, conversions_from_ir(graph))


def stages_from_ir(graph: Graph, plan: ParallelPlan) -> StageAssignment:
    from waferflow.parallel.per_layer import widths_of  # per_layer imports stages

    stage_of = {op: op.par.stage for op in graph.ops if op.par is not None}
    return StageAssignment(plan.pp, (), (), stage_of, (), widths_of(graph, plan))


def plan_of(graph: Graph) -> ParallelPlan:
    """The plan in ``graph``'s header; PlanError if it has none or it disagrees with
    the header's degrees."""
    gp = graph.parallel
    if gp is None:
        raise PlanError(
            f"graph @{graph.name} is not parallelised: run parallelize first (its "
            "parallel(...) header says how the graph is sharded)"
        )
    plan = parse_plan(gp.plan)
    mesh = plan.mesh()
    keys = ("dp", "tp", "mb", "pp", "ranks", "zero", "ep")
    said = (gp.dp, gp.tp, gp.mb, gp.pp, gp.ranks, gp.zero, gp.ep)
    means = (mesh.degree(MeshAxis.DP), mesh.degree(MeshAxis.TP), mesh.degree(MeshAxis.MB),
             plan.pp, plan.ranks_per_stage, plan.zero, mesh.degree(MeshAxis.EP))  # fmt: skip
    if said != means:
        raise PlanError(
            "the graph's header says "
            + ", ".join(f"{k}={v}" for k, v in zip(keys, said, strict=True))
            + f" but its plan {gp.plan!r} means "
            + ", ".join(f"{k}={v}" for k, v in zip(keys, means, strict=True))
        )
    return plan


def placement_of(text: object) -> Placement:
    """A collective's ``src`` / ``dst`` attribute (``S0/4``, ``P``, ``R``) as a placement."""
    if text == "P":
        return Partial()
    if text == "R":
        return Replicated()
    if isinstance(text, str) and text.startswith("S") and "/" in text:
        dim, block = text[1:].split("/")
        return Split(int(dim), int(block))
    raise PlanError(f"bad placement {text!r} in a collective (S<dim>/<block>, P or R)")


def collective_ops(graph: Graph) -> list:  # list[InsertedCollective]
    """The collectives of a graph at level ``collectives``, as ``insert`` made them."""
    from waferflow.parallel.insert import InsertedCollective

    out = []
    for op in graph.ops:
        if op.kind in COLLECTIVE:
            stats = op.attrs.get("stats_dim")
            out.append(
                InsertedCollective(
                    op, MeshAxis(str(op.attrs.get("axis"))), placement_of(op.attrs.get("src")),
                    placement_of(op.attrs.get("dst")), stats if isinstance(stats, int) else None,
                )
            )  # fmt: skip
    return out


__all__ = [
    "annotate",
    "annotate_layout",
    "collective_ops",
    "layout_from_ir",
    "placement_of",
    "plan_of",
    "resolve_view",
    "sharding_from_ir",
    "stages_from_ir",
]
