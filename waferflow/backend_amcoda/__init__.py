"""The AMCoDA seed machine: its actor programs, the seed's parallel plans, and a
cycle-level simulator that reproduces the authors' published runs.

    >>> from waferflow.backend_amcoda import seed_cnn_layers, generate_experiment, simulate_experiment
    >>> exp = generate_experiment(seed_cnn_layers(), "layers=ddt,ways=2")
    >>> simulate_experiment(exp).batch_ns
    11978000

See docs/amcoda.md.
"""

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
from waferflow.backend_amcoda.reference import PUBLISHED, PublishedRun, published
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
    "SeedPlan",
    "Transfer",
    "actor",
    "cnn_layers_from_graph",
    "generate_experiment",
    "hazard_b_sites",
    "inp",
    "keep",
    "out",
    "packages",
    "parse_seed_plan",
    "published",
    "release",
    "seed_cnn_layers",
    "simulate_experiment",
    "split_floats",
    "validate_experiment",
]
