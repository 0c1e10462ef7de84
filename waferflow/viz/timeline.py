"""Timeline: a Gantt chart of compute and communication per track over one step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.patches import Patch

from waferflow.viz import _render as R
from waferflow.viz.data import KINDS, PHASES, SpanKind, TimelineView

PHASE_COLOURS = {"fwd": "#4c72b0", "bwd": "#dd8452", "opt": "#55a868", "": "#8c8c8c"}
WAIT_COLOUR = "#f3c4c4"  # stalled on an input or a buffer: a bubble the schedule caused
IDLE_COLOUR = "#e4e4e4"
GAP_COLOUR = "#f5f5f5"
# Vertical lanes inside a track (track centre at 0, rows grow downwards):
# send strip on top, compute in the middle, receive strip at the bottom.
_LANES = {
    SpanKind.SEND: (-0.44, 0.14),
    SpanKind.COMPUTE: (-0.28, 0.56),
    SpanKind.RECV: (0.30, 0.14),
    SpanKind.WAIT: (-0.44, 0.88),
    SpanKind.IDLE: (-0.44, 0.88),
}
_ACTIVE = (SpanKind.COMPUTE, SpanKind.SEND, SpanKind.RECV)
_MAX_SPAN_TEXTS = 300
_WIDTH_IN = 9.4  # figure width, inches


def _colour(kind: SpanKind, phase: str) -> tuple[float, ...]:
    if kind is SpanKind.WAIT:
        return to_rgba(WAIT_COLOUR)
    if kind is SpanKind.IDLE:
        return to_rgba(IDLE_COLOUR)
    base = to_rgba(PHASE_COLOURS[phase])
    if kind is SpanKind.COMPUTE:
        return base
    # communication: the phase colour darkened, sends more than receives; they also sit
    # in their own strips (send on top, receive below)
    f = 0.55 if kind is SpanKind.SEND else 0.8
    return (base[0] * f, base[1] * f, base[2] * f, 1.0)


def _legend_name(kind: SpanKind, phase: str) -> str:
    if kind in (SpanKind.WAIT, SpanKind.IDLE):
        return kind.value
    where = {SpanKind.SEND: " (top)", SpanKind.RECV: " (bottom)"}.get(kind, "")
    return f"{phase or 'other'} {kind.value}{where}"


_ACTIVE_CODES = np.array([k in _ACTIVE for k in KINDS])


def track_busy(view: TimelineView) -> np.ndarray:
    """Active (compute + send + receive) seconds of each track."""
    cols = view.columns
    active = _ACTIVE_CODES[cols.kind]
    return np.bincount(
        cols.track[active], weights=cols.duration_s[active], minlength=len(view.tracks)
    )[: len(view.tracks)].astype(np.float64)


def busiest_tracks(view: TimelineView, limit: int) -> list[int]:
    """The ``limit`` tracks with the most active (compute + send + receive) time, in
    their original order; ties go to the lower index."""
    order = np.argsort(-track_busy(view), kind="stable")[: max(limit, 1)]
    return sorted(int(i) for i in order)


def _evenly(members: list[int], k: int, busiest: int) -> list[int]:
    """``k`` of ``members`` spread evenly over the list (first and last included), with
    ``busiest`` swapped in for the nearest pick when it is not one already."""
    n = len(members)
    if k >= n:
        return list(members)
    pos = sorted({round(i * (n - 1) / (k - 1)) for i in range(k)} if k > 1 else {0})
    want = members.index(busiest)
    if want not in pos:
        nearest = min(pos, key=lambda p: (abs(p - want), p))
        pos = sorted({*pos, want} - {nearest})
    return [members[p] for p in pos]


def sample_tracks(view: TimelineView, limit: int) -> tuple[list[int], str]:
    """The tracks to draw, group by group, and what was left out (``''``: nothing).

    With more than ``limit`` tracks each group keeps a share in proportion to its size,
    at least one: its busiest track and others evenly spaced, so no group (pipeline
    stage) ever disappears and every part of it is represented."""
    groups = [g for g in view.grouped() if g]
    n = len(view.tracks)
    if n <= limit:
        return [t for g in groups for t in g], ""
    busy = track_busy(view)
    shown: list[int] = []
    quotas: list[tuple[int, int]] = []
    for g in groups:
        k = max(1, (limit * len(g)) // n)
        best = max(g, key=lambda t: (busy[t], -t))
        shown += _evenly(g, k, best)
        quotas.append((min(k, len(g)), len(g)))
    noun = _group_noun(view)
    if len(set(quotas)) == 1 and view.groups:
        k, size = quotas[0]
        per = f"{k} of {size} tracks in each of {len(groups)} {noun}s"
    elif view.groups:
        per = f"per {noun}: " + ", ".join(f"{k}/{size}" for k, size in quotas)
    else:
        per = f"{quotas[0][0]} of {n} tracks"
    return shown, f"sampled: {per} (evenly spaced, the busiest kept)"


def _group_noun(view: TimelineView) -> str:
    """``'stage'`` when every group is named ``'stage ...'``, else ``'group'``."""
    first = {name.split(" ")[0] for name in view.groups}
    return first.pop() if len(first) == 1 and all(" " in g for g in view.groups) else "group"


def _gaps(bars: list[tuple[float, float]], end: float) -> list[tuple[float, float]]:
    """Intervals of [0, end] that no bar (start, width) covers (bubbles), as (start,
    width)."""
    x, w = _merged(*_columns(bars), 0.0)
    starts, ends = _gap_arrays(x, x + w, end)
    return list(zip(starts.tolist(), (ends - starts).tolist(), strict=True))


def _gap_arrays(x: np.ndarray, e: np.ndarray, end: float) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends of the gaps in [0, end] between sorted, disjoint bars [x, e]."""
    lo = np.concatenate([[0.0], e])
    hi = np.concatenate([x, [end]])
    keep = hi > lo
    return lo[keep], hi[keep]


def _columns(bars: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    arr = np.asarray(bars, dtype=np.float64).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _merged(x: np.ndarray, w: np.ndarray, pixel: float) -> tuple[np.ndarray, np.ndarray]:
    """``merge_bars`` on arrays of starts and widths: sorted by (start, width), a bar
    that starts less than ``pixel`` after the reach of those before it joins them."""
    if not len(x):
        return x, w
    order = np.lexsort((w, x))
    x = x[order]
    reach = np.maximum.accumulate(x + w[order])
    new = np.ones(len(x), dtype=bool)
    new[1:] = x[1:] - reach[:-1] >= pixel
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(x) - 1)
    return x[first], reach[last] - x[first]


def merge_bars(bars: list[tuple[float, float]], pixel: float) -> list[tuple[float, float]]:
    """Bars (start, width) that overlap or lie less than ``pixel`` apart, as one bar each:
    at the picture's resolution they are drawn as one anyway, and a step of 10^5 actors
    would otherwise send 10^5 rectangles per track to the renderer."""
    x, w = _merged(*_columns(bars), pixel)
    return list(zip(x.tolist(), w.tolist(), strict=True))


def plot_timeline(
    view: TimelineView,
    path: str | Path,
    max_tracks: int = 64,
    *,
    dpi: int = R.DEFAULT_DPI,
    shade_idle: bool = True,
) -> Path:
    """Draw the step's timeline to ``path`` (.png or .svg) and return the path.

    One row per track; compute in the middle, sends in a strip above, receives below,
    coloured by phase; waits pale red; with ``shade_idle`` the gaps where a track does
    nothing are shaded grey so pipeline bubbles stand out. Tracks are drawn group by
    group (stage by stage), each group named at the right; with more than
    ``max_tracks`` tracks every group is sampled (``sample_tracks``; the title says so).
    """
    R.output_path(path)
    shown, sampled = sample_tracks(view, max_tracks)
    n = len(shown)
    end = max(view.step_time_s, float(view.columns.end_s.max(initial=0.0)))
    scale, unit = R.time_unit(end if end > 0 else 1e-9)
    x_end = end * scale if end > 0 else 1.0

    height = min(11.0, max(3.2, 1.8 + 0.2 * n))
    fig = R.new_figure((_WIDTH_IN, height), dpi)
    ax = fig.add_subplot()

    # the spans of the tracks shown, by row (spans of tracks not shown are never drawn)
    cols = view.columns
    row_map = np.full(len(view.tracks), -1, dtype=np.int64)
    row_map[shown] = np.arange(n)
    rows = row_map[cols.track]
    keep = np.flatnonzero(rows >= 0)
    rows, kind, phase = rows[keep], cols.kind[keep], cols.phase[keep]
    x0, x1 = cols.start_s[keep] * scale, cols.end_s[keep] * scale
    # spans of one row and (kind, phase) next to each other
    order = np.lexsort((phase, kind, rows))
    rows, kind, phase, x0, x1, keep = (a[order] for a in (rows, kind, phase, x0, x1, keep))

    # bars closer than a pixel of the figure merge (the axes are narrower: conservative)
    pixel = x_end * 1.01 / (_WIDTH_IN * dpi)

    handles: list[Patch] = []
    if shade_idle:
        shaded: list[np.ndarray] = []
        active = _ACTIVE_CODES[kind]
        bounds = np.searchsorted(rows[active], np.arange(n + 1))
        ax0, ax1 = x0[active], x1[active]
        for row in range(n):
            a, b = bounds[row], bounds[row + 1]
            x, w = _merged(ax0[a:b], ax1[a:b] - ax0[a:b], pixel)
            g0, g1 = _gap_arrays(x, x + w, end * scale)
            wide = g1 - g0 >= pixel  # gaps narrower than a pixel would not show
            shaded.append(_rects(g0[wide], g1[wide] - g0[wide], row - 0.44, 0.88))
        if shaded and sum(len(r) for r in shaded):
            _add_bars(ax, np.concatenate(shaded), facecolors=GAP_COLOUR, edgecolors="#d0d0d0",
                      linewidth=0.3, hatch="////", zorder=0)  # fmt: skip
        handles.append(
            Patch(facecolor=GAP_COLOUR, edgecolor="#b0b0b0", hatch="////", label="idle gap")
        )

    # one collection per (kind, phase): few artists even for many spans
    key = (kind.astype(np.int64) * len(PHASES) + phase) * (n + 1) + rows
    cuts = np.flatnonzero(np.diff(key)) + 1
    groups: dict[tuple[int, int], list[np.ndarray]] = {}
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(key)], strict=True):
        if a == b:
            continue
        x, w = _merged(x0[a:b], x1[a:b] - x0[a:b], pixel)
        k, ph, row = int(kind[a]), int(phase[a]), int(rows[a])
        y0, dy = _LANES[KINDS[k]]
        groups.setdefault((k, ph), []).append(_rects(x, w, row + y0, dy))
    for k, ph in sorted(groups, key=lambda g: (g[0], PHASES[g[1]])):
        kind_k, phase_name = KINDS[k], PHASES[ph]
        colour = _colour(kind_k, phase_name)
        zorder = 1 if kind_k in (SpanKind.WAIT, SpanKind.IDLE) else 3
        _add_bars(ax, np.concatenate(groups[k, ph]), facecolors=colour, linewidth=0,
                  zorder=zorder)  # fmt: skip
        handles.append(Patch(facecolor=colour, label=_legend_name(kind_k, phase_name)))

    if n <= 24:
        _label_spans(ax, view, shown, scale, x_end)
    if view.groups:
        _draw_groups(ax, view, shown)
    if view.step_time_s > 0:
        ax.axvline(view.step_time_s * scale, color="black", ls="--", lw=1.0, zorder=5)

    ax.set_xlim(0, x_end * 1.01)
    ax.set_ylim(n - 0.5, -0.5)
    step = max(1, int(np.ceil(n / 64)))
    ticks = list(range(0, n, step))
    ax.set_yticks(ticks, [R.shorten(view.tracks[shown[i]], 28) for i in ticks])
    ax.tick_params(axis="y", labelsize=9 if n <= 32 else 7)
    ax.tick_params(axis="x", labelsize=9)
    ax.set_xlabel(f"time ({unit})")
    ax.grid(axis="x", color="#dddddd", lw=0.5, zorder=-1)
    ax.set_axisbelow(True)
    groups = f" in {len(view.groups)} {_group_noun(view)}s" if view.groups else ""
    note = f"; {sampled}" if sampled else ""
    R.set_title(
        ax,
        f"{view.title}\nstep {R.format_time(view.step_time_s)}, {len(view.tracks)} tracks"
        f"{groups}{note}",
    )
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=min(len(handles), 6),
        fontsize=8,
        frameon=False,
    )
    return R.save(fig, path, dpi)


def _rects(x: np.ndarray, w: np.ndarray, y: float, h: float) -> np.ndarray:
    """Rectangles (x, width, y, height) as rows of an array."""
    return np.column_stack([x, w, np.full(len(x), y), np.full(len(x), h)])


def _add_bars(ax: Axes, rects: np.ndarray, **style: Any) -> None:
    """Rectangles (rows ``x, width, y, height``) as one collection (what ``broken_barh``
    draws for one row, for all rows at once)."""
    x, w, y, h = rects.T
    verts = np.stack([np.column_stack(c) for c in ((x, y), (x, y + h), (x + w, y + h),
                                                   (x + w, y))], axis=1)  # fmt: skip
    ax.add_collection(PolyCollection(verts, **style), autolim=False)


def _draw_groups(ax: Axes, view: TimelineView, shown: list[int]) -> None:
    """A rule between groups and each group's name at the right of its rows."""
    group_of = [view.track_group[t] for t in shown]
    first = 0
    for row in range(1, len(shown) + 1):
        if row < len(shown) and group_of[row] == group_of[first]:
            continue
        if row < len(shown):
            ax.axhline(row - 0.5, color="black", lw=1.2, zorder=6)
        ax.annotate(
            view.groups[group_of[first]],
            xy=(1.005, (first + row - 1) / 2),
            xycoords=("axes fraction", "data"),
            ha="left",
            va="center",
            rotation=270,
            fontsize=9,
            annotation_clip=False,
        )
        first = row


def _label_spans(
    ax: Axes, view: TimelineView, shown: list[int], scale: float, x_end: float
) -> None:
    """Name the wide compute spans inside their bars (few tracks only)."""
    cols = view.columns
    row_of = {t: i for i, t in enumerate(shown)}
    compute = KINDS.index(SpanKind.COMPUTE)
    wide = (cols.kind == compute) & (cols.duration_s * scale >= 0.06 * x_end)
    # row by row, in the spans' order within a row
    picks = sorted(
        (row_of[t], i)
        for i, t in zip(np.flatnonzero(wide).tolist(), cols.track[wide].tolist(), strict=True)
        if t in row_of
    )
    written = 0
    for row, i in picks:
        label = cols.label(i)
        if not label:
            continue
        width = (cols.end_s[i] - cols.start_s[i]) * scale
        chars = max(3, int(60 * width / x_end))
        ax.text(
            (cols.start_s[i] + (cols.end_s[i] - cols.start_s[i]) / 2) * scale,
            row,
            R.shorten(label, chars),
            ha="center",
            va="center",
            fontsize=6,
            color="white",
            zorder=4,
            clip_on=True,
        )
        written += 1
        if written >= _MAX_SPAN_TEXTS:
            return
