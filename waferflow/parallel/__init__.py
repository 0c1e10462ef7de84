"""Parallel training plans: data, tensor and pipeline parallelism on a wafer.

``build_parallel_plan(graph, wafer, "dp=2,tp=4,pp=2,microbatches=4")`` shards a
traced training step over the wafer's cores and returns the actor program (a
``Plan`` for the simulator) with its memory report. The same steps run as passes
(``parallelize``, ``insert-collectives``, ``schedule``, ``lower-collectives``,
``plan-memory``; or all of them as ``parallel-lowering``). See docs/parallel.md.
"""

from waferflow.parallel.driver import ParallelResult, ParallelState, build_parallel_plan
from waferflow.parallel.layout import Layout, strip_layout
from waferflow.parallel.memory import CoreMemory, MemoryReport
from waferflow.parallel.plan_spec import (
    CollectiveAlgo,
    GradReduce,
    Granularity,
    LayerMode,
    Mesh,
    ParallelPlan,
    PipelineSchedule,
    parse_plan,
    plan_grid,
)
from waferflow.parallel.report import format_report, model_flops_utilisation

__all__ = [
    "CollectiveAlgo",
    "CoreMemory",
    "GradReduce",
    "Granularity",
    "LayerMode",
    "Layout",
    "MemoryReport",
    "Mesh",
    "ParallelPlan",
    "ParallelResult",
    "ParallelState",
    "PipelineSchedule",
    "build_parallel_plan",
    "format_report",
    "model_flops_utilisation",
    "parse_plan",
    "plan_grid",
    "strip_layout",
]
