"""What a pass is: a frozen dataclass with a name, typed options and ``apply``.

    @register_pass
    @dataclass(frozen=True)
    class FuseElementwise(Pass):
        \"\"\"Fold chains of elementwise ops into FUSED ops.\"\"\"

        name: ClassVar[str] = "fuse-elementwise"
        max: int = option(16, "most ops in one fused group")

        def apply(self, ctx: PassContext, graph: Graph) -> Graph: ...

Options are the dataclass fields; their pipeline spelling swaps ``_`` for ``-``.
Allowed option types: int, float, bool, str and Enum subclasses (spelled by value).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from waferflow.errors import PassError
from waferflow.ir.graph import Graph

if TYPE_CHECKING:  # only a type here; passes that use it import it themselves
    from waferflow.ir.target.wafer import Wafer

T = TypeVar("T")

OptionValue = int | float | bool | str | Enum


def option(default: T, help: str) -> T:
    """A pass option: a dataclass field with a default and a help line.

    Typed as returning ``T`` so that ``max: int = option(16, "...")`` type-checks,
    as ``dataclasses.field`` does.
    """
    return typing.cast(T, field(default=default, metadata={"help": help}))


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """One option of a pass, derived from a dataclass field."""

    name: str  # as spelled in a pipeline: keep-sources
    field_name: str  # as spelled in Python: keep_sources
    type: type
    default: OptionValue
    help: str

    @property
    def type_name(self) -> str:
        """``int``, ``float``, ``bool``, ``str`` or ``enum(a|b|c)``."""
        if issubclass(self.type, Enum):
            return "enum(" + "|".join(str(m.value) for m in self.type) + ")"
        return self.type.__name__

    def describe(self) -> str:
        """``max: int = 16``, the spelling used in error messages and listings."""
        from waferflow.passes.pipeline import format_option_value  # avoids an import cycle

        return f"{self.name}: {self.type_name} = {format_option_value(self.default)}"


_SCALAR_TYPES: tuple[type, ...] = (bool, int, float, str)


def _check_value(spec: OptionSpec, value: object, pass_name: str) -> None:
    """Raise PassError when ``value`` does not have the option's type."""
    ty = spec.type
    if ty is bool:
        ok = isinstance(value, bool)
    elif ty is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif ty is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, ty)
    if not ok:
        raise PassError(
            f"option {spec.name!r} of pass {pass_name!r} expects {spec.type_name}, "
            f"got {value!r} ({type(value).__name__})"
        )


@dataclass(frozen=True)
class Pass:
    """Base of all passes. Subclasses are frozen dataclasses registered with
    ``@register_pass``; ``name`` is the pipeline spelling, ``summary`` one line
    (taken from the docstring's first line when not set)."""

    name: ClassVar[str]
    summary: ClassVar[str]
    # what ``waferflow passes`` says of it: whether it needs a target wafer, and what
    # of the IR it reads and writes (its effect on the printed graph)
    needs_wafer: ClassVar[bool] = False
    reads: ClassVar[str] = "the ops"
    writes: ClassVar[str] = "the ops"

    def __post_init__(self) -> None:
        for spec in self.option_specs():
            value = getattr(self, spec.field_name)
            _check_value(spec, value, self.name)
            if spec.type is float and not isinstance(value, float):
                # an int given for a float option: store the float so equality holds
                object.__setattr__(self, spec.field_name, float(value))
        self.check_options()

    def check_options(self) -> None:
        """Range checks beyond the type; raise PassError naming the option."""

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        """Transform ``graph``: mutate it and return it, or return a new graph."""
        raise NotImplementedError(f"pass {type(self).__name__} does not implement apply")

    @classmethod
    def option_specs(cls) -> tuple[OptionSpec, ...]:
        return option_specs(cls)

    def option_values(self, *, non_default: bool = False) -> list[tuple[OptionSpec, OptionValue]]:
        """Each option with its value, in field order; only changed ones if asked."""
        out: list[tuple[OptionSpec, OptionValue]] = []
        for spec in self.option_specs():
            value = getattr(self, spec.field_name)
            if non_default and value == spec.default:
                continue
            out.append((spec, value))
        return out

    def __str__(self) -> str:
        from waferflow.passes.pipeline import format_pass  # avoids an import cycle

        return format_pass(self)


def option_specs(cls: type[Pass]) -> tuple[OptionSpec, ...]:
    """The options of a pass class, in field order. Raises TypeError for a field
    that cannot be an option (a programming error in the pass, not user input)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} must be a dataclass")
    hints = typing.get_type_hints(cls)
    specs: list[OptionSpec] = []
    for f in dataclasses.fields(cls):
        ty: Any = hints[f.name]
        if not (ty in _SCALAR_TYPES or (isinstance(ty, type) and issubclass(ty, Enum))):
            raise TypeError(
                f"option {f.name!r} of {cls.__name__} has type {ty!r}; "
                "options must be int, float, bool, str or an Enum"
            )
        if f.default is dataclasses.MISSING:
            raise TypeError(f"option {f.name!r} of {cls.__name__} needs a default")
        specs.append(
            OptionSpec(
                name=f.name.replace("_", "-"),
                field_name=f.name,
                type=ty,
                default=f.default,
                help=str(f.metadata.get("help", "")),
            )
        )
    return tuple(specs)


class Severity(Enum):
    NOTE = "note"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """A message a pass leaves for the user (it did not fail, but something is off)."""

    pass_name: str
    message: str
    severity: Severity = Severity.WARNING

    def __str__(self) -> str:
        return f"{self.severity.value}: {self.pass_name}: {self.message}"


@dataclass
class PassContext:
    """What passes share during one pipeline run.

    ``results`` holds analysis results keyed by the name of the pass that made
    them; read them back with ``get_result(key, Type)``, which checks the type,
    so a later pass never works on a result of the wrong kind. They are products
    for the caller (an actor plan, a memory report) and caches: a pass's decisions
    are in the IR, and no later pass needs a result to continue from the IR alone.
    """

    wafer: Wafer | None = None
    seed: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)
    results: dict[str, object] = field(default_factory=dict)

    def warn(self, pass_name: str, message: str) -> None:
        self.diagnostics.append(Diagnostic(pass_name, message, Severity.WARNING))

    def note(self, pass_name: str, message: str) -> None:
        self.diagnostics.append(Diagnostic(pass_name, message, Severity.NOTE))

    def put_result(self, key: str, result: object) -> None:
        """Store (or replace) the result under ``key``, normally the pass name."""
        self.results[key] = result

    def get_result(self, key: str, kind: type[T]) -> T:
        """The result stored under ``key``; PassError if missing or not a ``kind``."""
        if key not in self.results:
            have = ", ".join(sorted(self.results)) or "none"
            raise PassError(
                f"no analysis result {key!r} (a {kind.__name__}); run pass {key!r} "
                f"earlier in the pipeline (results present: {have})"
            )
        result = self.results[key]
        if not isinstance(result, kind):
            raise PassError(
                f"analysis result {key!r} is a {type(result).__name__}, not a {kind.__name__}"
            )
        return result

    def find_result(self, key: str, kind: type[T]) -> T | None:
        """Like ``get_result`` but None when missing (still checks the type)."""
        if key not in self.results:
            return None
        return self.get_result(key, kind)

    def require_wafer(self, pass_name: str) -> Wafer:
        """The target wafer; PassError telling the user to give one if missing."""
        if self.wafer is None:
            raise PassError(
                f"pass {pass_name!r} needs a target wafer; give one (e.g. --wafer <preset>)"
            )
        return self.wafer
