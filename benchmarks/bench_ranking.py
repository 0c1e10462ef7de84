"""Could placement rank its candidates without simulating them?

Placement builds and simulates every candidate layout (CP-SAT floorplans, the rank
refinement, the baselines) and keeps the fastest. Building them is most of a compile
(``bench_floor.py``); a cheap score that ranks layouts as the simulation does would let
it build only the likeliest. This compiles five instances (GPT-2 training and Llama-7B
inference, pipeline stages of tensor-parallel groups, on coarse views of WSE-2) and
prints, per instance, every candidate's simulated step beside the scores placement
has for it:

* ``floorplan``: the CP-SAT floorplan objective of the stages' bounding boxes (known
  before lowering; none when boxes overlap);
* ``rank byte-hops``: bytes x hops of the first candidate's rank-to-rank flows on the
  layout (known before lowering; the rank refinement's objective; on these instances
  the same as the lowered plan's bytes x hops on the routes it took).

and the position of the simulated winner when the candidates are ordered by each score.
A screen that builds the top k by a score keeps the same plan only where the winner is
within the top k (candidates tied with the winner count as the winner; a candidate
tied with it on a score is not ahead of it).

Run: ``.venv/bin/python benchmarks/bench_ranking.py`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Instance:
    name: str
    model: str
    plan: str
    coarsen: int
    mode: str = "train"
    batch: int | None = 8
    seq: int | None = 256
    dtype: str | None = None


INSTANCES = (
    Instance("demo", "hf:gpt2", "dp=2,tp=12,pp=4,microbatches=4", 84),
    Instance("gpt2 tp6 @24x", "hf:gpt2", "dp=2,tp=6,pp=4,microbatches=4", 24),
    Instance("gpt2 tp12 @42x", "hf:gpt2", "dp=1,tp=12,pp=4,microbatches=4", 42),
    Instance("gpt2 tp4 @32x", "hf:gpt2", "dp=2,tp=4,pp=2,microbatches=4", 32, batch=None,
             seq=None),
    Instance("llama-7b tp8 @16x", "hf:llama-7b", "dp=1,tp=8,pp=4,microbatches=2", 16, "infer",
             batch=2, dtype="bf16"),
)  # fmt: skip
SCORES = ("floorplan", "rank byte-hops")


def _score(c: Any, score: str) -> float:
    value = c.floorplan if score == "floorplan" else c.rank_cost
    return float("inf") if value is None else float(value)


def run(inst: Instance) -> tuple[list[str], dict[str, int]]:
    import waferflow as wf

    compiled = wf.compile(
        inst.model, wafer="wse2", mode=inst.mode, batch=inst.batch, seq=inst.seq,
        dtype=inst.dtype, plan=inst.plan, coarsen=inst.coarsen,
    )  # fmt: skip
    seen: dict[str, Any] = {}
    for c in compiled.placement.candidates:
        if "(same layout)" not in c.note:  # a layout offered twice is timed once
            seen.setdefault(c.method, c)
    cands = sorted(seen.values(), key=lambda c: (c.step_time, c.method))
    winner = cands[0]
    lines = [f"{inst.name}: {inst.model} {inst.plan} on wse2@{inst.coarsen}x"]
    lines.append(f"  {'candidate':<32} {'step ms':>9} " + " ".join(f"{s:>17}" for s in SCORES))
    for c in cands:
        scores = " ".join(
            f"{'-':>17}" if _score(c, s) == float("inf") else f"{_score(c, s):17.4g}"
            for s in SCORES
        )
        lines.append(f"  {c.method[:32]:<32} {c.step_time * 1e3:9.4f} {scores}")
    best = [c for c in cands if c.step_time == winner.step_time]  # ties: any of them wins
    where = {}
    for s in SCORES:  # 1 + the candidates scored strictly better than the best winner
        top = min(_score(c, s) for c in best)
        where[s] = 1 + sum(_score(c, s) < top for c in cands)
    lines.append("  the simulated winner by each score: "
                 + ", ".join(f"{s} #{where[s]}" for s in SCORES))  # fmt: skip
    return lines, where


def main() -> int:
    found: list[dict[str, int]] = []
    for inst in INSTANCES:
        lines, where = run(inst)
        print("\n".join(lines), flush=True)
        found.append(where)
    n = len(found)
    print("summary (instances where the simulated winner is first / within the top 2):")
    for s in SCORES:
        first = sum(w[s] == 1 for w in found)
        two = sum(w[s] <= 2 for w in found)
        print(f"  {s:<17} first on {first} of {n}, top 2 on {two} of {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
