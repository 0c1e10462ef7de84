"""Shared drawing helpers: figures, saving, grid axes, dies, dead cores, colours, units.

Figures are built with ``matplotlib.figure.Figure`` directly, never through pyplot: no
GUI backend is ever touched, nothing is registered in pyplot's figure list (so nothing
needs closing), and the user's chosen backend is left alone.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from waferflow.fileio import write_bytes
from waferflow.viz.data import Coord, VizError

# Per-core images larger than this are max-pooled so that one hot core stays visible.
MAX_IMAGE_PIXELS = 400
# Pictures are 7-9.5 in wide: 1,200-1,600 px at this resolution.
DEFAULT_DPI = 170

DEAD_RGBA = to_rgba("#3a3a3a")
UNASSIGNED_RGBA = to_rgba("#f4f4f4")
BACKGROUND_RGBA = to_rgba("#ececec")
HATCHES = ("", "//", "\\\\", "xx", "..", "++", "oo", "--")

_FORMATS = {".png": "png", ".svg": "svg"}
# No timestamps or version strings, so the same input gives the same bytes.
_METADATA = {
    "png": {"Software": None},
    "svg": {"Date": None, "Creator": None, "Type": None, "Format": None},
}
_RC = {"svg.hashsalt": "waferflow", "svg.fonttype": "path", "path.simplify": True}


def output_path(path: str | Path) -> tuple[Path, str]:
    """The path as a Path and the image format its suffix asks for."""
    out = Path(path)
    fmt = _FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise VizError(
            f"cannot write {str(out)!r}: the file name must end in .png or .svg to choose the "
            "image format"
        )
    return out, fmt


def new_figure(figsize: tuple[float, float], dpi: int) -> Figure:
    if dpi <= 0:
        raise VizError(f"dpi must be > 0, got {dpi}")
    return Figure(figsize=figsize, dpi=dpi, layout="constrained")


def save(fig: Figure, path: str | Path, dpi: int) -> Path:
    """Write the figure to ``path`` (format from the suffix, atomically) and free it."""
    out, fmt = output_path(path)
    buf = io.BytesIO()
    with mpl.rc_context(_RC):
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=_METADATA[fmt])
    fig.clear()
    return write_bytes(out, buf.getvalue())


MAX_ASPECT = 4.0  # grids more elongated than this get stretched (non-square) cells


def grid_side(rows: int, cols: int) -> tuple[float, float]:
    """Inches for a grid drawing that keeps cells square (up to ``MAX_ASPECT``) and
    stays readable."""
    longest = max(rows, cols)
    side = min(9.0, max(7.5, 0.42 * longest))
    short = side / min(longest / min(rows, cols), MAX_ASPECT)
    width, height = (side, short) if cols >= rows else (short, side)
    return max(width, 2.0), max(height, 2.0)


def cell_points(rows: int, cols: int) -> float:
    """Approximate size of one cell in points (for marker and font sizes)."""
    w, h = grid_side(rows, cols)
    return min(w * 72 / cols, h * 72 / rows)


def setup_grid_axes(ax: Axes, rows: int, cols: int) -> None:
    ax.set_xlim(-0.5, cols - 0.5)
    ax.set_ylim(rows - 0.5, -0.5)  # row 0 at the top, like a matrix
    ax.set_aspect(grid_aspect(rows, cols))
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(nbins=10, integer=True))
    ax.tick_params(labelsize=7)


def grid_aspect(rows: int, cols: int) -> str:
    """Square cells unless the grid is too elongated to read that way."""
    return "equal" if max(rows, cols) <= MAX_ASPECT * min(rows, cols) else "auto"


def grid_extent(rows: int, cols: int) -> tuple[float, float, float, float]:
    """imshow extent that puts core (r, c) centred at x = c, y = r."""
    return (-0.5, cols - 0.5, rows - 0.5, -0.5)


def draw_cell_borders(ax: Axes, rows: int, cols: int, color: str = "white") -> None:
    lw = 0.6 if max(rows, cols) <= 32 else 0.3
    ax.hlines(np.arange(rows + 1) - 0.5, -0.5, cols - 0.5, colors=color, linewidths=lw, zorder=2)
    ax.vlines(np.arange(cols + 1) - 0.5, -0.5, rows - 0.5, colors=color, linewidths=lw, zorder=2)


def die_cuts(n: int, parts: int) -> list[int]:
    """Indices where die k + 1 starts along an axis of n cores cut into ``parts`` dies."""
    return [k * n // parts for k in range(1, parts)]


DIE_COLOUR = "#202020"
DIE_DASHES = (0, (4, 2))  # dashed: told apart from outlines and highlights, always solid


def draw_dies(
    ax: Axes, rows: int, cols: int, die_rows: int, die_cols: int, zorder: float = 6
) -> bool:
    """Die boundaries as dashed lines (only the inner ones; the frame is the axes).
    Returns whether any was drawn (for the legend: ``die_handle``)."""
    style = {"colors": DIE_COLOUR, "linewidths": 1.8, "linestyles": DIE_DASHES, "zorder": zorder}
    rcuts = [r - 0.5 for r in die_cuts(rows, die_rows)]
    ccuts = [c - 0.5 for c in die_cuts(cols, die_cols)]
    if rcuts:
        ax.hlines(rcuts, -0.5, cols - 0.5, **style)
    if ccuts:
        ax.vlines(ccuts, -0.5, rows - 0.5, **style)
    return bool(rcuts or ccuts)


def die_handle() -> Line2D:
    """The legend entry of ``draw_dies``' lines."""
    return Line2D([], [], color=DIE_COLOUR, lw=1.8, ls=DIE_DASHES, label="die boundary")


def dead_mask(rows: int, cols: int, dead: Iterable[Coord]) -> np.ndarray:
    mask = np.zeros((rows, cols), dtype=bool)
    coords = np.asarray(sorted(dead), dtype=np.int64).reshape(-1, 2)
    if len(coords):
        mask[coords[:, 0], coords[:, 1]] = True
    return mask


def draw_dead_markers(ax: Axes, rows: int, cols: int, mask: np.ndarray, color: str) -> None:
    """An X on every dead core (small grids only; large grids show dead pixels)."""
    rr, cc = np.nonzero(mask)
    if len(rr):
        size = (0.55 * cell_points(rows, cols)) ** 2
        ax.scatter(cc, rr, s=size, marker="x", c=color, linewidths=1.2, zorder=7)


def draw_sparse_dead(ax: Axes, mask: np.ndarray, color: str, limit: int = 2000) -> None:
    """Image views: single dead pixels vanish, so mark up to ``limit`` of them with a
    small x (more than that show as a grey texture anyway)."""
    rr, cc = np.nonzero(mask)
    if 0 < len(rr) <= limit:
        ax.scatter(cc, rr, s=9, marker="x", c=color, linewidths=0.7, zorder=7)


def max_pool(values: np.ndarray, limit: int = MAX_IMAGE_PIXELS) -> tuple[np.ndarray, int]:
    """Block maximum over k x k cores so the image has at most ``limit`` pixels a side.

    NaN marks missing cores (dead); a block of only NaNs stays NaN. Returns the pooled
    array and k (1 when no pooling was needed).
    """
    rows, cols = values.shape
    k = max(1, math.ceil(max(rows, cols) / limit))
    if k == 1:
        return values, 1
    pr, pc = -rows % k, -cols % k
    padded = np.pad(values.astype(np.float64), ((0, pr), (0, pc)), constant_values=np.nan)
    blocks = padded.reshape((rows + pr) // k, k, (cols + pc) // k, k)
    filled = np.where(np.isnan(blocks), -np.inf, blocks).max(axis=(1, 3))
    return np.where(np.isneginf(filled), np.nan, filled), k


def wrap_words(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` characters, broken between words; a word longer than
    that breaks after a comma or a separator inside it (``dp=2,tp=12,...``), and is
    never cut anywhere else."""
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for word in para.split():
            pieces = _pieces(word, width)
            for i, piece in enumerate(pieces):
                glue = " " if i == 0 and line else ""
                if line and len(line) + len(glue) + len(piece) > width:
                    lines.append(line)
                    line, glue = "", ""
                line += glue + piece
        lines.append(line)
    return lines


def _pieces(word: str, width: int) -> list[str]:
    """A word cut after its commas / separators into runs of at most ``width`` (a run
    with no place to cut stays whole)."""
    if len(word) <= width:
        return [word]
    out: list[str] = []
    for part in re.findall(r"[^,;/]*[,;/]|[^,;/]+$", word):
        if out and len(out[-1]) + len(part) <= width:
            out[-1] += part
        else:
            out.append(part)
    return out


def set_title(ax: Axes, text: str, *, fontsize: float = 10, **kw: object) -> None:
    """A title whose long lines wrap at word boundaries to most of the figure's width
    (the layout makes room for it; characters are about 0.6 em wide)."""
    fig = ax.get_figure()
    inches = 0.9 * fig.get_size_inches()[0] if fig is not None else 5.0
    width = max(30, int(inches * 72 / (0.6 * fontsize)))
    ax.set_title("\n".join(wrap_words(text, width)), fontsize=fontsize, **kw)  # type: ignore[arg-type]


def shorten(name: str, width: int = 28) -> str:
    """Keep the specific end of a long dotted module path: '…layers.11.mlp.fc1'."""
    if len(name) <= width:
        return name
    tail = name[-(width - 1) :]
    dot = tail.find(".")
    if 0 <= dot < len(tail) // 2:
        tail = tail[dot + 1 :]
    return "…" + tail


def _mix(rgba: tuple[float, ...], target: float, amount: float) -> tuple[float, ...]:
    r, g, b, a = rgba
    return (
        r + (target - r) * amount,
        g + (target - g) * amount,
        b + (target - b) * amount,
        a,
    )


def label_colour(index: int) -> tuple[float, ...]:
    """tab20 for the first 20 labels; later rounds are shaded darker / lighter (and the
    patch drawings add a hatch, see ``label_hatch``)."""
    base = mpl.colormaps["tab20"].colors[index % 20]
    rgba = (*base, 1.0)
    cycle = index // 20
    if cycle == 0:
        return rgba
    amount = min(0.6, 0.25 * ((cycle + 1) // 2))
    return _mix(rgba, 0.0 if cycle % 2 else 1.0, amount)


def label_colours(n: int) -> np.ndarray:
    return np.array([label_colour(i) for i in range(n)], dtype=np.float64).reshape(-1, 4)


def label_hatch(index: int) -> str:
    return HATCHES[(index // 20) % len(HATCHES)]


def luminance(rgba: Iterable[float]) -> float:
    r, g, b = list(rgba)[:3]
    return 0.299 * r + 0.587 * g + 0.114 * b


def time_unit(seconds: float) -> tuple[float, str]:
    """(scale, name) so that ``seconds * scale`` reads well: ns, us, ms or s."""
    if seconds < 1e-6:
        return 1e9, "ns"
    if seconds < 1e-3:
        return 1e6, "us"
    if seconds < 1.0:
        return 1e3, "ms"
    return 1.0, "s"


def format_time(seconds: float) -> str:
    scale, unit = time_unit(seconds)
    return f"{seconds * scale:.4g} {unit}"


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    raise AssertionError("unreachable")
