"""Golden files: the printed IR after a pipeline, with the input as a comment.

Set WAFERFLOW_UPDATE_GOLDEN=1 to (re)write them, then read the diff by hand.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden" / "passes"
UPDATE = os.environ.get("WAFERFLOW_UPDATE_GOLDEN") == "1"


def golden_text(pipeline: str, before: str, after: str) -> str:
    """A parseable .wf file: the header and input are comments, the output is IR."""
    commented = "".join(f"#   {line}\n" if line else "#\n" for line in before.splitlines())
    return f"# pipeline: {pipeline}\n# input:\n{commented}{after}"


def strip_comments(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))


def check_golden(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path}; write it with WAFERFLOW_UPDATE_GOLDEN=1")
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                str(path),
                "actual",
            )
        )
        pytest.fail(f"output differs from {path.name}:\n{diff}")
