"""Summary plots of a sweep: step time against each varied input, and heat maps.

* ``step_time_vs_<input>.png`` for each input with more than one value (a wafer
  override, the wafer, the plan, the batch, ...): step time against it, a line per
  model (and per value of the other varied inputs, when there are any);
* ``heatmap_<a>_<b>.png`` when two or more numeric inputs vary: step time over the
  first two, one panel per model (and per value of the other varied inputs).

Failed jobs are left out. Each figure is written atomically (``fileio.write_bytes``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from waferflow.fileio import write_bytes
from waferflow.sweep.spec import Sweep

MAX_PANELS = 12
_METADATA = {"Software": None}  # no version string: the same rows give the same bytes


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _unit(column: str) -> str | None:
    """The SI unit of a wafer override column (its values are SI numbers), if any."""
    leaf = column.rsplit(".", 1)[-1]
    if leaf.endswith("bandwidth"):
        return "B/s"
    if leaf == "latency":
        return "s"
    if column == "wafer.clock_hz":
        return "Hz"
    if column == "wafer.sram_bytes":
        return "B"
    if column.startswith("wafer.peak_flops."):
        return "FLOP/s"
    return None


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name).strip("_")


def _label(row: dict[str, Any], names: Sequence[str]) -> str:
    return ", ".join(f"{n}={row.get(n)}" if n != "model" else str(row[n]) for n in names)


def _groups(rows: list[dict[str, Any]], by: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(_label(r, by) or "all jobs", []).append(r)
    return out


def _save(fig: Any, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata=_METADATA)
    fig.clear()
    return write_bytes(path, buf.getvalue())


def plot_sweep(sweep: Sweep, rows: list[dict[str, Any]]) -> list[Path]:
    """Draw the summary plots into ``sweep.output / "plots"``; their paths."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("step_time_s") is not None]
    if not ok:
        return []
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    folder = sweep.output / "plots"
    varied = [v for v in sweep.varied if v != "model"]
    out: list[Path] = []
    for name in varied or ["model"]:
        others = ["model", *(v for v in varied if v != name)] if name != "model" else []
        has = [r for r in ok if r.get(name) is not None]  # a point may leave it out
        fig = Figure(figsize=(7, 4.2), layout="constrained")
        ax = fig.add_subplot()
        xs_all = [r[name] for r in has]
        numeric = _numeric(xs_all)
        order = list(dict.fromkeys(map(str, xs_all)))  # categories in sweep order
        for label, group in _groups(has, others).items():
            pts = sorted((r[name] if numeric else order.index(str(r[name])),
                          r["step_time_s"]) for r in group)  # fmt: skip
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label or name)
        if numeric and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 10:
            ax.set_xscale("log")
        if not numeric:
            ax.set_xticks(range(len(order)), order, rotation=20, ha="right", fontsize=8)
        unit = _unit(name)
        if numeric and unit:
            ax.xaxis.set_major_formatter(EngFormatter(unit=unit))
        ax.yaxis.set_major_formatter(EngFormatter(unit="s"))
        ax.set_xlabel(name)
        ax.set_ylabel("step time (simulated)")
        ax.set_title(f"{sweep.name}: step time vs {name}", fontsize=10)
        ax.grid(alpha=0.3)
        if len(_groups(has, others)) > 1:
            ax.legend(fontsize=7)
        out.append(_save(fig, folder / f"step_time_vs_{_slug(name)}.png"))
    numeric_axes = [v for v in varied if _numeric([r[v] for r in ok if r.get(v) is not None])]
    if len(numeric_axes) >= 2:
        a, b = numeric_axes[:2]
        both = [r for r in ok if r.get(a) is not None and r.get(b) is not None]
        out.append(_heatmap(sweep, both, a, b, varied, folder))
    return out


def _heatmap(sweep: Sweep, ok: list[dict[str, Any]], a: str, b: str, varied: list[str],
             folder: Path) -> Path:  # fmt: skip
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    seconds = EngFormatter(unit="s", places=2)
    others = ["model", *(v for v in varied if v not in (a, b))]
    groups = list(_groups(ok, others).items())[:MAX_PANELS]
    ys = sorted({r[a] for r in ok})
    xs = sorted({r[b] for r in ok})
    cols = min(3, len(groups))
    nrows = math.ceil(len(groups) / cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * nrows), layout="constrained")
    for i, (label, group) in enumerate(groups):
        ax = fig.add_subplot(nrows, cols, i + 1)
        grid = [[math.nan] * len(xs) for _ in ys]
        for r in group:
            grid[ys.index(r[a])][xs.index(r[b])] = r["step_time_s"]
        im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
        values = [v for line in grid for v in line if not math.isnan(v)]
        middle = (min(values) + max(values)) / 2
        for yi, line in enumerate(grid):
            for xi, v in enumerate(line):
                if not math.isnan(v):  # dark text on the bright half of viridis
                    ax.text(xi, yi, seconds(v), ha="center", va="center", fontsize=7,
                            color="k" if v > middle else "w")  # fmt: skip
        ax.set_xticks(range(len(xs)), [_tick(x, b) for x in xs], fontsize=7)
        ax.set_yticks(range(len(ys)), [_tick(y, a) for y in ys], fontsize=7)
        ax.set_xlabel(b, fontsize=8)
        ax.set_ylabel(a, fontsize=8)
        ax.set_title(label, fontsize=8)
        fig.colorbar(im, ax=ax, label="step time", format=seconds)
    fig.suptitle(f"{sweep.name}: step time (simulated) over {a} and {b}", fontsize=10)
    return _save(fig, folder / f"heatmap_{_slug(a)}_{_slug(b)}.png")


def _tick(value: float, column: str) -> str:
    from matplotlib.ticker import EngFormatter

    unit = _unit(column)
    return EngFormatter(unit=unit, places=None)(value) if unit else f"{value:.3g}"


__all__ = ["plot_sweep"]
