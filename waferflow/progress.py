"""Progress of long work, on stderr: what runs now, how far it is, what is left.

Library code marks its long phases with ``phase(name, total)`` and reports with
``Phase.advance`` / ``Phase.status``; nothing is shown unless a caller (the command
line, the demo) opened ``reporting()``. Then

- on a terminal, each phase is a tqdm bar (count, elapsed, estimate of what is left,
  and the phase's status: the candidate built, the placement method and its share of
  the budget, the best objective so far);
- anywhere else (a file, a pipe, CI), one structured line per event: the phase
  starting, advancing, its status changing, and ending, plus a heartbeat line of the
  innermost phase every ``interval`` seconds, so that a log shows life through a long
  solver call too::

      waferflow: t=12.4s phase=placement done=2/5 left~18s | cp-sat floorplan (45% of the 10 s budget)

Progress only reads: it never changes what the work computes (solver loops stop on
deterministic work, never on wall time; wall time only throttles the printing).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TextIO

__all__ = ["Mode", "Phase", "detach", "phase", "reporting"]


class Mode(Enum):
    """How progress is shown: bars on a terminal, lines elsewhere, or nothing."""

    AUTO = "auto"
    BAR = "bar"
    LINES = "lines"
    OFF = "off"


@dataclass(eq=False)
class Phase:
    """One long phase: ``done`` of ``total`` units (``None``: unknown) and a status."""

    name: str
    total: float | None = None
    unit: str = ""
    done: float = 0.0
    text: str = ""
    started: float = field(default_factory=time.monotonic)
    _reporter: _Reporter | None = None
    _bar: Any = None

    def advance(self, n: float = 1.0, status: str | None = None) -> None:
        """``n`` more units done (and, when given, the new status)."""
        if self._reporter is None or _detached:
            return
        with self._reporter.lock:
            self.done += n
            if status is not None:
                self.text = status
        self._reporter.changed(self)

    def update(self, done: float) -> None:
        """Set the count of units done (a loop that counts for itself)."""
        self.advance(done - self.done)

    def status(self, text: str) -> None:
        """What the phase is doing now (shown with its count)."""
        if self._reporter is None or _detached:
            return
        with self._reporter.lock:
            self.text = text
        self._reporter.changed(self, force=True)

    def left(self) -> float | None:
        """Seconds left, estimated from the rate so far (``None`` when unknown)."""
        if not self.total or self.done <= 0:
            return None
        elapsed = time.monotonic() - self.started
        return max(0.0, elapsed / self.done * (self.total - self.done))

    def line(self, t0: float, event: str = "") -> str:
        now = time.monotonic()
        parts = [f"waferflow: t={now - t0:.1f}s", f"phase={self.name}"]
        if event:
            parts.append(event)
        if self.total is not None:
            unit = f" {self.unit}" if self.unit else ""
            parts.append(f"done={_num(self.done)}/{_num(self.total)}{unit}")
        elif self.done:
            parts.append(f"done={_num(self.done)}{f' {self.unit}' if self.unit else ''}")
        left = self.left()
        if event == "end":
            parts.append(f"took={now - self.started:.1f}s")
        elif left is not None:
            parts.append(f"left~{_seconds(left)}")
        text = " ".join(parts)
        return f"{text} | {self.text}" if self.text and event != "end" else text


def _num(x: float) -> str:
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.2f}"


def _seconds(s: float) -> str:
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}min"


class _Reporter:
    def __init__(self, mode: Mode, stream: TextIO, interval: float) -> None:
        self.mode, self.stream, self.interval = mode, stream, interval
        self.lock = threading.RLock()
        self.stack: list[Phase] = []
        self.t0 = time.monotonic()
        self.last_print = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="waferflow-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _emit(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed stream: not worth an error
            print(text, file=self.stream, flush=True)
        self.last_print = time.monotonic()

    def open(self, p: Phase) -> None:
        with self.lock:
            p._reporter = self
            if self.mode is Mode.BAR:
                from tqdm import tqdm

                sized = _columns(self.stream) > 0  # a pty may have no size: bars would be empty
                p._bar = tqdm(
                    total=p.total, desc=p.name, unit=f" {p.unit}" if p.unit else "it",
                    file=self.stream, position=len(self.stack), leave=not self.stack,
                    dynamic_ncols=sized, ncols=None if sized else _FALLBACK_COLUMNS,
                    nrows=None if sized else _FALLBACK_ROWS,  # tqdm hides bars below nrows
                    mininterval=0.5,
                )  # fmt: skip
            else:
                self._emit(p.line(self.t0, "start"))
            self.stack.append(p)

    def close(self, p: Phase) -> None:
        with self.lock:
            if p in self.stack:
                self.stack.remove(p)
            if p._bar is not None:
                p._bar.close()
            else:
                self._emit(p.line(self.t0, "end"))
            p._reporter = None

    def changed(self, p: Phase, force: bool = False) -> None:
        with self.lock:
            if p._bar is not None:
                p._bar.n = p.done
                p._bar.set_postfix_str(p.text[:60], refresh=False)
                p._bar.refresh()
            elif force or time.monotonic() - self.last_print >= self.interval:
                self._emit(p.line(self.t0))

    def _beat(self) -> None:
        while not self._stop.wait(min(self.interval, 1.0)):
            self.beat()

    def beat(self) -> None:
        """The heartbeat (every second, from a thread): refresh the bars (elapsed,
        estimate), or print the innermost phase when nothing was printed for
        ``interval`` seconds."""
        with self.lock:
            if not self.stack:
                return
            if self.mode is Mode.BAR:
                for p in self.stack:
                    if p._bar is not None:
                        p._bar.refresh()
            elif time.monotonic() - self.last_print >= self.interval:
                self._emit(self.stack[-1].line(self.t0, "running"))


_current: _Reporter | None = None
_detached = False  # a forked worker: shows nothing (waferflow.workers)


def detach() -> None:
    """Show nothing from here on, not even through phases opened before (a forked
    worker process: the reporter, its lock and its heartbeat thread are the
    parent's, and a lock held at the fork would never be released here)."""
    global _current, _detached
    _current = None
    _detached = True


@contextmanager
def reporting(
    mode: Mode | str = Mode.AUTO, stream: TextIO | None = None, interval: float = 2.0
) -> Iterator[None]:
    """Show the progress of the phases run inside the block on ``stream`` (stderr):
    bars on a terminal, one line per event elsewhere (``Mode.AUTO``), or nothing."""
    global _current
    mode = Mode(mode)
    out = stream if stream is not None else sys.stderr
    if mode is Mode.AUTO:
        mode = Mode.BAR if _isatty(out) else Mode.LINES
    if mode is Mode.OFF or _current is not None:
        yield
        return
    reporter = _Reporter(mode, out, interval)
    _current = reporter
    reporter.start()
    try:
        yield
    finally:
        _current = None
        reporter.stop()
        for p in reversed(list(reporter.stack)):
            reporter.close(p)


_FALLBACK_COLUMNS, _FALLBACK_ROWS = 100, 24  # for a terminal that reports no size


def _columns(stream: TextIO) -> int:
    """The terminal's width in columns (0 when it reports no size)."""
    try:
        size = os.get_terminal_size(stream.fileno())
        return size.columns if size.lines else 0
    except (AttributeError, ValueError, OSError):
        return 0


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def phase(name: str, total: float | None = None, unit: str = "") -> Iterator[Phase]:
    """A long phase; progress shows it when a ``reporting()`` block is open, else
    its methods do nothing."""
    p = Phase(name, total, unit)
    reporter = _current
    if reporter is None or _detached:
        yield p
        return
    reporter.open(p)
    try:
        yield p
    finally:
        reporter.close(p)
