"""Mixture-of-experts layers traced with static shapes: routing as typed ops.

A top-k router sends each of T tokens to k of E experts; how many land on each
expert depends on the data, which a trace on meta tensors cannot see. Here the
experts run GShard-style on a fixed **capacity** per expert, set by a stated load
assumption: ``skew = 1`` is uniform routing (each expert gets its mean share,
T k / E tokens), ``skew > 1`` sizes every expert for the busiest one, which gets
``skew`` times the mean (static-shape MoE implementations pad every expert to the
capacity, so the padded work is real work):

    capacity C = ceil(skew * T * k / E)

Two custom ops carry the routing, each the other's backward (both move data, no
FLOPs):

* ``waferflow::moe_dispatch(x[T, k, H], idx[T, k], E, C, skew) -> [E, C, H]``: each
  token's k copies to their experts' slots;
* ``waferflow::moe_combine(y[E, C, H], idx[T, k], T, skew) -> [T, k, H]``: each
  token's k expert outputs back (weighted and summed by ordinary ops after).

The frontend maps them to the op kinds ``moe_dispatch`` / ``moe_combine``
(attributes ``experts``, ``capacity``, ``skew``), whose sharding rules let an
expert-parallel plan (``ep=N``) place the experts and turn the two exchanges
into all-to-alls (``waferflow.parallel``; docs/parallel.md, "Experts").

``static_experts(model, skew)`` swaps, while tracing, the forward of every Hugging
Face experts module of ``model`` (Mixtral's ``MixtralExperts``: weights ``gate_up_proj[E, 2I, H]``
and ``down_proj[E, H, I]``) for ``static_experts_forward`` and restores it after.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from types import MethodType
from typing import Any

import torch
from torch import nn


def capacity(tokens: int, top_k: int, experts: int, skew: float) -> int:
    """Slots per expert for ``tokens`` routed to ``top_k`` of ``experts`` each."""
    return max(1, math.ceil(skew * tokens * top_k / experts - 1e-9))


@torch.library.custom_op("waferflow::moe_dispatch", mutates_args=())
def moe_dispatch(
    x: torch.Tensor, idx: torch.Tensor, experts: int, capacity: int, skew: float
) -> torch.Tensor:
    """``x[T, k, H]`` to ``[E, C, H]``: token t's copy j goes to expert idx[t, j], in
    arrival order; copies beyond an expert's capacity are dropped (GShard)."""
    out = x.new_zeros(experts, capacity, x.shape[-1])
    fill = [0] * experts
    for t in range(x.shape[0]):
        for j in range(x.shape[1]):
            e = int(idx[t, j])
            if fill[e] < capacity:
                out[e, fill[e]] = x[t, j]
                fill[e] += 1
    return out


@moe_dispatch.register_fake
def _dispatch_fake(
    x: torch.Tensor, idx: torch.Tensor, experts: int, capacity: int, skew: float
) -> torch.Tensor:
    return x.new_empty(experts, capacity, x.shape[-1])


@torch.library.custom_op("waferflow::moe_combine", mutates_args=())
def moe_combine(y: torch.Tensor, idx: torch.Tensor, tokens: int, skew: float) -> torch.Tensor:
    """``y[E, C, H]`` back to ``[T, k, H]``, the slots ``moe_dispatch`` filled (a
    dropped copy reads zeros)."""
    experts, cap = y.shape[0], y.shape[1]
    k = idx.shape[1]
    out = y.new_zeros(tokens, k, y.shape[-1])
    fill = [0] * experts
    for t in range(tokens):
        for j in range(k):
            e = int(idx[t, j])
            if fill[e] < cap:
                out[t, j] = y[e, fill[e]]
                fill[e] += 1
    return out


@moe_combine.register_fake
def _combine_fake(y: torch.Tensor, idx: torch.Tensor, tokens: int, skew: float) -> torch.Tensor:
    return y.new_empty(tokens, idx.shape[1], y.shape[-1])


def _dispatch_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, idx, _, _, skew = inputs
    ctx.save_for_backward(idx)
    ctx.tokens, ctx.skew = x.shape[0], skew


def _dispatch_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    (idx,) = ctx.saved_tensors
    return moe_combine(grad, idx, ctx.tokens, ctx.skew), None, None, None, None


def _combine_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    y, idx, _, skew = inputs
    ctx.save_for_backward(idx)
    ctx.experts, ctx.capacity, ctx.skew = y.shape[0], y.shape[1], skew


def _combine_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    (idx,) = ctx.saved_tensors
    return moe_dispatch(grad, idx, ctx.experts, ctx.capacity, ctx.skew), None, None, None


moe_dispatch.register_autograd(_dispatch_backward, setup_context=_dispatch_setup)
moe_combine.register_autograd(_combine_backward, setup_context=_combine_setup)


def static_experts_forward(
    self: nn.Module,
    hidden_states: torch.Tensor,
    top_k_index: torch.Tensor,
    top_k_weights: torch.Tensor,
) -> torch.Tensor:
    """The experts of a Mixtral-style block on a fixed capacity (module docstring):
    dispatch, a batched SwiGLU over the experts, combine, weight and sum."""
    tokens, hidden = hidden_states.shape
    k = top_k_index.shape[-1]
    experts = int(self.num_experts)
    skew = float(getattr(self, "waferflow_skew", 1.0))
    cap = capacity(tokens, k, experts, skew)
    copies = hidden_states.unsqueeze(1).expand(tokens, k, hidden)
    slots = moe_dispatch(copies, top_k_index, experts, cap, skew)  # [E, C, H]
    gate_up = torch.bmm(slots, self.gate_up_proj.transpose(1, 2))  # [E, C, 2I]
    gate, up = gate_up.chunk(2, dim=-1)
    inner = self.act_fn(gate) * up
    out = torch.bmm(inner, self.down_proj.transpose(1, 2))  # [E, C, H]
    back = moe_combine(out, top_k_index, tokens, skew)  # [T, k, H]
    weighted = back * top_k_weights.unsqueeze(-1).to(back.dtype)
    return weighted.sum(dim=1)


def _experts_modules(model: nn.Module) -> list[nn.Module]:
    """Modules holding experts stacked in ``gate_up_proj`` / ``down_proj``."""
    return [
        m for m in model.modules()
        if all(hasattr(m, a) for a in ("gate_up_proj", "down_proj", "num_experts"))
    ]  # fmt: skip


def count_experts(model: nn.Module) -> int:
    """How many experts modules ``static_experts`` would size (0: a dense model)."""
    return len(_experts_modules(model))


@contextmanager
def static_experts(model: nn.Module, skew: float = 1.0) -> Iterator[int]:
    """While inside, every experts module of ``model`` runs ``static_experts_forward``
    with load ``skew``; yields how many there are. The modules are restored after."""
    if not skew >= 1.0:
        raise ValueError(f"the MoE load skew must be >= 1 (1 = uniform routing), got {skew}")
    mods = _experts_modules(model)
    saved = [m.__dict__.get("forward") for m in mods]
    try:
        for m in mods:
            m.forward = MethodType(static_experts_forward, m)
            m.waferflow_skew = skew
        yield len(mods)
    finally:
        for m, old in zip(mods, saved, strict=True):
            del m.waferflow_skew
            if old is None:
                del m.forward
            else:
                m.forward = old


__all__ = [
    "capacity",
    "count_experts",
    "moe_combine",
    "moe_dispatch",
    "static_experts",
    "static_experts_forward",
]
