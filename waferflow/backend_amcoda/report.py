"""Compile a seed plan and describe it: ``compile_seed_plan`` (CNN + plan string ->
programs + simulated timing), the ``settings.json`` and ``predicted.json`` of an
emitted experiment, and the CNN / plan as JSON so an experiment can be emitted again
from a file (``waferflow emit plan.json --target amcoda``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from waferflow.backend_amcoda.generate import generate_experiment
from waferflow.backend_amcoda.layers import (
    Cnn,
    ConvLayer,
    FcLayer,
    Layer,
    LossLayer,
    PoolLayer,
    cnn_layers_from_graph,
)
from waferflow.backend_amcoda.plans import SeedPlan, parse_seed_plan
from waferflow.backend_amcoda.program import (
    BLOCK_FLOATS,
    CLOCK_NS,
    MAX_ACTORS,
    MAX_PARAM,
    MEMORY_BLOCKS,
    Experiment,
)
from waferflow.backend_amcoda.simulate import AmcodaResult, simulate_experiment
from waferflow.backend_amcoda.validate import hazard_b_sites
from waferflow.errors import ConfigError, PlanError
from waferflow.fileio import loads_json, read_text, write_text
from waferflow.ir.graph import Graph

PLAN_FORMAT = "waferflow.amcoda-plan"
PREDICTED_FORMAT = "waferflow.amcoda-predicted"
FORMAT_VERSION = 1
TEST_TIME_MARGIN = 0.075  # §7: keep test_time 5-10 % above the expected Total_time
# the reference simulator's wall time per actor per simulated cycle (§7: 2.5-3.5 us)
_WALL_S_PER_ACTOR_CYCLE = 3.0e-6


def waferflow_version() -> str:
    try:
        return metadata.version("waferflow")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


# -- test_time ----------------------------------------------------------------------------


def choose_test_time(batch_ns: int) -> int:
    """A ``test_time`` (ns) 5-10 % above the batch time: 7.5 % more, rounded up to the
    coarsest step (100 us ... 10 ns) that stays within 10 %."""
    if batch_ns <= 0:
        raise PlanError(f"a predicted batch time must be positive, got {batch_ns} ns")
    target = batch_ns * (1 + TEST_TIME_MARGIN)
    for step in (100_000, 10_000, 1_000, 100, CLOCK_NS):
        t = math.ceil(target / step) * step
        if t <= batch_ns * 1.10:
            return int(t)
    return int(math.ceil(target / CLOCK_NS) * CLOCK_NS)


# -- the plan and the experiment's notes --------------------------------------------------


def plan_text_of(exp: Experiment) -> str:
    """The plan string recorded in the experiment's notes (``plan <text>``), else its name."""
    for n in exp.notes:
        if n.startswith("plan "):
            return n[len("plan ") :]
    return exp.name


def _flag(exp: Experiment, key: str) -> bool:
    return any(n.startswith(f"{key}:") for n in exp.notes)


# -- the CNN as JSON ----------------------------------------------------------------------

_KINDS: dict[str, type] = {"conv": ConvLayer, "pool": PoolLayer, "fc": FcLayer, "loss": LossLayer}


def cnn_to_json(cnn: Cnn) -> dict[str, Any]:
    kind = {v: k for k, v in _KINDS.items()}
    return {
        "batch": cnn.batch,
        "layers": [{"kind": kind[type(x)], **asdict(x)} for x in cnn.layers],
    }


def cnn_from_json(doc: object, source: str = "<json>") -> Cnn:
    """The CNN of ``cnn_to_json``; a malformed document raises ``ConfigError`` naming
    the field."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: model must be an object with batch and layers")
    batch = doc.get("batch")
    layers = doc.get("layers")
    if not isinstance(batch, int) or isinstance(batch, bool):
        raise ConfigError(f"{source}: model.batch must be an integer, got {batch!r}")
    if not isinstance(layers, list):
        raise ConfigError(f"{source}: model.layers must be a list")
    out: list[Layer] = []
    for i, item in enumerate(layers):
        where = f"{source}: model.layers[{i}]"
        if not isinstance(item, dict) or item.get("kind") not in _KINDS:
            raise ConfigError(f"{where}.kind must be one of {', '.join(_KINDS)}")
        cls = _KINDS[item["kind"]]
        fields = {k: v for k, v in item.items() if k != "kind"}
        try:
            layer = cls(**fields)
        except TypeError as err:
            raise ConfigError(f"{where}: {err}") from None
        for k, v in fields.items():
            if k != "name" and (not isinstance(v, int) or isinstance(v, bool)):
                raise ConfigError(f"{where}.{k} must be an integer, got {v!r}")
        out.append(layer)
    return Cnn(batch, tuple(out))


# -- compile ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SeedCompileResult:
    """A seed plan compiled for the AMCoDA machine: the CNN, the plan, the programs and
    their simulated timing (waferflow's cycle-level model of the authors' simulator)."""

    cnn: Cnn
    plan: SeedPlan
    experiment: Experiment
    result: AmcodaResult
    hazard_guard: bool = False

    @property
    def batch_ns(self) -> int:
        return self.result.batch_ns

    def summary(self) -> str:
        """Batch time and, per actor, compute / communication / overlap / utilisation and
        the memory peak."""
        r = self.result
        exp = self.experiment
        lines = [
            f"AMCoDA plan {self.plan} for a {len(self.cnn.convs)}-conv CNN, batch "
            f"{self.cnn.batch}: {exp.n_actors} actors, MemWidth {exp.mem_ports}"
            + (", hazard guard on" if self.hazard_guard else ""),
            f"batch time {r.batch_ns / 1e6:.6f} ms (actor 1's last stamp, the authors' "
            f"Total_time: {r.actor1_last_ns / 1e6:.6f} ms)",
            f"{'actor':<6}{'role':<20}{'compute ms':>11}{'comm ms':>9}{'overlap ms':>11}"
            f"{'util':>7}  {'memory peak':<20}",
        ]
        for a in r.actors:
            mib = a.peak_blocks * BLOCK_FLOATS * 4 / 2**20
            lines.append(
                f"A{a.actor:<5}{a.role:<20}{a.compute_ns / 1e6:>11.4f}{a.comm_ns / 1e6:>9.4f}"
                f"{a.overlap_ns / 1e6:>11.4f}{a.utilisation(r.batch_ns):>7.1%}  "
                f"{a.peak_blocks:>3}/{MEMORY_BLOCKS} blocks ({mib:.1f} MiB)"
            )
        sites = hazard_b_sites(exp)
        if sites and not self.hazard_guard:
            lines.append(
                f"{len(sites)} mid-program STORE/LOAD entries (hazard (b) sites, §6.3): the "
                "simulation confirmed no ALU completion is lost at this MemWidth"
            )
        lines += [f"! {h}" for h in r.hazards]
        lines += [f"! never finished: {s}" for s in r.stuck]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def emit(self, out_dir: str | Path, *, seed: int = 0, name: str | None = None) -> Path:
        """Write the experiment folder (see ``emit_experiment``)."""
        from waferflow.backend_amcoda.emit import emit_experiment

        return emit_experiment(
            self.experiment, out_dir, predicted=self.result, seed=seed, cnn=self.cnn, name=name
        )

    def plan_json(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": FORMAT_VERSION,
            "plan": str(self.plan),
            "mem_ports": self.experiment.mem_ports,
            "hazard_guard": self.hazard_guard,
            "model": cnn_to_json(self.cnn),
        }

    def save_plan(self, path: str | Path) -> Path:
        """Write the plan and CNN as JSON; ``waferflow emit`` reads it back."""
        return write_text(path, json.dumps(self.plan_json(), indent=1) + "\n")


def compile_seed_plan(
    graph_or_cnn: Graph | Cnn,
    plan_text: str | SeedPlan,
    *,
    mem_ports: int = 4,
    hazard_guard: bool = False,
) -> SeedCompileResult:
    """Build the seed machine's programs for a CNN (a traced graph or a ``Cnn``) under
    a seed plan (``pipe``, ``gpipe=M``, ``layers=<d|t...>,ways=R``) and simulate them.

    Raises ``PlanError`` (a ``WaferflowError``) for anything the machine or its program
    format cannot take, naming the limit."""
    cnn = graph_or_cnn if isinstance(graph_or_cnn, Cnn) else cnn_layers_from_graph(graph_or_cnn)
    plan = parse_seed_plan(plan_text, cnn) if isinstance(plan_text, str) else plan_text
    try:
        exp = generate_experiment(cnn, plan, mem_ports=mem_ports, hazard_guard=hazard_guard)
    except ValueError as err:  # a field of the program format overflowed
        raise PlanError(
            f"plan {plan} does not fit the program format: {err} (every Op_Config "
            f"parameter is a 16-bit field, at most {MAX_PARAM}); use a smaller batch or layer"
        ) from err
    try:
        result = simulate_experiment(exp)
    except PlanError as err:
        if "hazard (b)" in str(err) and not hazard_guard:
            raise PlanError(
                f"{err}\nthe plan's template loses an ALU completion at MemWidth {mem_ports}; "
                "compile it with hazard_guard=True (CLI: --hazard-guard), which turns "
                "mid-program STORE/LOADs into 1-operand ADDs"
            ) from err
        raise
    return SeedCompileResult(cnn, plan, exp, result, hazard_guard)


@dataclass(frozen=True, slots=True)
class PlanFile:
    """What ``waferflow emit`` needs from a saved plan: CNN, plan string, options."""

    cnn: Cnn
    plan: str
    mem_ports: int | None
    hazard_guard: bool


def load_plan_file(path: str | Path) -> PlanFile:
    """Read a plan saved by ``SeedCompileResult.save_plan`` or an emitted experiment's
    ``predicted.json`` (both hold the plan string and the CNN)."""
    doc = loads_json(read_text(path, "plan file"), str(path))
    if not isinstance(doc, dict) or doc.get("format") not in (PLAN_FORMAT, PREDICTED_FORMAT):
        fmt = doc.get("format") if isinstance(doc, dict) else None
        hint = (
            " (a waferflow.compiled bundle holds the compiled actor plan, not a seed plan: "
            "`waferflow compile MODEL --wafer amcoda --plan P --emit amcoda --emit-dir DIR` "
            "writes the seed's programs for a compiled plan)"
            if fmt == "waferflow.compiled"
            else ""
        )
        raise ConfigError(
            f"{path}: not an AMCoDA plan file{hint}; give a plan string such as "
            f"'layers=ddt,ways=4', a file written by SeedCompileResult.save_plan, or an "
            f"emitted experiment's predicted.json"
        )
    if "model" not in doc:
        raise ConfigError(f"{path}: has no model (the CNN); it cannot be emitted again")
    plan = doc.get("plan")
    if not isinstance(plan, str):
        raise ConfigError(f"{path}: plan must be a plan string, got {plan!r}")
    ports = doc.get("mem_ports")
    if ports is not None and (not isinstance(ports, int) or isinstance(ports, bool)):
        raise ConfigError(f"{path}: mem_ports must be an integer, got {ports!r}")
    return PlanFile(
        cnn_from_json(doc["model"], str(path)),
        plan,
        ports,
        bool(doc.get("hazard_guard", False)),
    )


# -- settings.json and predicted.json -----------------------------------------------------


def settings_json(exp: Experiment, result: AmcodaResult, folder_name: str) -> dict[str, Any]:
    """The simulator's compile-time settings (``basic.h``, §1.2) for this experiment."""
    test_time = choose_test_time(result.batch_ns)
    cycles = result.batch_ns // CLOCK_NS
    defines = [
        f"#define test_actor_num {exp.n_actors}",
        f'#define file_name string("{folder_name}")',
        f"#define test_time {test_time}",
        f"#define SU_write_num {exp.mem_ports}",
        f"#define SU_read_num {exp.mem_ports}",
    ]
    return {
        "file_name": folder_name,
        "test_actor_num": exp.n_actors,
        "test_time": test_time,
        "test_time_unit": "ns",
        "SU_write_num": exp.mem_ports,
        "SU_read_num": exp.mem_ports,
        "predicted_batch_ns": result.batch_ns,
        "test_time_margin": round(test_time / result.batch_ns - 1, 4),
        "expected_wall_seconds": round(cycles * exp.n_actors * _WALL_S_PER_ACTOR_CYCLE, 1),
        "basic_h": defines,
    }


def predicted_json(
    exp: Experiment,
    result: AmcodaResult,
    *,
    seed: int,
    cnn: Cnn | None = None,
) -> dict[str, Any]:
    """waferflow's prediction for the experiment, to compare with the run's reports."""
    doc: dict[str, Any] = {
        "format": PREDICTED_FORMAT,
        "version": FORMAT_VERSION,
        "waferflow_version": waferflow_version(),
        "experiment": exp.name,
        "plan": plan_text_of(exp),
        "mem_ports": exp.mem_ports,
        "hazard_guard": _flag(exp, "hazard_guard"),
        "authors_slip": _flag(exp, "authors_slip"),
        "notes": list(exp.notes),
        "seed": seed,
        "batch_ns": result.batch_ns,
        "actor1_last_ns": result.actor1_last_ns,
        "test_time": choose_test_time(result.batch_ns),
        "complete": result.complete,
        "actors": [
            {
                "actor": a.actor,
                "role": a.role,
                "layer": a.layer,
                "entries": len(exp.program(a.actor).entries),
                "compute_ns": a.compute_ns,
                "comm_ns": a.comm_ns,
                "overlap_ns": a.overlap_ns,
                "busy_ns": a.busy_ns,
                "last_ns": a.last_ns,
                "utilisation": round(a.utilisation(result.batch_ns), 6),
                "peak_blocks": a.peak_blocks,
            }
            for a in result.actors
        ],
    }
    if result.hazards:
        doc["lost_completions"] = list(result.hazards)
    if cnn is not None:
        doc["model"] = cnn_to_json(cnn)
    return doc


def check_settings(
    settings: dict[str, Any] | None, n_actors: int, batch_ns: int | None
) -> list[tuple[str, str, bool]]:
    """Problems with ``settings.json`` as (rule, message, is_error); ``batch_ns`` is the
    expected batch time (waferflow's simulation of the scripts), if known."""
    if settings is None:
        return [("settings", "no settings.json: set basic.h by hand (§1.2)", False)]
    out: list[tuple[str, str, bool]] = []

    def integer(key: str) -> int | None:
        v = settings.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            out.append(("settings", f"settings.json {key} must be a positive integer", True))
            return None
        return v

    n = integer("test_actor_num")
    if n is not None and n > MAX_ACTORS:
        out.append(("actors", f"test_actor_num {n} exceeds interface_size {MAX_ACTORS}", True))
    elif n is not None and n != n_actors:
        out.append(("settings", f"test_actor_num {n} but {n_actors} scripts are checked", True))
    w, r = integer("SU_write_num"), integer("SU_read_num")
    if w is not None and r is not None and w != r:
        out.append(("settings", f"SU_write_num {w} differs from SU_read_num {r}", False))
    t = integer("test_time")
    if t is not None and batch_ns is not None:
        if t <= batch_ns:
            out.append(
                (
                    "test-time",
                    f"test_time {t} ns does not exceed the expected batch time {batch_ns} ns; "
                    "the run would be cut off and look like a deadlock (§6.2 f2)",
                    True,
                )
            )
        elif t < batch_ns * 1.05:
            out.append(
                ("test-time", f"test_time {t} ns leaves less than 5% over {batch_ns} ns", False)
            )
    return out


def run_total_time(root: str | Path) -> int | None:
    """``Total_time`` (ns) of ``report/report_1.txt`` after a run of the authors'
    simulator, or None if there is no report yet."""
    f = Path(root) / "report" / "report_1.txt"
    if not f.is_file():
        return None
    m = re.search(r"Total_time:\s*(-?\d+)", f.read_text(encoding="utf-8", errors="replace"))
    return int(m.group(1)) if m else None
