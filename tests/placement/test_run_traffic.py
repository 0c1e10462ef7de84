"""``run_traffic`` sums on int64 arrays while that is exact; past 2**53 byte-hops it adds
the messages' floats one by one, as ``plan_traffic`` does (the hypothesis test in
``test_bridge`` covers the common case)."""

from __future__ import annotations

import pytest

from waferflow.backend_sim import Run, SimConfig
from waferflow.backend_sim.config import for_wafer
from waferflow.backend_sim.network import prepare
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target import get_wafer
from waferflow.mapper import bridge
from waferflow.passes.place_result import run_traffic


def _run(sizes: list[int]) -> Run:
    """Messages of ``sizes`` bytes, one hop each, from stage 0 to stage 1 and back; run
    as far as ``prepare`` (the huge ones would take the event loop past int64)."""
    w = get_wafer("mesh4x4")
    actors = [Actor(i, f"a{i}", i % 2, stage=i % 2) for i in range(len(sizes) + 1)]
    msgs = [Message(i, i, i + 1, b) for i, b in enumerate(sizes)]
    plan = Plan.build("big", w.name, actors, msgs)
    cfg = for_wafer(SimConfig(), w)
    return Run(plan, w, cfg, prepare(plan, w, cfg), raw=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sizes",
    [
        [1000, 24, 7],  # exact on int64
        [2**53, 1, 1],  # one by one the ones round away: 2**53, not 2**53 + 2
        [2**64, 3],  # past int64
    ],
)
def test_run_traffic_adds_floats_like_plan_traffic(sizes: list[int]) -> None:
    run = _run(sizes)
    got = run_traffic(run)
    assert got == bridge.plan_traffic(run.plan, run.wafer)
    assert got.bytes == sum(sizes)
    if sizes[0] == 2**53:
        assert got.byte_hops == 2.0**53
