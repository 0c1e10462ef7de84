"""The AMCoDA seed machine: its actor programs, the seed's parallel plans, and a
cycle-level simulator that reproduces the authors' published runs.

    >>> from waferflow.backend_amcoda import seed_cnn_layers, generate_experiment, simulate_experiment
    >>> exp = generate_experiment(seed_cnn_layers(), "layers=ddt,ways=2")
    >>> simulate_experiment(exp).batch_ns
    11978000

``emit_experiment`` writes an experiment folder the authors' SystemC simulator runs,
``read_experiment`` reads one back and ``check_experiment`` checks one without running
it; ``compile_seed_plan`` compiles and simulates a seed plan in one call.

See docs/amcoda.md.
"""

from waferflow.backend_amcoda.checker import CheckIssue, check_experiment, format_issues
from waferflow.backend_amcoda.emit import emit_experiment
from waferflow.backend_amcoda.generate import generate_experiment
from waferflow.backend_amcoda.layers import (
    Cnn,
    ConvLayer,
    FcLayer,
    Layer,
    LossLayer,
    PoolLayer,
    cnn_layers_from_graph,
    seed_cnn_layers,
)
from waferflow.backend_amcoda.plans import Par, PlanKind, SeedPlan, parse_seed_plan
from waferflow.backend_amcoda.program import (
    HOST,
    ActorProgram,
    AluOp,
    Entry,
    Experiment,
    HostTransfer,
    InConfig,
    InMode,
    Mode,
    Op,
    Operand,
    OperandKind,
    OutConfig,
    OutMode,
    actor,
    inp,
    keep,
    out,
    packages,
    release,
    split_floats,
)
from waferflow.backend_amcoda.reader import Severity, read_experiment
from waferflow.backend_amcoda.reference import PUBLISHED, PublishedRun, published
from waferflow.backend_amcoda.report import SeedCompileResult, compile_seed_plan
from waferflow.backend_amcoda.simulate import (
    ActorStats,
    AmcodaResult,
    EntryTiming,
    LayerStats,
    Transfer,
    simulate_experiment,
)
from waferflow.backend_amcoda.validate import hazard_b_sites, validate_experiment

__all__ = [
    "HOST",
    "PUBLISHED",
    "ActorProgram",
    "ActorStats",
    "AluOp",
    "AmcodaResult",
    "CheckIssue",
    "Cnn",
    "ConvLayer",
    "Entry",
    "EntryTiming",
    "Experiment",
    "FcLayer",
    "HostTransfer",
    "InConfig",
    "InMode",
    "Layer",
    "LayerStats",
    "LossLayer",
    "Mode",
    "Op",
    "Operand",
    "OperandKind",
    "OutConfig",
    "OutMode",
    "Par",
    "PlanKind",
    "PoolLayer",
    "PublishedRun",
    "SeedCompileResult",
    "SeedPlan",
    "Severity",
    "Transfer",
    "actor",
    "check_experiment",
    "cnn_layers_from_graph",
    "compile_seed_plan",
    "emit_experiment",
    "format_issues",
    "generate_experiment",
    "hazard_b_sites",
    "inp",
    "keep",
    "out",
    "packages",
    "parse_seed_plan",
    "published",
    "read_experiment",
    "release",
    "seed_cnn_layers",
    "simulate_experiment",
    "split_floats",
    "validate_experiment",
]
