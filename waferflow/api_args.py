"""The Python API's arguments, checked before any work (``waferflow.api``).

A wrong type used to fail deep inside (``'int' object has no attribute 'strip'``,
``'str' object is not callable``), and some values were dropped in silence (a
``dtype`` or ``batch`` given with an ``nn.Module``, which is traced as it is, on its
own inputs). Each is one ``WaferflowError`` naming the argument and what to give.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from waferflow.errors import ConfigError, PassError, PlanError, WaferflowError
from waferflow.fileio import check_output, file_path, short
from waferflow.frontend.options import check_not_class


def plan_text(plan: Any) -> str | None:
    """``plan``: ``None``, a plan string, or a ``ParallelPlan`` (spelt as its string)."""
    if plan is None or isinstance(plan, str):
        return plan
    from waferflow.parallel.plan_spec import ParallelPlan

    if isinstance(plan, ParallelPlan):
        return str(plan)
    raise PlanError(
        f"plan={short(plan)}: give a plan string like 'dp=2,tp=4,pp=2,microbatches=4', "
        "'auto' (searched), a ParallelPlan, or None (no parallel plan)"
    )


def check_compile_args(*, passes: Any, progress: Any, seed: Any, place_time: Any) -> None:
    """``compile``'s options that are not the model's: their types, and ``place_time``
    and ``seed`` also when nothing is placed (as the command line checks them)."""
    if passes is not None and not isinstance(passes, str):
        raise PassError(
            f"passes={short(passes)}: give a pipeline string like 'canonicalize,dce', "
            "or None (the default pipeline)"
        )
    if progress is not None and not callable(progress):
        raise ConfigError(
            f"progress={short(progress)} is not callable: give a function taking the "
            "step's name (progress=print), or None"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed={short(seed)}: give an integer >= 0")
    from waferflow.passes.place_result import PlaceOptions

    PlaceOptions(time_limit=place_time)  # a finite number > 0


def pass_names(value: Any) -> tuple[str, ...]:
    """``print_ir_after``: pass names (a bare string was split into its letters:
    ``'dce'`` was "unknown pass 'c'")."""
    bad = PassError(f"print_ir_after={short(value)}: give a list of pass names, e.g. ['dce']")
    if isinstance(value, str):
        raise bad
    try:
        names = tuple(value)
    except TypeError:
        raise bad from None
    if not all(isinstance(n, str) for n in names):
        raise bad
    return names


def check_module_args(model: Any, *, given_inputs: bool, batch: Any, seq: Any, dtype: Any) -> None:
    """``batch`` / ``seq`` size the inputs waferflow builds for a zoo model or model
    file, and ``dtype`` casts such a model; an ``nn.Module`` is traced as it is, on
    ``example_inputs``, so each would be ignored. So would ``batch`` / ``seq`` with
    ``example_inputs`` given for a zoo model."""
    check_not_class(model)
    module = not isinstance(model, str | Path)
    for what, value in (("batch", batch), ("seq", seq)):
        if value is not None and (module or given_inputs):
            shape = "example_inputs" if given_inputs else "its example inputs"
            raise ConfigError(
                f"{what}={short(value)} sizes the inputs waferflow builds for a zoo model or "
                f"model file; this model is traced on {shape}, so it would be ignored: size "
                f"the inputs themselves, or leave {what} out"
            )
    if dtype is not None and module:
        raise ConfigError(
            f"dtype={short(dtype)} casts a zoo model or model file; an nn.Module is traced "
            "in the dtype of its parameters and inputs, so it would be ignored: cast them "
            "(model.to(torch.bfloat16) and its inputs), or leave dtype out"
        )


def output(path: Any, what: str) -> Path:
    """An output path checked before anything is drawn or written: a str or
    ``Path``, not empty, not a folder or device, in a folder where files can be made."""
    if not isinstance(path, str | os.PathLike):
        raise WaferflowError(f"{what}: path={short(path)} is not a file name: give a str or Path")
    if str(path) == "":
        raise WaferflowError(f"{what}: path: give a file name")
    try:
        out = file_path(path)  # a folder ('.' included), a device or a pipe
    except WaferflowError as err:
        raise WaferflowError(f"{what}: {err}") from None
    check_output(path, f"{what}: path")  # a file above it, a folder no file can be made in
    return out


def check_images(images: Any) -> dict[str, Path]:
    """``to_html``'s ``images``: caption -> picture file."""
    if not isinstance(images, Mapping):
        raise WaferflowError(
            f"to_html: images={short(images)}: give a dict of caption -> picture file, "
            "e.g. {'links': 'links.png'}, or None (drawn beside the page)"
        )
    out = {}
    for caption, file in images.items():
        if not isinstance(caption, str) or not isinstance(file, str | os.PathLike):
            raise WaferflowError(
                f"to_html: images entry {short(caption)}: {short(file)}: give a caption "
                "(str) and a picture file (str or Path)"
            )
        out[caption] = Path(file)
    return out


def check_count(value: Any, what: str, low: int) -> None:
    """A count argument (``top_k``, ``max_tracks``): an integer >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{what}={short(value)}: give an integer >= {low}")
