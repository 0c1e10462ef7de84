"""One offline HTML page: the summary and the tables side by side (as many to a row as
fit the window), then the pictures in a grid (two columns on a screen wide enough, one
on a narrow one).

The pictures are embedded as base64 data URIs. No scripts, no stylesheets or fonts from
elsewhere: the page opens from a mail attachment or an air-gapped machine exactly as
written.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path

from waferflow.fileio import write_text
from waferflow.viz.data import Table, VizError

_MIME = {".png": "image/png", ".svg": "image/svg+xml"}

_STYLE = """
body { font-family: sans-serif; margin: 1.2em 1.5em; color: #222; }
h1 { font-size: 1.35em; margin-bottom: 0.6em; }
h2 { font-size: 1.05em; margin: 0 0 0.4em 0; }
.blocks { display: flex; flex-wrap: wrap; gap: 1.2em 2em; align-items: flex-start;
          margin-bottom: 1.4em; }
.blocks > section { flex: 0 1 auto; max-width: 100%; min-width: 0; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 1.2em;
        align-items: start; }
@media (max-width: 900px) { .grid { grid-template-columns: minmax(0, 1fr); } }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; margin: 0; font-size: 0.78em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.8em; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left;
         white-space: nowrap; }
th { background: #f0f0f0; }
tr.kept td { background: #fff4c2; font-weight: bold; }
p.note { font-size: 0.8em; color: #555; margin: 0.3em 0 0 0; }
figure { margin: 0; }
figure img { width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-weight: bold; margin-bottom: 0.3em; }
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


def _table(t: Table) -> list[str]:
    esc = html.escape
    out = ["<section>", f"<h2>{esc(t.caption)}</h2>"]
    out.append('<div class="scroll"><table>')
    out.append("<tr>" + "".join(f"<th>{esc(c)}</th>" for c in t.columns) + "</tr>")
    for i, row in enumerate(t.rows):
        cls = ' class="kept"' if i == t.highlight else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    out.append("</table></div>")
    out += [f'<p class="note">{esc(n)}</p>' for n in t.notes]
    out.append("</section>")
    return out


def write_report_html(
    path: str | Path,
    images: Mapping[str, Path],
    summary_text: str,
    *,
    title: str = "waferflow report",
    tables: Sequence[Table] = (),
) -> Path:
    """Write a self-contained page and return its path: ``title``; the summary (in
    <pre>) and the ``tables`` side by side, wrapping to the next row when the window is
    too narrow; then each image under its caption, in the mapping's order, two to a
    row."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{esc(title)}</h1>",
        '<div class="blocks">',
        "<section>",
        "<h2>summary</h2>",
        f"<pre>{esc(summary_text)}</pre>",
        "</section>",
    ]
    for t in tables:
        parts += _table(t)
    parts.append("</div>")
    parts.append('<div class="grid pictures">')
    for caption, image in images.items():
        uri = data_uri(Path(image))
        parts += [
            "<figure>",
            f"<figcaption>{esc(caption)}</figcaption>",
            f'<img src="{uri}" alt="{esc(caption, quote=True)}">',
            "</figure>",
        ]
    parts += ["</div>", "</body>", "</html>", ""]
    return write_text(path, "\n".join(parts))
