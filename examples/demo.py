"""`make demo`: the whole path on a real model.

Trace GPT-2's training step on meta tensors, run the default passes, parallelise it
(dp=2, tp=12, pp=4, 4 micro-batches) onto the 84x84 coarse view of a WSE-2 (12 x 9 nodes
of 7,056 cores each), simulate one step, print the report, and write the pictures, the
plan, the IR, a Perfetto trace and an offline HTML report under out/demo/. The report
says, per op class (matmul, elementwise, ...), what fraction of its unit's peak the
cores achieved; the same plan is then timed on the roofline (the wafer without its
core model, [core]) for comparison.

    python examples/demo.py [--model hf:gpt2] [--wafer wse2] [--coarsen 84] [--plan ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import waferflow as wf
from waferflow.backend_sim import simulate
from waferflow.fileio import write_text
from waferflow.ir.summary import summarize
from waferflow.progress import phase, reporting


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="hf:gpt2")
    ap.add_argument("--wafer", default="wse2")
    ap.add_argument("--mode", default="train", choices=["train", "infer"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--coarsen", type=int, default=84, help="plan on the K x K coarse view")
    ap.add_argument("--plan", default="dp=2,tp=12,pp=4,microbatches=4", help="parallel plan")
    ap.add_argument("--out", default="out/demo")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    print(f"== compiling {args.model} ({args.mode}, batch {args.batch}, seq {args.seq}) "
          f"onto {args.wafer}")  # fmt: skip
    compiled = wf.compile(
        args.model,
        wafer=args.wafer,
        mode=args.mode,
        batch=args.batch,
        seq=args.seq,
        plan=args.plan,
        coarsen=args.coarsen,
    )
    assert compiled.graph is not None
    print(summarize(compiled.graph))
    print(repr(compiled))
    if compiled.placement is not None:
        print()
        print(compiled.placement)
    report = compiled.simulate()
    print()
    print(report)
    if compiled.wafer.core is not None:
        roof = simulate(compiled.plan, replace(compiled.wafer, core=None)).step_time
        step = report.result.step_time
        print(
            f"core model: step {step * 1e3:.4g} ms; the same plan on the roofline (no [core]): "
            f"{roof * 1e3:.4g} ms, so the core model is {step / roof:.2f}x the roofline"
        )

    # the outputs take a while (the trace holds every actor and message): a phase of
    # their own, so that progress shows through them too
    writers = output_writers(compiled, report, out)
    files: dict[str, Path] = {}
    with phase("outputs", len(writers) + 1, "files") as shown:
        for kind, write in writers.items():
            shown.status(f"writing the {kind}")
            files[kind] = write()
            shown.advance(1)
        images = {k: files[k] for k in ("placement", "links", "timeline", "memory")}
        shown.status("writing the HTML report")
        files["html"] = report.to_html(out / "report.html", images)
        shown.advance(1)
    print("\n== wrote")
    for kind, path in files.items():
        print(f"   {kind:<10} {path}")
    print(f"   trace: {trace_stats(files['trace'])}")
    print(f"   open {files['trace']} in https://ui.perfetto.dev, {files['html']} in a browser")
    return 0


def output_writers(
    compiled: wf.CompiledPlan, report: wf.Report, out: Path
) -> dict[str, Callable[[], Path]]:
    """What the demo writes under ``out`` (before the HTML report, which shows the
    pictures), each as a call that writes it (``benchmarks/bench_e2e.py`` times them)."""
    graph = compiled.graph
    assert graph is not None
    return {
        "plan": lambda: compiled.save(out / "plan.json"),
        "trace": lambda: report.to_chrome_trace(out / "trace.json"),
        "placement": lambda: compiled.plot_placement(out / "placement.png"),
        "links": lambda: report.plot_links(out / "links.png"),
        "timeline": lambda: report.plot_timeline(out / "timeline.png"),
        "memory": lambda: report.plot_memory(out / "memory.png"),
        "ir": lambda: write_text(out / "graph.wf", wf.ir.print_graph(graph)),
    }


def trace_stats(path: Path) -> str:
    """What the trace holds, read back from the file."""
    events = json.loads(path.read_text(encoding="utf-8"))["traceEvents"]
    phases = Counter(e["ph"] for e in events)
    waits = sum(1 for e in events if e.get("cat") == "wait")
    counters = len({(e["pid"], e["name"]) for e in events if e["ph"] == "C"})
    return (
        f"{len(events):,} events, {path.stat().st_size / 2**20:.1f} MiB: "
        f"{phases['X'] - waits:,} actor and {waits:,} wait slices, {phases['s']:,} message "
        f"flows, {counters} counter tracks ({phases['C']:,} samples)"
    )


if __name__ == "__main__":
    try:
        # progress on stderr: bars on a terminal, a line per event (and at least one every
        # 2 s) when piped to a file, e.g. `make demo > log 2>&1`
        with reporting():
            code = main()
        sys.exit(code)
    except wf.WaferflowError as err:
        print(f"demo: error: {err}", file=sys.stderr)
        sys.exit(2)
