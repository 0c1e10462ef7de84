"""Parallel training plans on a coarsened WSE-2: how fast they build and simulate, how
fast the step is, and whether it fits.

For GPT-2-small and Llama-7B training steps (traced on meta, SGD), every plan of a
small grid of (dp, tp, pp, micro-batches; 1F1B) is built with ``build_parallel_plan``
on ``wse2.coarsen(k)`` (default k = 84: 12 x 9 nodes of 84 x 84 cores, 330.75 MiB and
15.5 TFLOP/s f32 each; each rank on a block of span x span nodes, span=auto, so a
rank's share must fit its block; the plan column shows the span each plan got), timed
with the analytical estimator, and the fastest few (plus the baseline) with the event
simulator. ``--coarsen 12`` gives 84 x 63 nodes of 6.75 MiB (nothing fits).

Reported per plan: build, estimate and simulate wall time, actors, step time, model
FLOPs utilisation (MFU: the unsharded step's FLOPs / (step time x the whole wafer's
f32 peak)), the fullest core's memory and whether the plan fits. Ratios are against
the data-parallel-only plan measured in the same run (the baseline).

Plans are built with ``check_memory=False`` and flagged; the best plan is the fastest
that fits if any does, else the fastest overall (flagged). Llama-7B cannot fit the
wafer's 37.5 GB of SRAM in f32 with SGD (27 GB of weights and as much of gradients):
its rows show speed and how far each plan is from fitting.

Run: ``.venv/bin/python benchmarks/bench_parallel.py`` (``--quick``: GPT-2 only, fewer
plans; ``--simulate all`` simulates every plan; ``--coarsen K``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from waferflow.backend_sim import estimate, simulate
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.target import Wafer, get_wafer
from waferflow.parallel import ParallelPlan, build_parallel_plan, plan_grid
from waferflow.parallel.memory import fmt_bytes
from waferflow.parallel.plan_spec import PipelineSchedule
from waferflow.parallel.report import model_flops_utilisation

COARSEN = 84  # one node per WSE-2 die row-slice: 12 x 9 nodes of 84 x 84 cores


@dataclass
class Row:
    plan: ParallelPlan
    build_s: float = 0.0
    estimate_s: float = 0.0
    simulate_s: float = -1.0
    actors: int = 0
    step_s: float = 0.0  # simulated if simulated, else estimated
    simulated: bool = False
    mfu: float = 0.0
    peak: int = 0
    fits: bool = False
    error: str = ""


def trace_model(spec: str, batch: int, seq: int) -> tuple[Graph, float]:
    from waferflow.frontend import load_model, trace

    t0 = time.perf_counter()
    b = load_model(spec, batch=batch, seq=seq)
    g = trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn, name=b.name)
    return g, time.perf_counter() - t0


def run_plan(g: Graph, wafer: Wafer, plan: ParallelPlan) -> tuple[Row, object | None]:
    row = Row(plan)
    t0 = time.perf_counter()
    try:
        r = build_parallel_plan(g, wafer, plan, check_memory=False)
    except PlanError as exc:
        row.error = str(exc).splitlines()[0][:90]
        return row, None
    row.build_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    view = r.wafer or wafer  # the plan's span coarsens the wafer: simulate on its view
    est = estimate(r.plan, view)
    row.estimate_s = time.perf_counter() - t1
    row.plan = r.spec  # with the span it got
    row.actors = len(r.plan.actors)
    row.step_s = est.step_time
    row.peak = r.memory.peak_bytes
    row.fits = r.memory.fits
    row.mfu = model_flops_utilisation(r, view, row.step_s)
    return row, r


def confirm(row: Row, result: object, wafer: Wafer) -> None:
    t0 = time.perf_counter()
    view = result.wafer or wafer  # type: ignore[attr-defined]
    sim = simulate(result.plan, view)  # type: ignore[attr-defined]
    row.simulate_s = time.perf_counter() - t0
    row.step_s = sim.step_time
    row.simulated = True
    row.mfu = model_flops_utilisation(result, view, row.step_s)  # type: ignore[arg-type]


def table(rows: list[Row], base: Row) -> str:
    head = ("plan", "build s", "est s", "sim s", "actors", "step ms", "vs base", "MFU %",
            "peak/core", "fits")  # fmt: skip
    out = [head]
    for r in rows:
        p = r.plan
        name = f"dp{p.dp} tp{p.tp} pp{p.pp} m{p.microbatches} s{p.span or 'auto'}" + (
            " rc" if p.recompute else ""
        )
        if r.error:
            out.append((name, "-", "-", "-", "-", "-", "-", "-", "-", r.error))
            continue
        speed = base.step_s / r.step_s if r.step_s and base.step_s else 0.0
        out.append((
            name, f"{r.build_s:.2f}", f"{r.estimate_s:.2f}",
            f"{r.simulate_s:.2f}" if r.simulated else "-", str(r.actors),
            f"{r.step_s * 1e3:.2f}" + ("" if r.simulated else "*"), f"{speed:.2f}x",
            f"{100 * r.mfu:.3f}", fmt_bytes(r.peak), "yes" if r.fits else "no",
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in out)


def bench_model(
    spec: str, batch: int, seq: int, plans: list[ParallelPlan], wafer: Wafer, sim_all: bool
) -> None:
    g, trace_s = trace_model(spec, batch, seq)
    print(f"\n## {spec} training, batch {batch} x seq {seq}: {len(g.ops)} ops, "
          f"{g.total_cost().flops / 1e12:.2f} TFLOP per step, traced in {trace_s:.1f} s")  # fmt: skip
    rows: list[Row] = []
    built: dict[int, object] = {}
    for plan in plans:
        row, result = run_plan(g, wafer, plan)
        rows.append(row)
        if result is not None:
            built[id(row)] = result
        print(f"  built {plan}: {row.error or f'{row.actors} actors'}", flush=True)
    ok = [r for r in rows if not r.error]
    if not ok:
        print("no plan could be built")
        return
    base = next((r for r in ok if r.plan.tp == 1 and r.plan.pp == 1), ok[0])
    fastest = sorted(ok, key=lambda r: r.step_s)[:3]
    for r in ok if sim_all else [base, *[r for r in fastest if r is not base]]:
        confirm(r, built[id(r)], wafer)
    print(table(rows, base))
    print("(* estimated by the analytical model; others simulated by the event simulator)")
    fitting = [r for r in ok if r.fits]
    best = min(fitting or ok, key=lambda r: r.step_s)
    flag = "" if best.fits else (
        f"  -- DOES NOT FIT: needs {fmt_bytes(best.peak)} per node, "
        f"has less; no plan of the grid fits"
    )  # fmt: skip
    print(f"best: {best.plan}: step {best.step_s * 1e3:.2f} ms, MFU {100 * best.mfu:.3f} % of "
          f"the wafer's f32 peak, {base.step_s / best.step_s:.2f}x the dp-only baseline{flag}")  # fmt: skip
    smallest = min(ok, key=lambda r: r.peak)
    print(f"smallest peak per node: {fmt_bytes(smallest.peak)} ({smallest.plan})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="GPT-2-small only, fewer plans")
    ap.add_argument("--simulate", choices=["best", "all"], default="best")
    ap.add_argument("--coarsen", type=int, default=COARSEN, help=f"k (default {COARSEN})")
    args = ap.parse_args(argv)
    wafer = get_wafer("wse2").coarsen(args.coarsen)
    print(f"wafer: wse2 viewed {args.coarsen} x {args.coarsen}: {wafer.rows} x {wafer.cols} nodes, "
          f"{fmt_bytes(wafer.sram_bytes)} and {wafer.peak(wafer.peak_flops[0][0]) / 1e9:.0f} "
          f"GFLOP/s f32 per node")  # fmt: skip
    sched = {"schedule": PipelineSchedule.ONE_F_ONE_B}
    sim_all = args.simulate == "all"
    if args.quick:
        gpt2 = [ParallelPlan(dp=8), *plan_grid((1, 2), (4,), (1, 4), (1, 4), **sched)]
        bench_model("hf:gpt2", 8, 256, gpt2, wafer, sim_all)
        return 0
    gpt2 = [
        ParallelPlan(dp=8),
        *plan_grid((1, 2), (4, 12), (1, 4), (1, 4), **sched),
        *plan_grid((2,), (4,), (4,), (4,), recompute=True, **sched),
    ]
    bench_model("hf:gpt2", 8, 512, gpt2, wafer, sim_all)
    llama = [
        ParallelPlan(dp=4),
        *plan_grid((1,), (8,), (4, 8), (1, 4), **sched),
        *plan_grid((1,), (16,), (4,), (4,), **sched),
        *plan_grid((1,), (8,), (12,), (4,), **sched),
    ]
    bench_model("hf:llama-7b", 4, 512, llama, wafer, sim_all)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
