"""Timelines: Gantt bars by kind and phase, bubbles as shaded gaps, track selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.viz.images import DPI, colours, count, pixels, rgb8
from waferflow.viz import Span, SpanKind, TimelineView, plot_timeline
from waferflow.viz import _render as R
from waferflow.viz.timeline import (
    GAP_COLOUR,
    PHASE_COLOURS,
    WAIT_COLOUR,
    _gaps,
    busiest_tracks,
    merge_bars,
    sample_tracks,
)

K = SpanKind


def _gpipe(stages: int = 3, micro: int = 3, phases: bool = True) -> TimelineView:
    """GPipe: forwards 10 us, backwards 20 us, an optimiser step; bubbles at both ends."""
    f, b = 10e-6, 20e-6
    spans = []
    for s in range(stages):
        for m in range(micro):
            t = (s + m) * f
            spans.append(Span(s, t, t + f, K.COMPUTE, f"F{m}", "fwd" if phases else ""))
            if s + 1 < stages:
                spans.append(Span(s, t + f, t + f + 2e-6, K.SEND, f"a{m}", "fwd"))
            if s > 0:
                spans.append(Span(s, t - 2e-6, t, K.RECV, f"a{m}", "fwd"))
        back = (stages + micro - 1) * f
        for m in range(micro):
            t = back + (stages - 1 - s + m) * b
            spans.append(Span(s, t, t + b, K.COMPUTE, f"B{m}", "bwd" if phases else ""))
        opt = back + (stages + micro - 1) * b
        spans.append(Span(s, opt, opt + 5e-6, K.COMPUTE, "adam", "opt" if phases else ""))
    spans.append(Span(1, 0.0, 10e-6, K.WAIT, "wait"))
    step = (stages + micro - 1) * (f + b) + 5e-6
    return TimelineView(tuple(f"stage {s}" for s in range(stages)), tuple(spans), step, "gpipe")


def test_phases_kinds_and_bubbles_are_coloured(tmp_path: Path) -> None:
    img = pixels(plot_timeline(_gpipe(), tmp_path / "t.png", dpi=DPI))
    for phase in ("fwd", "bwd", "opt"):
        assert count(img, PHASE_COLOURS[phase]) > 100
    assert count(img, WAIT_COLOUR) > 20
    assert count(img, GAP_COLOUR) > 100  # the bubbles
    assert len(colours(img)) > 20


def test_phase_change_changes_the_colour_set(tmp_path: Path) -> None:
    with_phases = pixels(plot_timeline(_gpipe(), tmp_path / "a.png", dpi=DPI))
    without = pixels(plot_timeline(_gpipe(phases=False), tmp_path / "b.png", dpi=DPI))
    bwd = rgb8(PHASE_COLOURS["bwd"])
    assert bwd in colours(with_phases) and bwd not in colours(without)
    assert count(without, PHASE_COLOURS[""]) > 100


def test_shading_idle_is_optional(tmp_path: Path) -> None:
    plain = pixels(plot_timeline(_gpipe(), tmp_path / "a.png", dpi=DPI, shade_idle=False))
    shaded = pixels(plot_timeline(_gpipe(), tmp_path / "b.png", dpi=DPI))
    # without shading the pale grey only appears in anti-aliased edges
    assert count(shaded, GAP_COLOUR) > 10 * count(plain, GAP_COLOUR) + 100


def test_same_input_same_bytes(tmp_path: Path) -> None:
    for suffix in ("png", "svg"):
        a = plot_timeline(_gpipe(), tmp_path / f"a.{suffix}", dpi=DPI).read_bytes()
        b = plot_timeline(_gpipe(), tmp_path / f"b.{suffix}", dpi=DPI).read_bytes()
        assert a == b


def test_gaps_are_the_uncovered_parts_of_the_step() -> None:
    bars = [(2.0, 2.0), (3.0, 2.0), (7.0, 1.0)]  # (start, width)
    assert _gaps(bars, 10.0) == [(0.0, 2.0), (5.0, 2.0), (8.0, 2.0)]
    assert _gaps([], 1.0) == [(0.0, 1.0)]


def test_bars_closer_than_a_pixel_are_drawn_as_one() -> None:
    bars = [(5.0, 1.0), (0.0, 1.0), (1.05, 0.5), (1.2, 0.1), (3.0, 0.5)]
    # 1.05 starts 0.05 after the first ends: merged; 1.2 lies inside it; 3.0 is 1.45 away
    assert merge_bars(bars, 0.1) == [(0.0, 1.55), (3.0, 0.5), (5.0, 1.0)]
    assert merge_bars(bars, 0.01) == [(0.0, 1.0), (1.05, 0.5), (3.0, 0.5), (5.0, 1.0)]
    assert merge_bars([], 1.0) == []


def test_a_big_step_draws_a_bounded_number_of_bars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 back-to-back actors on one core, each far below a pixel: one bar."""
    from waferflow.viz import timeline

    spans = tuple(Span(0, i * 1e-9, (i + 1) * 1e-9 - 1e-12, K.COMPUTE, "", "fwd")
                  for i in range(20_000))  # fmt: skip
    view = TimelineView(tracks=("core 0",), spans=spans, step_time_s=20e-6)
    drawn: list[int] = []
    real = timeline._add_bars

    def counting(ax: object, rects: list, **style: object) -> None:
        drawn.append(len(rects))
        real(ax, rects, **style)  # type: ignore[arg-type]

    monkeypatch.setattr(timeline, "_add_bars", counting)
    plot_timeline(view, tmp_path / "t.png", dpi=DPI)
    assert drawn == [1]  # one compute bar; no idle gap is wide enough to shade


def test_busiest_tracks_keep_original_order() -> None:
    spans = (
        Span(0, 0.0, 1.0, K.COMPUTE),
        Span(1, 0.0, 5.0, K.SEND),
        Span(2, 0.0, 9.0, K.IDLE),  # idle time is not "busy"
        Span(3, 0.0, 3.0, K.RECV),
        Span(4, 0.0, 3.0, K.COMPUTE),
    )
    view = TimelineView(tuple("abcde"), spans, 10.0)
    assert busiest_tracks(view, 2) == [1, 3]  # 3 and 4 tie: the lower index wins
    assert busiest_tracks(view, 3) == [1, 3, 4]


def _staged(sizes: tuple[int, ...]) -> TimelineView:
    """Tracks in stages of the given sizes; track t is busy (t % 7 + 1) ms."""
    group = [g for g, size in enumerate(sizes) for _ in range(size)]
    spans = tuple(
        Span(t, 0.0, (t % 7 + 1) * 1e-3, K.COMPUTE, phase="fwd") for t in range(len(group))
    )
    return TimelineView(
        tuple(f"t{t}" for t in range(len(group))), spans, 0.01,
        groups=tuple(f"stage {g}" for g in range(len(sizes))), track_group=tuple(group),
    )  # fmt: skip


def test_sampling_keeps_every_stage_and_its_busiest_track() -> None:
    view = _staged((24, 24, 24, 24))
    shown, note = sample_tracks(view, 64)
    assert len(shown) == 64
    for g in range(4):
        members = [t for t in range(96) if view.track_group[t] == g]
        picked = [t for t in shown if view.track_group[t] == g]
        assert len(picked) == 16 and picked == sorted(picked)
        assert picked[0] == members[0] and picked[-1] == members[-1]  # spread end to end
        busiest = max(members, key=lambda t: (t % 7, -t))
        assert busiest in picked
    assert note == "sampled: 16 of 24 tracks in each of 4 stages (evenly spaced, the busiest kept)"
    # a stage far smaller than its share still keeps a track; nothing is sampled when
    # everything fits
    view = _staged((1, 40, 3))
    shown, note = sample_tracks(view, 10)
    assert {view.track_group[t] for t in shown} == {0, 1, 2}
    assert note.startswith("sampled: per stage: 1/1, 9/40, 1/3")
    assert sample_tracks(view, 44) == (list(range(44)), "")


def test_a_sampled_staged_timeline_draws(tmp_path: Path) -> None:
    out = plot_timeline(_staged((30, 30, 30)), tmp_path / "s.png", max_tracks=12, dpi=DPI)
    assert len(colours(pixels(out))) > 10


def test_many_tracks_are_sampled(tmp_path: Path) -> None:
    spans = tuple(Span(i, 0.0, (i % 17 + 1) * 1e-3, K.COMPUTE, phase="fwd") for i in range(200))
    view = TimelineView(tuple(f"core {i}" for i in range(200)), spans, 0.02)
    a = plot_timeline(view, tmp_path / "a.png", max_tracks=16, dpi=DPI)
    b = plot_timeline(view, tmp_path / "b.png", max_tracks=32, dpi=DPI)
    assert pixels(a).shape[0] < pixels(b).shape[0]  # fewer rows, shorter figure


@pytest.mark.parametrize(
    ("seconds", "unit"), [(3e-8, "ns"), (2e-6, "us"), (4e-4, "us"), (0.02, "ms"), (3.0, "s")]
)
def test_time_unit(seconds: float, unit: str) -> None:
    assert R.time_unit(seconds)[1] == unit
    assert R.format_time(0.0025) == "2.5 ms"


def test_empty_timeline(tmp_path: Path) -> None:
    view = TimelineView(("a", "b"), (), 0.0)
    assert plot_timeline(view, tmp_path / "e.png", dpi=DPI).stat().st_size > 0


def test_span_columns_draw_what_the_spans_draw(tmp_path: Path) -> None:
    """A view of ``SpanColumns`` (arrays, what the adapter makes for a big plan) gives
    the same picture as the same spans as a tuple, and its items are those spans."""
    from waferflow.viz.data import SpanColumns

    view = _gpipe()
    cols = SpanColumns.of(view.spans)
    assert tuple(cols) == view.spans and cols[-1] == view.spans[-1] and cols == view.spans
    assert hash(cols) == hash(view.spans) and cols != view.spans[:-1]
    as_columns = TimelineView(view.tracks, cols, view.step_time_s, view.title)
    a = plot_timeline(view, tmp_path / "a.png", dpi=DPI).read_bytes()
    assert plot_timeline(as_columns, tmp_path / "b.png", dpi=DPI).read_bytes() == a


def test_span_columns_refuse_what_spans_refuse() -> None:
    from waferflow.viz.data import SpanColumns, VizError

    with pytest.raises(VizError, match="ends"):
        SpanColumns([0], [2.0], [1.0], [0], [0], lambda i: "late")
    with pytest.raises(VizError, match="finite"):
        SpanColumns([0], [float("nan")], [1.0], [0], [0])
    with pytest.raises(VizError, match="on track 3"):
        TimelineView(("a",), SpanColumns([3], [0.0], [1.0], [0], [0]), 1.0)
