"""Placement map: which label (module, stage, op group) runs on each core."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.patches import Patch, Rectangle

from waferflow.viz import _render as R
from waferflow.viz.data import DETAIL_LIMIT, PlacementView

_MAX_REGION_NAMES = 48  # beyond this only outlines are drawn
_TEXT_LIMIT = 16  # write label numbers into cells up to this many cores a side
_CELL_TEXT_LIMIT = 24  # write cell texts (ranks) up to this many cores a side


def plot_placement(
    view: PlacementView,
    path: str | Path,
    *,
    dpi: int = R.DEFAULT_DPI,
    max_legend: int = 40,
    detail_limit: int = DETAIL_LIMIT,
) -> Path:
    """Draw the placement map to ``path`` (.png or .svg) and return the path.

    Grids up to ``detail_limit`` cores a side show every core (cell borders, hatching for
    labels past the 20th, an X on dead cores, each cell's ``cell_text`` such as its rank
    or else its label's number); larger ones are drawn as one image with region
    outlines.
    """
    R.output_path(path)  # fail before drawing
    rows, cols = view.rows, view.cols
    small = max(rows, cols) <= detail_limit
    labels = view.label_array()
    colours = R.label_colours(len(view.labels))
    dead = R.dead_mask(rows, cols, view.dead)

    rgba = np.empty((rows, cols, 4))
    rgba[:] = R.UNASSIGNED_RGBA
    assigned = labels >= 0
    if colours.size:
        rgba[assigned] = colours[labels[assigned]]
    rgba[dead] = R.DEAD_RGBA

    used = np.unique(labels[assigned & ~dead]) if assigned.any() else np.array([], int)
    handles = _legend_handles(view, colours, max_legend, numbered=small and _numbered(view))
    if max(view.die_rows, view.die_cols) > 1:
        handles.append(R.die_handle())
    if dead.any():
        handles.append(Patch(facecolor=R.DEAD_RGBA, edgecolor="0.3", label="dead core"))
    if (~assigned & ~dead).any():
        handles.append(Patch(facecolor=R.UNASSIGNED_RGBA, edgecolor="0.3", label="unassigned"))

    w, h = R.grid_side(rows, cols)
    ncol = 1 if len(handles) <= 24 else 2
    longest = max((len(hd.get_label()) for hd in handles), default=0)
    legend_w = (0.45 + 0.052 * longest) * ncol if handles else 0.0
    fig = R.new_figure((w + legend_w + 0.7, h + 0.8), dpi)
    ax = fig.add_subplot()
    R.setup_grid_axes(ax, rows, cols)
    ax.set_anchor("W")  # keep the legend next to the grid, spare width goes right
    ax.imshow(
        rgba,
        interpolation="nearest",
        extent=R.grid_extent(rows, cols),
        aspect=R.grid_aspect(rows, cols),
        zorder=1,
    )

    if small:
        R.draw_cell_borders(ax, rows, cols)
        _draw_hatches(ax, labels, dead)
        R.draw_dead_markers(ax, rows, cols, dead, color="white")
        if _has_cell_text(view):
            _draw_cell_text(ax, view, labels, dead, colours)
        elif _numbered(view):
            _draw_numbers(ax, labels, dead, colours)
    else:
        R.draw_sparse_dead(ax, dead, color="black")
    R.draw_dies(ax, rows, cols, view.die_rows, view.die_cols)
    # with texts in the cells the region names would cover them; the legend names them
    _draw_regions(ax, view, named=not (small and _has_cell_text(view)))

    if handles:
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            fontsize=8,
            ncol=ncol,
            frameon=False,
            title="labels",
            title_fontsize=9,
        )
    note = "" if small else "  (image view)"
    if small and _has_cell_text(view):
        note += f"; each {view.unit} shows its rank"
    R.set_title(
        ax,
        f"{view.title}\n{rows}x{cols} {view.unit}s, {len(used)} of {len(view.labels)} labels "
        f"placed, {int(dead.sum())} dead{note}",
    )
    return R.save(fig, path, dpi)


def _has_cell_text(view: PlacementView) -> bool:
    return bool(view.cell_text) and max(view.rows, view.cols) <= _CELL_TEXT_LIMIT


def _numbered(view: PlacementView) -> bool:
    if _has_cell_text(view):
        return False  # the cells carry their own text
    return max(view.rows, view.cols) <= _TEXT_LIMIT and len(view.labels) > 1


def _legend_handles(
    view: PlacementView, colours: np.ndarray, max_legend: int, *, numbered: bool
) -> list[Patch]:
    n = len(view.labels)
    shown = n if n <= max_legend else max(max_legend - 1, 0)
    handles = []
    for i in range(shown):
        name = R.shorten(view.labels[i])
        handles.append(
            Patch(
                facecolor=colours[i],
                edgecolor="0.3",
                hatch=R.label_hatch(i),
                label=f"{i}: {name}" if numbered else name,
            )
        )
    if shown < n:
        handles.append(Patch(facecolor="none", edgecolor="none", label=f"… {n - shown} more"))
    return handles


def _draw_hatches(ax: Axes, labels: np.ndarray, dead: np.ndarray) -> None:
    """Labels past the 20th reuse tab20 colours shaded; a hatch tells them apart."""
    cycles = np.where(labels >= 0, labels // 20, 0)
    for cycle in np.unique(cycles[(cycles > 0) & ~dead]):
        hatch = R.HATCHES[int(cycle) % len(R.HATCHES)]
        if not hatch:
            continue
        rr, cc = np.nonzero((cycles == cycle) & ~dead)
        rects = [Rectangle((c - 0.5, r - 0.5), 1, 1) for r, c in zip(rr, cc, strict=True)]
        ax.add_collection(
            PatchCollection(
                rects,
                facecolor="none",
                edgecolor=(0, 0, 0, 0.55),
                linewidth=0,
                hatch=hatch,
                zorder=3,
            )
        )


def _draw_numbers(ax: Axes, labels: np.ndarray, dead: np.ndarray, colours: np.ndarray) -> None:
    rows, cols = labels.shape
    size = max(4.0, min(9.0, 0.38 * R.cell_points(rows, cols)))
    for r, c in zip(*np.nonzero((labels >= 0) & ~dead), strict=True):
        idx = int(labels[r, c])
        colour = "white" if R.luminance(colours[idx]) < 0.5 else "black"
        ax.text(c, r, str(idx), ha="center", va="center", fontsize=size, color=colour, zorder=4)


def _draw_cell_text(
    ax: Axes, view: PlacementView, labels: np.ndarray, dead: np.ndarray, colours: np.ndarray
) -> None:
    """Each cell's text (its rank), words on separate lines, sized to fit the cell."""
    rows, cols = labels.shape
    texts = [t.replace(" ", "\n") for t in view.cell_text]
    longest = max((len(x) for t in texts for x in t.split("\n")), default=1)
    lines = max((t.count("\n") + 1 for t in texts), default=1)
    cell = R.cell_points(rows, cols)
    size = max(4.0, min(10.0, cell / (0.62 * max(longest, 3)), cell / (1.5 * lines)))
    for r, c in zip(*np.nonzero(~dead), strict=True):
        text = texts[r * cols + c]
        if not text:
            continue
        idx = int(labels[r, c])
        bright = idx < 0 or R.luminance(colours[idx]) >= 0.5
        ax.text(c, r, text, ha="center", va="center", fontsize=size, linespacing=1.0,
                color="black" if bright else "white", zorder=4)  # fmt: skip


def _draw_regions(ax: Axes, view: PlacementView, *, named: bool = True) -> None:
    named = named and len(view.regions) <= _MAX_REGION_NAMES
    halo = [patheffects.withStroke(linewidth=3, foreground="white")]
    for reg in view.regions:
        rect = Rectangle(
            (reg.c0 - 0.5, reg.r0 - 0.5),
            reg.c1 - reg.c0,
            reg.r1 - reg.r0,
            fill=False,
            edgecolor="#111111",
            linewidth=1.5,
            zorder=8,
        )
        rect.set_path_effects(halo)
        ax.add_patch(rect)
        if named and reg.name:
            ax.annotate(
                R.shorten(reg.name, 20),
                (reg.c0 - 0.5, reg.r0 - 0.5),
                xytext=(2.5, -2.5),
                textcoords="offset points",
                ha="left",
                va="top",
                fontsize=7,
                zorder=9,
                bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "alpha": 0.8, "lw": 0},
                clip_on=True,
            )
