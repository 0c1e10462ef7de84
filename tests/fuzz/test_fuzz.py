"""Mutated inputs of every format load, or are refused with one ``WaferflowError``
with a message: never another exception, never a hang. About 2,000 cases here;
``make fuzz`` runs 20,000 and more (tests/fuzz/runner.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.formats import FORMATS, Format
from tests.fuzz.runner import case, outcome

CASES_PER_FORMAT = 400  # 2,000 in all; make fuzz runs the volume


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_seeds_load(fmt: Format) -> None:
    for data in fmt.seeds():
        assert outcome(fmt, data) == ("loaded", None)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
@settings(
    max_examples=CASES_PER_FORMAT,
    deadline=None,  # a hang guard stands in for it: no wall-clock limit in a test
    suppress_health_check=[HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_inputs_load_or_are_refused(fmt: Format, seed: int) -> None:
    what, exc = outcome(fmt, case(fmt, seed))
    assert not what.startswith(("crash", "hang")), (
        f"{fmt.name} case {seed}: {what} (replay: python -m tests.fuzz.runner "
        f"--replay {fmt.name}:{seed})"
    ) + (f": {exc!r}" if exc else "")


# Inputs the fuzzers found crashing a reader, kept so that they stay fixed.
FOUND = [
    ("wafer-toml", b'preset = "mesh4x4"\n[wafer]\nclock_hz = 0\n[link]\nlatency = "1 cycle"\n'),
    ("plan-string", b"dp=2,span=" + b"9" * 5000),  # int() of more than 4,300 digits
    ("plan-string", "span=\u00b2".encode()),  # a digit int() does not read
    ("plan-bundle", None),  # a link of 5e-324 B/s: its duration overflowed a float
    ("ir-json", None),  # {"float": [1]} as an attribute: unhashable
]


@pytest.mark.parametrize(("name", "data"), FOUND, ids=[f for f, _ in FOUND])
def test_inputs_found_by_fuzzing_are_refused(name: str, data: bytes | None) -> None:
    fmt = next(f for f in FORMATS if f.name == name)
    if data is None and name == "plan-bundle":
        data = fmt.seeds()[0].replace(b"bandwidth = 100000000000.0", b"bandwidth = 5e-324")
        assert b"5e-324" in data
    elif data is None:
        data = fmt.seeds()[0].replace(b'"attrs": {', b'"attrs": {"odd": {"float": [1]}, ', 1)
    what, exc = outcome(fmt, data)
    assert what.startswith("refused"), (what, exc)
