"""A loaded machine for determinism tests: other processes that keep every core busy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def busy_cores() -> Iterator[None]:
    """Every core of the machine (at least two) kept busy by other processes."""
    spin = [sys.executable, "-c", "while True: pass"]
    procs = [subprocess.Popen(spin) for _ in range(max(2, os.cpu_count() or 2))]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
