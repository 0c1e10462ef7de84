"""The pass registry: pass names to pass classes.

The table is filled only by ``@register_pass`` while pass modules are imported
(``import waferflow.passes`` imports them all); nothing writes to it afterwards.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

from waferflow.errors import PassError
from waferflow.passes.base import Pass, option_specs

_NAME_RE = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")

P = TypeVar("P", bound=type[Pass])

_REGISTRY: dict[str, type[Pass]] = {}


def register_pass(cls: P) -> P:
    """Class decorator: check a pass class and record it under ``cls.name``.

    Apply it on top of ``@dataclass(frozen=True)``. Problems here are programming
    errors in the pass, so they raise TypeError / ValueError rather than PassError.
    """
    if not (isinstance(cls, type) and issubclass(cls, Pass)):
        raise TypeError(f"@register_pass needs a Pass subclass, got {cls!r}")
    # look in the class's own __dict__: a subclass not decorated inherits Pass's
    params = cls.__dict__.get("__dataclass_params__")
    if not dataclasses.is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"pass {cls.__name__} must be a @dataclass(frozen=True)")
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ValueError(
            f"pass {cls.__name__} needs a class attribute name like 'fuse-elementwise' "
            f"(lower case words joined by '-'), got {name!r}"
        )
    if "summary" not in cls.__dict__:
        cls.summary = _summary_from_doc(cls)
    option_specs(cls)  # raises if a field cannot be an option
    old = _REGISTRY.get(name)
    if old is not None and (old.__module__, old.__qualname__) != (
        cls.__module__,
        cls.__qualname__,
    ):
        raise ValueError(
            f"pass name {name!r} is taken by {old.__module__}.{old.__qualname__}; "
            f"cannot register {cls.__module__}.{cls.__qualname__}"
        )
    _REGISTRY[name] = cls
    return cls


def _summary_from_doc(cls: type[Pass]) -> str:
    doc = cls.__doc__ or ""
    # @dataclass writes "Name(field: type, ...)" when a class has no docstring
    if not doc.strip() or doc.startswith(f"{cls.__name__}("):
        raise ValueError(f"pass {cls.__name__} needs a docstring or a `summary` class attribute")
    return doc.strip().splitlines()[0].strip()


def get_pass(name: str) -> type[Pass]:
    """The pass class registered as ``name``; PassError with suggestions if unknown."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PassError(unknown_pass_message(name)) from None


def all_passes() -> list[type[Pass]]:
    """Every registered pass class, sorted by name."""
    return [_REGISTRY[n] for n in sorted(_REGISTRY)]


def pass_names() -> list[str]:
    return sorted(_REGISTRY)


def registered() -> Mapping[str, type[Pass]]:
    """A read-only view of the registry (name -> pass class)."""
    return MappingProxyType(_REGISTRY)


def did_you_mean(word: str, choices: list[str]) -> str:
    """`` did you mean 'x'?`` (with its leading space), or an empty string."""
    close = difflib.get_close_matches(word[:100], choices, n=3, cutoff=0.6)
    # a prefix ("fuse" for "fuse-elementwise") is too short for difflib's ratio
    if len(word) >= 3:
        close += [c for c in sorted(choices) if c.startswith(word) and c not in close]
    close = close[:3]
    if not close:
        return ""
    return " did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown_pass_message(name: str, where: str = "", names: list[str] | None = None) -> str:
    """``where`` (e.g. `` at column 5``) follows the name; ``names`` defaults to
    the registered passes."""
    names = sorted(names) if names is not None else pass_names()
    return (
        f"unknown pass {name!r}{where};{did_you_mean(name, names)} "
        f"registered passes: {', '.join(names) or '(none)'}"
    )
