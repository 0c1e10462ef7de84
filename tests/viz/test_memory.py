"""Memory maps: use / capacity heatmap, over-capacity cores in red, dead cores grey."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.viz.images import DPI, colours, count, pixels, rgb8
from waferflow.viz import MemoryView, plot_memory
from waferflow.viz import _render as R
from waferflow.viz.memory import OVER_COLOUR

CAP = 48 * 1024


def _view(n: int = 6, over: bool = False, dead: frozenset = frozenset()) -> MemoryView:
    used = [(i * 37) % 100 * CAP // 100 for i in range(n * n)]
    if over:
        used[n + 1] = CAP * 3 // 2
    return MemoryView(n, n, tuple(used), CAP, dead, die_rows=2, title="mem")


def test_heatmap_with_many_colours(tmp_path: Path) -> None:
    img = pixels(plot_memory(_view(), tmp_path / "m.png", dpi=DPI))
    assert len(colours(img)) > 30
    assert rgb8(OVER_COLOUR) not in colours(img)


def test_over_capacity_is_red(tmp_path: Path) -> None:
    fits = pixels(plot_memory(_view(), tmp_path / "a.png", dpi=DPI))
    over = pixels(plot_memory(_view(over=True), tmp_path / "b.png", dpi=DPI))
    assert count(over, OVER_COLOUR) > 100 > count(fits, OVER_COLOUR)


def test_dead_cores_are_dark_grey(tmp_path: Path) -> None:
    img = pixels(plot_memory(_view(dead=frozenset({(0, 0), (5, 5)})), tmp_path / "d.png", dpi=DPI))
    assert count(img, R.DEAD_RGBA) > 100


def test_same_input_same_bytes(tmp_path: Path) -> None:
    for suffix in ("png", "svg"):
        a = plot_memory(_view(over=True), tmp_path / f"a.{suffix}", dpi=DPI).read_bytes()
        b = plot_memory(_view(over=True), tmp_path / f"b.{suffix}", dpi=DPI).read_bytes()
        assert a == b


def test_large_grid_keeps_one_over_full_core_visible(tmp_path: Path) -> None:
    n = 500
    used = [CAP // 4] * (n * n)
    used[123 * n + 321] = 2 * CAP
    view = MemoryView(n, n, tuple(used), CAP, frozenset({(7, 7)}))
    img = pixels(plot_memory(view, tmp_path / "big.png", dpi=DPI))
    assert count(img, OVER_COLOUR) > 20  # pooled by maximum, then ringed


def test_max_pool_by_hand() -> None:
    grid = np.arange(16, dtype=float).reshape(4, 4)
    grid[0, 0] = np.nan
    pooled, k = R.max_pool(grid, limit=2)
    assert k == 2
    assert pooled.tolist() == [[5.0, 7.0], [13.0, 15.0]]
    alone, k1 = R.max_pool(grid, limit=4)
    assert k1 == 1 and alone is grid
    dead = np.full((3, 3), np.nan)
    dead[2, 2] = 1.0
    p, k3 = R.max_pool(dead, limit=2)  # padded to 4x4, blocks of 2
    assert k3 == 2 and np.isnan(p[0, 0]) and p[1, 1] == 1.0


def test_format_bytes() -> None:
    assert R.format_bytes(512) == "512 B"
    assert R.format_bytes(48 * 1024) == "48 KiB"
    assert R.format_bytes(32 * 2**20) == "32 MiB"
