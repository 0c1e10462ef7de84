"""Per-layer pipelines (``cut=layer``) and the seed machine's plan forms.

With ``cut=layer`` every *layer* of the forward pass is a pipeline stage of its own.
A layer is a run of forward units (``stages.forward_units``) that starts at a unit
doing a layer's real work: a matmul or convolution, a pooling, an embedding or a
loss. Units of elementwise or movement ops only (an activation, a flatten, a norm)
join the layer before them. The seed CNN has six: conv1+relu1, conv2+relu2,
conv3+relu3, pool (+ the flatten), fc, loss.

Each stage has its own width: the ``ways`` ranks of its pattern letter (``d``, ``t``,
``r``), one rank for ``s``. A layer without weights takes the letter of the next
layer that has one (else of the one before): the seed's pool before a one-rank fc
runs on one rank. Every op of a layer runs as its letter says (a tensor-parallel
conv layer's ReLU on its part's channels, as the seed's templates do). Without a
pattern every stage has ``dp x tp`` ranks.

The seed's spelling (``parse_plan`` reads ``pipe`` and ``gpipe=M``; ``resolve``
completes the rest against the model): a pattern with fewer letters than the model
has layers with weights gives letters to the first layers and ``s`` to the rest, and
means what the seed's plans mean: ``cut=layer``, gradients reduced to replica 0
(``grad-reduce=root,algo=root``) and GPipe, unless the plan says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import EMBEDDING, LOSS, MATMUL_LIKE, POOLING
from waferflow.parallel.plan_spec import (
    CollectiveAlgo,
    GradReduce,
    LayerMode,
    ParallelPlan,
    PipelineSchedule,
    StageCut,
)
from waferflow.parallel.stages import Unit, forward_units, layer_key, pattern_layers

# a forward unit holding one of these starts a layer
_STARTS = MATMUL_LIKE | POOLING | LOSS | EMBEDDING


def layer_of_units(graph: Graph, units: Sequence[Unit]) -> list[int]:
    """The layer (0, 1, ...) of every forward unit (see the module docstring)."""
    out: list[int] = []
    layer = -1
    for unit in units:
        if layer < 0 or any(graph.ops[i].kind in _STARTS for i in unit.ops):
            layer += 1
        out.append(layer)
    return out


def _default(name: str) -> object:
    return next(f.default for f in fields(ParallelPlan) if f.name == name)


def resolve(graph: Graph, plan: ParallelPlan) -> ParallelPlan:
    """``plan`` with the seed's short pattern completed and, for ``cut=layer``, ``pp``
    set to the number of layers; other plans come back unchanged."""
    weighted = pattern_layers(graph)
    seed_form = bool(plan.layers) and len(plan.layers) < len(weighted)
    if not seed_form and plan.cut is not StageCut.LAYER:
        return plan
    n = max(layer_of_units(graph, forward_units(graph)), default=-1) + 1
    if seed_form:
        given = {f.name for f in fields(ParallelPlan) if getattr(plan, f.name) != _default(f.name)}
        plan = replace(
            plan,
            layers=plan.layers + LayerMode.SINGLE.value * (len(weighted) - len(plan.layers)),
            cut=StageCut.LAYER,
            grad_reduce=plan.grad_reduce if "grad_reduce" in given else GradReduce.ROOT,
            algo=plan.algo if "algo" in given else CollectiveAlgo.ROOT,
            schedule=plan.schedule if "schedule" in given else PipelineSchedule.GPIPE,
        )
    if plan.pp not in (0, 1, n):  # 0 or 1 (the default): take it from the model
        raise PlanError(
            f"plan {plan}: cut=layer makes one stage per layer and @{graph.name} has {n} "
            f"layers; leave pp out (or pp={n})"
        )
    return replace(plan, pp=n)


def stage_letters(graph: Graph, plan: ParallelPlan, units: Sequence[Unit]) -> list[str]:
    """The pattern letter of every layer of a ``cut=layer`` plan ('' without a pattern)."""
    layer = layer_of_units(graph, units)
    n = max(layer, default=-1) + 1
    if not plan.layers:
        return [""] * n
    letter_of = dict(zip(pattern_layers(graph), plan.layers, strict=True))
    own: list[str] = [""] * n
    for unit, k in zip(units, layer, strict=True):
        own[k] = own[k] or letter_of.get(unit.key, "")
    out = list(own)
    for k in range(n):
        if not out[k]:
            later = [x for x in own[k + 1 :] if x]
            earlier = [x for x in own[:k] if x]
            out[k] = later[0] if later else (earlier[-1] if earlier else "")
    return out


def stage_widths(plan: ParallelPlan, letters: Sequence[str]) -> tuple[int, ...]:
    """Ranks of every stage: one for ``s``, else the plan's ranks per stage."""
    return tuple(1 if x == LayerMode.SINGLE.value else plan.ranks_per_stage for x in letters)


def widths_of(graph: Graph, plan: ParallelPlan) -> tuple[int, ...]:
    """Ranks per stage of a resolved ``cut=layer`` plan (() for a balanced cut, whose
    stages all have ``ranks_per_stage``)."""
    if plan.cut is not StageCut.LAYER:
        return ()
    return stage_widths(plan, stage_letters(graph, plan, forward_units(graph)))


def needed_ranks(graph: Graph, plan: ParallelPlan) -> tuple[int, str]:
    """Cores the plan needs, and how they are made up (for messages)."""
    widths = widths_of(graph, plan)
    if not widths:
        return plan.num_ranks, f"{plan.ranks_per_stage} per stage x pp={plan.pp}"
    return sum(widths), f"stages of {'+'.join(map(str, widths))} rank(s)"


def layer_ops(graph: Graph, plan: ParallelPlan) -> dict[int, LayerMode]:
    """The letter of every op of a ``cut=layer`` plan's layer that the pattern does not
    name (``stages.layer_modes`` does those), by op index: the activation of a conv
    layer runs as its conv does (a ``t`` layer's ReLU on the channels of its part),
    the seed's pool and loss on one rank (``s``). Ops without a module (a flatten, the
    loss function) follow their operands, except in a one-rank (``s``) layer, which
    has no second rank to hold a part: there they run whole too (the labels a language
    model shifts for its loss, split over the batch as inputs are)."""
    if plan.cut is not StageCut.LAYER or not plan.layers:
        return {}
    units = forward_units(graph)
    layer = layer_of_units(graph, units)
    letters = stage_letters(graph, plan, units)
    keyed = set(pattern_layers(graph))
    letter_of = {
        u.key: letters[k] for u, k in zip(units, layer, strict=True)
        if u.key and u.key not in keyed and letters[k]
    }  # fmt: skip
    out: dict[int, LayerMode] = {}
    for i, op in enumerate(graph.ops):
        letter = letter_of.get(layer_key(op.prov.module)) if op.prov.module else None
        if letter and not op.is_source:
            out[i] = LayerMode(letter)
    single = LayerMode.SINGLE
    for unit, k in zip(units, layer, strict=True):
        if letters[k] == single.value:
            for i in unit.ops:
                if not graph.ops[i].prov.module:
                    out[i] = single
    return out


__all__ = [
    "layer_of_units",
    "layer_ops",
    "needed_ranks",
    "resolve",
    "stage_letters",
    "stage_widths",
    "widths_of",
]
