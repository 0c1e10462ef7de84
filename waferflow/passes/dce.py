"""dce: remove ops whose results the graph outputs do not (transitively) need.

Kept besides what the outputs need:
- with ``keep-sources`` (the default), INPUT, PARAM and BUFFER ops, so that the
  step keeps its interface (every input and piece of state) even when unused;
  CONSTANT ops are dropped when unused;
- ops without results that are not bookkeeping (a SEND, say): they exist for
  their effect. ASSERT / METADATA ops without results go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph, Op
from waferflow.ir.opkind import BOOKKEEPING, OpKind
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass

INTERFACE_SOURCES: frozenset[OpKind] = frozenset({OpKind.INPUT, OpKind.PARAM, OpKind.BUFFER})


@register_pass
@dataclass(frozen=True)
class DeadCodeElimination(Pass):
    """Remove ops whose results no graph output needs."""

    name: ClassVar[str] = "dce"
    writes: ClassVar[str] = "the ops (those no output needs removed)"
    keep_sources: bool = option(True, "keep unused INPUT, PARAM and BUFFER ops")

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        live: set[int] = {id(v) for v in graph.outputs}
        dead: list[Op] = []
        # one backward sweep: every user of a value comes after its producer
        for op in reversed(graph.ops):
            if self._is_root(op) or any(id(v) in live for v in op.results):
                live.update(id(v) for v in op.operands)
            else:
                dead.append(op)
        if dead:
            graph.erase_ops(dead)
        return graph

    def _is_root(self, op: Op) -> bool:
        if self.keep_sources and op.kind in INTERFACE_SOURCES:
            return True
        return not op.results and op.kind not in BOOKKEEPING
