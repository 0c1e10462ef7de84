"""Quality of the CP-SAT placement against simple baselines and lower bounds.

Instances: synthetic pipeline floorplans (transformer-like stages with uneven layer
counts, a light embedding stage and a heavy LM-head stage; activations and their
gradients between neighbouring stages) and random layered actor graphs. For each:
the CP-SAT objective, the best lower bound, the gap, the solve effort (deterministic
seconds, which decide the limits, and wall seconds, which depend on machine load),
each baseline's objective as a ratio to CP-SAT, and the techniques that were used.

Targets (from the placement issue), checked on deterministic time:
  * up to 8 groups: gap (objective - bound) / objective <= 1% within 10 s;
  * up to 32 groups: objective within 10% of the best lower bound within 30 s.

Real models (after the synthetic table; ``--no-models`` skips them): GPT-2-small and
Llama-7B training steps with parallel plans on coarse views of WSE-2, and the seed's
CNN (one actor per op, and a pipeline) on Dojo-class meshes, each placed end to end by
``waferflow.passes.place`` (CP-SAT floorplans, block tilings, rank LNS) beside the
baseline layouts. Reported: which placement was kept, its traffic x distance (bytes x
hops of every message) against the best baseline's, its step time against the fastest
baseline's, the solvers' status and gap, and the wall time. Targets: at least 20% less
traffic x distance than the best baseline, and a step never slower than the fastest
baseline's. Add one as a :class:`ModelInstance` in :func:`model_instances`.

Run: ``.venv/bin/python benchmarks/bench_mapper.py`` (``--quick`` for short limits,
``--only NAME`` for one instance). To add an instance (e.g. a real model's stages),
append an :class:`Instance` to :func:`instances`.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from waferflow.mapper.placement import (
    AssignProblem,
    ComparisonTable,
    DeadCores,
    FloorplanProblem,
    Flow,
    Grid,
    Group,
    ObjectiveWeights,
    SolveOptions,
    compare,
)

CORE_FLOPS = 1e12  # a Dojo-class core: ~1 TFLOP/s, 1.25 MB SRAM, 512 GB/s links
CORE_SRAM = 1_250_000
LINK_BW = 512e9
D2D_BW = 128e9


@dataclass(frozen=True)
class Target:
    kind: str  # "gap": (obj - bound) / obj <= limit; "bound": obj / bound - 1 <= limit
    limit: float
    seconds: float  # deterministic seconds

    def met(self, objective: float, bound: float, det_time: float) -> bool:
        if det_time > self.seconds * 1.001:
            return False
        if self.kind == "gap":
            return objective <= 0 or (objective - bound) / objective <= self.limit + 1e-12
        return bound > 0 and objective / bound - 1 <= self.limit + 1e-12

    def __str__(self) -> str:
        what = "gap" if self.kind == "gap" else "above bound"
        return f"{what} <= {100 * self.limit:g}% in {self.seconds:g} s"


@dataclass(frozen=True)
class Instance:
    name: str
    build: Callable[[], FloorplanProblem | AssignProblem]
    time_limit: float  # deterministic seconds
    target: Target | None = None


@dataclass(frozen=True)
class Row:
    instance: Instance
    size: str
    table: ComparisonTable
    target_met: bool | None


# --- instance generators --------------------------------------------------------------


def pipeline(
    stages: int,
    rows: int,
    cols: int,
    *,
    layers: int,
    d_model: int,
    vocab: int,
    tokens: int,
    dies: int = 1,
    dead_fraction: float = 0.0,
    seed: int = 0,
) -> FloorplanProblem:
    """A transformer training step cut into pipeline stages.

    Layers are dealt out as evenly as they go (so some stages hold one more layer than
    others: the realistic skew), the first stage also holds the embedding (memory, no
    compute), the last the LM head (compute). Work is forward + backward FLOPs per
    micro-batch; memory is 40% of the wafer's SRAM spread by parameter count; each
    boundary carries the activations forward and their gradients back.
    """
    rng = np.random.default_rng(seed)
    per = [layers // stages + (1 if s < layers % stages else 0) for s in range(stages)]
    layer_flops = 6 * 12 * d_model * d_model * tokens
    head_flops = 6 * d_model * vocab * tokens
    params = [12 * d_model * d_model * n for n in per]
    params[0] += d_model * vocab  # embedding table
    params[-1] += d_model * vocab // 4  # final norm, head bias, buffers
    total_mem = 0.4 * rows * cols * CORE_SRAM
    scale = total_mem / sum(params)
    groups = []
    for s in range(stages):
        work = layer_flops * per[s] * float(rng.uniform(0.97, 1.03))
        if s == stages - 1:
            work += head_flops
        groups.append(Group(f"stage{s}", work, int(params[s] * scale)))
    act = 2.0 * tokens * d_model  # bf16 activations
    flows = [Flow(s, s + 1, act) for s in range(stages - 1)] + [
        Flow(s + 1, s, act) for s in range(stages - 1)
    ]
    dead: frozenset[tuple[int, int]] = frozenset()
    if dead_fraction > 0:
        k = round(dead_fraction * rows * cols)
        cells = rng.choice(rows * cols, size=k, replace=False)
        dead = frozenset((int(c) // cols, int(c) % cols) for c in cells)
    weights = ObjectiveWeights.seconds(LINK_BW, D2D_BW if dies > 1 else None, parallel_links=rows)
    return FloorplanProblem(
        Grid(rows, cols, dead, dies, dies),
        tuple(groups),
        tuple(flows),
        CORE_FLOPS,
        CORE_SRAM,
        weights,
        DeadCores.IDLE if dead else DeadCores.OBSTACLE,
    )


def layered_graph(n: int, rows: int, cols: int, seed: int = 0) -> AssignProblem:
    """Random layers of about sqrt(n) actors; every actor takes 1-3 inputs from the layer
    before, with log-normal message sizes (median ~1 MB)."""
    rng = np.random.default_rng(seed)
    width = max(2, round(math.sqrt(n)))
    layers = [list(range(i, min(n, i + width))) for i in range(0, n, width)]
    flows = []
    for prev, cur in itertools.pairwise(layers):
        for b in cur:
            k = min(len(prev), int(rng.integers(1, 4)))
            for a in rng.choice(prev, size=k, replace=False):
                flows.append(Flow(int(a), b, float(round(rng.lognormal(14, 1.0)))))
    return AssignProblem(Grid(rows, cols), n, (CORE_SRAM // 2,) * n, tuple(flows), CORE_SRAM)


def instances(quick: bool = False) -> list[Instance]:
    f = 0.2 if quick else 1.0
    gpt = {"d_model": 1024, "vocab": 50304, "tokens": 2048}
    return [
        Instance(
            "pipe8-16x16",
            lambda: pipeline(8, 16, 16, layers=20, **gpt),
            10 * f,
            Target("gap", 0.01, 10),
        ),
        Instance(
            "pipe16-64x64",
            lambda: pipeline(16, 64, 64, layers=40, dies=2, **gpt),
            30 * f,
            Target("bound", 0.10, 30),
        ),
        Instance(
            "pipe32-64x64",
            lambda: pipeline(32, 64, 64, layers=72, dies=2, **gpt),
            30 * f,
            Target("bound", 0.10, 30),
        ),
        Instance(
            "pipe16-64x64-1%dead",
            lambda: pipeline(16, 64, 64, layers=40, dies=2, dead_fraction=0.01, **gpt),
            30 * f,
            Target("bound", 0.10, 30),
        ),
        Instance("graph16-5x5", lambda: layered_graph(16, 5, 5), 10 * f),
        Instance("graph64-9x9", lambda: layered_graph(64, 9, 9), 10 * f),
        Instance("graph256-17x17", lambda: layered_graph(256, 17, 17), 10 * f),
    ]


# --- running and printing -------------------------------------------------------------


def _size(p: FloorplanProblem | AssignProblem) -> str:
    g = p.grid
    dead = f", {len(g.dead)} dead" if g.dead else ""
    dies = f", {g.die_rows}x{g.die_cols} dies" if g.die_rows * g.die_cols > 1 else ""
    n = f"{len(p.groups)} groups" if isinstance(p, FloorplanProblem) else f"{p.n_actors} actors"
    return f"{n} on {g.rows}x{g.cols}{dies}{dead}"


def run(quick: bool = False, only: str | None = None, seed: int = 0) -> list[Row]:
    out = []
    for inst in instances(quick):
        if only is not None and only != inst.name:
            continue
        problem = inst.build()
        table = compare(problem, SolveOptions(time_limit=inst.time_limit, seed=seed))
        s = table.solver
        met = (
            None
            if inst.target is None
            else inst.target.met(s.objective, s.best_bound, s.deterministic_time)
        )
        out.append(Row(inst, _size(problem), table, met))
        print(f"  {inst.name}: {s.summary()}", file=sys.stderr, flush=True)
    return out


def _short(techniques: tuple[str, ...]) -> str:
    keep = [t for t in techniques if not t.startswith(("redundant:", "formulation:"))]
    return ",".join(keep)


def format_rows(rows: list[Row]) -> str:
    head = (
        "instance",
        "size",
        "CP-SAT",
        "bound",
        "gap",
        "det s",
        "wall s",
        "baselines / CP-SAT",
        "target",
    )
    body = []
    for r in rows:
        s = r.table.solver
        bases = []
        for b in r.table.rows[1:]:
            bases.append(f"{b.method} {b.ratio:.3f}" if b.ratio is not None else f"{b.method} n/a")
        tgt = "-" if r.instance.target is None else ("met" if r.target_met else "NOT met")
        body.append(
            (
                r.instance.name,
                r.size,
                f"{s.objective:.5g}",
                f"{s.best_bound:.5g}",
                f"{100 * s.gap:.2f}%",
                f"{s.deterministic_time:.1f}",
                f"{s.wall_time:.1f}",
                "; ".join(bases),
                tgt,
            )
        )
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [head, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append("techniques:")
    for r in rows:
        lines.append(f"  {r.instance.name}: {_short(r.table.solver.techniques)}")
    lines.append("")
    lines.append("targets (deterministic seconds):")
    for r in rows:
        if r.instance.target is not None:
            s = r.table.solver
            above = s.objective / s.best_bound - 1 if s.best_bound > 0 else math.inf
            lines.append(
                f"  {r.instance.name}: {r.instance.target} -> {'met' if r.target_met else 'NOT met'} "
                f"(gap {100 * s.gap:.2f}%, {100 * above:.2f}% above bound, {s.deterministic_time:.1f} s)"
            )
    return "\n".join(lines)


# --- real models, placed end to end ---------------------------------------------------


@dataclass(frozen=True)
class ModelInstance:
    name: str
    model: str  # zoo name
    wafer: str
    coarsen: int
    plan: str  # parallel plan; "" places the one-actor-per-op lowering
    time_limit: float  # deterministic seconds for the whole placement
    batch: int | None = None
    seq: int | None = None
    evaluate: str = "auto"


def model_instances(quick: bool = False) -> list[ModelInstance]:
    f = 0.25 if quick else 1.0
    return [
        ModelInstance("gpt2-wse2/16-tp12-pp12", "hf:gpt2", "wse2", 16,
                      "dp=1,tp=12,pp=12,microbatches=4", 20 * f, batch=8, seq=128),
        ModelInstance("gpt2-wse2/16-dp2-tp12-pp6", "hf:gpt2", "wse2", 16,
                      "dp=2,tp=12,pp=6,microbatches=4", 20 * f, batch=8, seq=128),
        ModelInstance("llama7b-wse2/84-tp8-pp8", "hf:llama-7b", "wse2", 84,
                      "dp=1,tp=8,pp=8,microbatches=2", 20 * f, batch=2, seq=256),
        ModelInstance("cnn-dojo-d1-pipeline", "cnn:amcoda", "dojo-d1", 1,
                      "dp=2,pp=4,microbatches=2", 10 * f),
        ModelInstance("cnn-mesh16x16-actors", "cnn:amcoda", "mesh16x16", 1, "", 10 * f),
    ]  # fmt: skip


@dataclass(frozen=True)
class ModelRow:
    instance: ModelInstance
    result: object  # waferflow.passes.place_result.PlacedResult
    wall: float  # seconds: trace + placement

    def baseline_optimal(self) -> bool:
        """Whether the solver proved a baseline's rank (actor) traffic optimal."""
        return _baseline_optimal(self.result)

    def ratios(self) -> tuple[float, float, float]:
        """(traffic, step) of the kept plan over the best baseline's, and the least
        traffic of any CP-SAT placement over the best baseline's."""
        r = self.result
        bases = [c for c in r.candidates if not c.method.startswith("cp-sat")]
        least = min(c.byte_hops for c in bases)
        traffic = r.kept.byte_hops / least
        step = r.kept.step_time / min(c.step_time for c in bases)
        cp = min(c.byte_hops for c in r.candidates if c.method.startswith("cp-sat")) / least
        return traffic, step, cp


def _baseline_optimal(result) -> bool:
    bases = [c for c in result.candidates if not c.method.startswith("cp-sat")]
    bounds = [rep.best_bound for name, rep in result.reports if name in ("ranks", "actors")]
    best = min((c.rank_cost for c in bases if c.rank_cost is not None), default=None)
    return bool(bounds) and best is not None and best <= max(bounds) * (1 + 1e-6)


def run_models(quick: bool = False, only: str | None = None, seed: int = 0) -> list[ModelRow]:
    import time

    from waferflow.frontend import load_model, trace
    from waferflow.ir.target import get_wafer
    from waferflow.passes.lower_plan import lower_to_plan
    from waferflow.passes.place import PlaceOptions, place_actors, place_parallel

    out = []
    for inst in model_instances(quick):
        if only is not None and only != inst.name:
            continue
        t0 = time.perf_counter()
        b = load_model(inst.model, batch=inst.batch, seq=inst.seq)
        g = trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn, name=b.name)
        w = get_wafer(inst.wafer)
        w = w.coarsen(inst.coarsen) if inst.coarsen > 1 else w
        opts = PlaceOptions(time_limit=inst.time_limit, seed=seed, evaluate=inst.evaluate)
        if inst.plan:
            res = place_parallel(g, w, inst.plan, options=opts)
        else:
            res = place_actors(lower_to_plan(g, w), w, options=opts)
        row = ModelRow(inst, res, time.perf_counter() - t0)
        out.append(row)
        print(f"  {inst.name}: kept {res.chosen}, {row.wall:.1f} s", file=sys.stderr, flush=True)
    return out


def format_model_rows(rows: list[ModelRow]) -> str:
    head = ("instance", "plan", "kept", "traffic / best baseline", "step / fastest baseline",
            "best CP-SAT traffic / best baseline", "solvers (status, gap)", "wall s",
            "targets")  # fmt: skip
    body = []
    for r in rows:
        t, st, cp = r.ratios()
        solvers = "; ".join(
            f"{name} {rep.status.value} {100 * rep.gap:.1f}%" for name, rep in r.result.reports
        )
        ok = ("met" if t <= 0.8 else "traffic NOT met") + (
            "" if st <= 1 + 1e-12 else ", step NOT met"
        )
        if t > 0.8 and r.baseline_optimal():
            ok = "n/a: a baseline is proven optimal" + ("" if st <= 1 + 1e-12 else ", step NOT met")
        body.append((r.instance.name, r.instance.plan or "one actor per op", r.result.chosen,
                     f"{t:.3f}", f"{st:.3f}", f"{cp:.3f}", solvers, f"{r.wall:.1f}",
                     ok))  # fmt: skip
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [head, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        lines += ["", f"{r.instance.name}:", str(r.result)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a fifth of the time limits")
    ap.add_argument("--only", help="run one instance by name")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-models", action="store_true", help="skip the real-model placements")
    args = ap.parse_args(argv)
    names = {i.name for i in instances()}
    if args.only is None or args.only in names:
        rows = run(quick=args.quick, only=args.only, seed=args.seed)
        print(format_rows(rows))
    if not args.no_models and (args.only is None or args.only not in names):
        model_rows = run_models(quick=args.quick, only=args.only, seed=args.seed)
        if model_rows:
            print("\nreal models, placed end to end (waferflow.passes.place):")
            print(format_model_rows(model_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
