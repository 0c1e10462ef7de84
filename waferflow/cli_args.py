"""The command line's argument types, shared by ``cli`` and the
commands it adds from ``cli_amcoda`` and ``cli_sweep`` (which would otherwise import
them back from ``cli``)."""

from __future__ import annotations

import argparse
import math


def _int_at_least(low: int, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
    return value


def seed_type(text: str) -> int:
    """argparse type: an integer >= 0 (the random generators of the data files refuse
    negative seeds)."""
    return _int_at_least(0, text)


def seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0 (checked even when nothing is
    placed, so that a bad value is never silently dropped)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--coarsen 0`` is an error, not 1)."""
    return _int_at_least(1, text)
