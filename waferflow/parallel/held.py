"""A lower bound on a training plan's memory, from its shardings alone (no build).

The plan search (``waferflow.parallel.search``) builds its best-screened candidates to
learn whether they fit; most of those that do not are ruled out here first, at the
cost of ``parallelize`` instead of a whole build (on GPT-2 ``--plan auto`` on
``wse2@16x`` the builds of plans that did not fit were most of the search).

The bound: a rank keeps, when the first backward actor of micro-batch 0 starts on its
core, every value the forward of micro-batch 0 made on its stage that a backward op of
the same stage reads (``plan-memory`` frees a buffer only after its last reader on the
core, and a micro-batch's forward runs before its backward there: 1F1B and GPipe
alike). Each such value (views followed back to the value that holds the data) counts
once, at one micro-batch's share of its sharded shape, every split rounded down; weights,
inputs, gradients and other micro-batches are left out, so the bound is below the
planned peak (``tests/parallel/test_held.py`` checks it against every core of built
plans). With recompute a forward value is freed after its forward readers, so there
is no bound; nor without a backward (inference), nor for per-layer plans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from waferflow.ir.graph import Graph, Phase
from waferflow.ir.sharding import Split
from waferflow.parallel.driver import ParallelState, default_layout
from waferflow.parallel.shardcost import instance_degrees
from waferflow.parallel.stages import root_value


@dataclass(frozen=True)
class Shortfall:
    """A stage whose bound exceeds the SRAM of one of its cores (default layout)."""

    stage: int
    need_bytes: int  # at least
    capacity_bytes: int  # of the stage's smallest core


def held_bytes(graph: Graph, state: ParallelState) -> dict[int, int]:
    """Per stage, the bytes one rank of it keeps at once at least (module docstring);
    empty when there is no bound."""
    plan = state.plan
    if plan.recompute or plan.layers:
        return {}
    degrees = instance_degrees(plan.mesh(), True)
    stage_of = state.stages.stage_of
    kept: dict[int, dict[str, int]] = {}
    for op in graph.ops:
        if op.phase is not Phase.BWD:
            continue
        stage = stage_of.get(op)
        if stage is None:
            continue
        for v in op.operands:
            root = root_value(v)
            prod = root.producer
            if prod is None or prod.is_source or prod.phase is not Phase.FWD:
                continue
            if stage_of.get(prod) != stage:
                continue
            shape = list(root.type.shape)
            for axis, p in state.sharding.of(root).placements:
                if isinstance(p, Split):
                    shape[p.dim] //= degrees.get(axis, 1)  # the smallest share
            kept.setdefault(stage, {})[root.name] = math.prod(shape) * root.type.dtype.itemsize
    return {s: sum(values.values()) for s, values in sorted(kept.items())}


def shortfall(graph: Graph, state: ParallelState) -> Shortfall | None:
    """The first stage that cannot fit on the default layout's cores by the bound
    alone (its plan does not fit), or None when the bound rules nothing out."""
    held = held_bytes(graph, state)
    if not held:
        return None
    wafer = state.wafer
    layout = default_layout(state)
    for stage, need in held.items():
        have = min(wafer.core_sram_bytes(divmod(c, wafer.cols)) for c in layout.cores[stage])
        if need > have:
            return Shortfall(stage, need, have)
    return None


__all__ = ["Shortfall", "held_bytes", "shortfall"]
