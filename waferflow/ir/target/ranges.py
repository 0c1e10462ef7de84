"""Sane ranges of the wafer's quantities, declared once, beside each field.

Every number a wafer holds (grid size, clock, per-core compute and SRAM, link
figures, flow control) has a range, checked when the ``Wafer`` is built (from TOML,
from a preset, or by ``Wafer(...)`` in Python), so that an absurd figure is refused
at load with its field named, instead of overflowing a float or making a tiny
simulation run for minutes later. The bounds are generous: each is at least ten times
past any machine we know of (WSE-3, Dojo, GPUs); rates (FLOP/s, bytes/s) go up to
1e30 so that a resource can be modelled as free, and start at 1 per second so that no
duration overflows. The docs list them all (docs/errors.md, "Quantities").

A field declares its range in its dataclass metadata::

    @dataclass(frozen=True, slots=True)
    class FlowControl:
        header_packets: int = field(default=0, metadata=sane(0, 64, "packets"))

and ``check_fields(obj, prefix, coarsen_factor)`` checks every field of ``obj`` that
declares one (naming it ``prefix.field``). A quantity that a k x k coarse view pools
over its k x k cores (compute, SRAM) declares ``scale=AREA``; one that grows with the
k fine links or hops a coarse link stands for (link bandwidth and latency) ``EDGE``:
a view is checked per fine core. ``tests/ir/test_ranges.py`` requires a range on every
numeric field of the target's dataclasses, so a new field cannot forget one.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Any

from waferflow.errors import ConfigError
from waferflow.fileio import short

__all__ = [
    "AREA",
    "EDGE",
    "MAX_CORES",
    "MAX_SIDE",
    "NONE",
    "Range",
    "Scale",
    "check_fields",
    "check_value",
    "declared",
    "sane",
]

MAX_CORES = 2**22  # cores of one wafer (fine grid): 4.6x WSE-3's 900,000
MAX_SIDE = 2**16  # rows or columns of a grid


class Scale(Enum):
    """How a k x k coarse view scales a quantity of one fine core or link."""

    NONE = 1  # the same on every view (clock, packet size)
    EDGE = 2  # times k: a coarse link stands for k fine links side by side, k hops long
    AREA = 3  # times k**2: a coarse node pools k x k cores


NONE, EDGE, AREA = Scale.NONE, Scale.EDGE, Scale.AREA


@dataclass(frozen=True, slots=True)
class Range:
    """``lo <= value <= hi`` (``lo < value`` when ``open_lo``), in ``unit``, per fine
    core or link; ``integer``: a whole number."""

    lo: float
    hi: float
    unit: str
    integer: bool
    open_lo: bool = False
    scale: Scale = NONE
    allow_inf: bool = False  # +inf is also accepted (a rate that takes no time)

    def describe(self) -> str:
        low = f"> {_fmt(self.lo)}" if self.open_lo else f">= {_fmt(self.lo)}"
        unit = f" {self.unit}" if self.unit else ""
        per = {NONE: "", EDGE: " (per fine link)", AREA: " (per fine core)"}[self.scale]
        return f"{low} and <= {_fmt(self.hi)}{unit}{per}"


def _fmt(x: float) -> str:
    """``65,536``, ``2**40``, ``1e11``: bounds as a reader would write them."""
    if isinstance(x, int) and x >= 2**20 and x & (x - 1) == 0:
        return f"2**{x.bit_length() - 1}"
    if abs(x) >= 1e7 or 0 < abs(x) < 1e-3:
        return f"{x:g}".replace("e+", "e")
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def sane(
    lo: float,
    hi: float,
    unit: str = "",
    *,
    integer: bool = False,
    open_lo: bool = False,
    scale: Scale = NONE,
    allow_inf: bool = False,
) -> dict[str, Range]:
    """Field metadata declaring a range: ``field(metadata=sane(1, 64, "packets"))``."""
    return {"range": Range(lo, hi, unit, integer, open_lo, scale, allow_inf)}


@functools.cache
def declared(cls: type) -> dict[str, Range]:
    """The ranges ``cls``'s fields declare, by field name."""
    return {f.name: f.metadata["range"] for f in fields(cls) if "range" in f.metadata}


def check_value(value: Any, where: str, rng: Range, k: int = 1) -> int | float:
    """``value`` if it is a number (an integer when ``rng.integer``) in ``rng`` (on a
    k x k view, after dividing by the view's scale); else a ``ConfigError``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = "an integer" if rng.integer else "a number"
        raise ConfigError(f"{where} must be {kind}, got {short(value)}")
    if rng.integer and not isinstance(value, int):
        raise ConfigError(f"{where} must be an integer, got {short(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        if rng.allow_inf and value == math.inf:
            return value
        raise ConfigError(f"{where} must be finite, got {value!r}")
    factor = {NONE: 1, EDGE: k, AREA: k * k}[rng.scale]
    per = value / factor if factor != 1 else value
    # views multiply in floats: a fine figure exactly at a bound may come back a hair over
    lo, hi = rng.lo - 1e-12 * abs(rng.lo), rng.hi + 1e-12 * abs(rng.hi)
    view = f" (on a {k} x {k} view: {short(value)} for {factor} fine)" if factor != 1 else ""
    unit = f" {rng.unit}" if rng.unit else ""
    if (per <= rng.lo) if rng.open_lo else (per < lo):
        low = (
            "positive"
            if rng.open_lo and rng.lo == 0
            else f"{'>' if rng.open_lo else '>='} {_fmt(rng.lo)}"
        )
        raise ConfigError(f"{where} must be {low}{unit}, got {short(value)}{view}")
    if per > hi:
        raise ConfigError(
            f"{where} = {short(value)}{view} is out of range: it must be {rng.describe()}"
        )
    return value


def check_fields(obj: Any, prefix: str, k: int = 1) -> None:
    """Check every field of the dataclass ``obj`` that declares a range; a field that
    holds (key, number) pairs (rates by dtype or op group) has each number checked."""
    assert is_dataclass(obj)
    for name, rng in declared(type(obj)).items():
        value = getattr(obj, name)
        if isinstance(value, tuple):
            for key, v in value:
                check_value(v, f"{prefix}.{name}.{getattr(key, 'value', key)}", rng, k)
        else:
            check_value(value, f"{prefix}.{name}", rng, k)
