"""Link heatmap: how busy each link direction was over a step."""

from __future__ import annotations

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


def plot_links(
    view: LinkView,
    path: str | Path,
    top_k: int = 5,
    *,
    dpi: int = 100,
    detail_limit: int = DETAIL_LIMIT,
) -> Path:
    """Draw link utilisation to ``path`` (.png or .svg) and return the path.

    Small grids: one arrow per link direction, coloured by utilisation, the two
    directions of a link offset so both show; die-to-die links carry a diamond; the
    ``top_k`` hottest are outlined and annotated. Grids over ``detail_limit`` cores a
    side: an image of each core's busiest outgoing link.
    """
    R.output_path(path)
    rows, cols = view.rows, view.cols
    arr = _Arrays.of(view)
    top = hottest(view, top_k)
    small = max(rows, cols) <= detail_limit
    norm = Normalize(0.0, 1.0)
    cmap = mpl.colormaps[CMAP]
    dead = R.dead_mask(rows, cols, view.dead)

    w, h = R.grid_side(rows, cols)
    fig = R.new_figure((w + 1.6, h + 0.9), dpi)
    ax = fig.add_subplot()
    R.setup_grid_axes(ax, rows, cols)
    if small:
        _draw_arrows(ax, view, arr, top, norm, cmap, dead)
        note = f"top {len(top)} outlined"
    else:
        k = _draw_image(ax, view, arr, top, norm, cmap, dead)
        pooled = f", pixel = max of {k}x{k} cores" if k > 1 else ""
        note = f"colour = busiest outgoing link per core{pooled}; top {len(top)} circled"
    # under the arrows on small grids so that links across a die edge stay visible
    R.draw_dies(ax, rows, cols, view.die_rows, view.die_cols, zorder=2.5 if small else 6)

    cbar = fig.colorbar(
        ScalarMappable(norm=norm, cmap=cmap), ax=ax, shrink=0.85, format=PercentFormatter(1.0)
    )
    cbar.set_label("link utilisation", fontsize=8)
    cbar.ax.tick_params(labelsize=7)
    busy = arr.util[arr.util > 0]
    stats = (
        f"max {busy.max():.0%}, mean of busy {busy.mean():.0%}" if busy.size else "all links idle"
    )
    R.set_title(
        ax,
        f"{view.title}\n{len(view.links)} link directions ({int(arr.d2d.sum())} die-to-die), "
        f"{stats}\n{note}",
        fontsize=9,
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
) -> None:
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
        return
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
    if top:
        t = np.asarray(top)
        ax.quiver(*tail[t].T, *vec[t].T, color="black", width=_WIDTH * 2.1, zorder=4, **style)
    busy = ~idle
    if busy.any():
        ax.quiver(
            *tail[busy].T,
            *vec[busy].T,
            arr.util[busy],
            cmap=cmap,
            norm=norm,
            width=_WIDTH,
            zorder=5,
            **style,
        )
    handles = [Line2D([], [], color=IDLE_COLOUR, lw=2, label="idle link")] if idle.any() else []
    marked = arr.d2d & ~idle  # idle die-to-die links are plain to see on the die edge
    if marked.any():
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
        handles.append(Line2D([], [], color="black", lw=3, label=f"{len(top)} hottest (outlined)"))
    fontsize = max(5.0, min(8.0, 0.3 * R.cell_points(rows, cols)))
    for i in top:
        anchor = tail[i] + vec[i] / 2 + normal[i] * 0.22
        ax.annotate(
            f"{view.links[i].utilisation:.0%}",
            (anchor[0], anchor[1]),
            ha="center",
            va="center",
            fontsize=fontsize,
            zorder=9,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.85, "lw": 0.4},
        )
    if handles:
        ax.figure.legend(
            handles=handles, loc="outside lower center", ncol=3, fontsize=7, frameon=False
        )


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
            src[:, 1], src[:, 0], s=90, facecolor="none", edgecolor="black", lw=1.4, zorder=8
        )
        for i in top:
            r, c = view.links[i].src
            ax.annotate(
                f"{view.links[i].utilisation:.0%}",
                (c, r),
                xytext=(6, 6),
                textcoords="offset points",
                fontsize=7,
                zorder=9,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.85},
            )
    return k
