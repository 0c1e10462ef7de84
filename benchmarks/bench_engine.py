"""The compiled event loop against the pure-Python one, in the same run.

Cases: the demo plan (GPT-2 small training, batch 8, seq 256,
``dp=2,tp=12,pp=4,microbatches=4`` on ``wse2@84x``, as ``make demo`` builds it) and
the uniform-random traffic cases of ``bench_sim.py``. For each, the two loops run on
the same prepared input, interleaved (python, compiled, python, ...), and must give
the same run: the same events, step time and every actor's and message's times.

**Events per CPU second** = the events the run processes (``SimResult.events``: heap
pushes, the same count for both loops, which run the same events) divided by the CPU
time (``time.process_time``: user + sys of this process) of the engine, the event loop
from a prepared plan to its record (``engine.run``: for the compiled loop this includes
flattening the input into arrays and turning the record back into lists). The best of
the repeats is kept for each. ``simulate()`` end to end (verify, prepare, loop,
assemble) is timed the same way with each loop. The compiled loop's one-time cost
(numba's compilation, or loading it from numba's cache) is paid before timing and
printed apart.

The demo plan takes minutes to build: it is built once and kept as
``out/bench/demo_plan.json`` (delete it to rebuild). ``--quick`` skips the demo.

Run: ``.venv/bin/python benchmarks/bench_engine.py [--quick]``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_sim import CASES, PACKET_BYTES, mesh, random_traffic

import waferflow as wf
from waferflow.backend_sim import SimConfig, simulate
from waferflow.backend_sim.engine import RawRun, run
from waferflow.backend_sim.network import prepare
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer

ROOT = Path(__file__).resolve().parent.parent
DEMO_PLAN = ROOT / "out" / "bench" / "demo_plan.json"
DEMO = {"model": "hf:gpt2", "wafer": "wse2", "mode": "train", "batch": 8, "seq": 256,
        "plan": "dp=2,tp=12,pp=4,microbatches=4", "coarsen": 84}  # fmt: skip


def demo_plan() -> tuple[Plan, Wafer]:
    if not DEMO_PLAN.is_file():
        print(f"building the demo plan once (minutes) into {DEMO_PLAN} ...", flush=True)
        DEMO_PLAN.parent.mkdir(parents=True, exist_ok=True)
        args = dict(DEMO)
        wf.compile(args.pop("model"), **args).save(DEMO_PLAN)  # type: ignore[arg-type]
    c = wf.load_plan(DEMO_PLAN)
    return c.plan, c.wafer


def cpu(fn: Callable[[], object]) -> tuple[float, object]:
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


@dataclass(frozen=True)
class Row:
    case: str
    events: int
    loop_py: float
    loop_jit: float
    sim_py: float
    sim_jit: float
    step_ps: int

    def line(self) -> str:
        ev = self.events
        return (
            f"{self.case:<16}{ev:>11,}{self.step_ps / 1e6:>12,.3f}"
            f"{ev / self.loop_py:>12,.0f}{ev / self.loop_jit:>12,.0f}"
            f"{self.loop_py / self.loop_jit:>8.1f}x"
            f"{ev / self.sim_py:>12,.0f}{ev / self.sim_jit:>12,.0f}"
            f"{self.sim_py / self.sim_jit:>8.1f}x"
        )


def same(a: RawRun, b: RawRun) -> None:
    for f in ("start", "end", "inject", "data_start", "arrive", "occ_start", "occ_end",
              "cause_kind", "cause_id", "events"):  # fmt: skip
        if getattr(a, f) != getattr(b, f):
            raise SystemExit(f"the compiled loop differs from the pure-Python one in {f!r}")


def measure(case: str, plan: Plan, w: Wafer, cfg: SimConfig, repeats: int) -> Row:
    p = prepare(plan, w, cfg)
    loop_py, loop_jit = [], []
    ref = None
    for _ in range(repeats):
        t, raw_py = cpu(lambda: run(p, "python"))
        loop_py.append(t)
        t, raw_jit = cpu(lambda: run(p, "compiled"))
        loop_jit.append(t)
        assert isinstance(raw_py, RawRun) and isinstance(raw_jit, RawRun)
        same(raw_py, raw_jit)
        ref = raw_py
    assert ref is not None
    sim_py, sim_jit = [], []
    steps = set()
    for _ in range(max(1, repeats - 1)):
        for engine, out in (("python", sim_py), ("compiled", sim_jit)):
            t, res = cpu(lambda e=engine: simulate(plan, w, SimConfig(  # type: ignore[misc]
                packet_bytes=cfg.packet_bytes, engine=e)))  # fmt: skip
            out.append(t)
            steps.add(res.step_time_ps)  # type: ignore[attr-defined]
    if len(steps) != 1:
        raise SystemExit(f"{case}: step times differ between the loops: {steps}")
    return Row(case, ref.events, min(loop_py), min(loop_jit), min(sim_py), min(sim_jit),
               steps.pop())  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    quick = "--quick" in args
    load0 = os.getloadavg()
    # the compiled loop's one-time cost: numba compiles it, or loads it from its cache
    w0 = mesh(4)
    t_first, _ = cpu(
        lambda: run(prepare(random_traffic(w0, 20, 2, 0), w0, SimConfig()), "compiled")
    )
    rows = []
    cfg = SimConfig(packet_bytes=PACKET_BYTES)
    for n, n_msgs in CASES:
        if quick:
            n_msgs //= 10
        w = mesh(n)
        rows.append(measure(f"{n}x{n} mesh", random_traffic(w, n_msgs, 5, seed=n), w, cfg, 3))
    if not quick:
        plan, w = demo_plan()
        rows.append(measure("demo (wse2@84x)", plan, w, SimConfig(), 2))
    load1 = os.getloadavg()
    head = (
        f"{'case':<16}{'events':>11}{'step us':>12}{'loop py/s':>12}{'loop jit/s':>12}"
        f"{'ratio':>9}{'sim py/s':>12}{'sim jit/s':>12}{'ratio':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(r.line())
    print(
        f"\nevents per CPU second (time.process_time, best of the repeats), python and\n"
        f"compiled loops interleaved in this run on the same input, same events and results\n"
        f"(checked). loop = engine.run (the compiled one with its flattening and the record\n"
        f"turned back into lists); sim = simulate() end to end. The compiled loop's\n"
        f"one-time cost in this process: {t_first:.2f} CPU s (numba compiles it on the first\n"
        f"run after an install or a change, later runs load it from numba's cache).\n"
        f"load average {load0[0]:.1f} before, {load1[0]:.1f} after ({os.cpu_count()} CPUs)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
