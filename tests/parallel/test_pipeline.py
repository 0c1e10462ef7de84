"""Pipeline parallelism: stage cuts, schedules and the GPipe bubble."""

from __future__ import annotations

import pytest

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.parallel import build_parallel_plan, parse_plan
from waferflow.parallel.build import _stage_blocks
from waferflow.parallel.stages import layer_key, partition

from .graphs import chain, fast_wafer

F, B = 8_000_000, 16_000_000  # FLOPs of one micro-batch's forward / backward per stage


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p", [2, 3, 4])
@pytest.mark.parametrize("m", [1, 2, 4, 8])
def test_bubble_matches_closed_form(schedule: str, p: int, m: int) -> None:
    """p equal stages, m micro-batches, links as good as free: the step takes
    (m + p - 1)(f + b), i.e. the bubble is (p - 1) / (m + p - 1) of it.

    At 1 TFLOP/s a FLOP is a picosecond, so f = F ps and b = B ps. Each message
    still takes 1 ps (one packet over a 1e30 B/s link); the tolerance allows 2 ps
    per micro-batch and stage on the critical path."""
    g = chain(p, batch=8 * m, width=4, fwd_flops=F * m, bwd_flops=B * m)
    wafer = fast_wafer(p)
    r = build_parallel_plan(g, wafer, f"pp={p},microbatches={m},schedule={schedule}")
    sim = simulate(r.plan, wafer)
    closed = (m + p - 1) * (F + B)
    assert abs(sim.step_time_ps - closed) <= 2 * (m + p)
    bubble = 1 - m * (F + B) / sim.step_time_ps
    assert bubble == pytest.approx((p - 1) / (m + p - 1), abs=1e-6)
    # each stage runs on its own core
    assert sorted({a.stage for a in r.plan.actors}) == list(range(p))
    assert len(r.plan.cores) == p


def test_one_f_one_b_block_order() -> None:
    plan = parse_plan("pp=4,microbatches=6,schedule=1f1b")
    order = [str(b) for b in _stage_blocks(plan, 1)]
    # stage 1 of 4: two warm-up forwards, then one forward / one backward in turn
    assert order == ["F0", "F1", "F2", "B0", "F3", "B1", "F4", "B2", "F5", "B3", "B4", "B5", "L"]
    last = [str(b) for b in _stage_blocks(plan, 3)]
    assert last[:4] == ["F0", "B0", "F1", "B1"]
    gpipe = parse_plan("pp=2,microbatches=2,schedule=gpipe")
    assert [str(b) for b in _stage_blocks(gpipe, 0)] == ["F0", "F1", "B0", "B1", "L"]


def test_partition_balances_and_keeps_order() -> None:
    assert partition([1, 1, 1, 1], [0, 0, 0, 0], 2, 1.0) == [0, 0, 1, 1]
    assert partition([3, 1, 1, 1], [0, 0, 0, 0], 2, 1.0) == [0, 1, 1, 1]
    # memory moves the cut when it can: units of 6 bytes into 10-byte stages
    assert partition([1, 1, 5, 1], [6, 6, 1, 1], 2, 10.0) == [0, 1, 1, 1]
    with pytest.raises(PlanError, match="only 3 layer unit"):
        partition([1, 1, 1], [0, 0, 0], 4, 1.0)


def test_layer_key() -> None:
    assert layer_key("transformer.h.3.attn.c_attn") == "transformer.h.3"
    assert layer_key("model.layers.12.mlp") == "model.layers.12"
    assert layer_key("lm_head") == "lm_head"
    assert layer_key("") == ""


def test_stages_follow_the_layers(gpt2_tiny) -> None:  # type: ignore[no-untyped-def]
    r = build_parallel_plan(gpt2_tiny, fast_wafer(2), "pp=2")
    stage = r.stage_of_op
    # the two blocks land on different stages, forward and backward together
    assert stage["transformer.h.0.attn.c_attn.weight.grad"] == 0
    assert stage["transformer.h.1.attn.c_attn.weight.grad"] == 1
    assert stage["loss"] == 1


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 4), (4, 8), (3, 2)])
def test_micro_batches_in_flight(p: int, m: int) -> None:
    """GPipe keeps every micro-batch's activations until its backward; 1F1B at most
    p - s on stage s: the most forwards done and not yet backwarded."""
    for s in range(p):
        for schedule, limit in (("gpipe", m), ("1f1b", min(p - s, m))):
            blocks = _stage_blocks(parse_plan(f"pp={p},mb={m},schedule={schedule}"), s)
            live = peak = 0
            for b in blocks:
                live += {"F": 1, "B": -1, "L": 0}[b.kind]
                peak = max(peak, live)
            assert peak == limit and live == 0


def test_1f1b_needs_less_memory_than_gpipe() -> None:
    g = chain(4, batch=32, width=64, fwd_flops=1000, bwd_flops=2000)
    peaks = {}
    for schedule in ("gpipe", "1f1b"):
        r = build_parallel_plan(g, fast_wafer(4), f"pp=4,microbatches=8,schedule={schedule}")
        peaks[schedule] = [c.part("activations") for c in r.memory.cores]
    assert all(a < b for a, b in zip(peaks["1f1b"], peaks["gpipe"], strict=True))
