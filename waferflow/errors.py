"""User-facing errors. The CLI prints ``WaferflowError``s as one message (exit 2);
anything else is a bug and keeps its traceback. docs/errors.md lists every class with
an example message and what to do about it."""

from __future__ import annotations


class WaferflowError(Exception):
    """A problem with the user's input: the message names the cause and what to do."""


class ParseError(WaferflowError):
    """Malformed IR text, reported with line and column."""

    def __init__(self, message: str, line: int, col: int, source: str = "<text>") -> None:
        self.line = line
        self.col = col
        self.source = source
        super().__init__(f"{source}:{line}:{col}: {message}")


class FormatError(WaferflowError):
    """An input file that does not follow its format: bytes that are not UTF-8, a
    number out of range, a missing field or one of the wrong type. ``path`` names the
    field (``$.plan.actors[3].core``), ``source`` the file."""

    def __init__(self, path: str, message: str, source: str = "") -> None:
        self.path = path
        self.source = source
        self.detail = message
        where = f"{source}: {path}" if source and path else (source or path)
        super().__init__(f"{where}: {message}" if where else message)


class VerificationError(WaferflowError):
    """A graph (or plan) breaks an IR invariant."""


class ConfigError(WaferflowError):
    """A malformed TOML file or option; the message names the field."""


class TraceError(WaferflowError):
    """A model that could not be traced."""


class PassError(WaferflowError):
    """An unknown pass or option, or a pass that failed."""


class PlanError(WaferflowError):
    """A parallel plan that is invalid or does not fit the wafer."""


class SolverHangError(WaferflowError):
    """A CP-SAT call stopped by its hang guard (far more CPU time than its deterministic
    limit needs). Not a ``PlanError``: a pass that falls back on a ``PlanError`` must
    not hide it, since the plan it would return instead differs between runs."""
