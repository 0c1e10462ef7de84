"""Optimizer updates traced into the training step.

Each update is written with the ATen ops that have op kinds of their own, so
the ``opt`` phase of a graph reads as a few ops per parameter:

- SGD: ``p' = p - lr * g``, one ``add`` with ``alpha = -lr``.
- AdamW (decoupled weight decay, bias correction for ``step``):
  ``m' = lerp(m, g, 1 - b1)``; ``v' = addcmul(b2 * v, g, g, 1 - b2)``;
  ``d = sqrt(v' / (1 - b2^t)) + eps``; ``p' = addcdiv(p * (1 - lr * wd), m', d,
  -lr / (1 - b1^t))``. The state ``m`` and ``v`` enters the graph as BUFFER
  sources named ``adamw.m.<param>`` and ``adamw.v.<param>``; their new values
  are graph outputs named ``adamw.m.<param>.new`` and ``adamw.v.<param>.new``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch


class Optimizer(Enum):
    SGD = "sgd"
    ADAMW = "adamw"

    @property
    def state_names(self) -> tuple[str, ...]:
        """Per-parameter state tensors, in the order they are graph sources."""
        return ("m", "v") if self is Optimizer.ADAMW else ()


@dataclass(frozen=True, slots=True)
class SGDConfig:
    lr: float = 0.01


@dataclass(frozen=True, slots=True)
class AdamWConfig:
    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    step: int = 1


def state_name(opt: Optimizer, slot: str, param: str) -> str:
    return f"{opt.value}.{slot}.{param}"


def sgd_update(p: torch.Tensor, g: torch.Tensor, cfg: SGDConfig) -> torch.Tensor:
    return torch.add(p, g, alpha=-cfg.lr)


def adamw_update(
    p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, cfg: AdamWConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(new parameter, new m, new v)."""
    bias1 = 1.0 - cfg.beta1**cfg.step
    bias2 = 1.0 - cfg.beta2**cfg.step
    m_new = torch.lerp(m, g, 1.0 - cfg.beta1)
    v_new = torch.addcmul(v * cfg.beta2, g, g, value=1.0 - cfg.beta2)
    denom = torch.sqrt(v_new * (1.0 / bias2)) + cfg.eps
    decayed = p * (1.0 - cfg.lr * cfg.weight_decay)
    p_new = torch.addcdiv(decayed, m_new, denom, value=-cfg.lr / bias1)
    return p_new, m_new, v_new
