"""Link heatmap: how busy each link direction was over a step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Colormap, Normalize
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from waferflow.viz import _render as R
from waferflow.viz.data import DETAIL_LIMIT, LinkView

CMAP = "turbo"
IDLE_COLOUR = "#b8b8b8"
HOT_COLOUR = "#ff2bd6"  # magenta: not in the colour map, not the dashed die boundaries
_LABEL_BOX = {"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.9,
              "edgecolor": HOT_COLOUR, "lw": 1.0}  # fmt: skip
_SHRINK = 0.2  # arrow ends stop this far (in cells) short of the core centres
_OFFSET = 0.14  # the two directions of a link sit this far either side of its axis
_WIDTH = 0.07  # arrow shaft width in cells


@dataclass(frozen=True, slots=True)
class _Arrays:
    src: np.ndarray  # (n, 2) row, col
    dst: np.ndarray
    util: np.ndarray
    nbytes: np.ndarray
    d2d: np.ndarray

    @staticmethod
    def of(view: LinkView) -> _Arrays:
        links = view.links
        n = len(links)
        return _Arrays(
            src=np.array([lk.src for lk in links], dtype=np.int64).reshape(n, 2),
            dst=np.array([lk.dst for lk in links], dtype=np.int64).reshape(n, 2),
            util=np.clip(np.array([lk.utilisation for lk in links], dtype=np.float64), 0, 1),
            nbytes=np.array([lk.bytes for lk in links], dtype=np.int64),
            d2d=np.array([lk.is_d2d for lk in links], dtype=bool),
        )


def hottest(view: LinkView, k: int) -> list[int]:
    """Indices of the k busiest links: by utilisation, then bytes, then position, so ties
    always break the same way."""
    order = sorted(
        range(len(view.links)),
        key=lambda i: (
            -view.links[i].utilisation,
            -view.links[i].bytes,
            view.links[i].src,
            view.links[i].dst,
        ),
    )
    return [i for i in order[: max(k, 0)] if view.links[i].utilisation > 0]


def scale_top(busiest: float) -> float:
    """The top of the colour scale: the busiest link's utilisation rounded up to 1, 2,
    2.5 or 5 x a power of ten (18 % -> 20 %), between 1 % and 100 %."""
    if busiest <= 0.01:
        return 0.01
    if busiest >= 1.0:
        return 1.0
    exp = math.floor(math.log10(busiest))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        top = step * 10.0**exp
        if top >= busiest * (1 - 1e-9):
            return min(top, 1.0)
    return 1.0


def plot_links(
    view: LinkView,
    path: str | Path,
    top_k: int = 5,
    *,
    dpi: int = R.DEFAULT_DPI,
    detail_limit: int = DETAIL_LIMIT,
) -> Path:
    """Draw link utilisation to ``path`` (.png or .svg) and return the path.

    The colour scale runs from 0 to the busiest link (``scale_top``), so a wafer whose
    busiest link is at 18 % still shows which links carry what. Small grids: one arrow
    per link direction, the two directions of a link offset so both show; the ``top_k``
    hottest are outlined in magenta and annotated; die boundaries are dashed lines
    (die-to-die links carry a diamond only when no die grid is drawn). Grids over
    ``detail_limit`` cores a side: an image of each core's busiest outgoing link.
    """
    R.output_path(path)
    rows, cols = view.rows, view.cols
    arr = _Arrays.of(view)
    top = hottest(view, top_k)
    small = max(rows, cols) <= detail_limit
    norm = Normalize(0.0, scale_top(float(arr.util.max()) if len(arr.util) else 0.0))
    cmap = mpl.colormaps[CMAP]
    dead = R.dead_mask(rows, cols, view.dead)

    w, h = R.grid_side(rows, cols)
    fig = R.new_figure((w + 1.6, h + 0.9), dpi)
    ax = fig.add_subplot()
    R.setup_grid_axes(ax, rows, cols)
    # under the arrows on small grids so that links across a die edge stay visible
    dies = R.draw_dies(ax, rows, cols, view.die_rows, view.die_cols, zorder=2.5 if small else 6)
    if small:
        handles = _draw_arrows(ax, view, arr, top, norm, cmap, dead, mark_d2d=not dies)
        note = f"{len(top)} hottest outlined in magenta"
    else:
        k = _draw_image(ax, view, arr, top, norm, cmap, dead)
        unit = view.unit
        pooled = f", pixel = max of {k}x{k} {unit}s" if k > 1 else ""
        note = f"colour = busiest outgoing link per {unit}{pooled}; {len(top)} hottest circled"
        handles = [Line2D([], [], ls="", marker="o", mfc="none", mec=HOT_COLOUR, mew=2,
                          label=f"{len(top)} hottest")] if top else []  # fmt: skip
    if dies:
        handles.append(R.die_handle())
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8, frameon=False)

    cbar = fig.colorbar(
        ScalarMappable(norm=norm, cmap=cmap),
        ax=ax,
        shrink=0.85,
        format=PercentFormatter(1.0, decimals=None),
        extend="neither",
    )
    top_pct = f"{norm.vmax:.0%}" if norm.vmax >= 0.1 else f"{norm.vmax:.1%}"
    cbar.set_label(f"link utilisation (scale 0-{top_pct}: to the busiest link)", fontsize=9)
    cbar.ax.tick_params(labelsize=8)
    busy = arr.util[arr.util > 0]
    stats = (
        f"busiest {busy.max():.1%}, mean of busy {busy.mean():.1%}"
        if busy.size
        else "all links idle"
    )
    R.set_title(
        ax,
        f"{view.title}\n{len(view.links)} link directions ({int(arr.d2d.sum())} die-to-die), "
        f"{stats}; {note}",
    )
    return R.save(fig, path, dpi)


def _geometry(arr: _Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tail points and vectors (x = col, y = row) of each arrow, shortened at both ends
    and shifted to the right of its direction, plus the unit normals."""
    p0 = arr.src[:, ::-1].astype(np.float64)
    p1 = arr.dst[:, ::-1].astype(np.float64)
    d = p1 - p0
    length = np.hypot(d[:, 0], d[:, 1]).reshape(-1, 1)
    unit = d / np.where(length > 0, length, 1.0)
    normal = np.stack([-unit[:, 1], unit[:, 0]], axis=1)
    tail = p0 + unit * _SHRINK + normal * _OFFSET
    vec = d - unit * (2 * _SHRINK)
    return tail, vec, normal


def _draw_arrows(
    ax: Axes,
    view: LinkView,
    arr: _Arrays,
    top: list[int],
    norm: Normalize,
    cmap: Colormap,
    dead: np.ndarray,
    *,
    mark_d2d: bool,
) -> list[Line2D]:
    """The arrows; returns the legend entries they need."""
    rows, cols = view.rows, view.cols
    bg = np.empty((rows, cols, 4))
    bg[:] = R.BACKGROUND_RGBA
    bg[dead] = R.DEAD_RGBA
    ax.imshow(
        bg,
        interpolation="nearest",
        extent=R.grid_extent(rows, cols),
        aspect=R.grid_aspect(rows, cols),
        zorder=0,
    )
    R.draw_cell_borders(ax, rows, cols)
    R.draw_dead_markers(ax, rows, cols, dead, color="white")
    if not len(view.links):
        return []
    tail, vec, normal = _geometry(arr)
    style = {
        "angles": "xy",
        "scale_units": "xy",
        "scale": 1.0,
        "units": "xy",
        "headwidth": 2.6,
        "headlength": 2.6,
        "headaxislength": 2.3,
        "minlength": 0.0,
    }
    idle = (arr.util == 0) & (arr.nbytes == 0)
    if idle.any():
        ax.quiver(
            *tail[idle].T, *vec[idle].T, color=IDLE_COLOUR, width=_WIDTH * 0.6, zorder=3, **style
        )
    busy = ~idle
    hot = np.zeros(len(busy), dtype=bool)
    hot[np.asarray(top, dtype=np.int64)] = True
    for mask, edge in ((busy & ~hot, {}), (hot, {"edgecolor": HOT_COLOUR, "linewidth": 2.5})):
        if mask.any():  # the hottest: their own colour, outlined
            ax.quiver(
                *tail[mask].T,
                *vec[mask].T,
                arr.util[mask],
                cmap=cmap,
                norm=norm,
                width=_WIDTH,
                zorder=5,
                **edge,
                **style,
            )
    handles = [Line2D([], [], color=IDLE_COLOUR, lw=2, label="idle link")] if idle.any() else []
    marked = arr.d2d & ~idle & mark_d2d
    if marked.any():  # idle die-to-die links are plain to see on the die edge
        mid = tail[marked] + vec[marked] / 2
        size = min(0.13 * R.cell_points(rows, cols), 7.0) ** 2
        ax.scatter(
            mid[:, 0],
            mid[:, 1],
            s=size,
            marker="D",
            facecolor="white",
            edgecolor="black",
            linewidths=0.6,
            zorder=6,
        )
        handles.append(
            Line2D([], [], ls="", marker="D", mfc="white", mec="black", label="die-to-die")
        )
    if top:
        handles.append(Line2D([], [], color=HOT_COLOUR, lw=4, label=f"{len(top)} hottest"))
    fontsize = max(6.0, min(9.0, 0.3 * R.cell_points(rows, cols)))
    for i in top:
        # beside the arrow, on the side away from its link's other direction
        anchor = tail[i] + vec[i] / 2 + normal[i] * 0.12
        nx, ny = normal[i]
        ax.annotate(
            f"{view.links[i].utilisation:.0%}",
            (anchor[0], anchor[1]),
            ha="left" if nx > 0.5 else "right" if nx < -0.5 else "center",
            va="top" if ny > 0.5 else "bottom" if ny < -0.5 else "center",
            fontsize=fontsize,
            zorder=9,
            bbox=_LABEL_BOX,
        )
    return handles


def _draw_image(
    ax: Axes,
    view: LinkView,
    arr: _Arrays,
    top: list[int],
    norm: Normalize,
    cmap: Colormap,
    dead: np.ndarray,
) -> int:
    rows, cols = view.rows, view.cols
    per_core = np.zeros(rows * cols)
    if len(view.links):
        np.maximum.at(per_core, arr.src[:, 0] * cols + arr.src[:, 1], arr.util)
    grid = per_core.reshape(rows, cols)
    grid[dead] = np.nan
    pooled, k = R.max_pool(grid)
    ax.imshow(
        np.ma.masked_invalid(pooled),
        cmap=cmap.with_extremes(bad=R.DEAD_RGBA),
        norm=norm,
        interpolation="nearest",
        extent=R.grid_extent(rows, cols),
        aspect=R.grid_aspect(rows, cols),
        zorder=1,
    )
    R.draw_sparse_dead(ax, dead, color="white")
    if top:
        src = arr.src[np.asarray(top)]
        ax.scatter(
            src[:, 1], src[:, 0], s=110, facecolor="none", edgecolor=HOT_COLOUR, lw=2, zorder=8
        )
        for i in top:
            r, c = view.links[i].src
            ax.annotate(
                f"{view.links[i].utilisation:.0%}",
                (c, r),
                xytext=(6, 6),
                textcoords="offset points",
                fontsize=8,
                zorder=9,
                bbox=_LABEL_BOX,
            )
    return k
