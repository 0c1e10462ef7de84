"""How many of the wafer's nodes one rank runs on: the plan's ``span``.

A plan has ``dp x tp x pp`` ranks, typically tens to hundreds; a wafer view has
thousands of nodes (``wse2`` coarsened 16x: 63 x 48). With one rank per node the
plan would use a few percent of the wafer and each rank would hold its weights in
one node's SRAM. With ``span = s`` each rank runs on an ``s x s`` block of nodes,
which is exactly a node of ``wafer.coarsen(s)`` (views compose: coarsening by k then
by s is coarsening by k * s), so the plan is built, placed and simulated on that
view: a block pools the compute and SRAM of its cores and messages between blocks
cross ``s`` times as many links, as in any coarse view (``ir/target/coarsen.py``).
Traffic inside a block is not modelled, as inside any coarse node.

``span=auto`` takes the largest ``s`` whose view still has ``HEADROOM`` times as many
strong nodes (at least ``STRONG`` of a full node's cores: ragged edges and mostly dead
blocks do not count) as the plan has ranks, so that a floorplan has room to shape
each stage's rectangle; ``s = 1`` when even the given view is that tight. Blocks never
straddle a die boundary whose links differ from on-die links (``coarsen`` refuses such
a view), so on such a wafer ``s`` divides the die's sides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from waferflow.errors import ConfigError, PlanError
from waferflow.ir.target.islands import connected_view
from waferflow.ir.target.parts import Topology
from waferflow.ir.target.wafer import CAPACITY_TIERS, Wafer
from waferflow.parallel.plan_spec import SPAN_AUTO, ParallelPlan

HEADROOM = 1.1  # strong nodes per rank that span=auto keeps, at least
STRONG = CAPACITY_TIERS[-1]  # a node with less of a full node's cores does not count


@dataclass(frozen=True)
class SpanChoice:
    """The view a plan runs on: ``view = given.coarsen(span)``."""

    span: int
    view: Wafer
    given: Wafer
    auto: bool
    notes: tuple[str, ...] = ()  # e.g. stranded nodes the view leaves out (ir/target/islands)

    def describe(self, ranks: int) -> str:
        """One line for reports: what the span is and what it leaves of the wafer."""
        how = "span=auto" if self.auto else f"span={self.span}"
        g, v = self.given, self.view
        if self.span == 1:
            return (
                f"{how}: one rank per node of the {g.rows}x{g.cols} view ({ranks} of "
                f"{g.num_alive} nodes used)"
            )
        k = v.coarsen_factor
        return (
            f"{how}: each rank runs on {self.span}x{self.span} nodes of the {g.rows}x{g.cols} "
            f"view, i.e. one node of the {v.rows}x{v.cols} view of {k}x{k} cores ({ranks} of "
            f"{v.num_alive} blocks used); compute and SRAM pool over a block"
        )


def strong_nodes(wafer: Wafer) -> int:
    """Alive nodes holding at least ``STRONG`` of a full node's cores."""
    return wafer.num_alive - len(wafer.nodes_below(STRONG))


def choose_span(wafer: Wafer, plan: ParallelPlan, ranks: int | None = None) -> SpanChoice:
    """Resolve ``plan.span`` on ``wafer`` (see the module docstring) for ``ranks``
    ranks (default ``plan.num_ranks``)."""
    ranks = plan.num_ranks if ranks is None else ranks
    if plan.span != SPAN_AUTO:
        return _explicit(wafer, plan.span, ranks)
    if wafer.topology in (Topology.CROSSBAR, Topology.TREE):  # cores without blocks
        return SpanChoice(1, wafer, wafer, auto=True)
    need = math.ceil(HEADROOM * ranks)
    s = math.isqrt(max(1, strong_nodes(wafer) // max(1, need))) + 1  # ragged edges: try one up
    while s > 1:
        try:
            view, notes = connected_view(wafer.coarsen(s), _context(wafer, s))
        except (ConfigError, PlanError):
            # blocks of s would cut dies whose links differ, or straddle a cut of dead
            # cores and links: a finer view may not
            s -= 1
            continue
        if strong_nodes(view) >= need:
            return SpanChoice(s, view, wafer, auto=True, notes=notes)
        s -= 1
    view, notes = connected_view(wafer)
    return SpanChoice(1, view, wafer, auto=True, notes=notes)


def _context(wafer: Wafer, s: int) -> str:
    return f"the span={s} view of {wafer.name!r} ({s}x{s} of its nodes per block)"


def _explicit(wafer: Wafer, s: int, ranks: int) -> SpanChoice:
    if s == 1:
        view, notes = connected_view(wafer)
        return SpanChoice(1, view, wafer, auto=False, notes=notes)
    if wafer.topology in (Topology.CROSSBAR, Topology.TREE):
        raise PlanError(
            f"span={s}: {wafer.name} is a {wafer.topology.value}, whose cores have no blocks; "
            "use span=1"
        )
    if s > min(wafer.rows, wafer.cols):
        raise PlanError(
            f"span={s} is larger than the {wafer.rows}x{wafer.cols} grid of {wafer.name}; "
            "use a smaller span or span=auto"
        )
    view, notes = connected_view(wafer.coarsen(s), _context(wafer, s))
    if view.num_alive < ranks:
        raise PlanError(
            f"span={s} leaves {view.num_alive} blocks of {s}x{s} nodes on {wafer.name} but the "
            f"plan has {ranks} ranks; use a smaller span or span=auto"
        )
    return SpanChoice(s, view, wafer, auto=False, notes=notes)


__all__ = ["HEADROOM", "STRONG", "SpanChoice", "choose_span", "strong_nodes"]
