"""plan-memory: liveness per core against hand-computed peaks, and refusals."""

from __future__ import annotations

import pytest

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.target import get_wafer
from waferflow.parallel import build_parallel_plan

from .graphs import chain, fast_wafer

# chain(1 layer), batch 8 x width 4 in f32, 2 micro-batches of 4 rows:
#   x (input, 8x4)        128 B, resident for the whole step
#   h = relu(x)            64 B per micro-batch  (saved for the backward)
#   loss = sum(h)           4 B, one buffer: the returned loss is summed over the
#                           micro-batches (live from l0 to l1)
#   g_loss = fill(loss)     4 B (takes the loss's shape only: reads no micro-batch)
#   g = relu_bwd(g_loss, h) 64 B  (a graph output, used by nothing: freed at once)
#
# GPipe runs  h0 l0 h1 l1 | f0 g0 f1 g1. At g0 both micro-batches' h are live, with
# f0 and g0: 64 + 64 + 4 + 64 = 196, plus x = 324.
# 1F1B runs  h0 l0 f0 g0 | h1 l1 f1 g1. At g0: h0, the loss, f0, g0 = 136, plus x = 264.
# GPipe with recompute frees h after the forward and rebuilds it for its backward:
# at g0, h0 + f0 + g0 = 132, plus x = 260.


@pytest.mark.parametrize(
    ("plan", "peak", "activations"),
    [
        ("microbatches=2,schedule=gpipe", 324, 196),
        ("microbatches=2,schedule=1f1b", 264, 136),
        ("microbatches=2,schedule=gpipe,recompute=true", 260, 132),
    ],
)
def test_liveness_matches_hand_computed_peak(plan: str, peak: int, activations: int) -> None:
    g = chain(1, batch=8, width=4, fwd_flops=100, bwd_flops=100)
    r = build_parallel_plan(g, fast_wafer(1), plan)
    (core,) = r.memory.cores
    assert core.peak_bytes == peak
    assert core.part("inputs") == 128
    assert core.part("activations") == activations


def test_recompute_adds_the_forward_flops() -> None:
    g = chain(1, batch=8, width=4, fwd_flops=100, bwd_flops=300)
    plain = build_parallel_plan(g, fast_wafer(1), "microbatches=2,schedule=gpipe")
    again = build_parallel_plan(g, fast_wafer(1), "microbatches=2,schedule=gpipe,recompute=true")
    assert again.plan.total_flops - plain.plan.total_flops == 100  # 2 x 50 per micro-batch


def test_weights_gradients_and_adam_state(gpt2_tiny: Graph) -> None:
    from waferflow.frontend import load_model, trace

    b = load_model("hf:gpt2-tiny", batch=4, seq=32)
    adam = trace(b.module, b.example_inputs, mode="train", optimizer="adamw", loss_fn=b.loss_fn)
    wafer = get_wafer("mesh16x16")
    sgd = build_parallel_plan(gpt2_tiny, wafer, "tp=2", check_memory=False).memory.cores[0]
    adamw = build_parallel_plan(adam, wafer, "tp=2", check_memory=False).memory.cores[0]
    assert sgd.part("optimizer") == 0
    # AdamW keeps two moments per weight: twice the weights' bytes
    assert adamw.part("optimizer") == 2 * adamw.part("weights")
    assert adamw.part("weights") == sgd.part("weights")
    assert sgd.part("gradients") > 0


def test_a_plan_that_does_not_fit_is_refused(gpt2_tiny: Graph) -> None:
    small = fast_wafer(4, rows=4, sram="64 KiB")
    with pytest.raises(PlanError) as info:
        build_parallel_plan(gpt2_tiny, small, "tp=2,pp=2")
    msg = str(info.value)
    assert "does not fit" in msg and "needs" in msg and "has 64.00 KiB" in msg
    assert "raise tp or pp" in msg or "recompute" in msg
    # asked not to check, the plan is built and the report says so
    r = build_parallel_plan(gpt2_tiny, small, "tp=2,pp=2", check_memory=False)
    assert not r.memory.fits and r.memory.offenders()
    assert "DOES NOT FIT" in r.memory.summary()
