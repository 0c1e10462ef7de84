"""Trace options that would change nothing are refused, not dropped (without torch).

An optimizer only shapes a training step, and an expert load skew only sizes
mixture-of-experts layers; given to an inference trace or a model without experts,
each would be ignored silently. Their neutral values (``sgd``, the default
optimizer, and a skew of 1, uniform routing) are always accepted, so that a caller
passing every option (a sweep, a script looping over modes) is not refused.
"""

from __future__ import annotations

import math
from typing import Any

from waferflow.errors import ConfigError, TraceError
from waferflow.frontend.catalog import canonical_model, expert_count, experts_per_token

DEFAULT_OPTIMIZER = "sgd"
UNIFORM_SKEW = 1.0
MOE_EXAMPLE = "hf:mixtral-tiny"  # a zoo model with experts, for the messages


def check_optimizer(mode: str, optimizer: str) -> None:
    """Refuse an optimizer other than the default for an inference trace."""
    if mode == "infer" and optimizer != DEFAULT_OPTIMIZER:
        raise ConfigError(
            f"--optimizer {optimizer} applies to training only, and this is --mode infer "
            "(no optimizer update is traced), so it would be ignored: add --mode train, or "
            "drop --optimizer (in Python: mode='train', or leave optimizer out)"
        )


def check_moe_skew(
    moe_skew: Any, model: str, experts: int | None, top_k: int | None = None
) -> None:
    """Refuse a skew that is not a finite number >= 1, and, when ``experts`` is 0 (the
    model has none; ``None``: not known until the model is built), any skew but 1.
    With ``top_k`` (experts per token) known, a skew above ``experts / top_k`` is
    refused too: the busiest expert cannot get more than every token."""
    if (
        isinstance(moe_skew, bool)
        or not isinstance(moe_skew, int | float)
        or not moe_skew >= 1
        or not math.isfinite(moe_skew)
    ):
        raise TraceError(
            f"moe_skew={moe_skew!r}: the expert load skew must be a finite number >= 1 "
            "(1 = uniform)"
        )
    if experts and top_k and moe_skew > experts / top_k:
        raise ConfigError(
            f"--moe-skew {moe_skew:g}: {model} routes each token to {top_k} of its {experts} "
            f"experts, so the busiest expert gets at most {experts / top_k:g} times the mean "
            f"share (every token); give a skew from 1 to {experts / top_k:g}"
        )
    if experts == 0 and moe_skew != UNIFORM_SKEW:
        raise ConfigError(
            f"--moe-skew {moe_skew:g} sizes mixture-of-experts layers, and {model} has no "
            f"experts, so it would be ignored: drop --moe-skew, or use a model with experts "
            f"(e.g. {MOE_EXAMPLE}; in Python: leave moe_skew out)"
        )


def check_trace_options(spec: str, *, mode: str, optimizer: str, moe_skew: Any) -> None:
    """The checks above for a zoo name or model file, before torch is imported (the
    experts of a model file are counted when it is traced)."""
    check_optimizer(mode, optimizer)
    check_moe_skew(moe_skew, canonical_model(spec), expert_count(spec), experts_per_token(spec))


__all__ = ["check_moe_skew", "check_optimizer", "check_trace_options"]
