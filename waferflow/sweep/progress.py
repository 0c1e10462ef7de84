"""Progress of a running sweep on stderr: jobs done / failed / left and the ETA.

On a terminal, a tqdm bar (its own ETA) with one line above it per failed job; when
stderr is not a terminal (a log file, CI), one plain line per finished job, with the
ETA from this run's rate so far (finished jobs over elapsed wall time, which counts
every worker).
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def describe_row(row: dict[str, Any]) -> str:
    """What a finished job came to, in a few words."""
    if row.get("status") != "ok":
        first = str(row.get("error") or "").splitlines()
        return f"FAILED: {first[0] if first else 'no message'}"
    text = f"step {row['step_time_s'] * 1e3:.4g} ms"
    if row.get("chosen_plan"):
        text += f", plan {row['chosen_plan']}"
    ratio = row.get("auto_vs_uniform")
    if ratio is not None:
        text += f", {ratio:.3f}x the best uniform plan"
    return text


class Progress:
    """Counts finished jobs and shows them (module docstring)."""

    def __init__(self, to_run: int, *, stream: TextIO | None = None, enabled: bool = True,
                 tty: bool | None = None) -> None:  # fmt: skip
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.to_run = to_run
        self.done = self.failed = 0
        self.start = time.monotonic()
        is_tty = self.stream.isatty() if tty is None else tty
        self.bar: Any = None
        if enabled and is_tty and to_run:
            from tqdm import tqdm

            self.bar = tqdm(total=to_run, file=self.stream, unit="job", desc="sweep",
                            dynamic_ncols=True)  # fmt: skip

    def say(self, text: str) -> None:
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def finished(self, label: str, row: dict[str, Any]) -> None:
        self.done += 1
        ok = row.get("status") == "ok"
        self.failed += 0 if ok else 1
        left = self.to_run - self.done
        if self.bar is not None:
            if not ok:
                self.bar.write(f"job {row.get('index')} ({label}): {describe_row(row)}",
                               file=self.stream)  # fmt: skip
            self.bar.set_postfix(failed=self.failed, left=left, refresh=False)
            self.bar.update(1)
            return
        elapsed = time.monotonic() - self.start
        eta = f", ETA {_duration(elapsed / self.done * left)}" if left else ""
        self.say(
            f"sweep: job {row.get('index')} ({label}): {describe_row(row)} | "
            f"{self.done - self.failed} done, {self.failed} failed, {left} left{eta}"
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


__all__ = ["Progress", "describe_row"]
