"""Speed and memory of the torch frontend: ``load_model`` + ``trace`` on meta tensors.

Cases: the AMCoDA CNN training step (small reference), GPT-2 small training step
(batch 8, seq 1024), LLaMA-7B inference and training step (batch 1, seq 2048).
Every measurement runs in a fresh subprocess so that peak RSS (``ru_maxrss``, which
includes the ~350 MB of torch and transformers themselves) belongs to that case.

Baselines measured in the same run, on the same model in the same process layout:
- ``export s``: a bare ``torch.export.export(model, example_inputs)`` of the forward;
- ``make_fx s``: a bare ``make_fx`` of the same step (forward, and for training the
  loss, ``autograd.grad`` and an SGD update) with none of waferflow's annotation,
  hooks or conversion; ``trace/make_fx`` is waferflow's overhead over it.

Targets: GPT-2 small train < 5 s; LLaMA-7B train < 15 s with peak RSS < 2 GB.

Run: ``.venv/bin/python benchmarks/bench_trace.py`` (``--quick`` skips LLaMA-7B).
Times are wall-clock seconds (time.perf_counter) of the trace alone; model building
(config -> meta module) is reported separately.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass
from typing import Any

GB = 1 << 30


@dataclass(frozen=True)
class Case:
    spec: str
    mode: str
    batch: int
    seq: int | None
    target_s: float | None = None
    target_rss_mb: float | None = None

    @property
    def label(self) -> str:
        size = f"b{self.batch}" + (f" s{self.seq}" if self.seq else "")
        return f"{self.spec} {self.mode} {size}"


CASES: tuple[Case, ...] = (
    Case("cnn:amcoda", "train", 32, None),
    Case("hf:gpt2", "train", 8, 1024, target_s=5.0),
    Case("hf:llama-7b", "infer", 1, 2048),
    Case("hf:llama-7b", "train", 1, 2048, target_s=15.0, target_rss_mb=2048.0),
)


# -- what runs in a child process -----------------------------------------------------


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _measure_waferflow(case: Case) -> dict[str, Any]:
    from collections import Counter

    from waferflow.frontend import load_model, trace

    t0 = time.perf_counter()
    bundle = load_model(case.spec, batch=case.batch, seq=case.seq)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LLaMA's rotary cos/sin are opaque ops
        g = trace(bundle.module, bundle.example_inputs, mode=case.mode, loss_fn=bundle.loss_fn)
    trace_s = time.perf_counter() - t0
    phases = Counter(op.phase.value for op in g.ops)
    return {
        "build_s": build_s,
        "trace_s": trace_s,
        "ops": len(g.ops),
        "ops_fwd": phases.get("fwd", 0),
        "ops_bwd": phases.get("bwd", 0),
        "ops_opt": phases.get("opt", 0),
        "gflops": g.total_cost().flops / 1e9,
        "peak_rss_mb": _peak_rss_mb(),
    }


def _measure_export(case: Case) -> dict[str, Any]:
    import torch

    from waferflow.frontend import load_model

    bundle = load_model(case.spec, batch=case.batch, seq=case.seq)
    bundle.module.eval()
    t0 = time.perf_counter()
    torch.export.export(bundle.module, bundle.example_inputs)
    return {"export_s": time.perf_counter() - t0, "export_rss_mb": _peak_rss_mb()}


def _measure_make_fx(case: Case) -> dict[str, Any]:
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from waferflow.frontend import load_model

    bundle = load_model(case.spec, batch=case.batch, seq=case.seq)
    model = bundle.module
    train = case.mode == "train"
    model.train(train)
    params = {n: p.detach().requires_grad_(train) for n, p in model.named_parameters()}
    buffers = dict(model.named_buffers())
    names = list(params)
    n_p, n_b = len(params), len(buffers)

    def step(*flat: torch.Tensor) -> list[torch.Tensor]:
        ps = dict(zip(names, flat[:n_p], strict=True))
        bs = dict(zip(buffers, flat[n_p : n_p + n_b], strict=True))
        inputs = flat[n_p + n_b :]
        out = torch.func.functional_call(model, (ps, bs), inputs)
        if not train:
            return [out if isinstance(out, torch.Tensor) else out[0]]
        loss = bundle.loss_fn(out, *inputs)
        grads = torch.autograd.grad(loss, list(ps.values()), allow_unused=True)
        return [loss, *(p - 0.01 * g for p, g in zip(ps.values(), grads, strict=True) if g is not None)]  # fmt: skip

    flat = [*params.values(), *buffers.values(), *bundle.example_inputs]
    t0 = time.perf_counter()
    gm = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(*flat)
    return {"make_fx_s": time.perf_counter() - t0, "fx_nodes": len(gm.graph.nodes)}


_MEASURES = {
    "waferflow": _measure_waferflow,
    "export": _measure_export,
    "make_fx": _measure_make_fx,
}


def _child(what: str, case_json: str) -> int:
    case = Case(**json.loads(case_json))
    try:
        result = _MEASURES[what](case)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# -- the parent --------------------------------------------------------------------------


def _in_subprocess(what: str, case: Case) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", what, json.dumps(asdict(case))],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"child exited {proc.returncode}: {tail}"}


def run(quick: bool = False) -> list[dict[str, Any]]:
    """One row per case: waferflow's numbers, the baselines and the verdict."""
    rows: list[dict[str, Any]] = []
    for case in CASES:
        if quick and case.spec == "hf:llama-7b":
            continue
        row: dict[str, Any] = {"case": case.label, **asdict(case)}
        for what in ("waferflow", "export", "make_fx"):
            got = _in_subprocess(what, case)
            if "error" in got:
                got = {f"{what}_error": got["error"]}
            row.update(got)
        ok = "trace_s" in row
        if ok and case.target_s is not None:
            ok = row["trace_s"] < case.target_s
        if ok and case.target_rss_mb is not None:
            ok = row["peak_rss_mb"] < case.target_rss_mb
        row["meets_target"] = ok
        rows.append(row)
    return rows


def _fmt(value: Any, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        return _child(args[1], args[2])
    rows = run(quick="--quick" in args)
    head = (
        f"{'case':<28}{'ops':>7}{'fwd/bwd/opt':>17}{'build s':>9}{'trace s':>9}{'RSS MB':>8}"
        f"{'export s':>10}{'make_fx s':>11}{'/export':>9}{'/make_fx':>10}  target"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        split = f"{r.get('ops_fwd', '-')}/{r.get('ops_bwd', '-')}/{r.get('ops_opt', '-')}"
        ratio_export = r["trace_s"] / r["export_s"] if "trace_s" in r and "export_s" in r else None
        ratio_fx = r["trace_s"] / r["make_fx_s"] if "trace_s" in r and "make_fx_s" in r else None
        target = []
        if r["target_s"] is not None:
            target.append(f"< {r['target_s']:.0f} s")
        if r["target_rss_mb"] is not None:
            target.append(f"< {r['target_rss_mb'] / 1024:.0f} GB")
        verdict = ("ok" if r["meets_target"] else "MISSED") if target else ""
        print(
            f"{r['case']:<28}{_fmt(r.get('ops'), ',d'):>7}{split:>17}"
            f"{_fmt(r.get('build_s'), '.2f'):>9}{_fmt(r.get('trace_s'), '.2f'):>9}"
            f"{_fmt(r.get('peak_rss_mb'), '.0f'):>8}{_fmt(r.get('export_s'), '.2f'):>10}"
            f"{_fmt(r.get('make_fx_s'), '.2f'):>11}{_fmt(ratio_export, '.1f'):>8}x"
            f"{_fmt(ratio_fx, '.2f'):>9}x  {', '.join(target)} {verdict}"
        )
        for key in ("waferflow_error", "export_error", "make_fx_error"):
            if key in r:
                print(f"    {key}: {r[key]}")
    print(
        "\nops = IR ops after conversion (sources included); trace s = trace() alone, wall time;\n"
        "RSS = peak resident memory of the tracing process, torch and transformers included;\n"
        "export s = bare torch.export.export of the forward; make_fx s = bare make_fx of the\n"
        "same step (forward, or forward + loss + grad + SGD); /export and /make_fx = trace s\n"
        "over those baselines."
    )
    missed = [r["case"] for r in rows if not r["meets_target"]]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
