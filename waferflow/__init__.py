"""waferflow: compile PyTorch models onto wafer-scale dataflow chips and score the result.

import waferflow as wf
plan = wf.compile(model, example_inputs, wafer="mesh16x16", mode="train")
print(plan.simulate())

The names below are imported on first use, so that ``import waferflow.cli`` is
instant and the command line owns Ctrl-C from its first moment (``interrupt.py``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, tuple[str, str]] = {
    "CompiledPlan": ("waferflow.api", "CompiledPlan"),
    "Report": ("waferflow.api", "Report"),
    "StepTiming": ("waferflow.api", "StepTiming"),
    "compile": ("waferflow.api", "compile"),
    "load_plan": ("waferflow.api", "load_plan"),
    "WaferflowError": ("waferflow.errors", "WaferflowError"),
    "Graph": ("waferflow.ir.graph", "Graph"),
    "Plan": ("waferflow.ir.plan", "Plan"),
    "Wafer": ("waferflow.ir.target", "Wafer"),
    "get_wafer": ("waferflow.ir.target", "get_wafer"),
    "list_presets": ("waferflow.ir.target", "list_presets"),
    "presets": ("waferflow.ir.target", "list_presets"),
}

if TYPE_CHECKING:
    from waferflow.api import CompiledPlan, Report, StepTiming, compile, load_plan
    from waferflow.errors import WaferflowError
    from waferflow.ir.graph import Graph
    from waferflow.ir.plan import Plan
    from waferflow.ir.target import Wafer, get_wafer, list_presets

    presets = list_presets


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:  # a subpackage, as an eager import would have set it: wf.ir, wf.viz
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module 'waferflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(target[0]), target[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "CompiledPlan",
    "Graph",
    "Plan",
    "Report",
    "StepTiming",
    "Wafer",
    "WaferflowError",
    "__version__",
    "compile",
    "get_wafer",
    "list_presets",
    "load_plan",
    "presets",
]
