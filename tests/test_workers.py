"""Forked workers (waferflow.workers): the same results as running here, errors
raised in the parent, a lost worker's items run here, Ctrl-C-safe children."""

from __future__ import annotations

import os
import signal

import pytest

from waferflow import workers
from waferflow.errors import PlanError


def _square(x: int) -> int:
    return x * x


def test_results_are_those_of_running_everything_here() -> None:
    here, there = workers.fork_map([1, 2], [[3, 4], [5], []], _square)
    assert here == [1, 4]
    assert there == [[9, 16], [25], []]


def test_children_really_are_other_processes() -> None:
    here, there = workers.fork_map([0], [[0], [0]], lambda _: os.getpid())
    assert here == [os.getpid()]
    assert len({there[0][0], there[1][0], here[0]}) == 3


def test_an_error_in_a_child_is_raised_in_the_parent() -> None:
    def fn(x: int) -> int:
        if x == 3:
            raise PlanError(f"no room for {x}")
        return x

    with pytest.raises(PlanError, match="no room for 3"):
        workers.fork_map([1], [[2, 3]], fn)


def test_a_child_that_dies_has_its_items_run_here() -> None:
    parent = os.getpid()

    def fn(x: int) -> tuple[int, bool]:
        if x == 2 and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # a worker lost to the OOM killer, say
        return x, os.getpid() == parent

    here, there = workers.fork_map([1], [[2]], fn)
    assert here == [(1, True)]
    assert there == [[(2, True)]]  # computed again, here


def test_children_ignore_ctrl_c_and_show_no_progress() -> None:
    def fn(_: int) -> tuple[object, bool]:
        from waferflow import progress

        return signal.getsignal(signal.SIGINT), progress._detached

    _, there = workers.fork_map([], [[0]], fn)
    assert there == [[(signal.SIG_IGN, True)]]
    from waferflow import progress

    assert not progress._detached  # the parent is untouched
