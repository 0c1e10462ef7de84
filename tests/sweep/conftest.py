"""Tiny sweeps: GPT-2-shaped 2-layer model, inference, batch 1, on a 4x4 mesh."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY_JOB = """
[job]
model = "hf:gpt2-tiny"
wafer = "mesh4x4"
mode = "infer"
batch = 1
seq = 16
place = "none"
"""


@pytest.fixture
def write_sweep(tmp_path: Path):  # -> Callable[[str], Path]
    """Write a sweep file into tmp_path: ``top`` (top-level keys), the tiny [job]
    table, then ``body``."""

    def write(body: str, name: str = "s", job: str = TINY_JOB, top: str = "") -> Path:
        path = tmp_path / f"{name}.toml"
        out = tmp_path / f"{name}.sweep"
        path.write_text(f'output = "{out}"\n{top}\n{job}\n{body}\n')
        return path

    return write
