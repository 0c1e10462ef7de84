"""Pictures of a compiled and simulated plan: placement maps, link heatmaps, timelines,
memory maps, and an offline HTML page that holds them.

Every ``plot_*`` takes a small plain-data view (``waferflow.viz.data``) and a path
ending in ``.png`` or ``.svg``, writes the image (the same input gives the same bytes)
and returns the path. Views are built by hand or from a plan and a simulation result
with the adapters (``placement_view``, ``link_view``, ``timeline_view``,
``memory_view``).

matplotlib is an optional extra (``pip install waferflow[viz]``): importing this package
does not import it; the first use of a plot function does. Figures are drawn without
pyplot, so no GUI backend is used and the caller's backend is left alone.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from waferflow.viz.data import (
    UNASSIGNED,
    LinkLoad,
    LinkView,
    MemoryView,
    PlacementView,
    Region,
    Span,
    SpanKind,
    Table,
    TimelineView,
    VizError,
)

if TYPE_CHECKING:
    from waferflow.viz.adapters import (
        LabelBy,
        link_view,
        memory_view,
        placement_view,
        timeline_view,
    )
    from waferflow.viz.html import write_report_html
    from waferflow.viz.links import plot_links
    from waferflow.viz.memory import plot_memory
    from waferflow.viz.placement import plot_placement
    from waferflow.viz.timeline import plot_timeline

# name -> module that defines it; loaded on first use (keeps matplotlib out of imports)
_LAZY = {
    "plot_placement": "waferflow.viz.placement",
    "plot_links": "waferflow.viz.links",
    "plot_timeline": "waferflow.viz.timeline",
    "plot_memory": "waferflow.viz.memory",
    "write_report_html": "waferflow.viz.html",
    "placement_view": "waferflow.viz.adapters",
    "link_view": "waferflow.viz.adapters",
    "timeline_view": "waferflow.viz.adapters",
    "memory_view": "waferflow.viz.adapters",
    "LabelBy": "waferflow.viz.adapters",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'waferflow.viz' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "UNASSIGNED",
    "LabelBy",
    "LinkLoad",
    "LinkView",
    "MemoryView",
    "PlacementView",
    "Region",
    "Span",
    "SpanKind",
    "Table",
    "TimelineView",
    "VizError",
    "link_view",
    "memory_view",
    "placement_view",
    "plot_links",
    "plot_memory",
    "plot_placement",
    "plot_timeline",
    "timeline_view",
    "write_report_html",
]
