"""Mutated inputs of every format load, or are refused with one ``WaferflowError``
with a message: never another exception, never a hang. About 2,500 cases here;
``make fuzz`` runs 20,000 and more (tests/fuzz/runner.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.formats import FORMATS, Format
from tests.fuzz.runner import case, outcome

CASES_PER_FORMAT = 500


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
