"""Emit an experiment folder that the authors' SystemC simulator runs (§1.1).

``emit_experiment(exp, out_dir)`` writes::

    <out_dir>/script/host_1.txt ... host_N.txt   one annotated host script per actor (§2)
    <out_dir>/script/weight*.txt data*.txt label*.txt   every input file they name (§5)
    <out_dir>/result/  <out_dir>/report/         empty; the simulator writes there
    <out_dir>/settings.json    the basic.h settings: test_actor_num, test_time, MemWidth
    <out_dir>/predicted.json   waferflow's predicted timing, the plan, the version

Before writing anything it refuses, with a ``PlanError`` naming the limit, what the
format cannot express (more than 16 actors, more than 4 operands in an In_Config,
more than 341 entries or 1024 instruction lines, a parameter above 65535) and what
the machine would not run as intended (``validate_experiment``).
"""

from __future__ import annotations

import json
from pathlib import Path

from waferflow.backend_amcoda.datafiles import write_input_files
from waferflow.backend_amcoda.layers import Cnn
from waferflow.backend_amcoda.program import (
    MAX_ACTORS,
    MAX_ENTRIES,
    MAX_OPERANDS,
    MAX_PARAM,
    Experiment,
)
from waferflow.backend_amcoda.report import predicted_json, settings_json
from waferflow.backend_amcoda.scripts import host_script
from waferflow.backend_amcoda.simulate import AmcodaResult, simulate_experiment
from waferflow.backend_amcoda.validate import validate_experiment
from waferflow.errors import PlanError
from waferflow.fileio import atomic_dir

ICACHE_LINES = 1024  # instruction cache of an actor (§1.2)


def check_format_limits(exp: Experiment) -> None:
    """Raise ``PlanError`` naming the first limit of the program format ``exp`` breaks."""
    if exp.n_actors > MAX_ACTORS:
        raise PlanError(
            f"experiment {exp.name} has {exp.n_actors} actors; the format addresses at most "
            f"{MAX_ACTORS} (test_actor_num <= interface_size = {MAX_ACTORS})"
        )
    for p in exp.programs:
        if len(p.entries) > MAX_ENTRIES:
            raise PlanError(
                f"actor {p.actor} has {len(p.entries)} entries; a program holds at most "
                f"{MAX_ENTRIES} (the instruction cache of {ICACHE_LINES} instructions, 3 per entry)"
            )
        if p.instruction_lines > ICACHE_LINES:
            raise PlanError(
                f"actor {p.actor} has {p.instruction_lines} instruction lines; the instruction "
                f"cache holds at most {ICACHE_LINES}"
            )
        for i, e in enumerate(p.entries):
            if len(e.inp.operands) > MAX_OPERANDS:
                raise PlanError(
                    f"actor {p.actor} e{i} ({e.label or e.op.alu.name}) reads "
                    f"{len(e.inp.operands)} operands; an entry holds at most {MAX_OPERANDS} "
                    f"(Max_op_num); a wider reduction needs a tree of ADDs"
                )
            big = [v for v in e.op.params if not 0 <= v <= MAX_PARAM]
            if big:
                raise PlanError(
                    f"actor {p.actor} e{i}: parameter {big[0]} does not fit a 16-bit para "
                    f"field (at most {MAX_PARAM})"
                )


def emit_experiment(
    exp: Experiment,
    out_dir: str | Path,
    *,
    predicted: AmcodaResult | None = None,
    seed: int = 0,
    cnn: Cnn | None = None,
    name: str | None = None,
) -> Path:
    """Write the experiment folder for ``exp`` and return its path.

    ``predicted`` is waferflow's simulation of ``exp`` (run here if not given; it sets
    ``test_time``). ``seed`` makes the input values; ``cnn``, if given, is recorded in
    ``predicted.json`` so that ``waferflow emit predicted.json`` can rebuild the folder.
    ``name`` is the folder's name the settings record (default: ``out_dir``'s), for a
    folder written elsewhere first and renamed into place (``fileio.Staged``)."""
    check_format_limits(exp)
    validate_experiment(exp)
    if predicted is None:
        predicted = simulate_experiment(exp)
    elif predicted.experiment != exp.name or len(predicted.actors) != exp.n_actors:
        raise PlanError(
            f"the predicted result is for experiment {predicted.experiment} "
            f"({len(predicted.actors)} actors), not {exp.name} ({exp.n_actors} actors)"
        )
    final = Path(out_dir)
    # built in a fresh folder beside it, then put in place: a killed run leaves the old
    # experiment or none, and nothing of an earlier, larger experiment stays behind
    with atomic_dir(final) as root:
        script = root / "script"
        for sub in (script, root / "result", root / "report"):
            sub.mkdir(parents=True, exist_ok=True)
        for p in exp.programs:
            text = host_script(p, annotate=True, experiment=exp.name)
            (script / f"host_{p.actor}.txt").write_text(text, encoding="utf-8")
        write_input_files(exp, script, seed)
        settings = settings_json(exp, predicted, name or final.name)
        (root / "settings.json").write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")
        doc = predicted_json(exp, predicted, seed=seed, cnn=cnn)
        (root / "predicted.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return final
