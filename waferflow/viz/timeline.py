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
from waferflow.viz.data import Span, SpanKind, TimelineView

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


def track_busy(view: TimelineView) -> np.ndarray:
    """Active (compute + send + receive) seconds of each track."""
    busy = np.zeros(len(view.tracks))
    for span in view.spans:
        if span.kind in _ACTIVE:
            busy[span.track] += span.duration_s
    return busy


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
    out: list[tuple[float, float]] = []
    t = 0.0
    for x, w in sorted(bars):
        if x > t:
            out.append((t, x - t))
        t = max(t, x + w)
    if t < end:
        out.append((t, end - t))
    return out


def merge_bars(bars: list[tuple[float, float]], pixel: float) -> list[tuple[float, float]]:
    """Bars (start, width) that overlap or lie less than ``pixel`` apart, as one bar each:
    at the picture's resolution they are drawn as one anyway, and a step of 10^5 actors
    would otherwise send 10^5 rectangles per track to the renderer."""
    out: list[tuple[float, float]] = []
    for x, w in sorted(bars):
        if out and x - (out[-1][0] + out[-1][1]) < pixel:
            x0, w0 = out[-1]
            out[-1] = (x0, max(w0, x + w - x0))
        else:
            out.append((x, w))
    return out


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
    row_of = {t: i for i, t in enumerate(shown)}
    n = len(shown)
    end = max([view.step_time_s, *(s.end_s for s in view.spans)])
    scale, unit = R.time_unit(end if end > 0 else 1e-9)
    x_end = end * scale if end > 0 else 1.0

    height = min(11.0, max(3.2, 1.8 + 0.2 * n))
    fig = R.new_figure((_WIDTH_IN, height), dpi)
    ax = fig.add_subplot()

    per_row: dict[int, list[Span]] = {i: [] for i in range(n)}
    for span in view.spans:
        row = row_of.get(span.track)
        if row is not None:
            per_row[row].append(span)

    # bars closer than a pixel of the figure merge (the axes are narrower: conservative)
    pixel = x_end * 1.01 / (_WIDTH_IN * dpi)

    handles: list[Patch] = []
    if shade_idle:
        shaded: list[tuple[float, float, float, float]] = []
        for row, spans in per_row.items():
            active = [(s.start_s, s.duration_s) for s in spans if s.kind in _ACTIVE]
            # gaps narrower than a pixel would not show
            gaps = [
                g for g in _gaps(merge_bars(active, pixel / scale), end) if g[1] * scale >= pixel
            ]
            shaded += [(a * scale, w * scale, row - 0.44, 0.88) for a, w in gaps]
        if shaded:
            _add_bars(ax, shaded, facecolors=GAP_COLOUR, edgecolors="#d0d0d0", linewidth=0.3,
                      hatch="////", zorder=0)  # fmt: skip
        handles.append(
            Patch(facecolor=GAP_COLOUR, edgecolor="#b0b0b0", hatch="////", label="idle gap")
        )

    # one collection per (kind, phase): few artists even for many spans
    groups: dict[tuple[SpanKind, str], dict[int, list[tuple[float, float]]]] = {}
    for row, spans in per_row.items():
        for s in spans:
            bars = groups.setdefault((s.kind, s.phase), {}).setdefault(row, [])
            bars.append((s.start_s * scale, s.duration_s * scale))
    kind_order = list(SpanKind)
    for kind, phase in sorted(groups, key=lambda g: (kind_order.index(g[0]), g[1])):
        y0, dy = _LANES[kind]
        colour = _colour(kind, phase)
        zorder = 1 if kind in (SpanKind.WAIT, SpanKind.IDLE) else 3
        rects = [
            (x, w, row + y0, dy)
            for row, bars in sorted(groups[(kind, phase)].items())
            for x, w in merge_bars(bars, pixel)
        ]
        _add_bars(ax, rects, facecolors=colour, linewidth=0, zorder=zorder)
        handles.append(Patch(facecolor=colour, label=_legend_name(kind, phase)))

    if n <= 24:
        _label_spans(ax, per_row, scale, x_end)
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


def _add_bars(ax: Axes, rects: list[tuple[float, float, float, float]], **style: Any) -> None:
    """Rectangles ``(x, width, y, height)`` as one collection (what ``broken_barh`` draws
    for one row, for all rows at once)."""
    verts = [[(x, y), (x, y + h), (x + w, y + h), (x + w, y)] for x, w, y, h in rects]
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


def _label_spans(ax: Axes, per_row: dict[int, list[Span]], scale: float, x_end: float) -> None:
    """Name the wide compute spans inside their bars (few tracks only)."""
    written = 0
    for row, spans in per_row.items():
        for s in spans:
            width = s.duration_s * scale
            if s.kind is not SpanKind.COMPUTE or not s.label or width < 0.06 * x_end:
                continue
            chars = max(3, int(60 * width / x_end))
            ax.text(
                (s.start_s + s.duration_s / 2) * scale,
                row,
                R.shorten(s.label, chars),
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
