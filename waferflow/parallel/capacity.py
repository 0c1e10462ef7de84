"""The whole-wafer capacity check: refuse, before anything is traced, a model whose
weights (and, for training, gradients and optimizer state) cannot fit in the SRAM of
every core of the wafer together.

It is a necessary condition, not a sufficient one: activations, buffers and the
imbalance between cores come on top, and the plan's own memory check
(``parallel.memory.check_fits``) still runs after the plan is built. What it buys is
the answer in a second instead of after a trace and a build, and advice that can
help: each change it suggests (a wafer with more SRAM, bf16, inference, fewer data-
parallel copies or ZeRO sharding when the plan grammar has it) is one that makes the
bound hold.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields, replace

from waferflow.errors import PlanError
from waferflow.ir.summary import human_bytes

# bytes of one parameter in each --dtype (None: as built, f32)
DTYPE_BYTES: dict[str | None, int] = {None: 4, "f32": 4, "bf16": 2, "f16": 2}
# per-parameter optimizer state tensors (frontend.optim: AdamW keeps m and v, SGD none)
OPTIMIZER_STATES: dict[str, int] = {"sgd": 0, "adamw": 2}


@dataclass(frozen=True, slots=True)
class StateBytes:
    """What the whole wafer must hold at least: one model's parameters in ``dtype``,
    for ``mode``, times the data-parallel copies the plan keeps."""

    params: int
    dtype: str | None = None
    mode: str = "infer"
    optimizer: str = "sgd"
    dp: int = 1
    zero: int = 0  # ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also weights

    @property
    def per_param(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 4)

    @property
    def total(self) -> int:
        weights = self.params * self.per_param
        if self.mode != "train":
            return weights * (1 if self.zero >= 3 else self.dp)
        states = weights * OPTIMIZER_STATES.get(self.optimizer, 0)
        copies = [1 if self.zero >= stage else self.dp for stage in (3, 2, 1)]
        return weights * copies[0] + weights * copies[1] + states * copies[2]

    def what(self) -> str:
        """The terms, e.g. "124.4M parameters x 4 B x (weights + gradients) x 2 dp copies"."""
        parts = ["weights"]
        if self.mode == "train":
            parts.append("gradients")
            states = OPTIMIZER_STATES.get(self.optimizer, 0)
            if states:
                parts.append(f"{states} {self.optimizer} state tensors")
        text = f"{_count(self.params)} parameters x {self.per_param} B x ({' + '.join(parts)})"
        if self.dp > 1:
            text += f", {self.dp} data-parallel copies" + (
                f" under zero={self.zero}" if self.zero else ""
            )
        return text


def _count(n: int) -> str:
    for unit, size in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return str(n)


def plan_accepts_zero() -> bool:
    """Whether the plan grammar has a ``zero=`` key (ZeRO-style sharding)."""
    from waferflow.parallel.plan_spec import ParallelPlan

    return any(f.name == "zero" for f in fields(ParallelPlan))


def plan_copies(plan: str | None) -> tuple[int, int]:
    """(dp, zero) of a plan string; (1, 0) for none or ``auto`` (the search may pick
    dp=1, so only one copy is certain)."""
    if plan is None or plan.strip().lower() == "auto":
        return 1, 0
    from waferflow.parallel.plan_spec import parse_plan

    spec = parse_plan(plan)
    return max(1, spec.dp), int(getattr(spec, "zero", 0) or 0)


Change = tuple[str, dict[str, object]]  # advice, and the StateBytes fields it sets


def _changes(need: StateBytes, zero_ok: bool) -> list[Change]:
    out: list[Change] = []
    if need.per_param > 2:
        out.append(("--dtype bf16", {"dtype": "bf16"}))
    if need.mode == "train":
        out.append(("--mode infer (no gradients, no optimizer state)", {"mode": "infer"}))
    if need.dp > 1 and zero_ok and need.zero < 3:
        out.append(("zero=3 in the plan (weights, gradients and optimizer state "
                    "sharded over the dp ranks)", {"zero": 3}))  # fmt: skip
    elif need.dp > 1:
        out.append(("dp=1 in the plan (each dp copy holds the whole model)",
                    {"dp": 1}))  # fmt: skip
    return out


def _apply(need: StateBytes, combo: tuple[Change, ...]) -> StateBytes:
    for _, fields_set in combo:
        need = replace(need, **fields_set)  # type: ignore[arg-type]
    return need


def _and(items: list[str]) -> str:
    return (
        items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] + ", together"
    )


def advice(need: StateBytes, have: int, bigger: list[tuple[str, int]], zero_ok: bool) -> list[str]:
    """The changes that each make ``need`` fit in ``have`` bytes (the smallest sets of
    them), and the wafers (name, total SRAM) that hold it as it is."""
    options = _changes(need, zero_ok)
    found: list[tuple[Change, ...]] = []
    for size in range(1, len(options) + 1):
        for combo in itertools.combinations(options, size):
            if any(all(c in combo for c in f) for f in found):
                continue  # a smaller set already fits
            if _apply(need, combo).total <= have:
                found.append(combo)
    tips = [f"{_and([name for name, _ in combo])} (needs {human_bytes(_apply(need, combo).total)})"
            for combo in found]  # fmt: skip
    if bigger:
        names = ", ".join(f"{n} ({human_bytes(b)})" for n, b in bigger)
        tips.append(f"a wafer with more SRAM: {names}")
    return tips


def check_capacity(
    need: StateBytes, wafer: object, *, model: str, presets: list[tuple[str, int]] | None = None
) -> None:
    """Refuse ``need`` when it exceeds the SRAM of every alive core of ``wafer`` (a
    ``Wafer``) together, with the changes that would make it fit; ``presets`` (name,
    total SRAM) are the wafers to suggest (default: the presets)."""
    have = wafer.total_sram()  # type: ignore[attr-defined]
    if need.total <= have:
        return
    if presets is None:
        from waferflow.ir.target import get_wafer, list_presets

        presets = [(n, get_wafer(n).total_sram()) for n in list_presets()]
    bigger = sorted(((b, n) for n, b in presets if b >= need.total), key=lambda t: t[0])
    tips = advice(need, have, [(n, b) for b, n in bigger[:3]], plan_accepts_zero())
    what = "training" if need.mode == "train" else "inference"
    cores = wafer.num_alive  # type: ignore[attr-defined]
    alive = "alive " if cores < wafer.num_cores else ""  # type: ignore[attr-defined]
    raise PlanError(
        f"{model} {what} does not fit on {wafer.name}: it needs at least "  # type: ignore[attr-defined]
        f"{human_bytes(need.total)} ({need.what()}), and the SRAM of all {cores:,} "
        f"{alive}{_unit(wafer)} together is {human_bytes(have)}; activations come on top. "
        "What would pass this check:\n  " + "\n  ".join(tips)
    )


def _unit(wafer: object) -> str:
    k = getattr(wafer, "coarsen_factor", 1)
    return "cores" if k == 1 else f"nodes of {k}x{k} cores"


__all__ = [
    "DTYPE_BYTES",
    "StateBytes",
    "advice",
    "check_capacity",
    "plan_accepts_zero",
    "plan_copies",
]
