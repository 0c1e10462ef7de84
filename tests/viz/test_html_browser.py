"""The HTML report as a browser shows it: a headless Chromium screenshot.

Four pictures of one flat colour each are found on the screenshot: two side by side,
the other two below them, each scaled to about half the window. A real report of a
simulated plan renders with its pictures (not blank) and its tables.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imsave

from tests.viz.browser import bbox, dump_dom, screenshot
from tests.viz.images import rgb8
from tests.viz.test_adapters import Run, _plan, _wafer, four_pictures
from waferflow.backend_sim.simulate import simulate
from waferflow.viz import Table, write_report_html

_FLAT = {"red": "#e41a1c", "green": "#4daf4a", "blue": "#377eb8", "orange": "#ff7f00"}
_KEPT_ROW = "#fff4c2"  # the highlighted table row (html._STYLE)


def _flat_pngs(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, colour in _FLAT.items():
        path = tmp_path / f"{name}.png"
        imsave(path, np.ones((600, 800, 3)) * np.array(rgb8(colour)) / 255)
        out[name] = path
    return out


def test_pictures_sit_two_to_a_row(tmp_path: Path) -> None:
    table = Table("placement", ("method", "step"), (("snake", "2 ms"), ("cp-sat *", "1 ms")),
                  highlight=1)  # fmt: skip
    page = write_report_html(tmp_path / "r.html", _flat_pngs(tmp_path), "step 1 ms",
                             tables=(table,))  # fmt: skip
    img = screenshot(page, tmp_path / "shot.png", 1400, 2000)
    box = {name: bbox(img, rgb8(colour)) for name, colour in _FLAT.items()}
    red, green, blue, orange = (box[k] for k in ("red", "green", "blue", "orange"))
    for top, left, bottom, right in box.values():
        assert 500 < right - left < 700  # half of the 1400 px window, less the margins
        assert abs((bottom - top) / (right - left) - 0.75) < 0.02  # the 4:3 picture, unstretched
    assert abs(red[0] - green[0]) <= 2 and red[3] < green[1]  # side by side
    assert abs(blue[0] - orange[0]) <= 2 and blue[3] < orange[1]
    assert blue[0] > red[2] and abs(blue[1] - red[1]) <= 2  # the second row, same columns
    kept = bbox(img, rgb8(_KEPT_ROW))
    assert kept[2] < red[0]  # the tables come before the pictures


@pytest.fixture(scope="module")
def run() -> Run:
    plan, wafer = _plan(), _wafer()
    return plan, wafer, simulate(plan, wafer)


def test_a_real_report_renders_its_pictures_and_tables(run: Run, tmp_path: Path) -> None:
    from waferflow.api import Report

    plan, wafer, result = run
    images = four_pictures(run, tmp_path)
    page = Report(result, plan, wafer).to_html(tmp_path / "report.html", images)
    dom = dump_dom(page)
    assert len(re.findall(r'<img src="data:image/png;base64,', dom)) == 4
    assert "step time" in dom
    img = screenshot(page, tmp_path / "shot.png", 1400, 2400)
    # the picture grid is the lower part of the page: it is drawn, in many colours
    lower = img[img.shape[0] // 3 :]
    assert len(np.unique(lower.reshape(-1, 3), axis=0)) > 200
    assert (lower.min(axis=-1) < 200).mean() > 0.05  # far from a blank white page
