"""Passes over the graph IR: the pass base, the registry, pipelines and the PassManager.

Importing this package imports every module in it, so that every pass is
registered (see ``_import_pass_modules``). The reference is docs/passes.md.
"""

from __future__ import annotations

import importlib
import pkgutil

from waferflow.passes.base import (
    Diagnostic,
    OptionSpec,
    Pass,
    PassContext,
    Severity,
    option,
)
from waferflow.passes.manager import (
    PassFailure,
    PassManager,
    PassRecord,
    check_pass_names,
    format_timing,
)
from waferflow.passes.pipeline import (
    PipelineSyntaxError,
    format_option_value,
    format_pipeline,
    parse_pipeline,
)
from waferflow.passes.registry import all_passes, get_pass, register_pass

DEFAULT_PIPELINE = "canonicalize,dce,split-backward,fuse-elementwise,annotate-cost"


def _import_pass_modules() -> None:
    # Pass modules are written by several people and register themselves when
    # imported; importing every module of the package (sorted, so the order is
    # fixed) keeps the registry full without a hand-kept list to forget.
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_import_pass_modules()


def describe_passes() -> str:
    """Every registered pass, sorted: name and summary; whether it needs a wafer and
    what of the IR it reads and writes; then one line per option with its type,
    default and help."""
    blocks: list[str] = []
    for cls in all_passes():
        wafer = "needs a wafer (--wafer); " if cls.needs_wafer else ""
        lines = [
            f"{cls.name} - {cls.summary}",
            f"    {wafer}reads {cls.reads}; writes {cls.writes}",
        ]
        specs = cls.option_specs()
        width = max((len(spec.describe()) for spec in specs), default=0)
        for spec in specs:
            lines.append(f"    {spec.describe():<{width}}  {spec.help}".rstrip())
        if not specs:
            lines.append("    (no options)")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) + "\n"


__all__ = [
    "DEFAULT_PIPELINE",
    "Diagnostic",
    "OptionSpec",
    "Pass",
    "PassContext",
    "PassFailure",
    "PassManager",
    "PassRecord",
    "PipelineSyntaxError",
    "Severity",
    "all_passes",
    "check_pass_names",
    "describe_passes",
    "format_option_value",
    "format_pipeline",
    "format_timing",
    "get_pass",
    "option",
    "parse_pipeline",
    "register_pass",
]
