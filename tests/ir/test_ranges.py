"""Every wafer quantity has a sane range, checked at load with its field named
(waferflow/ir/target/ranges.py)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

from waferflow.errors import ConfigError
from waferflow.ir.target import get_wafer, parse_wafer_toml, parts
from waferflow.ir.target.ranges import declared
from waferflow.ir.target.validate import TOML_PATH
from waferflow.ir.target.wafer import Wafer

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
_NUMBERS = (int, float)


def _numeric_fields(cls: type) -> list[str]:
    hints = typing.get_type_hints(cls)
    return [f.name for f in dataclasses.fields(cls) if hints[f.name] in _NUMBERS]


def _target_dataclasses() -> list[type]:
    """The value types a wafer is made of, and the Wafer: a field added to any of
    them (a new core or flow figure) must declare its range here."""
    found = [
        obj
        for _, obj in inspect.getmembers(parts, inspect.isclass)
        if dataclasses.is_dataclass(obj) and obj.__module__ == parts.__name__
    ]
    return [*(c for c in found if c is not parts.Link), Wafer]  # a Link is derived


@pytest.mark.parametrize("cls", _target_dataclasses(), ids=lambda c: c.__name__)
def test_every_numeric_field_declares_a_range(cls: type) -> None:
    missing = [name for name in _numeric_fields(cls) if name not in declared(cls)]
    assert not missing, f"{cls.__name__}: give {missing} a range: field(metadata=sane(...))"
    assert "peak_flops" in declared(Wafer)  # per-dtype rates: one range for each


def range_rows() -> list[str]:
    """The table of docs/errors.md, one row per declared range, as it must read."""
    rows = []
    tables = (
        (Wafer, ""),
        (parts.LinkSpec, "link."),
        (parts.FlowControl, "flow."),
        (parts.CoreModel, "core."),
        (parts.MemoryModel, "memory."),
    )
    for cls, prefix in tables:
        for name, rng in declared(cls).items():
            path = TOML_PATH[name] if cls is Wafer else prefix + name
            path += {"peak_flops": ".<dtype>", "rates": ".<op group>"}.get(name, "")
            rows.append(f"| `{path}` | {rng.describe()} |")
    return rows


def test_docs_list_every_range() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [row for row in range_rows() if row not in text]
    assert not missing, "docs/errors.md: update the table of ranges:\n" + "\n".join(missing)


MESH = 'preset = "mesh4x4"\n'


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        # the examples: each overflowed or hung later, now refused at load
        ('[wafer]\nclock_hz = "1e400 Hz"', "wafer.clock_hz = '1e400 Hz' is out of range"),
        ('[wafer]\nclock_hz = "1e999999999 Hz"', "exponent within"),
        ("[wafer]\nclock_hz = 1e-308", "wafer.clock_hz must be >= 1,000 Hz"),
        ("[wafer.peak_flops]\nf32 = 1e308", "wafer.peak_flops.f32 = 1e+308 is out of range"),
        ("[link]\nlatency = 1e300", "link.latency = 1e+300 is out of range"),
        ("[flow]\nheader_packets = 2147483648", "flow.header_packets = 2147483648 is out of"),
        ("[wafer]\nrows = 9223372036854775807\n[dies]\nrows = 7", "wafer.rows = 9223372"),
        ("[wafer]\nrows = 60000\ncols = 60000", "waferflow models up to 4,194,304"),
        ("[wafer]\nsram_bytes = " + "9" * 5000, "malformed TOML"),
        ("[faults]\ndead_cores = " + "[" * 3000 + "]" * 3000, "nested too deeply"),
        ('[link]\nbandwidth = "1e40 GB/s"', "link.bandwidth = 1e+49 is out of range"),
    ],
)
def test_absurd_quantities_are_refused_at_load(toml: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace("+", r"\+")):
        parse_wafer_toml(MESH + toml, "w.toml")


def test_a_die_grid_on_the_largest_wafer_does_not_enumerate_it() -> None:
    """``dead_cores_each_die`` on a grid too big to model is refused by the grid check,
    not expanded into billions of cores first."""
    toml = "[wafer]\nrows = 65536\ncols = 65536\n[dies]\nrows = 65536\ncols = 65536\n"
    with pytest.raises(ConfigError, match="waferflow models up to"):
        parse_wafer_toml(MESH + toml + "[faults]\ndead_cores_each_die = [[0, 0]]\n", "w.toml")


def test_coarse_views_are_checked_per_fine_core() -> None:
    """A view pools k x k cores: its per-node figures are k**2 (or k) times a core's,
    and stay in range; the check divides by the view's factor."""
    w = dataclasses.replace(
        get_wafer("mesh64x64"), die_rows=1, die_cols=1, d2d_link=None, sram_bytes=2**40
    )  # at the top of the range
    view = w.coarsen(32)
    assert view.sram_bytes == 2**40 * 32 * 32
    with pytest.raises(ConfigError, match=r"on a 32 x 32 view"):
        dataclasses.replace(view, sram_bytes=view.sram_bytes + 1024**2 * 2**10)
    assert get_wafer("wse2").coarsen(64).rows == 16  # presets and their views all load
