"""A real headless browser for the HTML report tests: Chromium's ``--screenshot``.

`make test` installs Debian's chromium when it runs as root with apt-get (CI does); CI
sets ``WAFERFLOW_REQUIRE_BROWSER=1`` so that a missing browser fails there instead of
skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.viz.images import pixels

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
# a guard against a browser that hangs (it never should): not a speed limit
HANG_GUARD_S = 600


def chromium() -> str:
    """The browser's path; skips the test (fails it on CI) when there is none."""
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    reason = (
        "no headless Chromium on PATH (chromium, chromium-browser or google-chrome): "
        "`make test` installs Debian's chromium when run as root with apt-get; elsewhere "
        "install it (e.g. `apt-get install chromium`) to run the HTML report's browser check"
    )
    if os.environ.get("WAFERFLOW_REQUIRE_BROWSER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", f"--user-data-dir={profile}", *args]  # fmt: skip
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False
        )


def screenshot(page: Path, out: Path, width: int, height: int) -> np.ndarray:
    """The page rendered in a ``width`` x ``height`` window, as (h, w, 3) uint8 pixels."""
    done = _run([f"--window-size={width},{height}", f"--screenshot={out}", page.as_uri()])
    assert out.is_file(), f"chromium wrote no screenshot:\n{done.stderr[-2000:]}"
    return pixels(out)


def dump_dom(page: Path) -> str:
    """The page's DOM after the browser parsed it."""
    done = _run(["--dump-dom", page.as_uri()])
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def bbox(img: np.ndarray, rgb: tuple[int, int, int], tol: int = 2) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of the pixels of this colour (exclusive ends)."""
    diff = np.abs(img.astype(np.int16) - np.array(rgb, dtype=np.int16)).max(axis=-1)
    rr, cc = np.nonzero(diff <= tol)
    assert len(rr), f"colour {rgb} is nowhere on the screenshot"
    return int(rr.min()), int(cc.min()), int(rr.max()) + 1, int(cc.max()) + 1
