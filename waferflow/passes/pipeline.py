"""Pipeline strings: ``canonicalize,dce,fuse-elementwise{max=8},parallelize{dp=2,tp=4}``.

Grammar (spaces are allowed between tokens)::

    pipeline := [ pass ( "," pass )* ]
    pass     := NAME [ "{" [ option ( "," option )* ] "}" ]
    option   := NAME [ "=" value ]          a bare NAME sets a bool option to true
    value    := BARE | '"' chars '"'        BARE: no spaces or , { } = "

Option names use ``-`` (``keep-sources``); ``_`` is accepted too. Values are typed
by the pass's dataclass fields: ints, floats, bools (true/false/1/0), strings and
enums by value. ``format_pipeline`` writes the canonical form back: no spaces, only
the options that differ from their defaults.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from waferflow.errors import PassError
from waferflow.passes.base import OptionSpec, OptionValue, Pass
from waferflow.passes.registry import did_you_mean, registered, unknown_pass_message

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_NOT_BARE = frozenset(',{}="')
_SAFE_BARE_RE = re.compile(r"[A-Za-z0-9_.:/+-]+")
_INT_RE = re.compile(r"[+-]?[0-9]+")


class PipelineSyntaxError(PassError):
    """A malformed pipeline string; ``col`` is the 1-based column of the problem."""

    def __init__(self, message: str, text: str, col: int) -> None:
        self.col = col
        self.text = text
        caret = " " * (col - 1) + "^"
        super().__init__(f"pipeline syntax error at column {col}: {message}\n  {text}\n  {caret}")


@dataclass(frozen=True, slots=True)
class _RawOption:
    key: str
    value: str | None  # None: a bare flag
    quoted: bool
    col: int  # of the key
    value_col: int


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def col(self, pos: int | None = None) -> int:
        return (self.pos if pos is None else pos) + 1

    def error(self, message: str, pos: int | None = None) -> PipelineSyntaxError:
        return PipelineSyntaxError(message, self.text, self.col(pos))

    def found(self) -> str:
        return f"found {self.peek()!r}" if not self.at_end() else "found end of pipeline"

    def name(self, what: str) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _NAME_CHARS:
            self.pos += 1
        if self.pos == start:
            raise self.error(f"expected {what}, {self.found()}")
        return self.text[start : self.pos]

    def value(self) -> tuple[str, bool]:
        """A bare or quoted value; returns (text, quoted)."""
        if self.peek() == '"':
            start = self.pos
            self.pos += 1
            chars: list[str] = []
            while True:
                if self.at_end():
                    raise self.error("unterminated string", start)
                c = self.text[self.pos]
                self.pos += 1
                if c == '"':
                    return "".join(chars), True
                if c == "\\":
                    if self.at_end() or self.text[self.pos] not in '"\\':
                        raise self.error('only \\" and \\\\ escapes are allowed', self.pos - 1)
                    c = self.text[self.pos]
                    self.pos += 1
                chars.append(c)
        start = self.pos
        while (
            self.pos < len(self.text)
            and self.text[self.pos] not in _NOT_BARE
            and not self.text[self.pos].isspace()
        ):
            self.pos += 1
        if self.pos == start:
            raise self.error(f"expected a value, {self.found()}")
        return self.text[start : self.pos], False


def parse_pipeline(text: str, registry: Mapping[str, type[Pass]] | None = None) -> list[Pass]:
    """Parse a pipeline string into pass instances (see the module docstring).

    The whole string is read first, so a syntax error anywhere is reported before
    an unknown pass or a bad option value. Names are looked up in ``registry``
    (default: the registered passes).
    """
    table = registry if registry is not None else registered()
    s = _Scanner(text)
    raw_passes: list[tuple[str, int, list[_RawOption]]] = []
    s.skip_ws()
    while not s.at_end():
        name_pos = s.pos
        name = s.name("a pass name")
        s.skip_ws()
        raw: list[_RawOption] = []
        if s.peek() == "{":
            raw = _parse_options(s)
            s.skip_ws()
        raw_passes.append((name, s.col(name_pos), raw))
        if s.at_end():
            break
        if s.peek() != ",":
            raise s.error(f"expected ',' or end of pipeline, {s.found()}")
        s.pos += 1
        s.skip_ws()
        if s.at_end():
            raise s.error("expected a pass name after ',', found end of pipeline")
    return [_build(table, name, raw, col) for name, col, raw in raw_passes]


def _parse_options(s: _Scanner) -> list[_RawOption]:
    open_pos = s.pos
    s.pos += 1  # the "{"
    s.skip_ws()
    out: list[_RawOption] = []
    if s.peek() == "}":
        s.pos += 1
        return out
    while True:
        key_pos = s.pos
        key = s.name("an option name")
        s.skip_ws()
        value: str | None = None
        quoted = False
        value_pos = s.pos
        if s.peek() == "=":
            s.pos += 1
            s.skip_ws()
            value_pos = s.pos
            value, quoted = s.value()
            s.skip_ws()
        out.append(_RawOption(key, value, quoted, s.col(key_pos), s.col(value_pos)))
        if s.peek() == ",":
            s.pos += 1
            s.skip_ws()
            continue
        if s.peek() == "}":
            s.pos += 1
            return out
        if s.at_end():
            raise s.error(f"unterminated '{{' opened at column {s.col(open_pos)}")
        raise s.error(f"expected ',' or '}}' after option {key!r}, {s.found()}")


def _build(table: Mapping[str, type[Pass]], name: str, raw: list[_RawOption], col: int) -> Pass:
    cls = table.get(name)
    if cls is None:
        raise PassError(unknown_pass_message(name, f" at column {col}", list(table)))
    specs = {spec.name: spec for spec in cls.option_specs()}
    kwargs: dict[str, OptionValue] = {}
    for opt in raw:
        spec = specs.get(opt.key.replace("_", "-"))
        if spec is None:
            raise PassError(
                f"pass {name!r} has no option {opt.key!r} at column {opt.col};"
                f"{did_you_mean(opt.key, list(specs))} {_options_listing(cls)}"
            )
        if spec.field_name in kwargs:
            raise PassError(
                f"option {spec.name!r} of pass {name!r} is given twice (again at column {opt.col})"
            )
        kwargs[spec.field_name] = _convert(spec, opt, name)
    return cls(**kwargs)


def _options_listing(cls: type[Pass]) -> str:
    specs = cls.option_specs()
    if not specs:
        return f"pass {cls.name!r} takes no options"
    return "its options: " + ", ".join(spec.describe() for spec in specs)


def _convert(spec: OptionSpec, opt: _RawOption, pass_name: str) -> OptionValue:
    ty = spec.type
    text = opt.value
    if text is None:
        if ty is bool:
            return True
        raise PassError(
            f"option {spec.name!r} of pass {pass_name!r} needs a value "
            f"({spec.type_name}) at column {opt.col}, e.g. {pass_name}{{{spec.name}=...}}"
        )

    def bad(expected: str) -> PassError:
        return PassError(
            f"option {spec.name!r} of pass {pass_name!r} expects {expected}, "
            f"got {text!r} at column {opt.value_col}"
        )

    if ty is bool:
        low = text.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise bad("a bool (true, false, 1 or 0)")
    if ty is int:
        if not _INT_RE.fullmatch(text):
            raise bad("an int")
        return int(text)
    if ty is float:
        try:
            return float(text)
        except ValueError:
            raise bad("a float") from None
    if ty is str:
        return text
    if issubclass(ty, Enum):
        for member in ty:
            if str(member.value) == text:
                return member
        raise bad("one of " + ", ".join(repr(str(m.value)) for m in ty))
    raise AssertionError(f"unsupported option type {ty!r}")  # option_specs rejects these


def format_option_value(value: OptionValue) -> str:
    """The canonical pipeline spelling of an option value."""
    if isinstance(value, Enum):
        return _format_str(str(value.value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value)  # shortest text that parses back to the same float
    return _format_str(value)


def _format_str(text: str) -> str:
    if _SAFE_BARE_RE.fullmatch(text):
        return text
    # the parser reads only two escapes (backslash-quote, backslash-backslash)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_pass(p: Pass) -> str:
    """``name`` or ``name{opt=value,...}`` with only the non-default options."""
    opts = p.option_values(non_default=True)
    if not opts:
        return p.name
    return p.name + "{" + ",".join(f"{s.name}={format_option_value(v)}" for s, v in opts) + "}"


def format_pipeline(passes: Iterable[Pass]) -> str:
    """The canonical pipeline string; ``parse_pipeline`` of it gives equal passes."""
    return ",".join(format_pass(p) for p in passes)
