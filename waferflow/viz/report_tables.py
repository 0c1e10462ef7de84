"""The HTML report's tables from the toolkit's own results: the placement comparison
(``PlacedResult``) and the fullest cores' memory (``MemoryReport``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from waferflow.viz.data import Table

if TYPE_CHECKING:
    from waferflow.parallel.memory import MemoryReport
    from waferflow.passes.place_result import PlacedResult


def placement_table(placed: PlacedResult) -> Table:
    """Every placement tried, its traffic and step time; the kept one emphasised."""
    from waferflow.passes.place_result import comparison_table

    head, body = comparison_table(placed)
    kept = next((i for i, row in enumerate(body) if row[0].endswith(" *")), -1)
    return Table(
        caption=placed.title,
        columns=tuple(head),
        rows=tuple(tuple(row) for row in body),
        notes=(placed.summary(),),
        highlight=kept,
    )


def memory_table(memory: MemoryReport, k: int = 8) -> Table:
    """The ``k`` fullest cores of the plan's liveness and what fills them."""
    head, body = memory.rows(k)
    more = len(memory.cores) - min(k, len(memory.cores))
    notes = [memory.summary()]
    if more > 0:
        notes.append(f"and {more} more {memory.unit}(s), less full")
    return Table(
        caption=f"memory: the fullest {memory.unit}s (planned liveness)",
        columns=tuple(head),
        rows=tuple(tuple(row) for row in body),
        notes=tuple(notes),
    )


__all__ = ["memory_table", "placement_table"]
