"""waferflow: compile PyTorch models onto wafer-scale dataflow chips and score the result.

import waferflow as wf
plan = wf.compile(model, example_inputs, wafer="mesh16x16", mode="train")
print(plan.simulate())
"""

from waferflow.api import CompiledPlan, Report, StepTiming, compile, load_plan
from waferflow.errors import WaferflowError
from waferflow.ir.graph import Graph
from waferflow.ir.plan import Plan
from waferflow.ir.target import Wafer, get_wafer, list_presets

__version__ = "0.1.0"

presets = list_presets

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
