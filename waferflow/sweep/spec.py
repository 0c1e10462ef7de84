"""Sweep files: models x wafers x plans x modes x batch sizes, as TOML.

    name = "d2d"                      # optional: default the file's name
    output = "d2d.sweep"              # optional: results folder (default NAME.sweep)

    [job]                             # every job's settings (a [grid] axis or a point
    model = "hf:gpt2-tiny"            #   overrides them)
    wafer = "mesh16x16"               # a preset, NAME@Kx, or a .toml (relative to this file)
    mode = "train"
    batch = 8
    plan = "auto"
    override.dies.rows = 4            # wafer fields over the preset, as in a wafer file

    [grid]                            # the product of these lists
    model = ["hf:gpt2-tiny", "hf:llama-tiny"]
    override.dies.link.bandwidth = ["25 GB/s", "50 GB/s", "100 GB/s"]

    [[points]]                        # and / or points listed one by one
    model = "cnn:amcoda"
    plan = "dp=2,tp=2"

Job fields (``FIELDS``): model, wafer, mode, batch, seq, dtype, optimizer, coarsen,
plan (``auto``, an explicit plan, or ``none``), place, place_time, seed, uniform, and
the ``override`` table. A job's wafer is its preset plus its overrides, read by the
same code as a wafer TOML file (``toml_io.wafer_from_doc``): unknown fields, bad
units and bad values are refused the same way. Everything is checked before any job
runs; every error names the file and the field (``grid.override.link.bandwidth[1]``,
``points[2].plan``), or for combinations that are only wrong together, the job.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from waferflow.errors import ConfigError, WaferflowError
from waferflow.fileio import read_text
from waferflow.frontend.options import check_optimizer
from waferflow.ir.target import Wafer, get_wafer
from waferflow.ir.target.catalog import split_view
from waferflow.ir.target.toml_io import loads_toml, wafer_from_doc, wafer_to_doc, wafer_to_toml

NONE_PLAN = "none"  # a job without a parallel plan (compile's default lowering)


@dataclass(frozen=True)
class Job:
    """One compile + simulate of a sweep: plain data, sent to a worker as is."""

    index: int  # position in the sweep (rows are written in this order)
    model: str
    wafer: str  # as written in the sweep file
    mode: str = "infer"
    batch: int | None = None
    seq: int | None = None
    dtype: str | None = None
    optimizer: str = "sgd"
    coarsen: int = 1
    plan: str | None = None  # None: no parallel plan
    place: str = "auto"
    place_time: float = 10.0
    seed: int = 0
    uniform: bool = True  # plan auto: hold it against every uniform plan
    override: tuple[tuple[str, Any], ...] = ()  # (wafer field path, value as written)
    wafer_toml: str = ""  # the resolved wafer (preset + overrides): what workers build
    model_digest: str = ""  # sha256 of a model file (path/file.py:factory), else ""

    def key(self, version: str) -> str:
        """A hash of every input of the job and the waferflow version: the job's
        identity when a sweep resumes."""
        doc = asdict(self)
        del doc["index"]
        doc["version"] = version
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def label(self) -> str:
        """A short description for progress lines."""
        parts = [self.model, self.wafer, *(f"{p}={v}" for p, v in self.override)]
        if self.plan is not None:
            parts.append(f"plan={self.plan}")
        return " ".join(parts)


@dataclass(frozen=True)
class Sweep:
    name: str
    path: Path
    output: Path
    jobs: tuple[Job, ...]
    override_paths: tuple[str, ...]  # every wafer field overridden by some job
    varied: tuple[str, ...]  # input columns with more than one value over the jobs


# --- field checks ----------------------------------------------------------------------


def _choice(*options: str) -> Callable[[Any, str], Any]:
    def check(v: Any, where: str) -> Any:
        if not isinstance(v, str) or v not in options:
            close = difflib.get_close_matches(str(v), options, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where} = {v!r}{hint}: use one of {', '.join(options)}")
        return v

    return check


def _int(low: int) -> Callable[[Any, str], Any]:
    def check(v: Any, where: str) -> Any:
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ConfigError(f"{where} = {v!r}: must be an integer >= {low}")
        return v

    return check


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
        raise ConfigError(f"{where} = {v!r}: must be a number > 0")
    return float(v)


def _text(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise ConfigError(f"{where} = {v!r}: must be a non-empty string")
    return v.strip()


def _flag(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{where} = {v!r}: must be true or false")
    return v


def _plan(v: Any, where: str) -> str | None:
    from waferflow.parallel.plan_spec import parse_plan
    from waferflow.parallel.search import is_auto

    text = _text(v, where)
    if text.lower() == NONE_PLAN:
        return None
    if is_auto(text):
        return "auto"
    try:
        parse_plan(text)
    except WaferflowError as e:
        raise ConfigError(f"{where} = {v!r}: {e}") from None
    return text


FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "model": _text,
    "wafer": _text,
    "mode": _choice("infer", "train"),
    "batch": _int(1),
    "seq": _int(1),
    "dtype": _choice("f32", "bf16", "f16"),
    "optimizer": _choice("sgd", "adamw"),
    "coarsen": _int(1),
    "plan": _plan,
    "place": _choice("auto", "cpsat", "none"),
    "place_time": _number,
    "seed": _int(0),
    "uniform": _flag,
}
OVERRIDE = "override"
TOP_KEYS = ("name", "output", "job", "grid", "points")


def _unknown(key: str, known: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown key {where}{hint}; allowed: {', '.join(known)}")


def _leaves(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A nested table's leaves as (dotted path, value), in file order."""
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _nest(pairs: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for path, value in pairs:
        *tables, leaf = path.split(".")
        at = doc
        for t in tables:
            at = at.setdefault(t, {})
        at[leaf] = value
    return doc


def _fields(table: Any, where: str, *, axes: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Check one table of job fields (``[job]``, ``[grid]``, a point): its values
    (lists of values when ``axes``) and its override leaves, by dotted path."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {table!r}")
    values: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for key, value in table.items():
        if key == OVERRIDE:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}.{OVERRIDE} must be a table of wafer fields")
            for path, leaf in _leaves(value):
                overrides[path] = _axis(leaf, f"{where}.{OVERRIDE}.{path}") if axes else leaf
            continue
        if key not in FIELDS:
            raise _unknown(key, [*FIELDS, OVERRIDE], f"{where}.{key}")
        if axes:
            values[key] = [FIELDS[key](v, f"{where}.{key}[{i}]")
                           for i, v in enumerate(_axis(value, f"{where}.{key}"))]  # fmt: skip
        else:
            values[key] = FIELDS[key](value, f"{where}.{key}")
    return values, overrides


def _axis(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of values, got {value!r}")
    return value


# --- wafers ----------------------------------------------------------------------------


def _split_view(spec: str) -> tuple[str, int]:
    base, factor = split_view(spec)
    return base, 1 if factor is None else factor


def build_wafer(spec: str, override: tuple[tuple[str, Any], ...], base_dir: Path) -> Wafer:
    """``spec`` (a preset, a .toml relative to ``base_dir``, ``NAME@Kx``) with the
    overrides applied, validated as a wafer file; the view ``@Kx`` is taken last."""
    base, factor = _split_view(spec)
    is_file = base.endswith(".toml") or "/" in base
    if not override:
        wafer = get_wafer(base_dir / base if is_file else base)
    else:
        doc = _nest(override)
        doc["preset"] = base  # wafer_from_doc reads a file preset relative to base_dir
        name = Path(base).stem if is_file else base
        wafer = wafer_from_doc(doc, "the sweep's overrides", base_dir, default_name=name)
    return wafer.coarsen(factor) if factor > 1 else wafer


def override_value(wafer_doc: dict[str, Any], path: str, given: Any) -> Any:
    """An override as the CSV records it: the wafer's value in SI units (``"25 GB/s"``
    -> ``25e9``), or the value given where the wafer keeps no such field
    (``faults.random_dead_fraction``)."""
    at: Any = wafer_doc
    for part in path.split("."):
        if not isinstance(at, dict) or part not in at:
            return given
        at = at[part]
    return at


# --- reading ---------------------------------------------------------------------------


def load_sweep(path: str | Path, output: str | Path | None = None) -> Sweep:
    """Read and check a sweep file; every job's wafer and model is checked too."""
    file = Path(path)
    try:
        text = read_text(file, "sweep file", "see examples/sweep_d2d.toml")
    except WaferflowError as e:  # missing, a folder, unreadable, not UTF-8
        raise ConfigError(str(e)) from None
    doc = loads_toml(text, str(path))
    try:
        return _read(doc, file, output)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def _read(doc: dict[str, Any], file: Path, output: str | Path | None) -> Sweep:
    for key in doc:
        if key not in TOP_KEYS:
            raise _unknown(key, list(TOP_KEYS), key)
    name = _text(doc.get("name", file.stem), "name")
    out = output if output is not None else doc.get("output", f"{name}.sweep")
    base, base_over = _fields(doc.get("job", {}), "job", axes=False)
    grid, grid_over = _fields(doc["grid"], "grid", axes=True) if "grid" in doc else ({}, {})
    points = doc.get("points", [])
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        raise ConfigError("points must be an array of tables ([[points]])")
    base_dir = file.parent
    # each grid value with the fixed overrides and the other axes' first values, so that
    # an error names the value; [job] overrides together (toml_io names the field)
    first = (grid.get("wafer") or [base.get("wafer")])[0]
    context = {**base_over, **{p: vals[0] for p, vals in grid_over.items()}}
    with_grid = f" with each grid.{OVERRIDE}'s first value" if grid_over else ""
    _check_override(first, context, base_dir, f"job.{OVERRIDE}{with_grid}")
    for path, vals in grid_over.items():
        for i, v in enumerate(vals):
            _check_override(first, {**context, path: v}, base_dir,
                            f"grid.{OVERRIDE}.{path}[{i}] = {v!r}")  # fmt: skip
    combos: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if grid or grid_over or not points:
        axes = [(k, v) for k, v in grid.items()] + [(f"{OVERRIDE}.{p}", v) for p, v in grid_over.items()]  # fmt: skip
        for values in itertools.product(*(v for _, v in axes)):
            chosen = dict(zip((k for k, _ in axes), values, strict=True))
            fixed = {k: v for k, v in chosen.items() if not k.startswith(f"{OVERRIDE}.")}
            over = {k.removeprefix(f"{OVERRIDE}."): v for k, v in chosen.items() if k not in fixed}
            combos.append(({**base, **fixed}, {**base_over, **over}))
    for i, point in enumerate(points):
        fixed, over = _fields(point, f"points[{i}]", axes=False)
        _check_override(fixed.get("wafer", base.get("wafer")), {**base_over, **over}, base_dir,
                        f"points[{i}].{OVERRIDE}")  # fmt: skip
        combos.append(({**base, **fixed}, {**base_over, **over}))
    jobs = tuple(_job(i, values, over, base_dir) for i, (values, over) in enumerate(combos))
    _check_models(jobs)
    paths = tuple(dict.fromkeys(p for j in jobs for p, _ in j.override))
    return Sweep(name, file, Path(out), jobs, paths, _varied(jobs, paths))


def _check_override(wafer: str | None, over: dict[str, Any], base_dir: Path, where: str) -> None:
    if not over or wafer is None:  # no wafer: the job says so
        return
    try:
        build_wafer(wafer, tuple(over.items()), base_dir)
    except WaferflowError as e:
        raise ConfigError(f"{where}: {_strip_origin(str(e))}") from None


def _strip_origin(message: str) -> str:
    return message.split("the sweep's overrides: ", 1)[-1]


def _job(index: int, values: dict[str, Any], over: dict[str, Any], base_dir: Path) -> Job:
    for need in ("model", "wafer"):
        if need not in values:
            raise ConfigError(
                f"job {index}: no {need}: give job.{need}, grid.{need} or one per point"
            )
    override = tuple(over.items())
    job = Job(index=index, override=override, **values)
    try:
        check_optimizer(job.mode, job.optimizer)  # an inference job has no optimizer
    except WaferflowError:
        raise ConfigError(
            f"job {index} ({job.label()}): optimizer = {job.optimizer!r} applies to training "
            f"only, and this job has mode = {job.mode!r}: vary the optimizer over training "
            "jobs only (list them as [[points]])"
        ) from None
    try:
        wafer = build_wafer(job.wafer, override, base_dir)
    except WaferflowError as e:
        raise ConfigError(f"job {index} ({job.label()}): {_strip_origin(str(e))}") from None
    digest = ""
    model_file, colon, _ = job.model.rpartition(":")
    if colon and model_file.endswith(".py"):
        file = base_dir / model_file
        if not file.is_file():
            raise ConfigError(
                f"job {index}: model file {model_file} not found beside the sweep file"
            )
        digest = hashlib.sha256(file.read_bytes()).hexdigest()[:16]
        job = replace(job, model=f"{file}:{job.model.rpartition(':')[2]}")
    return replace(job, wafer_toml=wafer_to_toml(wafer), model_digest=digest)


def _check_models(jobs: tuple[Job, ...]) -> None:
    """Build every distinct model once on meta tensors (names, files, sizes)."""
    from waferflow.frontend import load_model

    seen: set[tuple[Any, ...]] = set()
    for job in jobs:
        key = (job.model, job.batch, job.seq, job.dtype)
        if key in seen:
            continue
        seen.add(key)
        try:
            load_model(job.model, batch=job.batch, seq=job.seq, dtype=job.dtype)
        except WaferflowError as e:
            raise ConfigError(f"job {job.index} ({job.label()}): model: {e}") from None


INPUT_FIELDS = tuple(
    f.name for f in fields(Job) if f.name not in ("override", "wafer_toml", "model_digest")
)


def _varied(jobs: tuple[Job, ...], paths: tuple[str, ...]) -> tuple[str, ...]:
    out = [name for name in INPUT_FIELDS if name != "index"
           and len({getattr(j, name) for j in jobs}) > 1]  # fmt: skip
    for p in paths:  # values may be lists (faults.dead_cores): compared as JSON
        if len({json.dumps(dict(j.override).get(p), sort_keys=True) for j in jobs}) > 1:
            out.append(p)
    return tuple(out)


def wafer_of(job: Job) -> Wafer:
    """The job's wafer, from its resolved TOML (the same on every machine)."""
    from waferflow.ir.target.toml_io import parse_wafer_toml

    return parse_wafer_toml(job.wafer_toml, f"<wafer of job {job.index}>")


def override_columns(job: Job, wafer: Wafer) -> dict[str, Any]:
    doc = wafer_to_doc(wafer)
    return {p: override_value(doc, p, v) for p, v in job.override}


__all__ = ["FIELDS", "Job", "Sweep", "build_wafer", "load_sweep", "wafer_of"]
