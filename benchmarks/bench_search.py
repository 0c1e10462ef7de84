"""``--plan auto``: how long the plan search takes and how its plan compares with
hand-written ones, all timed by the analytical estimator in the same run.

For each case the model is traced (meta tensors) and optimised by the default pass
pipeline, as ``compile`` does; ``search_plans`` runs on the wafer
view, and the hand plans are built (``span=auto`` like the search's) and estimated on
the views their spans make. Reported: trace and search wall time, candidates
screened and built, the kept plan, and every plan's estimated step with its ratio to
the first hand plan (the baseline) and whether it fits.

Run: ``.venv/bin/python benchmarks/bench_search.py`` (``--quick``: GPT-2 only).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass

from waferflow.backend_sim import estimate
from waferflow.errors import PlanError
from waferflow.frontend import load_model, trace
from waferflow.ir.graph import Graph
from waferflow.ir.target import Wafer, get_wafer
from waferflow.parallel import build_parallel_plan
from waferflow.parallel.memory import fmt_bytes
from waferflow.parallel.search import search_plans
from waferflow.passes import DEFAULT_PIPELINE, PassContext, PassManager


@dataclass(frozen=True)
class Case:
    model: str
    mode: str
    batch: int
    seq: int
    dtype: str | None
    wafer: str
    hand: tuple[str, ...]  # the first is the baseline


CASES = (
    Case("hf:gpt2", "train", 8, 256, None, "wse2@16x",
         ("dp=8", "dp=2,tp=12,pp=4,microbatches=4", "dp=1,tp=12,pp=4,microbatches=8,recompute=true")),
    Case("hf:llama-7b", "infer", 2, 256, "bf16", "wse2@16x",
         ("dp=2,tp=8", "dp=1,tp=8,pp=4,microbatches=2")),
)  # fmt: skip


@dataclass(frozen=True)
class Row:
    plan: str
    step_s: float | None
    fits: bool | None
    peak: int
    note: str = ""


def _trace(case: Case) -> tuple[Graph, float]:
    t0 = time.perf_counter()
    b = load_model(case.model, batch=case.batch, seq=case.seq, dtype=case.dtype)
    g = trace(b.module, b.example_inputs, mode=case.mode, loss_fn=b.loss_fn, name=b.name)
    g = PassManager(DEFAULT_PIPELINE).run(g, PassContext(wafer=get_wafer(case.wafer)))
    return g, time.perf_counter() - t0  # traced and optimised, as compile() does


def _hand(g: Graph, wafer: Wafer, plan: str) -> Row:
    try:
        r = build_parallel_plan(g, wafer, plan, check_memory=False)
    except PlanError as e:
        return Row(plan, None, None, 0, str(e).splitlines()[0][:80])
    assert r.wafer is not None
    return Row(str(r.spec), estimate(r.plan, r.wafer).step_time, r.memory.fits,
               r.memory.peak_bytes)  # fmt: skip


def run_case(case: Case) -> None:
    wafer = get_wafer(case.wafer)
    g, trace_s = _trace(case)
    t0 = time.perf_counter()
    search = search_plans(g, wafer)
    search_s = time.perf_counter() - t0
    kept = search.kept
    rows = [_hand(g, wafer, p) for p in case.hand]
    rows.append(Row(str(search.best), kept.step_seconds, kept.fits, kept.peak_bytes or 0,
                    "plan auto"))  # fmt: skip
    dtype = f", {case.dtype}" if case.dtype else ""
    print(f"\n## {case.model} {case.mode} b{case.batch} s{case.seq}{dtype} on {case.wafer}: "
          f"{len(g.ops)} ops traced in {trace_s:.1f} s; search {search_s:.1f} s "
          f"({search.screened} screened, {search.built} built)")  # fmt: skip
    base = rows[0].step_s
    head = ("plan", "step ms (est)", "vs baseline", "peak/rank", "fits", "note")
    body = []
    for r in rows:
        ratio = f"{base / r.step_s:.2f}x" if base and r.step_s else "-"
        step = f"{r.step_s * 1e3:.3f}" if r.step_s is not None else "-"
        fits = "-" if r.fits is None else ("yes" if r.fits else "no")
        body.append((r.plan, step, ratio, fmt_bytes(r.peak), fits, r.note))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    for line in [head, *body]:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    print("(vs baseline: the baseline's step over this one's; >1 is faster)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="GPT-2 only")
    args = ap.parse_args(argv)
    for case in CASES[:1] if args.quick else CASES:
        run_case(case)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
