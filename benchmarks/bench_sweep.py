"""Sweeps: jobs per minute locally and on Ray, and ``--plan auto`` against the best
uniform plan.

**Throughput.** One 24-job sweep (``hf:gpt2-tiny`` and ``hf:llama-tiny`` training,
batch 4, sequence 32, on ``mesh16x16`` cut into 4 x 4 dies: 4 die-to-die bandwidths
x 3 explicit plans x 2 models; default layout) is run three times, each into a fresh
folder: in 1 local worker process, in 2, and as Ray tasks on a local Ray instance of
2 CPUs (started before the clock starts; its start-up time is printed apart). Printed:
wall time, jobs per minute, the speed-up over 1 worker, the summed in-worker job
time, and the machine's load average (the machine is shared: wall times move with
it). The three CSVs must hold the same rows, timings aside, or the benchmark fails.

**plan auto vs the best uniform plan.** The cases of ``bench_search.py`` (GPT-2
training, b8 s256, and Llama-7B bf16 inference, b2 s256, on ``wse2@16x``): the plan
search alone (its plan built on the default layout and simulated), every uniform
plan (``waferflow.parallel.uniform``: built, and simulated when it fits), and the
search held against them (``search_plans(uniform=True)``, as ``waferflow sweep`` runs
``plan = "auto"``). Printed: the grid's size, the best uniform plan, the search's own
plan and its ratio to the best uniform plan, and the held search's ratio (never
above 1). Simulated step times, on the default layout; CPU seconds per stage.

Run: ``.venv/bin/python benchmarks/bench_sweep.py`` (``--quick``: throughput only;
``--auto-only``: the second part only; ``--case gpt2|llama|gpt2-infer``: a case,
repeatable; ``gpt2-infer``, GPT-2 inference b2 s256 on ``wse2@16x``, has a much
smaller grid than the training case).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

from bench_search import CASES, Case  # this folder is on sys.path when run
from bench_search import _trace as trace_case

from waferflow.ir.target import get_wafer
from waferflow.parallel.search import hold_against_uniform, search_plans
from waferflow.parallel.uniform import uniform_baseline
from waferflow.sweep import load_sweep, run_sweep
from waferflow.sweep.job import TIMING_COLUMNS

SWEEP_24 = """
name = "bench24"

[job]
mode = "train"
batch = 4
seq = 32
wafer = "mesh16x16"
override.dies.rows = 4
override.dies.cols = 4
override.dies.link.latency = "5 ns"
place = "none"

[grid]
model = ["hf:gpt2-tiny", "hf:llama-tiny"]
override.dies.link.bandwidth = ["12.5 GB/s", "25 GB/s", "50 GB/s", "100 GB/s"]
plan = ["dp=2,tp=2,pp=2,microbatches=2", "dp=4", "tp=2,pp=2,microbatches=2"]
"""


# bench_search's cases (GPT-2 training, Llama-7B inference), and GPT-2 inference: its
# uniform grid is a fraction of the training case's (about an hour of CPU), so it
# gives a GPT-2 figure on a loaded machine.
AUTO_CASES: dict[str, Case] = {
    "gpt2": CASES[0],
    "llama": CASES[1],
    "gpt2-infer": Case("hf:gpt2", "infer", 2, 256, None, "wse2@16x", ()),
}


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in csv.DictReader(f)]


def throughput() -> None:
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        spec = Path(tmp) / "bench24.toml"
        spec.write_text(SWEEP_24)
        n = len(load_sweep(spec).jobs)
        print(f"## throughput: a {n}-job sweep (tiny models, default layout); {_load()}")
        runs: list[tuple[str, float, float, Path]] = []
        for label, kwargs in (("1 local worker", {"jobs": 1}), ("2 local workers", {"jobs": 2})):
            runs.append(_timed(label, spec, Path(tmp) / label.replace(" ", "_"), kwargs))
        import ray

        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        started = time.perf_counter() - t0
        try:
            runs.append(_timed("Ray, 2 CPUs", spec, Path(tmp) / "ray", {"ray": True}))
        finally:
            ray.shutdown()
        base = runs[0][1]
        head = ("run", "wall s", "jobs/min", "vs 1 worker", "in-job s")
        body = [(label, f"{wall:.1f}", f"{n / wall * 60:.1f}", f"{base / wall:.2f}x",
                 f"{busy:.1f}") for label, wall, busy, _ in runs]  # fmt: skip
        _print_table(head, body)
        print(f"(Ray start-up {started:.1f} s, not counted; {_load()})")
        first = _rows(runs[0][3] / "results.csv")
        for label, _, _, folder in runs[1:]:
            if _rows(folder / "results.csv") != first:
                raise SystemExit(f"{label}: the rows differ from 1 local worker's")
        print("rows: the same in all three runs (inputs and results; timings aside)")


def _timed(label: str, spec: Path, out: Path, kwargs: dict) -> tuple[str, float, float, Path]:
    sweep = load_sweep(spec, output=out)
    t0 = time.perf_counter()
    result = run_sweep(sweep, quiet=True, plots=False, **kwargs)
    wall = time.perf_counter() - t0
    if result.failed or result.ran != len(sweep.jobs):
        raise SystemExit(f"{label}: {result.failed} failed, {result.ran} ran")
    busy = sum((r["compile_s"] or 0) + (r["simulate_s"] or 0) for r in result.rows)
    return label, wall, busy, out


def auto_vs_uniform(case: Case) -> None:
    wafer = get_wafer(case.wafer)
    c0 = time.process_time()
    g, _ = trace_case(case)  # traced and optimised, as compile() does
    c1 = time.process_time()
    own = search_plans(g, wafer)
    c2 = time.process_time()
    base = uniform_baseline(g, wafer)
    c3 = time.process_time()
    held = hold_against_uniform(g, wafer, own, base)  # search_plans(uniform=True), reusing both
    c4 = time.process_time()
    own_step = held.searched_seconds
    assert own_step is not None
    dtype = f", {case.dtype}" if case.dtype else ""
    best = base.best_row
    print(f"\n## plan auto vs uniform plans: {case.model} {case.mode} b{case.batch} "
          f"s{case.seq}{dtype} on {case.wafer}; {_load()}")  # fmt: skip
    fit = sum(1 for r in base.rows if r.step_seconds is not None)
    print(f"uniform plans: {len(base.rows)} tried, {fit} fit; CPU: trace {c1 - c0:.0f} s, "
          f"search {c2 - c1:.0f} s, uniform grid {c3 - c2:.0f} s, simulating the search's "
          f"plan {c4 - c3:.0f} s")  # fmt: skip
    if best is None or best.step_seconds is None:
        print("no uniform plan fits")
        return
    assert held.vs_uniform is not None and held.simulated_seconds is not None
    head = ("plan", "source", "step ms (simulated)", "vs best uniform", "speed-up")
    b = best.step_seconds
    body = [
        (best.plan, "best uniform plan", f"{b * 1e3:.4f}", "1.000x", "1.000x"),
        (str(own.best), "plan search alone", f"{own_step * 1e3:.4f}", f"{own_step / b:.3f}x",
         f"{b / own_step:.3f}x"),
        (str(held.best), "plan auto (held: " + ("uniform kept" if held.uniform_kept else
         "search kept") + ")", f"{held.simulated_seconds * 1e3:.4f}", f"{held.vs_uniform:.3f}x",
         f"{b / held.simulated_seconds:.3f}x"),
    ]  # fmt: skip
    _print_table(head, body)
    print(
        "(vs best uniform: this step over the best uniform plan's, <= 1 is at least as fast; "
        "speed-up: the best uniform step over this one, >= 1 is at least as fast)"
    )
    print(f"plan auto speed-up over the best uniform plan: {b / held.simulated_seconds:.3f}x")
    if held.vs_uniform > 1.0:
        raise SystemExit("plan auto is slower than the best uniform plan")


def _print_table(head: tuple[str, ...], body: list[tuple[str, ...]]) -> None:
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    for line in [head, *body]:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the throughput part only")
    ap.add_argument("--auto-only", action="store_true", help="the plan auto part only")
    ap.add_argument("--case", action="append", choices=list(AUTO_CASES),
                    help="a plan auto case (repeatable; default gpt2 and llama)")  # fmt: skip
    args = ap.parse_args(argv)
    if not args.auto_only:
        throughput()
    if not args.quick:
        for name in args.case or ["gpt2", "llama"]:
            auto_vs_uniform(AUTO_CASES[name])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
