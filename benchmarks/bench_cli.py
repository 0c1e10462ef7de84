"""How fast the command line starts and how fast it fails: CPU seconds of each command.

Cases (each run in a fresh process, ``REPEAT`` times, the median kept):
- ``--help``, ``models``, ``wafers``, ``passes``: target < 1 CPU s each;
- ``trace hf:gtp2`` (a model-name typo) and ``compile hf:gpt2 --plan
  dp=2,tp=4,microbatch=4`` (a plan-key typo): refused with a "did you mean", target < 2 s;
- the README's refused example (GPT-2 training on mesh16x16, refused by the whole-wafer
  capacity check): target < 5 s.

Baseline measured in the same run: ``python -c pass`` (the interpreter's own start),
so that a loaded machine shows as a larger baseline; each case is printed with its
ratio to it. CPU seconds are the child's user + system time (``RUSAGE_CHILDREN``), which
the machine's load changes far less than wall time.

Run: ``.venv/bin/python benchmarks/bench_cli.py``; exits 1 when a target is missed.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPEAT = 3
WAFERFLOW = [sys.executable, "-m", "waferflow.cli"]


@dataclass(frozen=True)
class Case:
    name: str
    argv: list[str]
    target: float  # CPU seconds
    exit_code: int = 0
    expect: str = ""  # a text the output must hold


CASES = [
    Case("--help", ["--help"], 1.0),
    Case("models", ["models"], 1.0),
    Case("wafers", ["wafers"], 1.0),
    Case("passes", ["passes"], 1.0),
    Case("trace hf:gtp2", ["trace", "hf:gtp2"], 2.0, 2, "did you mean hf:gpt2"),
    Case(
        "compile ... microbatch=4",
        ["compile", "hf:gpt2", "--wafer", "mesh16x16", "--plan", "dp=2,tp=4,microbatch=4"],
        2.0,
        2,
        "did you mean microbatches",
    ),
    Case(
        "README refused example",
        [
            "compile",
            "hf:gpt2",
            "--mode",
            "train",
            "--wafer",
            "mesh16x16",
            "--plan",
            "dp=2,tp=4,pp=2,microbatches=4",
        ],
        5.0,
        2,
        "does not fit on mesh16x16",
    ),
]


def cpu_seconds(argv: list[str], exit_code: int = 0, expect: str = "") -> float:
    """User + system CPU seconds of one run of ``argv`` in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != exit_code or expect not in proc.stdout + proc.stderr:
        raise SystemExit(
            f"{' '.join(argv)}: exit {proc.returncode} (expected {exit_code}), output:\n"
            f"{proc.stdout[-500:]}{proc.stderr[-500:]}"
        )
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    os.chdir(Path(__file__).resolve().parent.parent)
    base = statistics.median(cpu_seconds([sys.executable, "-c", "pass"]) for _ in range(REPEAT))
    print(f"load average {os.getloadavg()[0]:.1f}; baseline `python -c pass`: {base:.3f} CPU s")
    print(f"{'command':<28} {'CPU s':>7} {'x base':>7} {'target':>7}  ok")
    missed = []
    for case in CASES:
        argv = [*WAFERFLOW, *case.argv]
        cpu = statistics.median(
            cpu_seconds(argv, case.exit_code, case.expect) for _ in range(REPEAT)
        )
        ok = cpu < case.target
        if not ok:
            missed.append(case.name)
        print(
            f"{case.name:<28} {cpu:7.2f} {cpu / base:7.1f} {case.target:7.1f}  {'yes' if ok else 'NO'}"
        )
    if missed:
        print(f"missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
