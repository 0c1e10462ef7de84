"""Placement maps: written, readable back, sensitive to the input, deterministic."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.viz.images import DPI, colours, count, pixels, rgb8
from waferflow.viz import PlacementView, Region, VizError, plot_placement
from waferflow.viz import _render as R


def _view(moved: str | None = None, **kw: object) -> PlacementView:
    """4x4 in four quadrant stages, two dies; ``moved`` relabels core (0, 0)."""
    assignment: dict[tuple[int, int], str] = {}
    for r in range(4):
        for c in range(4):
            assignment[(r, c)] = f"stage{2 * (r // 2) + c // 2}"
    if moved is not None:
        assignment[(0, 0)] = moved
    args = {
        "labels": ("stage0", "stage1", "stage2", "stage3", "new"),
        "die_cols": 2,
        "dead": frozenset({(3, 3)}),
        "regions": (Region("pipe", 0, 0, 2, 4),),
        "title": "test",
    }
    args.update(kw)
    return PlacementView.from_assignment(4, 4, assignment, **args)  # type: ignore[arg-type]


def test_writes_a_png_with_many_colours(tmp_path: Path) -> None:
    out = plot_placement(_view(), tmp_path / "p.png", dpi=DPI)
    assert out == tmp_path / "p.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = pixels(out)
    assert len(colours(img)) > 20  # not a blank figure
    for i in range(4):  # every stage colour is on the picture
        assert count(img, R.label_colour(i)) > 100
    assert count(img, R.DEAD_RGBA) > 50


def test_moving_a_core_changes_the_picture(tmp_path: Path) -> None:
    before = plot_placement(_view(), tmp_path / "a.png", dpi=DPI)
    after = plot_placement(_view(moved="stage3"), tmp_path / "b.png", dpi=DPI)
    assert before.read_bytes() != after.read_bytes()
    a, b = pixels(before), pixels(after)
    assert a.shape == b.shape and (a != b).any()
    # core (0, 0) left stage0 (colour 0) for stage3: fewer pixels of one, more of the other
    assert count(b, R.label_colour(0)) < count(a, R.label_colour(0)) - 50
    assert count(b, R.label_colour(3)) > count(a, R.label_colour(3)) + 50


def test_a_new_label_brings_a_new_colour(tmp_path: Path) -> None:
    four = ("stage0", "stage1", "stage2", "stage3")
    before = pixels(plot_placement(_view(labels=four), tmp_path / "a.png", dpi=DPI))
    after = pixels(plot_placement(_view(moved="new"), tmp_path / "b.png", dpi=DPI))
    new = rgb8(R.label_colour(4))
    assert new not in colours(before)
    assert new in colours(after)
    assert count(after, R.label_colour(4)) > 50


def test_same_input_same_bytes(tmp_path: Path) -> None:
    for suffix in ("png", "svg"):
        a = plot_placement(_view(), tmp_path / f"a.{suffix}", dpi=DPI).read_bytes()
        b = plot_placement(_view(), tmp_path / f"b.{suffix}", dpi=DPI).read_bytes()
        assert a == b


def test_svg_output(tmp_path: Path) -> None:
    text = plot_placement(_view(), tmp_path / "p.svg", dpi=DPI).read_text()
    assert text.startswith("<?xml") and "<svg" in text
    assert "<dc:date>" not in text  # no timestamp
    assert "Matplotlib v" not in text  # no version string either


def test_unsupported_suffix_is_rejected_before_drawing(tmp_path: Path) -> None:
    with pytest.raises(VizError, match=r"\.png or \.svg"):
        plot_placement(_view(), tmp_path / "p.jpg")
    assert not (tmp_path / "p.jpg").exists()


def test_parent_directories_are_created(tmp_path: Path) -> None:
    out = plot_placement(_view(), tmp_path / "a" / "b" / "p.png", dpi=DPI)
    assert out.is_file()


def test_more_than_twenty_labels_get_shades_and_hatches(tmp_path: Path) -> None:
    n = 36
    view = PlacementView.from_assignment(6, 6, {i: f"m{i}" for i in range(n)})
    assert len({R.label_colour(i) for i in range(n)}) == n
    assert R.label_hatch(5) == "" and R.label_hatch(25) != ""
    img = pixels(plot_placement(view, tmp_path / "p.png", dpi=DPI))
    assert count(img, R.label_colour(25)) > 0


def test_large_grid_uses_an_image(tmp_path: Path) -> None:
    n = 500
    labels = tuple((i // n) // 50 for i in range(n * n))  # ten bands of 50 rows
    view = PlacementView(
        n,
        n,
        labels,
        tuple(f"model.layers.{i}.block" for i in range(10)),
        die_rows=2,
        die_cols=2,
        dead=frozenset({(10, 10), (400, 123)}),
        regions=tuple(Region(f"stage {i}", 50 * i, 0, 50 * i + 50, n) for i in range(10)),
    )
    out = plot_placement(view, tmp_path / "big.png", dpi=DPI)
    img = pixels(out)
    for i in range(10):
        assert count(img, R.label_colour(i)) > 500
    assert len(colours(img)) > 20


def test_shorten_keeps_the_specific_end() -> None:
    assert R.shorten("fc1", 10) == "fc1"
    # cut at a module boundary when one is near the front of the kept tail
    assert R.shorten("model.layers.11.mlp.fc1", 16) == "…11.mlp.fc1"
    assert R.shorten("model.layers.11.self_attn.q_proj") == "…layers.11.self_attn.q_proj"
    assert R.shorten("abcdefghijklmnopqrstuvwxyz", 10) == "…rstuvwxyz"


def test_long_titles_wrap_to_the_axes_width() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from waferflow.viz import _render as R

    fig = Figure(figsize=(4, 4))
    ax = fig.add_subplot()
    R.set_title(ax, "plan " + "dp=2,tp=12,pp=4,microbatches=4 " * 4 + "\nsecond line")
    lines = ax.get_title().split("\n")
    width = int(0.9 * 4 * 72 / (0.6 * 10))
    assert len(lines) > 2 and all(len(x) <= width for x in lines)
    assert lines[-1] == "second line"


def test_titles_break_between_words_or_after_commas_never_inside_a_token() -> None:
    from waferflow.viz import _render as R

    title = "hf:gpt2[dp=2,tp=12,pp=4,microbatches=4,span=1] on wse2@84x: placement by stage"
    assert R.wrap_words(title, 30) == [
        "hf:gpt2[dp=2,tp=12,pp=4,",
        "microbatches=4,span=1] on",
        "wse2@84x: placement by stage",
    ]
    assert R.wrap_words(title, 200) == [title]
    # a token with no comma stays whole, even when longer than the width
    assert R.wrap_words("a " + "x" * 40 + " b", 10) == ["a", "x" * 40, "b"]
    assert R.wrap_words("one\n\ntwo", 10) == ["one", "", "two"]


def test_cell_texts_are_written_in_their_cells(tmp_path: Path) -> None:
    view = PlacementView.from_assignment(4, 4, {0: "s0", 1: "s0", 2: "s1", 3: "s1"})
    ranked = replace(view, cell_text=("tp0", "tp1", "tp0", "tp1", *[""] * 12))
    a = pixels(plot_placement(view, tmp_path / "a.png", dpi=DPI))
    b = pixels(plot_placement(ranked, tmp_path / "b.png", dpi=DPI))
    assert a.shape == b.shape and (a != b).any()
    with pytest.raises(VizError, match="cell_text has 2 entries"):
        replace(view, cell_text=("a", "b"))
