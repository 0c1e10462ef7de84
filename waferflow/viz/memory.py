"""Memory map: peak SRAM use per core as a fraction of its capacity."""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import PercentFormatter

from waferflow.viz import _render as R
from waferflow.viz.data import DETAIL_LIMIT, MemoryView

CMAP = "YlGnBu"
OVER_COLOUR = "#e31a1c"  # over capacity: outside the colour scale, always this red
_TEXT_LIMIT = 16
_RING_LIMIT = 500


def plot_memory(
    view: MemoryView,
    path: str | Path,
    *,
    dpi: int = R.DEFAULT_DPI,
    detail_limit: int = DETAIL_LIMIT,
) -> Path:
    """Draw per-core SRAM use / capacity to ``path`` (.png or .svg) and return the path.

    0..100 % on a colour scale; cores over capacity in red and counted in the title;
    dead cores dark grey. Large grids are max-pooled so an over-full core stays visible.
    """
    R.output_path(path)
    rows, cols = view.rows, view.cols
    frac = view.fraction_array()
    dead = R.dead_mask(rows, cols, view.dead)
    live = frac[~dead]
    over = (frac > 1.0) & ~dead
    n_over = int(over.sum())
    small = max(rows, cols) <= detail_limit

    grid = np.where(dead, np.nan, frac)
    pooled, k = (grid, 1) if small else R.max_pool(grid)
    cmap = mpl.colormaps[CMAP].with_extremes(over=OVER_COLOUR, bad=R.DEAD_RGBA)
    norm = Normalize(0.0, 1.0)

    w, h = R.grid_side(rows, cols)
    fig = R.new_figure((w + 1.6, h + 0.9), dpi)
    ax = fig.add_subplot()
    R.setup_grid_axes(ax, rows, cols)
    image = ax.imshow(
        np.ma.masked_invalid(pooled),
        cmap=cmap,
        norm=norm,
        interpolation="nearest",
        extent=R.grid_extent(rows, cols),
        aspect=R.grid_aspect(rows, cols),
        zorder=1,
    )
    if small:
        R.draw_cell_borders(ax, rows, cols)
        R.draw_dead_markers(ax, rows, cols, dead, color="white")
        for r, c in zip(*np.nonzero(over), strict=True):
            ax.add_patch(
                Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black", lw=1.4, zorder=5)
            )
        if max(rows, cols) <= _TEXT_LIMIT:
            _write_percent(ax, frac, dead)
    else:
        R.draw_sparse_dead(ax, dead, color="white")
        rr, cc = np.nonzero(over)
        if 0 < len(rr) <= _RING_LIMIT:  # one over-full pixel is easy to miss: ring it
            ax.scatter(cc, rr, s=70, facecolor="none", edgecolor=OVER_COLOUR, lw=1.3, zorder=7)
    dies = R.draw_dies(ax, rows, cols, view.die_rows, view.die_cols)

    cbar = fig.colorbar(
        image,
        ax=ax,
        shrink=0.85,
        extend="max" if n_over else "neither",
        format=PercentFormatter(1.0),
    )
    cbar.set_label("SRAM used / capacity", fontsize=9)
    cbar.ax.tick_params(labelsize=8)
    handles = [R.die_handle()] if dies else []
    if n_over:
        handles.append(Patch(facecolor=OVER_COLOUR, edgecolor="black", label="over capacity"))
    if dead.any():
        handles.append(Patch(facecolor=R.DEAD_RGBA, label=f"dead {view.unit}"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)

    peak = f"peak {live.max():.0%}, mean {live.mean():.0%}" if live.size else "no live cores"
    unit = view.unit
    pooled_note = f"; pixel = max of {k}x{k} {unit}s" if k > 1 else ""
    over_note = (
        f"{n_over} {unit}{'s' if n_over != 1 else ''} OVER capacity" if n_over else "all fit"
    )
    R.set_title(
        ax,
        f"{view.title}\n{peak} of {R.format_bytes(view.capacity_bytes)} per {unit}; "
        f"{over_note}{pooled_note}",
        color=OVER_COLOUR if n_over else "black",
    )
    return R.save(fig, path, dpi)


def _write_percent(ax: Axes, frac: np.ndarray, dead: np.ndarray) -> None:
    rows, cols = frac.shape
    size = max(5.0, min(9.0, 0.3 * R.cell_points(rows, cols)))
    cmap = mpl.colormaps[CMAP]
    for r, c in zip(*np.nonzero(~dead), strict=True):
        value = float(frac[r, c])
        colour = "white" if value > 1.0 or R.luminance(cmap(min(value, 1.0))) < 0.5 else "black"
        ax.text(
            c, r, f"{value:.0%}", ha="center", va="center", fontsize=size, color=colour, zorder=4
        )
