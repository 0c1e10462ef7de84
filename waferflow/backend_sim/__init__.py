"""The actor-level discrete-event simulator and the analytical estimator.

``simulate(plan, wafer)`` runs one step of an actor program on a wafer and returns a
``SimResult`` (step time, per-core and per-link figures, peak memory, critical path,
Chrome trace). ``estimate(plan, wafer)`` gives the same schedule without link
contention, from closed forms. The model is described in docs/simulator.md.
"""

from waferflow.backend_sim.analysis import PathStep
from waferflow.backend_sim.analytic import Estimate, estimate
from waferflow.backend_sim.config import SimConfig
from waferflow.backend_sim.costs import (
    ComputeModel,
    compute_ps,
    core_ps,
    roofline_ps,
    transit_ps,
)
from waferflow.backend_sim.results import CoreStat, LinkStat, SimResult
from waferflow.backend_sim.simulate import Run, run_plan, simulate

__all__ = [
    "ComputeModel",
    "CoreStat",
    "Estimate",
    "LinkStat",
    "PathStep",
    "Run",
    "SimConfig",
    "SimResult",
    "compute_ps",
    "core_ps",
    "estimate",
    "roofline_ps",
    "run_plan",
    "simulate",
    "transit_ps",
]
