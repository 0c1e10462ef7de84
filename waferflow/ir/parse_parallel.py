"""The parallel annotations of the text form, read back (docs/ir.md, *Parallel
annotations*): the graph's ``parallel(...)`` header, a value's sharding after its type
(``{dp=split(0), tp=partial}``) and an op's ``par(...)``. A mixin of the parser
(``parser._Parser``), whose token helpers it uses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from waferflow.errors import ParseError
from waferflow.fileio import short
from waferflow.ir.graph import Value
from waferflow.ir.parallel import GraphParallel, MbMode, OpParallel, ParallelLevel, sorted_axes
from waferflow.ir.sharding import PARTIAL, REPLICATED, MeshAxis, Placement, Sharding, Split
from waferflow.ir.tokens import _INT_RE, _NUM, _PUNCT, _STR, _WORD, Token, _suggest

_AXES: dict[str, MeshAxis] = {a.value: a for a in MeshAxis}
_MODES: dict[str, MbMode] = {m.value: m for m in MbMode}
_LEVELS: dict[str, ParallelLevel] = {lv.value: lv for lv in ParallelLevel}
_GRAPH_PAR_INTS = ("dp", "tp", "mb", "pp", "ranks")
_BOOLS = {"true": True, "false": False}
_GRAPH_PAR_KEYS = ("plan", "wafer", *_GRAPH_PAR_INTS, "level", "reshard", "ep", "zero")
_OP_PAR_KEYS = ("stage", "mb", "in", "div", "stats", "on")


class ParallelClauses:
    """Parses the parallel clauses; ``degrees`` holds the header's mesh degrees."""

    degrees: dict[MeshAxis, int]

    if TYPE_CHECKING:  # provided by the parser

        def advance(self) -> Token: ...
        def peek(self) -> Token: ...
        def at_punct(self, p: str) -> bool: ...
        def expect_punct(self, p: str, wanted: str | None = None) -> Token: ...
        def error(self, message: str, pos: int) -> ParseError: ...
        def unexpected(self, tok: Token, wanted: str) -> ParseError: ...
        def int_of(self, text: str, pos: int) -> int: ...
        def string_of(self, tok: Token) -> str: ...

    def expect_int(self, what: str) -> int:
        tok = self.advance()
        if tok[0] != _NUM or not _INT_RE.fullmatch(tok[1]):
            raise self.unexpected(tok, f"an integer for {what}")
        return self.int_of(tok[1], tok[2])

    def expect_word(self, choices: dict[str, object], what: str) -> Token:
        tok = self.advance()
        if tok[0] != _WORD or tok[1] not in choices:
            if tok[0] == _WORD:
                raise self.error(
                    f"unknown {what} {short(tok[1])}{_suggest(tok[1], list(choices))} "
                    f"(known: {', '.join(choices)})",
                    tok[2],
                )
            raise self.unexpected(tok, what)
        return tok

    def keyed_fields(
        self, clause: str, keys: tuple[str, ...], parse_one: Callable[[str, int], object]
    ) -> dict[str, object]:
        """``clause(key=value, ...)``: each key once, from ``keys``; ``parse_one(key)``
        reads a value."""
        self.advance()  # the clause's word
        self.expect_punct("(", f"'(' after {clause}")
        found: dict[str, object] = {}
        while True:
            key_tok = self.advance()
            if key_tok[0] != _WORD or key_tok[1] not in keys:
                if key_tok[0] == _WORD:
                    raise self.error(
                        f"unknown field {short(key_tok[1])} in {clause}(...)"
                        f"{_suggest(key_tok[1], list(keys))} (known: {', '.join(keys)})",
                        key_tok[2],
                    )
                raise self.unexpected(key_tok, f"a field of {clause}(...)")
            if key_tok[1] in found:
                raise self.error(f"field {short(key_tok[1])} is given twice", key_tok[2])
            self.expect_punct("=", f"'=' after {key_tok[1]}")
            found[key_tok[1]] = parse_one(key_tok[1], key_tok[2])
            sep = self.advance()
            if sep[0] == _PUNCT and sep[1] == ")":
                return found
            if not (sep[0] == _PUNCT and sep[1] == ","):
                raise self.unexpected(sep, f"',' or ')' in {clause}(...)")

    def parse_graph_parallel(self) -> GraphParallel:
        start = self.peek()[2]

        def one(key: str, pos: int) -> object:
            if key in ("plan", "wafer"):
                tok = self.advance()
                if tok[0] != _STR:
                    raise self.unexpected(tok, f'a string for {key} (e.g. {key}="...")')
                return self.string_of(tok)
            if key == "level":
                return _LEVELS[self.expect_word(_LEVELS, "level")[1]]  # type: ignore[arg-type]
            if key == "reshard":
                return self.expect_word(_BOOLS, "true or false")[1] == "true"
            value = self.expect_int(key)
            if key == "zero":
                if value not in (0, 1, 2, 3):
                    raise self.error(f"zero must be 0, 1, 2 or 3 (a ZeRO stage), got {value}", pos)
                return value
            if value < 1:
                raise self.error(f"{key} must be at least 1, got {value}", pos)
            return value

        found = self.keyed_fields("parallel", _GRAPH_PAR_KEYS, one)
        for key in ("plan", "wafer"):
            if key not in found:
                raise self.error(f'parallel(...) needs {key}="..."', start)
        return GraphParallel(**found)  # type: ignore[arg-type]

    def parse_sharding(self, shape: tuple[int, ...]) -> Sharding:
        """``{dp=split(0), tp=partial}``: the placement along each listed axis."""
        self.expect_punct("{")
        items: dict[MeshAxis, Placement] = {}
        if self.at_punct("}"):
            self.advance()
            return Sharding()
        while True:
            axis_tok = self.expect_word(_AXES, "mesh axis")  # type: ignore[arg-type]
            axis = _AXES[axis_tok[1]]
            if axis in items:
                raise self.error(f"axis {axis.value!r} is given twice", axis_tok[2])
            self.expect_punct("=", f"'=' after {axis.value}")
            items[axis] = self.parse_placement(axis, shape)
            sep = self.advance()
            if sep[0] == _PUNCT and sep[1] == "}":
                return Sharding.of(items)
            if not (sep[0] == _PUNCT and sep[1] == ","):
                raise self.unexpected(sep, "',' or '}' in the sharding")

    def parse_placement(self, axis: MeshAxis, shape: tuple[int, ...]) -> Placement:
        tok = self.advance()
        if tok[0] == _WORD and tok[1] == "partial":
            return PARTIAL
        if tok[0] == _WORD and tok[1] == "replicated":
            return REPLICATED
        if tok[0] != _WORD or tok[1] != "split":
            raise self.unexpected(tok, "split(dim), partial or replicated")
        self.expect_punct("(", "'(' after split")
        dim_tok = self.peek()
        dim = self.expect_int("the split dimension")
        block: int | None = None
        if self.at_punct(","):
            self.advance()
            key = self.advance()
            if key[0] != _WORD or key[1] != "block":
                raise self.unexpected(key, "block=")
            self.expect_punct("=", "'=' after block")
            block = self.expect_int("block")
        self.expect_punct(")", "')' after the split")
        if block is None:
            n = self.degrees.get(axis, 1)
            size = shape[dim] if 0 <= dim < len(shape) else 0
            if n < 2 or size % n:
                raise self.error(
                    f"split({dim}) along {axis.value} is contiguous over the axis's ranks, "
                    f"but the graph has {axis.value}={n} and the dimension is {size}: give "
                    f"split({dim}, block=B)",
                    dim_tok[2],
                )
            block = size // n
        if dim < 0 or block < 1:
            raise self.error(f"split needs dim >= 0 and block >= 1, got {dim}, {block}", dim_tok[2])
        return Split(dim, block)

    def parse_op_parallel(self, operands: list[Value]) -> OpParallel:
        start = self.peek()[2]

        def axes_list() -> list[MeshAxis]:
            self.expect_punct("[")
            out: list[MeshAxis] = []
            while not self.at_punct("]"):
                out.append(_AXES[self.expect_word(_AXES, "mesh axis")[1]])  # type: ignore[arg-type]
                if not self.at_punct("]"):
                    self.expect_punct(",", "',' or ']'")
            self.advance()
            return out

        def one(key: str, pos: int) -> object:
            if key == "stage":
                return self.expect_int("stage")
            if key == "mb":
                return _MODES[self.expect_word(_MODES, "micro-batch mode")[1]]  # type: ignore[arg-type]
            if key == "div":
                return sorted_axes(axes_list())
            if key == "stats":
                self.expect_punct("{")
                stats: list[tuple[MeshAxis, int]] = []
                while not self.at_punct("}"):
                    axis = _AXES[self.expect_word(_AXES, "mesh axis")[1]]  # type: ignore[arg-type]
                    self.expect_punct("=", f"'=' after {axis.value}")
                    stats.append((axis, self.expect_int("the statistics dimension")))
                    if not self.at_punct("}"):
                        self.expect_punct(",", "',' or '}'")
                self.advance()
                return tuple(stats)
            self.expect_punct("[", f"'[' after {key}=")
            cells: list[object] = []
            while not self.at_punct("]"):
                if key == "in":
                    i = len(cells)
                    shape = operands[i].type.shape if i < len(operands) else ()
                    cells.append(self.parse_sharding(shape))
                else:
                    cells.append(self.expect_int("a core"))
                if not self.at_punct("]"):
                    self.expect_punct(",", "',' or ']'")
            self.advance()
            if key == "in" and len(cells) != len(operands):
                raise self.error(
                    f"in=[...] lists {len(cells)} placement(s) for {len(operands)} operand(s)",
                    pos,
                )
            return tuple(cells)

        found = self.keyed_fields("par", _OP_PAR_KEYS, one)
        if "stage" not in found:
            raise self.error("par(...) needs stage=", start)
        return OpParallel(
            stage=found["stage"],  # type: ignore[arg-type]
            mode=found.get("mb", MbMode.EARLY),  # type: ignore[arg-type]
            inputs=found.get("in", tuple(v.sharding for v in operands)),  # type: ignore[arg-type]
            divided=found.get("div", ()),  # type: ignore[arg-type]
            stats=found.get("stats", ()),  # type: ignore[arg-type]
            region=found.get("on", ()),  # type: ignore[arg-type]
        )
