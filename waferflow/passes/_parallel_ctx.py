"""How the parallel passes find their state: from the IR, with a cache in the context.

Every parallel pass reads what earlier passes decided from the graph's annotations
(``waferflow.parallel.driver.read_state``), so a pipeline can stop after any pass,
print or save the IR, and continue in another run. What is derived from the
annotations and costly to rebuild (the per-core program, the actor plan, the memory
report) is cached in ``ctx.results[CACHE]`` together with a fingerprint of the IR
it was derived from; a pass uses the cache only when the graph it is given still
prints the same and holds the same op objects, else it rebuilds from the IR.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from waferflow.ir.graph import Graph
from waferflow.ir.printer import print_graph
from waferflow.parallel.driver import ParallelState, lower, read_state, schedule
from waferflow.passes.base import PassContext

CACHE = "parallel-state"


@dataclass(frozen=True)
class _Cached:
    fingerprint: tuple[int, int, str]
    state: ParallelState


def fingerprint(graph: Graph) -> tuple[int, int, str]:
    """Identity of the graph and its ops, and a digest of its text."""
    digest = hashlib.sha256(print_graph(graph).encode("utf-8")).hexdigest()
    return (id(graph), hash(tuple(map(id, graph.ops))), digest)


def load_state(ctx: PassContext, graph: Graph, pass_name: str) -> ParallelState:
    """The parallel state of ``graph``: the cached one if the IR is unchanged since it
    was stored, else rebuilt from the annotations (PlanError when there are none)."""
    wafer = ctx.require_wafer(pass_name)
    cached = ctx.results.get(CACHE)
    if isinstance(cached, _Cached) and cached.fingerprint == fingerprint(graph):
        return cached.state
    return read_state(graph, wafer)


def store_state(ctx: PassContext, graph: Graph, state: ParallelState) -> None:
    ctx.results[CACHE] = _Cached(fingerprint(graph), state)


def ensure_lowered(graph: Graph, state: ParallelState) -> None:
    """Give ``state`` its actor plan: rebuilt from the graph's regions if it has none
    (the program and the lowering are deterministic functions of the IR)."""
    if state.actor_plan is not None:
        return
    if state.layout is None:
        from waferflow.errors import PlanError

        raise PlanError(
            "the graph's ops have no regions yet: run schedule (or place) and "
            "lower-collectives earlier in the pipeline"
        )
    if state.program is None:
        schedule(graph, state, state.layout)
    lower(state)


__all__ = ["CACHE", "ensure_lowered", "fingerprint", "load_state", "store_state"]
