"""A sweep worker runs job after job: what a job leaves in reference cycles (compile
runs with the cyclic collector paused) is freed before the next job."""

from __future__ import annotations

import weakref
from typing import Any

import pytest

import waferflow
from waferflow.perf import gc_paused
from waferflow.sweep import job as job_mod
from waferflow.sweep import load_sweep


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_job_leaves_no_cycles_behind(write_sweep, monkeypatch: pytest.MonkeyPatch) -> None:
    refs: list[weakref.ref[_Node]] = []

    @gc_paused()
    def fake_run(job: Any) -> dict[str, Any]:  # a compile's garbage: cycles, made paused
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        refs.append(weakref.ref(a))
        return {}

    monkeypatch.setattr(job_mod, "_run", fake_run)
    job = load_sweep(write_sweep('[[points]]\nplan = "none"\n')).jobs[0]
    row = job_mod.run_job(job, "k", waferflow.__version__)
    assert row["status"] == "ok"
    assert refs and refs[0]() is None
