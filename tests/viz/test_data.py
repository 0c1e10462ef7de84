"""The view dataclasses: validation and the helpers that build or read them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from waferflow.errors import WaferflowError
from waferflow.viz import (
    UNASSIGNED,
    LinkLoad,
    LinkView,
    MemoryView,
    PlacementView,
    Region,
    Span,
    SpanKind,
    TimelineView,
    VizError,
)


def test_viz_error_is_a_waferflow_error() -> None:
    assert issubclass(VizError, WaferflowError)


def test_from_assignment_numbers_labels_by_first_core() -> None:
    view = PlacementView.from_assignment(
        2, 3, {5: "b", (0, 1): "a", 0: "b", (1, 0): "c"}, title="t"
    )
    # cores in row-major order: 0 -> b, 1 -> a, 3 -> c, 5 -> b
    assert view.labels == ("b", "a", "c")
    assert view.core_label == (0, 1, UNASSIGNED, 2, UNASSIGNED, 0)
    assert view.label_array().tolist() == [[0, 1, -1], [2, -1, 0]]


def test_from_assignment_with_fixed_label_order() -> None:
    view = PlacementView.from_assignment(1, 3, {0: "b", 2: "a"}, labels=("a", "b", "c"))
    assert view.labels == ("a", "b", "c")
    assert view.core_label == (1, UNASSIGNED, 0)
    with pytest.raises(VizError, match="not in labels"):
        PlacementView.from_assignment(1, 3, {0: "z"}, labels=("a",))
    with pytest.raises(VizError, match="twice"):
        PlacementView.from_assignment(1, 3, {0: "a"}, labels=("a", "a"))


def test_from_assignment_rejects_cores_off_the_grid() -> None:
    with pytest.raises(VizError, match="outside"):
        PlacementView.from_assignment(2, 2, {4: "x"})
    with pytest.raises(VizError, match="outside"):
        PlacementView.from_assignment(2, 2, {(2, 0): "x"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"core_label": (0, 0, 0)}, "expected rows \\* cols = 4"),
        ({"core_label": (0, 0, 0, 2)}, "label indices span"),
        ({"core_label": (0, 0, 0, -2)}, "label indices span"),
        ({"dead": frozenset({(2, 0)})}, "outside the 2x2 grid"),
        ({"regions": (Region("r", 0, 0, 3, 1),)}, "leaves the 2x2 grid"),
        ({"die_rows": 3}, "die grid"),
        ({"rows": 0, "core_label": ()}, "at least 1x1"),
    ],
)
def test_placement_view_validation(kwargs: dict, message: str) -> None:
    base = {"rows": 2, "cols": 2, "core_label": (0, 1, 0, 1), "labels": ("a", "b")}
    with pytest.raises(VizError, match=message):
        PlacementView(**{**base, **kwargs})


def test_region_must_not_be_empty() -> None:
    with pytest.raises(VizError, match="exclusive"):
        Region("r", 1, 1, 1, 2)


@pytest.mark.parametrize("util", [-0.1, 1.5, float("nan"), float("inf")])
def test_link_load_utilisation_range(util: float) -> None:
    with pytest.raises(VizError, match="utilisation"):
        LinkLoad((0, 0), (0, 1), util, 10)


def test_link_load_accepts_rounding_above_one_and_rejects_self_links() -> None:
    LinkLoad((0, 0), (0, 1), 1.0 + 1e-9, 10)
    with pytest.raises(VizError, match="two different cores"):
        LinkLoad((0, 0), (0, 0), 0.5, 10)
    with pytest.raises(VizError, match="negative"):
        LinkLoad((0, 0), (0, 1), 0.5, -1)


def test_link_view_checks_coordinates() -> None:
    with pytest.raises(VizError, match="destination"):
        LinkView(2, 2, (LinkLoad((0, 0), (0, 2), 0.5, 1),))


def test_span_validation() -> None:
    assert Span(0, 1.0, 3.5, SpanKind.COMPUTE).duration_s == 2.5
    with pytest.raises(VizError, match="before it starts"):
        Span(0, 2.0, 1.0, SpanKind.COMPUTE)
    with pytest.raises(VizError, match="phase"):
        Span(0, 0.0, 1.0, SpanKind.COMPUTE, phase="forward")
    with pytest.raises(VizError, match="on track 1"):
        TimelineView(("a",), (Span(1, 0.0, 1.0, SpanKind.SEND),), 1.0)
    with pytest.raises(VizError, match="no tracks"):
        TimelineView((), (), 1.0)


def test_memory_view_fractions() -> None:
    view = MemoryView(1, 3, (0, 50, 150), 100)
    assert view.fraction_array().tolist() == [[0.0, 0.5, 1.5]]
    scaled = MemoryView(1, 3, (0, 50, 150), 100, core_capacity=(100, 25, 300))
    assert scaled.fraction_array().tolist() == [[0.0, 2.0, 0.5]]
    with pytest.raises(VizError, match="core_capacity"):
        MemoryView(1, 3, (0, 0, 0), 100, core_capacity=(1, 2))
    with pytest.raises(VizError, match="capacity_bytes"):
        MemoryView(1, 3, (0, 0, 0), 0)
    with pytest.raises(VizError, match="negative"):
        MemoryView(1, 3, (0, -1, 0), 10)


def test_importing_viz_does_not_import_matplotlib() -> None:
    code = (
        "import sys, waferflow, waferflow.viz\n"
        "from waferflow.viz import PlacementView, MemoryView, LinkView, TimelineView\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported too early'\n"
        "from waferflow.viz import plot_memory\n"
        "assert 'matplotlib' in sys.modules\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot must never be used'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_unknown_attribute_is_an_attribute_error() -> None:
    import waferflow.viz as viz

    with pytest.raises(AttributeError, match="plot_everything"):
        viz.plot_everything  # noqa: B018
    assert "plot_links" in dir(viz)
