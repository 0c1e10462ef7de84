"""The whole-wafer capacity check: bytes by hand, and advice that makes the bound hold."""

from __future__ import annotations

import pytest

from waferflow.errors import PlanError
from waferflow.ir.target import get_wafer
from waferflow.parallel import capacity
from waferflow.parallel.capacity import StateBytes, advice, check_capacity, plan_copies

MiB = 2**20


def test_bytes_by_hand() -> None:
    assert StateBytes(1000).total == 4000  # inference, f32: weights only
    assert StateBytes(1000, "bf16", "train").total == 4000  # weights + gradients, 2 B
    assert StateBytes(1000, None, "train", "adamw").total == 16000  # + m and v
    assert StateBytes(1000, None, "train", "sgd", dp=2).total == 16000  # two copies
    # ZeRO stages shard optimizer state, then gradients, then weights over dp
    assert StateBytes(1000, None, "train", "adamw", dp=4, zero=1).total == 4000 * 8 + 8000
    assert StateBytes(1000, None, "train", "adamw", dp=4, zero=3).total == 16000


def test_plan_copies() -> None:
    assert plan_copies(None) == (1, 0) and plan_copies("auto") == (1, 0)
    assert plan_copies("dp=2,tp=4") == (2, 0)
    with pytest.raises(PlanError, match="did you mean microbatches"):
        plan_copies("dp=2,microbatch=4")


def test_advice_lists_the_smallest_changes_that_fit() -> None:
    need = StateBytes(100 * MiB // 4, None, "train", "sgd", dp=2)  # 400 MiB
    tips = advice(need, 150 * MiB, [], zero_ok=False)
    # bf16 alone: 200 MiB; infer alone: 200; dp=1 alone: 200; any two: 100 MiB
    assert len(tips) == 3 and all(", together" in t for t in tips)
    assert not any("zero" in t for t in tips)
    tips = advice(need, 250 * MiB, [("big", 1 << 40)], zero_ok=True)
    assert tips[:3] == [
        "--dtype bf16 (needs 200 MiB)",
        "--mode infer (no gradients, no optimizer state) (needs 200 MiB)",
        "zero=3 in the plan (weights, gradients and optimizer state sharded over the dp "
        "ranks) (needs 200 MiB)",
    ]
    assert tips[3].startswith("a wafer with more SRAM: big")


def test_zero_is_advised_only_when_the_plan_grammar_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    need = StateBytes(124_439_808, None, "train", "sgd", dp=2)
    for accepts in (False, True):
        monkeypatch.setattr(capacity, "plan_accepts_zero", lambda a=accepts: a)
        with pytest.raises(PlanError) as exc:
            check_capacity(need, get_wafer("mesh16x16"), model="hf:gpt2", presets=[])
        assert ("zero=3" in str(exc.value)) is accepts


def test_a_model_that_fits_passes() -> None:
    check_capacity(StateBytes(1000, None, "train"), get_wafer("mesh4x4"), model="m")
