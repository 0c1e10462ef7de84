"""Link heatmaps: arrows per link direction on small grids, an image on large ones."""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl

from tests.viz.images import DPI, colours, count, pixels
from waferflow.viz import LinkLoad, LinkView, plot_links
from waferflow.viz.links import CMAP, HOT_COLOUR, IDLE_COLOUR, hottest, scale_top


def _mesh(n: int, hot: float = 0.1, *, d2d: bool = True) -> LinkView:
    """Every mesh link both ways; utilisation by position; link (0,0)->(0,1) = ``hot``."""
    links = []
    for r in range(n):
        for c in range(n):
            for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                r2, c2 = r + dr, c + dc
                if not (0 <= r2 < n and 0 <= c2 < n):
                    continue
                util = hot if (r, c, r2, c2) == (0, 0, 0, 1) else ((r * 7 + c * 3 + dr) % 5) / 10
                crosses = d2d and (c < n // 2) != (c2 < n // 2)
                links.append(LinkLoad((r, c), (r2, c2), util, int(util * 1000), crosses))
    return LinkView(n, n, tuple(links), die_cols=2, dead=frozenset(), title="mesh")


def _cmap_colour(u: float) -> tuple[float, ...]:
    return mpl.colormaps[CMAP](u)


def test_small_mesh_draws_coloured_arrows(tmp_path: Path) -> None:
    img = pixels(plot_links(_mesh(4), tmp_path / "l.png", dpi=DPI))
    assert len(colours(img)) > 50
    assert count(img, IDLE_COLOUR) > 0  # utilisation-0 links are drawn grey


def test_hotter_link_changes_pixels_and_colours(tmp_path: Path) -> None:
    cool = plot_links(_mesh(4, hot=0.1), tmp_path / "a.png", dpi=DPI, top_k=0)
    warm = plot_links(_mesh(4, hot=0.95), tmp_path / "b.png", dpi=DPI, top_k=0)
    a, b = pixels(cool), pixels(warm)
    assert (a != b).any()
    hot = _cmap_colour(0.95)  # in the colour bar of both; on an arrow only in the second
    assert count(b, hot) > count(a, hot) + 10


def test_top_k_and_d2d_are_drawn(tmp_path: Path) -> None:
    plain = plot_links(_mesh(4), tmp_path / "a.png", dpi=DPI, top_k=0).read_bytes()
    top = plot_links(_mesh(4), tmp_path / "b.png", dpi=DPI, top_k=3).read_bytes()
    no_d2d = plot_links(_mesh(4, d2d=False), tmp_path / "c.png", dpi=DPI, top_k=0).read_bytes()
    assert len({plain, top, no_d2d}) == 3


def test_hottest_orders_by_utilisation_then_bytes_then_position() -> None:
    links = (
        LinkLoad((0, 1), (0, 0), 0.5, 10),
        LinkLoad((0, 0), (0, 1), 0.5, 10),
        LinkLoad((1, 0), (1, 1), 0.5, 20),
        LinkLoad((1, 1), (1, 0), 0.9, 1),
        LinkLoad((1, 1), (0, 1), 0.0, 0),
    )
    view = LinkView(2, 2, links)
    assert hottest(view, 10) == [3, 2, 1, 0]  # idle links are never "hot"
    assert hottest(view, 2) == [3, 2]
    assert hottest(view, 0) == []


def test_same_input_same_bytes(tmp_path: Path) -> None:
    for suffix in ("png", "svg"):
        a = plot_links(_mesh(4), tmp_path / f"a.{suffix}", dpi=DPI).read_bytes()
        b = plot_links(_mesh(4), tmp_path / f"b.{suffix}", dpi=DPI).read_bytes()
        assert a == b


def test_crossbar_links_and_no_links(tmp_path: Path) -> None:
    links = tuple(
        LinkLoad((r, c), (r2, c2), 0.3 + 0.1 * (r + c), 100)
        for r in range(2)
        for c in range(2)
        for r2 in range(2)
        for c2 in range(2)
        if (r, c) != (r2, c2)
    )
    assert plot_links(LinkView(2, 2, links), tmp_path / "x.png", dpi=DPI).stat().st_size > 0
    empty = plot_links(LinkView(3, 3, ()), tmp_path / "e.svg", dpi=DPI)
    assert "<svg" in empty.read_text()


def test_large_grid_shows_per_core_maximum(tmp_path: Path) -> None:
    n = 500
    links = [LinkLoad((r, c), (r, c + 1), 0.2, 10) for r in range(0, n, 7) for c in range(n - 1)]
    links.append(LinkLoad((250, 250), (251, 250), 0.97, 10**6))
    view = LinkView(n, n, tuple(links), die_rows=2, die_cols=2, dead=frozenset({(3, 3)}))
    img = pixels(plot_links(view, tmp_path / "big.png", dpi=DPI, top_k=1))
    assert count(img, _cmap_colour(0.2)) > 200  # the rows of 20 % links
    assert len(colours(img)) > 20


def test_scale_top_rounds_the_busiest_link_up() -> None:
    assert [scale_top(u) for u in (0.179, 0.2, 0.21, 0.03, 0.004, 0.7, 1.0, 0.0)] == [
        0.2, 0.2, 0.25, 0.05, 0.01, 1.0, 1.0, 0.01,
    ]  # fmt: skip


def test_colours_run_to_the_busiest_link_and_the_hottest_are_magenta(tmp_path: Path) -> None:
    # every link at 1 % but one at 18 %: on a 0-20 % scale that one is near the top colour
    links = tuple(
        LinkLoad((r, c), (r, c + 1), 0.18 if (r, c) == (1, 1) else 0.01, 100)
        for r in range(4) for c in range(3)
    )  # fmt: skip
    view = LinkView(4, 4, links, die_cols=2)
    img = pixels(plot_links(view, tmp_path / "l.png", dpi=DPI, top_k=1))
    assert count(img, _cmap_colour(0.18 / 0.2)) > 20  # not the 18 % colour of a 0-100 % scale
    assert count(img, HOT_COLOUR) > 20
    plain = pixels(plot_links(view, tmp_path / "p.png", dpi=DPI, top_k=0))
    assert count(plain, HOT_COLOUR) == 0
