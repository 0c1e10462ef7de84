"""Options of a simulation (the wafer itself is passed separately)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from waferflow.backend_sim.costs import ComputeModel, compute_ps, view_packet_bytes
from waferflow.errors import ConfigError
from waferflow.fileio import short
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer

ENGINES = ("auto", "compiled", "python")  # SimConfig.engine: the event loop to run


@dataclass(frozen=True)
class SimConfig:
    """``packet_bytes`` overrides the wafer's packet size (``flow.packet_bytes``, or
    ``costs.view_packet_bytes`` without flow control). ``route_order`` is the
    dimension order of default routes. ``compute`` gives each actor's duration in
    picoseconds (by default ``compute_ps``: the wafer's core model, or the roofline
    when it has none). ``engine`` picks the event loop: ``"auto"`` (compiled with
    numba when it can, else pure Python), ``"compiled"`` or ``"python"``; both give
    the same run, event for event (``backend_sim.engine.run``)."""

    packet_bytes: int | None = None
    route_order: str = "xy"
    compute: ComputeModel = compute_ps
    verify: bool = True  # verify the plan against the wafer first
    engine: str = "auto"

    def __post_init__(self) -> None:
        if self.packet_bytes is not None and (
            not isinstance(self.packet_bytes, int) or self.packet_bytes <= 0
        ):
            raise ConfigError(
                f"SimConfig.packet_bytes must be a positive int, got {self.packet_bytes!r}"
            )
        if self.engine not in ENGINES:
            raise ConfigError(
                f"SimConfig.engine must be one of {', '.join(ENGINES)}; got {self.engine!r}"
            )
        if self.route_order not in ("xy", "yx"):
            raise ConfigError(
                f"SimConfig.route_order must be 'xy' or 'yx', got {self.route_order!r}"
            )


def check_call(plan: Any, wafer: Any, config: Any) -> None:
    """The arguments of ``simulate`` / ``estimate``: a ``Plan``, a ``Wafer`` (a preset's
    name or a ``CompiledPlan`` failed deep inside with an AttributeError) and a
    ``SimConfig`` or ``None``."""
    if not isinstance(plan, Plan):
        hint = " (use its .plan, or CompiledPlan.simulate())" if hasattr(plan, "plan") else ""
        raise ConfigError(
            f"simulate: plan must be a waferflow Plan, got {type(plan).__name__}{hint}"
        )
    if not isinstance(wafer, Wafer):
        raise ConfigError(
            f"simulate: wafer must be a Wafer, got {short(wafer)}: make one with "
            "waferflow.get_wafer(NAME or PATH.toml), or use the plan's own "
            "(CompiledPlan.wafer)"
        )
    if config is not None and not isinstance(config, SimConfig):
        raise ConfigError(f"simulate: config must be a SimConfig or None, got {short(config)}")


def for_wafer(config: SimConfig | None, wafer: Wafer) -> SimConfig:
    """``config`` with its packet size settled for ``wafer``: a wafer without flow
    control gets ``costs.view_packet_bytes`` unless the config names one."""
    cfg = config or SimConfig()
    if cfg.packet_bytes is None and wafer.flow is None:
        return replace(cfg, packet_bytes=view_packet_bytes(wafer))
    return cfg
