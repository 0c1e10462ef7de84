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
from waferflow.fileio import short
from waferflow.frontend.catalog import canonical_model, expert_count, experts_per_token

DEFAULT_OPTIMIZER = "sgd"
UNIFORM_SKEW = 1.0
MOE_EXAMPLE = "hf:mixtral-tiny"  # a zoo model with experts, for the messages
DTYPE_NAMES = ("f32", "bf16", "f16")  # what ``dtype`` casts a zoo model or model file to

# a batch (or sequence) beyond this is refused before torch sees it: far above any
# training run (hundreds of times the largest batches published), far below the sizes
# at which tensor shapes or op costs overflow 64-bit integers
MAX_SIZE = 2**24


def check_size(what: str, value: Any) -> None:
    """``batch`` / ``seq``: ``None`` or an integer from 1 to ``MAX_SIZE``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{what} must be a positive integer, got {value!r}")
    if value is not None and value > MAX_SIZE:
        raise ConfigError(
            f"{what}={short(value)} is too large: waferflow models a {what} of at most "
            f"{MAX_SIZE:,}; give a smaller one"
        )


def check_dtype(dtype: Any) -> None:
    """``None`` (as the model is) or one of ``DTYPE_NAMES`` (a string, not a torch dtype)."""
    if dtype is not None and (not isinstance(dtype, str) or dtype not in DTYPE_NAMES):
        raise ConfigError(f"dtype {short(dtype)}: use one of {', '.join(DTYPE_NAMES)}")


def check_name(name: Any) -> None:
    """A graph name is a string (an int one was kept, and the saved plan then failed
    to load: ``$.plan.name: expected a string``)."""
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"name={short(name)}: give the graph's name as a string, or None")


def check_not_class(model: Any) -> None:
    """A model class given where an instance goes (``nn.Linear``, not ``nn.Linear(4, 4)``):
    compile failed on ``Module.parameters() missing 'self'``."""
    if isinstance(model, type):
        raise TraceError(
            f"model is the class {model.__name__}, not a module: pass an instance "
            f"({model.__name__}(...))"
        )


def check_loss_fn(loss_fn: Any) -> None:
    """``loss_fn``: ``None`` or a callable (a string or number failed inside the trace,
    with advice about torch.export). It is accepted in inference, where no loss is
    traced: a zoo bundle's loss is passed whatever the mode (``trace_model``)."""
    if loss_fn is not None and not callable(loss_fn):
        raise TraceError(
            f"loss_fn={short(loss_fn)} is not callable: give a function "
            "loss_fn(output, *inputs) returning a scalar tensor, or None (the mean of the output)"
        )


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


__all__ = [
    "DTYPE_NAMES",
    "MAX_SIZE",
    "check_dtype",
    "check_loss_fn",
    "check_moe_skew",
    "check_name",
    "check_not_class",
    "check_optimizer",
    "check_size",
    "check_trace_options",
]
