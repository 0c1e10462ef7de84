"""One offline HTML page with the pictures embedded (base64 data URIs) and a text summary.

No scripts, no stylesheets or fonts from elsewhere: the page opens from a mail
attachment or an air-gapped machine exactly as written.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping
from pathlib import Path

from waferflow.fileio import write_text
from waferflow.viz.data import VizError

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; }
h2 { font-size: 1.05em; margin-top: 1.5em; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; }
img { max-width: 100%; border: 1px solid #ddd; }
"""


def data_uri(image: Path) -> str:
    """The image file as a ``data:`` URI."""
    mime = _MIME.get(image.suffix.lower())
    if mime is None:
        raise VizError(f"cannot embed {str(image)!r}: only .png and .svg images are supported")
    if not image.is_file():
        raise VizError(f"cannot embed {str(image)!r}: no such file; draw the picture first")
    encoded = base64.b64encode(image.read_bytes()).decode("ascii")
    return f"data:{mime};base64,{encoded}"


def write_report_html(
    path: str | Path,
    images: Mapping[str, Path],
    summary_text: str,
    *,
    title: str = "waferflow report",
) -> Path:
    """Write a self-contained page: ``title``, the summary in <pre>, then each image under
    its caption (in the mapping's order). Returns the path."""
    out = Path(path)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<pre>{html.escape(summary_text)}</pre>",
    ]
    for caption, image in images.items():
        uri = data_uri(Path(image))
        parts += [
            "<section>",
            f"<h2>{html.escape(caption)}</h2>",
            f'<img src="{uri}" alt="{html.escape(caption, quote=True)}">',
            "</section>",
        ]
    parts += ["</body>", "</html>", ""]
    return write_text(out, "\n".join(parts))  # atomically
