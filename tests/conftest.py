"""Suite-wide isolation: the tests never read or write the user's trace cache.

``pytest_configure`` points ``$WAFERFLOW_CACHE_DIR`` at a temporary folder before any
fixture runs (session fixtures trace too), and each test gets an empty one of its
own, so that no test sees another's traced graphs; subprocesses inherit it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CACHE_ENV = "WAFERFLOW_CACHE_DIR"  # waferflow.frontend.disk_cache.CACHE_ENV
_ROOT: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    _ROOT["old"] = os.environ.get(CACHE_ENV, "")
    _ROOT["dir"] = tempfile.mkdtemp(prefix="waferflow-test-cache-")
    os.environ[CACHE_ENV] = _ROOT["dir"]


def pytest_unconfigure(config: pytest.Config) -> None:
    if "dir" in _ROOT:
        shutil.rmtree(_ROOT.pop("dir"), ignore_errors=True)
        os.environ[CACHE_ENV] = _ROOT.pop("old")
        if not os.environ[CACHE_ENV]:
            del os.environ[CACHE_ENV]


@pytest.fixture(autouse=True)
def _own_trace_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(dir=_ROOT["dir"]))
    monkeypatch.setenv(CACHE_ENV, str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
