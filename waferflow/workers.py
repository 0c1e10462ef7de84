"""Evaluate independent pieces of work on forked worker processes.

Placement builds and simulates several candidate layouts of one program, each a few
seconds of pure Python on the same large in-memory state (the scheduled program, its
assembly memo, the traced graph). Forking shares that state copy-on-write, so a worker
starts at once, where a pool would have to pickle it; each worker sends back only the
small results (``pickle`` through a pipe).

``fork_map(mine, theirs, fn)`` runs ``fn`` on the items of ``mine`` in this process
and on each list of ``theirs`` in a forked child, and returns every result. The
results are the same as running everything here, in any order: ``fn`` must be a pure
function of its item and of state that exists before the fork. A child:

- shows no progress (the parent's reporter stays the parent's) and ignores Ctrl-C:
  the parent sees it, and ends its children before it re-raises;
- returns an exception ``fn`` raised as that item's result (the parent re-raises it);
- when it dies without answering (killed, out of memory), its items are run in the
  parent instead, so a lost worker costs time, never a result.

Off Linux (no ``fork``, or macOS, where forking a process that has loaded system
frameworks is unsafe) everything runs here.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# fork without exec is safe on Linux; macOS's system libraries do not support it
CAN_FORK = sys.platform.startswith("linux") and hasattr(os, "fork")
# placement's worker processes (``PlaceOptions.jobs``) when the options leave it open
PLACE_JOBS_ENV = "WAFERFLOW_PLACE_JOBS"


def jobs_from_env() -> int | None:
    """``$WAFERFLOW_PLACE_JOBS`` as a number of processes (None when unset); a
    ``ConfigError`` for anything but a whole number >= 1."""
    env = os.environ.get(PLACE_JOBS_ENV, "").strip()
    if not env:
        return None
    if not env.isdigit() or int(env) < 1:
        from waferflow.errors import ConfigError

        raise ConfigError(
            f"{PLACE_JOBS_ENV}={env!r}: give a whole number of processes >= 1 "
            "(or unset it: as many as there are CPUs for a large plan)"
        )
    return int(env)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def fork_map(
    mine: Sequence[T], theirs: Sequence[Sequence[T]], fn: Callable[[T], R]
) -> tuple[list[R], list[list[R]]]:
    """``fn`` over ``mine`` here and over each list of ``theirs`` in a child process
    of its own, at the same time; results in the lists' orders. An exception ``fn``
    raises (here or in a child) is raised once all children have answered."""
    if not CAN_FORK or not any(theirs):
        return [fn(x) for x in mine], [[fn(x) for x in xs] for xs in theirs]
    children: list[tuple[int, int] | None] = []
    try:
        for xs in theirs:
            children.append(_spawn(xs, fn) if xs else None)
        here = [fn(x) for x in mine]
        there: list[list[R]] = []
        for xs, child in zip(theirs, children, strict=True):
            got = _collect(child) if child is not None else []
            if len(got) != len(xs):  # the child died without answering: run them here
                got = [_Outcome(True, fn(x)) for x in xs]
            there.append([o.unwrap() for o in got])
        children.clear()
        return here, there
    finally:
        for child in children:  # only on an exception or Ctrl-C: end what still runs
            if child is not None:
                _kill(child)


class _Outcome:
    """One item's result or the exception it raised (pickled back from a child)."""

    __slots__ = ("ok", "value")

    def __init__(self, ok: bool, value: Any) -> None:
        self.ok = ok
        self.value = value

    def unwrap(self) -> Any:
        if not self.ok:
            raise self.value
        return self.value


def _spawn(items: Sequence[T], fn: Callable[[T], Any]) -> tuple[int, int]:
    """Fork a child that runs ``fn`` on ``items`` and pickles the outcomes to a pipe;
    returns (pid, read end)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(w)
        return pid, r
    # the child: never return into the parent's code
    status = 1
    try:
        os.close(r)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
        from waferflow import progress

        progress.detach()
        out: list[_Outcome] = []
        for x in items:
            try:
                out.append(_Outcome(True, fn(x)))
            except Exception as e:  # handed to the parent, which raises it
                out.append(_Outcome(False, e))
        data = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(w, "wb") as f:
            f.write(data)
        status = 0
    finally:
        os._exit(status)


def _collect(child: tuple[int, int]) -> list[_Outcome]:
    """Read a child's outcomes (empty if it died first) and reap it."""
    pid, r = child
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    if not data:
        return []
    try:
        got = pickle.loads(data)
    except Exception:  # a torn write: the child died mid-way
        return []
    return got if isinstance(got, list) else []


def _kill(child: tuple[int, int]) -> None:
    pid, r = child
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        os.close(r)


__all__ = ["CAN_FORK", "PLACE_JOBS_ENV", "fork_map", "jobs_from_env", "usable_cpus"]
