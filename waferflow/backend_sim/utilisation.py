"""Utilisation by op class: for matmuls, convolutions, elementwise ops, ... the time the
cores spent on them, the same work at the peak of the unit that ran it, and what bound
them, so that a report says why a step is slow (``SimResult.op_classes``).

With a core model (``[core]``) every pass counts on its own (``costs.actor_passes``):
its class (``core_model.op_class``), its unit (the MAC array: MACs at the array's peak;
the vector unit: element ops at its peak; a ``core.rates`` entry or the wafer's peak:
FLOPs at that rate) and its largest term (compute, operand reads, result writes, a
coarse node's operand exchange). On the roofline an actor counts whole, by its op kind,
against the wafer's peak, bound by compute, SRAM bandwidth or the node network.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from waferflow.backend_sim.core_model import Bound, Unit, op_class
from waferflow.backend_sim.costs import (
    ActorTimes,
    duration_ps,
    ideal_compute_ps,
    node_network_ps,
)
from waferflow.ir.plan import Actor, Plan
from waferflow.ir.target.wafer import Wafer

_UNIT_NAME = {
    Unit.ARRAY: "MAC array",
    Unit.VECTOR: "vector unit",
    Unit.RATE: "core.rates",
    Unit.PEAK: "peak FLOP/s",
}


@dataclass(frozen=True, slots=True)
class ClassStat:
    """One op class over a step: ``busy_ps`` the core time spent on it (summed over
    cores), ``ideal_ps`` the same work at the peak of the unit(s) that ran it, and the
    busy time by what bound it (``bounds``, largest first)."""

    op_class: str
    units: tuple[str, ...]
    passes: int
    flops: int
    busy_ps: int
    ideal_ps: int
    bounds: tuple[tuple[str, int], ...]

    @property
    def utilisation(self) -> float:
        """Achieved fraction of the peak of the unit that ran it."""
        return self.ideal_ps / self.busy_ps if self.busy_ps else 0.0


class _Acc:
    __slots__ = ("bounds", "busy", "flops", "ideal", "passes", "units")

    def __init__(self) -> None:
        self.passes = 0
        self.flops = 0
        self.busy = 0
        self.ideal = 0
        self.units: list[str] = []
        self.bounds: dict[str, int] = {}

    def add(self, unit: str, flops: int, busy: int, ideal: int, bound: str) -> None:
        self.passes += 1
        self.flops += flops
        self.busy += busy
        self.ideal += ideal
        if unit not in self.units:
            self.units.append(unit)
        self.bounds[bound] = self.bounds.get(bound, 0) + busy


def op_classes(plan: Plan, wafer: Wafer) -> tuple[ClassStat, ...]:
    """Every op class in ``plan`` on ``wafer``, the busiest first (ties by name)."""
    acc: dict[str, _Acc] = {}
    times = ActorTimes(wafer)
    # a pass's figures, by the identity of its (shared, memoised) PassTime
    figures: dict[int, tuple[str, str, int, int, int, str]] = {}
    for a in plan.actors:
        if wafer.core is None:
            _roofline(a, wafer, acc)
            continue
        for p in times.passes(a):
            got = figures.get(id(p))
            if got is None:
                got = figures[id(p)] = (
                    p.op_class, _UNIT_NAME[p.unit], p.flops,
                    duration_ps(p.cycles, wafer.clock_hz), _ideal_ps(p.ideal, wafer.clock_hz),
                    p.bound.value,
                )  # fmt: skip
            cls, unit, flops, busy, ideal, bound = got
            c = acc.get(cls)
            if c is None:
                c = acc[cls] = _Acc()
            c.add(unit, flops, busy, ideal, bound)
    stats = [
        ClassStat(
            op_class=name,
            units=tuple(c.units),
            passes=c.passes,
            flops=c.flops,
            busy_ps=c.busy,
            ideal_ps=c.ideal,
            bounds=tuple(sorted(c.bounds.items(), key=lambda kv: (-kv[1], kv[0]))),
        )
        for name, c in acc.items()
    ]
    return tuple(sorted(stats, key=lambda s: (-s.busy_ps, s.op_class)))


def _ideal_ps(cycles: Fraction, clock_hz: float) -> int:
    q = cycles * 10**12 / Fraction(clock_hz)
    return -(-q.numerator // q.denominator)


def _roofline(a: Actor, wafer: Wafer, acc: dict[str, _Acc]) -> None:
    from waferflow.backend_sim.costs import roofline_ps

    busy = roofline_ps(a, wafer)
    if not busy:
        return
    coord = divmod(a.core, wafer.cols)
    compute = ideal_compute_ps(a, wafer)
    nbytes = a.bytes_read + a.bytes_written
    memory = duration_ps(nbytes, wafer.core_sram_bandwidth(coord)) if nbytes else 0
    network = node_network_ps(a, wafer)
    terms = ((compute, Bound.COMPUTE.value), (memory, "SRAM bandwidth"),
             (network, Bound.NETWORK.value))  # fmt: skip
    bound = max(terms, key=lambda t: t[0])[1]
    acc.setdefault(op_class(a.op_kind), _Acc()).add(
        _UNIT_NAME[Unit.PEAK], a.flops, busy, compute, bound
    )


def class_lines(stats: tuple[ClassStat, ...], top: int = 6) -> list[str]:
    """The summary's lines: per class its share of the busy time, its utilisation of
    its unit's peak, and what bound it."""
    total = sum(s.busy_ps for s in stats)
    if not total:
        return []
    lines = [
        "  op classes (share of compute time; achieved fraction of the unit's peak; bound by):"
    ]
    for s in stats[:top]:
        shares = [(b, 100 * t / s.busy_ps) for b, t in s.bounds]
        bounds = ", ".join(f"{b} {share:.0f} %" for b, share in shares if share >= 0.5)
        lines.append(
            f"    {s.op_class:<14}{100 * s.busy_ps / total:5.1f} %  "
            f"{100 * s.utilisation:5.1f} % of {' / '.join(s.units)}"
            + (f"  ({bounds})" if bounds else "")
        )
    rest = stats[top:]
    if rest:
        share = 100 * sum(s.busy_ps for s in rest) / total
        lines.append(f"    {len(rest)} more class(es), {share:.1f} % of compute time")
    return lines


__all__ = ["ClassStat", "class_lines", "op_classes"]
