"""Text reports of a parallel plan, for the CLI and benchmarks.

``format_report(result, wafer, sim)`` prints what a user of
``waferflow compile ... --plan dp=2,tp=4`` wants: the plan's shape, the simulated
step time, utilisation (of the busy cores, and model FLOPs against the whole
wafer's peak) and per-core memory. ``sim`` is anything with ``step_time``
(seconds) and ``flop_utilisation`` (a ``SimResult`` or an ``Estimate``-like object);
it is optional so that a refused or unsimulated plan can still be described.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from waferflow.ir.dtypes import DType
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.driver import ParallelResult


def dominant_dtype(result: ParallelResult) -> DType:
    """The dtype carrying most of the plan's FLOPs (the wafer peak to compare with)."""
    flops: Counter[DType] = Counter()
    for a in result.plan.actors:
        flops[a.dtype] += a.flops
    return flops.most_common(1)[0][0] if flops else DType.F32


def model_flops_utilisation(result: ParallelResult, wafer: Wafer, step_time_s: float) -> float:
    """FLOPs of the unsharded step / (step time x the whole wafer's peak)."""
    peak = wafer.total_peak_flops(dominant_dtype(result))
    if step_time_s <= 0 or peak <= 0:
        return 0.0
    return result.model_flops / (step_time_s * peak)


def fmt_seconds(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3f} {unit}"
    return f"{s * 1e9:.1f} ns"


def format_report(
    result: ParallelResult, wafer: Wafer, sim: Any | None = None, top: int = 8
) -> str:
    lines = [
        result.summary(),
        result.layout.describe(wafer) if len(result.plan.cores) <= 16 else "",
    ]
    if sim is not None:
        step = float(sim.step_time)
        busy = float(getattr(sim, "flop_utilisation", 0.0))
        mfu = model_flops_utilisation(result, wafer, step)
        lines.append(
            f"step time {fmt_seconds(step)}; FLOP utilisation of the "
            f"{wafer.units(wafer.count_cores(result.plan.cores))} used {100 * busy:.1f} %; "
            f"model FLOPs utilisation of the wafer ({wafer.units(wafer.num_alive)}) "
            f"{100 * mfu:.3f} %"
        )
    lines.append(f"per-{wafer.unit} memory as planned (by liveness; fullest first):")
    lines.append(result.memory.table(top))
    return "\n".join(x for x in lines if x) + "\n"


__all__ = ["dominant_dtype", "fmt_seconds", "format_report", "model_flops_utilisation"]
