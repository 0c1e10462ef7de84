"""Pipeline stages: cut the forward pass into contiguous, balanced pieces.

* A **layer key** is an op's module path cut after its first numeric component
  (``transformer.h.3.attn.c_attn`` -> ``transformer.h.3``), or the whole path when it
  has none (``conv1``, ``lm_head``). A **unit** is a maximal run of forward ops (graph
  order) with the same key: the pieces a stage boundary never splits.
* Units are cut into ``pp`` contiguous stages minimising the slowest stage, where a
  unit costs the roofline time of its forward ops plus the backward ops of the same
  key, subject to each stage's estimated memory fitting one core (when no cut fits,
  the balanced cut is kept and ``plan-memory`` refuses the plan with the numbers).
  With ``cut=layer`` each layer is a stage instead (``waferflow.parallel.per_layer``),
  with its own number of ranks (``StageAssignment.widths``).
* Backward and optimizer ops go to the stage that owns their key (the forward layer
  they differentiate / update); ops without a usable key (residual-gradient adds,
  the loss) follow their operands: a backward op joins the earliest stage among its
  operands' producers, since gradients flow from later stages to earlier ones.
* Per-layer patterns (``layers=ddt``) give one letter to every key whose forward
  ops hold a matmul or convolution with a parameter, in order of first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from waferflow.errors import PlanError
from waferflow.ir.graph import Graph, Op, Phase, Value
from waferflow.ir.opkind import MATMUL_LIKE, OPTIMIZER, SOURCES, VIEWS, OpKind
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.plan_spec import LayerMode, ParallelPlan, StageCut

K = OpKind


def layer_key(module: str) -> str:
    parts = module.split(".") if module else []
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return module


def root_value(v: Value) -> Value:
    """Follow views back to the value that holds the data."""
    while v.producer is not None and v.producer.kind in VIEWS and v.producer.operands:
        v = v.producer.operands[0]
    return v


def param_of(v: Value) -> Op | None:
    p = root_value(v).producer
    return p if p is not None and p.kind in (K.PARAM, K.BUFFER) else None


@dataclass(frozen=True)
class Unit:
    key: str
    ops: tuple[int, ...]  # forward op indices, graph order


@dataclass
class StageAssignment:
    """The stage of every non-source op (sources live wherever they are used)."""

    pp: int
    units: tuple[Unit, ...]
    unit_stage: tuple[int, ...]
    stage_of: dict[Op, int]
    stage_cost_s: tuple[float, ...]  # estimated forward+backward seconds per stage
    widths: tuple[int, ...] = ()  # ranks per stage when they differ (cut=layer); () = all alike

    def width(self, stage: int, default: int) -> int:
        return self.widths[stage] if self.widths else default

    def of(self, op: Op) -> int:
        return self.stage_of[op]


def forward_units(graph: Graph) -> list[Unit]:
    units: list[Unit] = []
    cur_key: str | None = None
    cur: list[int] = []
    for i, op in enumerate(graph.ops):
        if op.is_source or op.phase is not Phase.FWD:
            continue
        key = layer_key(op.prov.module)
        if key != cur_key and cur:
            units.append(Unit(cur_key or "", tuple(cur)))
            cur = []
        cur_key = key
        cur.append(i)
    if cur:
        units.append(Unit(cur_key or "", tuple(cur)))
    return units


def pattern_layers(graph: Graph) -> list[str]:
    """Keys that get a letter in a per-layer pattern, in forward order."""
    keys: list[str] = []
    for op in graph.ops:
        weighted = any(param_of(v) is not None for v in op.operands)
        if op.phase is Phase.FWD and op.kind in MATMUL_LIKE and weighted:
            key = layer_key(op.prov.module)
            if key not in keys:
                keys.append(key)
    return keys


def layer_modes(graph: Graph, plan: ParallelPlan) -> dict[int, LayerMode]:
    """The pattern letter of every op of a pattern layer (empty without a pattern)."""
    if not plan.layers:
        return {}
    keys = pattern_layers(graph)
    if len(plan.layers) != len(keys):
        listed = ", ".join(k or "(top level)" for k in keys)
        raise PlanError(
            f"layers={plan.layers!r} has {len(plan.layers)} letter(s) but @{graph.name} has "
            f"{len(keys)} layer(s) with weights: {listed}; give one letter (d, t, r or s) per "
            "layer, in this order (or fewer, for the seed machine's per-layer form: the "
            "layers after them on one rank each)"
        )
    mode_of = dict(zip(keys, plan.layer_modes(), strict=True))
    out: dict[int, LayerMode] = {}
    for i, op in enumerate(graph.ops):
        if op.is_source:
            continue
        mode = mode_of.get(layer_key(op.prov.module))
        if mode is not None:
            out[i] = mode
    return out


def _op_seconds(op: Op, wafer: Wafer) -> float:
    dtype = op.results[0].type.dtype if op.results else None
    peak = wafer.peak(dtype) if dtype is not None and dtype.is_float else wafer.peak_flops[0][1]
    return max(op.cost.flops / peak, op.cost.bytes / wafer.sram_bandwidth)


def _unit_figures(
    graph: Graph, units: Sequence[Unit], wafer: Wafer, plan: ParallelPlan
) -> tuple[list[float], list[float]]:
    """Per unit: estimated seconds (fwd + bwd of its key) and bytes per core."""
    first_unit: dict[str, int] = {}
    for u, unit in enumerate(units):
        first_unit.setdefault(unit.key, u)
    cost = [0.0] * len(units)
    mem = [0.0] * len(units)
    unit_of_op = {i: u for u, unit in enumerate(units) for i in unit.ops}
    state: dict[str, int] = {}  # optimizer state bytes per param
    for op in graph.ops:
        if op.kind in OPTIMIZER or op.phase is Phase.OPT:
            params = [p for p in (param_of(v) for v in op.operands) if p is not None]
            bufs = [p for p in params if p.kind is K.BUFFER]
            weights = [p for p in params if p.kind is K.PARAM]
            if weights:
                w = weights[0].results[0].name
                state[w] = max(state.get(w, 0), sum(b.results[0].type.nbytes for b in bufs))
    users = graph.users()
    used: set[str] = set()
    ways = plan.tp * (plan.ways if plan.layers else 1)
    batch_div = (plan.ways if plan.layers else plan.dp) * plan.microbatches
    inflight = plan.microbatches if plan.schedule.value == "gpipe" else plan.pp
    for i, op in enumerate(graph.ops):
        if op.is_source:
            continue
        if op.phase is Phase.FWD:
            u = unit_of_op[i]
            cost[u] += _op_seconds(op, wafer)
            for v in op.operands:
                p = param_of(v)
                if p is not None and p.kind is K.PARAM and p.results[0].name not in used:
                    name = p.results[0].name
                    used.add(name)
                    mem[u] += p.results[0].type.nbytes * 2 / ways + state.get(name, 0) / ways
            for r in op.results:
                if any(c.phase is Phase.BWD for c in users.get(r, [])):
                    mem[u] += r.type.nbytes / batch_div * inflight / max(1, plan.tp)
        elif op.phase is Phase.BWD:
            u2 = first_unit.get(layer_key(op.prov.module))
            if u2 is not None:
                cost[u2] += _op_seconds(op, wafer)
    return cost, mem


def partition(cost: Sequence[float], mem: Sequence[float], pp: int, capacity: float) -> list[int]:
    """Stage of each unit: contiguous, ``pp`` non-empty stages, the slowest stage as
    fast as possible among cuts whose stages fit ``capacity`` (else ignoring memory)."""
    n = len(cost)
    if pp > n:
        raise PlanError(
            f"pp={pp} stages but the forward pass has only {n} layer unit(s) to cut "
            f"between; choose pp <= {n}"
        )
    pre_c = [0.0]
    pre_m = [0.0]
    for c, m in zip(cost, mem, strict=True):
        pre_c.append(pre_c[-1] + c)
        pre_m.append(pre_m[-1] + m)
    for respect_memory in (True, False):
        inf = float("inf")
        # best[k][j]: minimal max-stage cost covering units[:j] with k stages
        best = [[inf] * (n + 1) for _ in range(pp + 1)]
        cut = [[0] * (n + 1) for _ in range(pp + 1)]
        best[0][0] = 0.0
        for k in range(1, pp + 1):
            for j in range(k, n - (pp - k) + 1):
                for i in range(k - 1, j):
                    if best[k - 1][i] == inf:
                        continue
                    if respect_memory and pre_m[j] - pre_m[i] > capacity:
                        continue
                    v = max(best[k - 1][i], pre_c[j] - pre_c[i])
                    if v < best[k][j] - 1e-18:
                        best[k][j], cut[k][j] = v, i
        if best[pp][n] < inf:
            stages = [0] * n
            j = n
            for k in range(pp, 0, -1):
                i = cut[k][j]
                for u in range(i, j):
                    stages[u] = k - 1
                j = i
            return stages
    raise AssertionError("partition without memory limits always succeeds")


def assign_stages(graph: Graph, wafer: Wafer, plan: ParallelPlan) -> StageAssignment:
    units = forward_units(graph)
    pp = plan.pp
    if not units:
        raise PlanError(f"@{graph.name} has no forward ops to cut into pp={pp} stages")
    cost, mem = _unit_figures(graph, units, wafer, plan)
    widths: tuple[int, ...] = ()
    if plan.cut is StageCut.LAYER:  # one stage per layer (waferflow.parallel.per_layer)
        from waferflow.parallel.per_layer import layer_of_units, stage_letters, stage_widths

        unit_stage = layer_of_units(graph, units)
        widths = stage_widths(plan, stage_letters(graph, plan, units))
    elif pp > 1:
        unit_stage = partition(cost, mem, pp, float(wafer.sram_bytes))
    else:
        unit_stage = [0] * len(units)
    stage = [-1] * len(graph.ops)
    key_stages: dict[str, set[int]] = {}
    for unit, s in zip(units, unit_stage, strict=True):
        key_stages.setdefault(unit.key, set()).add(s)
        for i in unit.ops:
            stage[i] = s
    param_stage: dict[str, int] = {}
    for i, op in enumerate(graph.ops):
        if op.phase is Phase.FWD and not op.is_source:
            for v in op.operands:
                p = param_of(v)
                if p is not None:
                    param_stage.setdefault(p.results[0].name, stage[i])
    index = {id(op): i for i, op in enumerate(graph.ops)}
    for i, op in enumerate(graph.ops):
        if op.kind in SOURCES or stage[i] >= 0:
            continue
        stage[i] = _follow(op, stage, index, key_stages, param_stage, pp)
    stage_cost = [0.0] * pp
    for c, s in zip(cost, unit_stage, strict=True):
        stage_cost[s] += c
    stage_of = {op: stage[i] for i, op in enumerate(graph.ops) if stage[i] >= 0}
    return StageAssignment(pp, tuple(units), tuple(unit_stage), stage_of, tuple(stage_cost), widths)


def _follow(
    op: Op,
    stage: list[int],
    index: dict[int, int],
    key_stages: dict[str, set[int]],
    param_stage: dict[str, int],
    pp: int,
) -> int:
    key = layer_key(op.prov.module)
    owners = key_stages.get(key) if key else None
    if owners is not None and len(owners) == 1:
        return next(iter(owners))
    if op.phase is Phase.OPT or op.kind in OPTIMIZER:
        for v in op.operands:
            p = param_of(v)
            if p is not None and p.results[0].name in param_stage:
                return param_stage[p.results[0].name]
    found = []
    for v in op.operands:
        prod = root_value(v).producer
        if prod is not None and not prod.is_source:
            s = stage[index[id(prod)]]
            if s >= 0:
                found.append(s)
    if found:
        return min(found) if op.phase is not Phase.FWD else max(found)
    return pp - 1 if op.phase is Phase.BWD else 0


__all__ = [
    "StageAssignment",
    "Unit",
    "assign_stages",
    "forward_units",
    "layer_key",
    "layer_modes",
    "param_of",
    "partition",
    "pattern_layers",
    "root_value",
]
