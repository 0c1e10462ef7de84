"""Where the demo's compile goes, step by step, and the least that design could cost.

The demo (``make demo``: GPT-2 small training, batch 8, seq 256,
``dp=2,tp=12,pp=4,microbatches=4`` on ``wse2@84x``) is compiled in one process with
placement's candidates built there one after the other (``WAFERFLOW_PLACE_JOBS=1``),
so that every step's CPU seconds are seen, each call apart: scheduling the program,
lowering it to an actor plan (the first layout in full, later ones retargeted),
planning its memory, timing it (one event simulation per candidate), the CP-SAT
floorplans, the rank refinement, verifying and routing the kept plan. The trace cache
is warm (a first process fills a new cache folder), so the trace reads IR text back.

Then one fresh simulation of the kept plan (the baseline, as in ``bench_e2e``), and:

* the compile / one simulation, as the compile runs today;
* the *floor*: the same compile if placement built, planned and timed no candidate
  but the first (it needs one: its plan gives the rank flows that every CP-SAT model
  prices) and ran no rank refinement: trace, passes, scheduling, the first
  candidate's lowering, memory plan and simulation, the CP-SAT floorplans, verifying
  and routing the kept plan. No ranking of candidates can make the compile cheaper
  than that while the kept plan is simulated once and reported.

Run: ``.venv/bin/python benchmarks/bench_floor.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

DEMO: dict[str, Any] = dict(
    wafer="wse2", mode="train", batch=8, seq=256, plan="dp=2,tp=12,pp=4,microbatches=4",
    coarsen=84,
)  # fmt: skip
MODEL = "hf:gpt2"

# (step, module, function): each function is timed wherever a module of the package
# binds it (placement imports them by name)
STEPS = (
    ("schedule", "waferflow.parallel.driver", "schedule"),
    ("retarget", "waferflow.parallel.build", "retarget"),
    ("lower", "waferflow.parallel.driver", "lower"),
    ("memory", "waferflow.parallel.driver", "memory"),
    ("simulate", "waferflow.passes.place_result", "step_time"),
    ("traffic", "waferflow.passes.place_result", "run_traffic"),
    ("rank flows", "waferflow.mapper.bridge", "rank_flows"),
    ("floorplan", "waferflow.mapper.placement", "solve_floorplan"),
    ("rank refinement", "waferflow.mapper.bridge", "refine_ranks"),
    ("verify", "waferflow.ir.plan", "verify_plan"),
    ("route", "waferflow.passes.route", "route_plan"),
)
# what the floor keeps: every call of these, and the first call of the per-candidate ones
WHOLE = ("schedule", "rank flows", "floorplan", "verify", "route")
FIRST = ("lower", "memory", "simulate", "traffic")


def _timed(calls: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            calls.append(time.process_time() - t)

    return timed


def _instrument() -> dict[str, list[float]]:
    """Wrap every step's function in every loaded waferflow module that binds it."""
    import importlib

    import waferflow.api  # noqa: F401  (loads the passes and what they import)

    calls: dict[str, list[float]] = {}
    for step, module, name in STEPS:
        fn = getattr(importlib.import_module(module), name)
        calls[step] = []
        wrapper = _timed(calls[step], fn)
        bound = 0
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("waferflow") and vars(mod).get(name) is fn:
                setattr(mod, name, wrapper)
                bound += 1
        assert bound, f"{module}.{name} is bound nowhere: update STEPS"
    return calls


def measure() -> dict[str, Any]:
    """The demo's compile, step by step, and one fresh simulation (in this process)."""
    calls = _instrument()
    import waferflow as wf
    from waferflow.backend_sim import simulate

    marks: list[tuple[str, float]] = []
    t0 = time.process_time()
    compiled = wf.compile(MODEL, progress=lambda s: marks.append((s, time.process_time())), **DEMO)
    marks.append(("end", time.process_time()))
    compile_cpu = time.process_time() - t0
    phases = {a[0]: b[1] - a[1] for a, b in itertools.pairwise(marks)}
    calls = {step: list(got) for step, got in calls.items()}  # the compile's (not the baseline's)
    t = time.process_time()
    simulate(compiled.plan, compiled.wafer)
    sim_cpu = time.process_time() - t
    empty = [step for step, got in calls.items() if not got and step != "rank refinement"]
    assert not empty, f"not called: {empty}"
    return {"phases": phases, "calls": calls, "compile": compile_cpu, "sim": sim_cpu,
            "candidates": len(compiled.placement.candidates)}  # fmt: skip


def report(r: dict[str, Any]) -> list[str]:
    calls: dict[str, list[float]] = r["calls"]
    lines = ["demo compile, CPU seconds (one process, WAFERFLOW_PLACE_JOBS=1, trace cache warm):"]
    for step, cpu in r["phases"].items():
        if step != "parallelize+place":
            lines.append(f"  {step:<18} {cpu:7.2f}")
    lines.append(f"  {'parallelize+place':<18} {r['phases'].get('parallelize+place', 0.0):7.2f}"
                 f"   ({r['candidates']} candidates), of which:")  # fmt: skip
    for step, got in calls.items():
        each = " ".join(f"{x:.2f}" for x in got[:8]) + (" ..." if len(got) > 8 else "")
        lines.append(f"    {step:<16} {sum(got):7.2f}   ({len(got)} call(s): {each})")
    outside = sum(v for k, v in r["phases"].items() if k != "parallelize+place")
    floor = outside + sum(sum(calls[s]) for s in WHOLE) + sum(calls[s][0] for s in FIRST)
    sim = r["sim"]
    lines += [
        f"  one simulation of the kept plan: {sim:.2f} CPU s",
        f"  compile: {r['compile']:.2f} CPU s = {r['compile'] / sim:.2f} simulations",
        f"  floor (only the first candidate built and timed, no rank refinement): "
        f"{floor:.2f} CPU s = {floor / sim:.2f} simulations",
        "  (bench_e2e's cold trace, which imports torch, adds its own seconds to both)",
    ]
    return lines


def main(argv: list[str]) -> int:
    if argv == ["--child"]:
        print(json.dumps(measure()))
        return 0
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "WAFERFLOW_CACHE_DIR": cache, "WAFERFLOW_PLACE_JOBS": "1"}
        fill = [sys.executable, "-c", "from waferflow.frontend import trace_model; "
                f"trace_model({MODEL!r}, mode='train', batch=8, seq=256)"]  # fmt: skip
        subprocess.run(fill, check=True, env=env, capture_output=True)
        proc = subprocess.run([sys.executable, __file__, "--child"], env=env, text=True,
                              capture_output=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        print(f"FAILED\n{proc.stderr[-2000:]}")
        return 1
    print("\n".join(report(json.loads(proc.stdout.strip().splitlines()[-1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
