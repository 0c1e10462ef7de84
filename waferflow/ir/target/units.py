"""Physical quantities in wafer files: parsing unit strings and printing figures.

A quantity in a wafer TOML is either a plain number in SI base units (bytes,
bytes/s, seconds, Hz, FLOP/s) or a string with a unit:

=============  =====================================================================
kind           accepted spellings (prefix + unit)
=============  =====================================================================
bytes          ``B`` with ``k K M G T P`` (powers of 1000) or ``Ki Mi Gi Ti Pi``
               (powers of 1024): ``"48 KiB"``, ``"1.25 MB"``
bandwidth      ``B/s`` with the same prefixes, or ``B/cycle``: ``"12.8 GB/s"``,
               ``"128 B/cycle"``
time           ``s ms us µs ns ps``, or ``cycle`` / ``cycles``: ``"10 ns"``, ``"1 cycle"``
frequency      ``Hz kHz MHz GHz THz``: ``"100 MHz"``
compute rate   ``FLOP/s`` or ``FLOPS`` with decimal prefixes, or ``FLOP/cycle``:
               ``"125 PFLOP/s"``, ``"2048 FLOP/cycle"``
=============  =====================================================================

``KB`` and ``kB`` both mean 1000 bytes; write ``KiB`` for 1024. Bits (``Gb/s``,
``Gbps``) are refused rather than guessed at: write bytes. ``cycle`` units are
converted with the wafer's own ``wafer.clock_hz``. Numbers are parsed exactly
(as fractions) so that ``"1.25 MiB"`` is exactly 1,310,720 bytes.
"""

from __future__ import annotations

import math
import re
from enum import Enum
from fractions import Fraction

from waferflow.errors import ConfigError
from waferflow.fileio import short


class Kind(Enum):
    """What a quantity measures; the value is its SI unit."""

    BYTES = "B"
    BANDWIDTH = "B/s"
    TIME = "s"
    FREQUENCY = "Hz"
    FLOPS = "FLOP/s"


_EXAMPLE: dict[Kind, str] = {
    Kind.BYTES: '"48 KiB"',
    Kind.BANDWIDTH: '"12.8 GB/s"',
    Kind.TIME: '"10 ns"',
    Kind.FREQUENCY: '"100 MHz"',
    Kind.FLOPS: '"1 TFLOP/s"',
}

_NOUN: dict[Kind, str] = {
    Kind.BYTES: "a size in bytes",
    Kind.BANDWIDTH: "a bandwidth",
    Kind.TIME: "a time",
    Kind.FREQUENCY: "a frequency",
    Kind.FLOPS: "a compute rate",
}

_DECIMAL: dict[str, int] = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_BINARY: dict[str, int] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_TIME_PREFIX: dict[str, Fraction] = {
    "": Fraction(1),
    "m": Fraction(1, 10**3),
    "u": Fraction(1, 10**6),
    "µ": Fraction(1, 10**6),  # micro sign
    "μ": Fraction(1, 10**6),  # Greek mu
    "n": Fraction(1, 10**9),
    "p": Fraction(1, 10**12),
}


def _build_units() -> dict[str, tuple[Kind, Fraction, bool]]:
    """Every accepted unit spelling -> (kind, factor to SI, factor is per clock cycle)."""
    units: dict[str, tuple[Kind, Fraction, bool]] = {}
    for p, f in {**_DECIMAL, **_BINARY}.items():
        units[f"{p}B"] = (Kind.BYTES, Fraction(f), False)
        units[f"{p}B/s"] = (Kind.BANDWIDTH, Fraction(f), False)
    for p, f in _DECIMAL.items():
        if p == "K":
            continue  # kHz, kFLOP/s: lower-case k only, as SI writes it
        units[f"{p}Hz"] = (Kind.FREQUENCY, Fraction(f), False)
        units[f"{p}FLOP/s"] = (Kind.FLOPS, Fraction(f), False)
        units[f"{p}FLOPS"] = (Kind.FLOPS, Fraction(f), False)
    for p, f in _TIME_PREFIX.items():
        units[f"{p}s"] = (Kind.TIME, f, False)
    units["B/cycle"] = (Kind.BANDWIDTH, Fraction(1), True)
    units["FLOP/cycle"] = (Kind.FLOPS, Fraction(1), True)
    units["cycle"] = (Kind.TIME, Fraction(1), True)
    units["cycles"] = (Kind.TIME, Fraction(1), True)
    return units


_UNITS = _build_units()
_QUANTITY = re.compile(
    r"^\s*(?P<num>[+-]?(?:\d[\d_]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>\S*)\s*$"
)
_BITS = re.compile(r"^[kKMGTPE]?i?(b/s|bps|b)$")
# Numbers that parse at all: the per-field ranges (ranges.py) then bound each quantity.
_MAX_DIGITS = 100
_MAX_EXPONENT = 300
_MAX_BITS = 1000  # integers beyond 2**1000 are refused before any arithmetic


def parse_quantity(value: object, kind: Kind, path: str, clock_hz: float | None = None) -> Fraction:
    """Read one quantity (a number in SI units or a string with a unit) as an exact fraction.

    ``path`` is the TOML path of the field, used in every error message. ``clock_hz``
    converts ``cycle`` units; without it they are an error.
    """
    if isinstance(value, bool):
        raise ConfigError(f"{path} must be {_NOUN[kind]}, got the boolean {short(value)}")
    if isinstance(value, int):
        if value.bit_length() > _MAX_BITS:
            raise ConfigError(f"{path} = {short(value)} is far too large for {_NOUN[kind]}")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{path} must be a finite number, got {short(value)}")
        return Fraction(value)
    if not isinstance(value, str):
        raise ConfigError(
            f"{path} must be {_NOUN[kind]} (a number in {kind.value} or a string like "
            f"{_EXAMPLE[kind]}), got {type(value).__name__} {short(value)}"
        )
    m = _QUANTITY.match(value)
    if m is None:
        raise ConfigError(
            f"{path} = {short(value)} is not a quantity: write a number and a unit, like {_EXAMPLE[kind]}"
        )
    number = _number(m.group("num").replace("_", ""), value, path)
    unit = m.group("unit")
    if unit == "":
        return number  # a bare number in a string: SI units
    if _BITS.match(unit):
        raise ConfigError(
            f"{path} = {short(value)} is in bits; waferflow counts bytes: write B (e.g. {_EXAMPLE[kind]})"
        )
    found = _UNITS.get(unit)
    if found is None:
        known = ", ".join(sorted(u for u, (k, _, _) in _UNITS.items() if k is kind)[:12])
        raise ConfigError(
            f"{path} = {short(value)}: unknown unit {unit!r}; for {_NOUN[kind]} use {known}, ..."
        )
    unit_kind, factor, per_cycle = found
    if unit_kind is not kind:
        raise ConfigError(
            f"{path} = {short(value)} is {_NOUN[unit_kind]}, but {path} is {_NOUN[kind]} (like {_EXAMPLE[kind]})"
        )
    if per_cycle:
        if clock_hz is None or not clock_hz > 0:
            raise ConfigError(
                f"{path} = {short(value)} uses cycles, but the clock (wafer.clock_hz) is "
                f"{'unknown' if clock_hz is None else short(clock_hz)}"
            )
        clock = Fraction(clock_hz)
        # "N cycles" is a time (N / f); "N B/cycle" and "N FLOP/cycle" are rates (N * f)
        return number / clock if kind is Kind.TIME else number * clock
    return number * factor


def _number(text: str, value: str, path: str) -> Fraction:
    """The exact value of a decimal numeral, refusing exponents that would take
    memory and time to expand (``"1e999999999"``) or overflow a float later."""
    mantissa, _, exponent = text.lower().partition("e")
    if len(mantissa) > _MAX_DIGITS or (exponent and abs(int(exponent[:8])) > _MAX_EXPONENT):
        raise ConfigError(
            f"{path} = {short(value)} is out of range: numbers in a wafer file have at most "
            f"{_MAX_DIGITS} digits and an exponent within +-{_MAX_EXPONENT}"
        )
    return Fraction(text)


def quantity_float(value: object, kind: Kind, path: str, clock_hz: float | None = None) -> float:
    try:
        return float(parse_quantity(value, kind, path, clock_hz))
    except OverflowError:
        raise ConfigError(f"{path} = {short(value)} is far too large for {_NOUN[kind]}") from None


def quantity_int(value: object, kind: Kind, path: str, clock_hz: float | None = None) -> int:
    """A quantity that must be a whole number (bytes): ``"1.5 B"`` is an error."""
    if isinstance(value, float) and value.is_integer():
        raise ConfigError(
            f"{path} must be an integer, got the float {short(value)}; write {int(value)}"
        )
    q = parse_quantity(value, kind, path, clock_hz)
    if q.denominator != 1:
        raise ConfigError(
            f"{path} = {short(value)} is not a whole number of {kind.value} ({float(q)!r})"
        )
    return int(q)


# --- printing -------------------------------------------------------------------------

_SI_UP = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_SI_DOWN = ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p"))


def _sig(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits, no trailing zeros, no exponent."""
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_si(value: float, unit: str, digits: int = 3) -> str:
    """``fmt_si(1.28e10, "B/s") == "12.8 GB/s"``; small values scale down (ns, us)."""
    a = abs(value)
    if a >= 1e3:
        for scale, prefix in _SI_UP:
            if a >= scale * 0.9995:
                return f"{_sig(value / scale, digits)} {prefix}{unit}"
    if a >= 1.0 or a == 0 or unit != "s":
        return f"{_sig(value, digits)} {unit}"
    for scale, prefix in _SI_DOWN[1:]:
        if a >= scale * 0.9995:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def fmt_bytes(n: int | float) -> str:
    """Binary units when the figure is round in them (``"48 KiB"``), decimal otherwise."""
    n_int = int(n)
    for exp, prefix in ((5, "Pi"), (4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki")):
        unit = 1024**exp
        if n_int >= unit:  # the largest binary unit only: "35721 MiB" reads worse than "37.5 GB"
            if n_int == n and (n_int * 1000) % unit == 0:
                return f"{_sig(n_int / unit, 6)} {prefix}B"
            break
    return fmt_si(float(n), "B")


def fmt_count(n: int) -> str:
    return f"{n:,}"
