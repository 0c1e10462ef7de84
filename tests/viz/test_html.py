"""The offline HTML report: images inlined, summary escaped, nothing fetched."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from tests.viz.images import DPI
from waferflow.viz import MemoryView, Table, VizError, plot_memory, write_report_html


def _images(tmp_path: Path) -> dict[str, Path]:
    view = MemoryView(2, 2, (1, 2, 3, 4), 4)
    return {
        "memory <png>": plot_memory(view, tmp_path / "m.png", dpi=DPI),
        "memory svg": plot_memory(view, tmp_path / "m.svg", dpi=DPI),
    }


def test_page_embeds_images_and_fetches_nothing(tmp_path: Path) -> None:
    images = _images(tmp_path)
    out = write_report_html(tmp_path / "r" / "report.html", images, "step 1 ms <b>x</b> & y")
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    uris = re.findall(r'src="data:(image/[a-z+]+);base64,([A-Za-z0-9+/=]+)"', page)
    assert [m for m, _ in uris] == ["image/png", "image/svg+xml"]
    assert base64.b64decode(uris[0][1]) == images["memory <png>"].read_bytes()
    assert base64.b64decode(uris[1][1]) == images["memory svg"].read_bytes()
    assert "<pre>step 1 ms &lt;b&gt;x&lt;/b&gt; &amp; y</pre>" in page
    assert "<figcaption>memory &lt;png&gt;</figcaption>" in page
    assert "<script" not in page.lower()
    assert "http" not in page.lower()  # no links, fonts or scripts from the network
    assert "<link" not in page.lower()


def test_missing_or_unsupported_image(tmp_path: Path) -> None:
    with pytest.raises(VizError, match="no such file"):
        write_report_html(tmp_path / "r.html", {"x": tmp_path / "nope.png"}, "")
    other = tmp_path / "x.gif"
    other.write_bytes(b"GIF89a")
    with pytest.raises(VizError, match=r"only \.png and \.svg"):
        write_report_html(tmp_path / "r.html", {"x": other}, "")


def test_page_is_deterministic(tmp_path: Path) -> None:
    images = _images(tmp_path)
    a = write_report_html(tmp_path / "a.html", images, "s").read_bytes()
    b = write_report_html(tmp_path / "b.html", images, "s").read_bytes()
    assert a == b


def test_tables_are_escaped_and_the_kept_row_marked(tmp_path: Path) -> None:
    table = Table("placement <x>", ("method", "step"), (("snake", "2 ms"), ("a&b *", "1 ms")),
                  notes=("kept a&b",), highlight=1)  # fmt: skip
    page = write_report_html(tmp_path / "r.html", {}, "s", tables=(table,)).read_text()
    assert "<h2>placement &lt;x&gt;</h2>" in page
    assert "<tr><th>method</th><th>step</th></tr>" in page
    assert "<tr><td>snake</td><td>2 ms</td></tr>" in page
    assert '<tr class="kept"><td>a&amp;b *</td><td>1 ms</td></tr>' in page
    assert '<p class="note">kept a&amp;b</p>' in page
    with pytest.raises(VizError, match="row 0 has 1 cells for 2 columns"):
        Table("t", ("a", "b"), (("x",),))
