"""The IR's text form, read back: ``parse_graph`` is the inverse of ``print_graph``.

The grammar is in docs/ir.md. One compiled regular expression splits the text
into tokens (whitespace and ``#`` comments are skipped inside it, so the scan
runs at C speed); a small recursive-descent parser walks the token list once.
Positions are character offsets, turned into line:column only when an error
is reported, which keeps a 100k-op graph linear and quick.
"""

from __future__ import annotations

import bisect
import json
import re

from waferflow.errors import ParseError
from waferflow.fileio import MAX_DEPTH, MAX_INT_DIGITS, short
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import (
    REPLICATED_EVERYWHERE,
    Attrs,
    AttrValue,
    Cost,
    Graph,
    Phase,
    Provenance,
    Value,
)
from waferflow.ir.opkind import SOURCES, OpKind
from waferflow.ir.parse_parallel import ParallelClauses
from waferflow.ir.sharding import MeshAxis, Sharding
from waferflow.ir.tokens import (
    _BAD,
    _COST,
    _EOF,
    _GNAME,
    _INT_RE,
    _LOC,
    _NUM,
    _PUNCT,
    _STR,
    _TYPE,
    _VAL,
    _WORD,
    Token,
    _suggest,
)

__all__ = ["parse_graph"]

_TOKEN_RE = re.compile(
    r"(?>(?:\s+|#[^\n]*)*)"  # whitespace and comments, skipped (atomic: no backtracking)
    r"(?:"
    r"(?P<val>%[\w.]+)"
    r'|(?P<type>[A-Za-z]\w*\[[^\]\n{}"]*\])'
    r'|(?P<loc>loc\("(?:[^"\\\n]|\\.)*", "(?:[^"\\\n]|\\.)*"\))'
    r"|(?P<cost>cost\(flops=-?[0-9]+, read=-?[0-9]+, write=-?[0-9]+\))"
    r"|(?P<word>[^\W\d]\w*)"
    r"|(?P<num>-?[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?|-inf(?!\w))"
    r'|(?P<str>"(?:[^"\\\n]|\\.)*")'
    r'|(?P<gname>@[^\s{}#"]*)'
    r"|(?P<punct>[=,:{}\[\]()])"
    r"|(?P<bad>\S)"
    r")",
)
_LOC_RE = re.compile(r'loc\(("(?:[^"\\\n]|\\.)*"), ("(?:[^"\\\n]|\\.)*")\)')
_COST_RE = re.compile(r"cost\(flops=(-?[0-9]+), read=(-?[0-9]+), write=(-?[0-9]+)\)")
_FLOAT_RE = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

_KINDS: dict[str, OpKind] = {k.value: k for k in OpKind}
_DTYPES: dict[str, DType] = {d.value: d for d in DType}
_PHASES: dict[str, Phase] = {p.value: p for p in Phase}
_COST_KEYS = ("flops", "read", "write")


def parse_graph(text: str, source: str = "<text>") -> Graph:
    """Parse the text form of one graph (as ``print_graph`` writes it).

    Raises ``ParseError`` with the line and column of the first problem.
    """
    return _Parser(text, source).parse()


def _describe(tok: Token) -> str:
    kind, text, _ = tok
    if kind == _EOF:
        return "end of input"
    if kind == _STR:
        return "a string"
    if len(text) > 30:
        text = text[:27] + "..."
    return repr(text)


class _Parser(ParallelClauses):
    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        toks: list[Token] = [
            (m.lastgroup, m.group(m.lastgroup), m.start(m.lastgroup))  # type: ignore[misc]
            for m in _TOKEN_RE.finditer(text)
        ]
        end = toks[-1][2] + len(toks[-1][1]) if toks else 0
        toks.append((_EOF, "", end))
        self.toks = toks
        self.i = 0
        self.values: dict[str, tuple[Value, int]] = {}  # name -> (value, offset of definition)
        self.type_cache: dict[str, TensorType] = {}
        self.in_op = False  # inside an op, whose text sits on one line
        self.degrees: dict[MeshAxis, int] = {}  # of the graph's parallel(...) header

    # -- helpers ------------------------------------------------------------------
    def error(self, message: str, pos: int) -> ParseError:
        line = self.text.count("\n", 0, pos) + 1
        col = pos - self.text.rfind("\n", 0, pos)
        return ParseError(message, line, col, self.source)

    def line_of(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def peek(self) -> Token:
        return self.toks[self.i]

    def advance(self) -> Token:
        tok = self.toks[self.i]
        if tok[0] != _EOF:
            self.i += 1
        return tok

    def unexpected(self, tok: Token, wanted: str) -> ParseError:
        if tok[0] == _BAD:
            return self.error(self.bad_char(tok[1]), tok[2])
        # An op sits on one line: when the culprit is on a later line, the
        # thing is missing at the end of this one, so point there.
        idx = self.i if self.toks[self.i] is tok else self.i - 1
        if self.in_op and idx > 0 and tok[0] != _EOF:
            prev = self.toks[idx - 1]
            prev_end = prev[2] + len(prev[1])
            if "\n" in self.text[prev_end : tok[2]]:
                return self.error(f"expected {wanted} at the end of the line", prev_end)
        return self.error(f"expected {wanted}, found {_describe(tok)}", tok[2])

    @staticmethod
    def bad_char(ch: str) -> str:
        if ch == '"':
            return "unterminated string (strings are JSON strings on one line)"
        if ch == "%":
            return "expected a value name after '%' (letters, digits, '_' and '.')"
        return f"unexpected character {ch!r}"

    def expect_punct(self, p: str, wanted: str | None = None) -> Token:
        tok = self.advance()
        if tok[0] != _PUNCT or tok[1] != p:
            raise self.unexpected(tok, wanted or f"'{p}'")
        return tok

    def at_punct(self, p: str) -> bool:
        tok = self.toks[self.i]
        return tok[0] == _PUNCT and tok[1] == p

    # -- grammar ------------------------------------------------------------------
    def parse(self) -> Graph:
        tok = self.advance()
        if tok[0] != _WORD or tok[1] != "graph":
            raise self.unexpected(tok, "'graph @name {' at the start")
        tok = self.advance()
        if tok[0] != _GNAME:
            raise self.unexpected(tok, "the graph's name as '@name'")
        graph = Graph(tok[1][1:])
        tok = self.peek()
        if tok[0] == _WORD and tok[1] == "parallel":
            graph.parallel = self.parse_graph_parallel()
            self.degrees = graph.parallel.degrees()
        open_tok = self.expect_punct("{", "'{' after the graph's name")
        while True:
            tok = self.peek()
            if tok[0] == _VAL or (tok[0] == _WORD and tok[1] != "return"):
                self.in_op = True
                self.parse_op(graph)
                self.in_op = False
            elif tok[0] == _WORD:  # return
                self.advance()
                break
            elif tok[0] == _EOF:
                raise self.error(
                    f"expected 'return' and '}}' to close graph @{graph.name} "
                    f"(opened at line {self.line_of(open_tok[2])}), found end of input",
                    tok[2],
                )
            else:
                raise self.unexpected(tok, "an op ('%name = kind ...') or 'return'")
        outputs: list[Value] = []
        if self.peek()[0] == _VAL:
            outputs.append(self.use_value(self.advance()))
            while self.at_punct(","):
                self.advance()
                outputs.append(self.use_value(self.expect_value()))
        tok = self.advance()
        if tok[0] != _PUNCT or tok[1] != "}":
            if tok[0] == _EOF:
                raise self.error(
                    f"expected '}}' to close graph @{graph.name} "
                    f"(opened at line {self.line_of(open_tok[2])}), found end of input",
                    tok[2],
                )
            raise self.unexpected(tok, "'}' after the return list")
        tok = self.peek()
        if tok[0] != _EOF:
            raise self.unexpected(tok, "end of input after the graph's closing '}'")
        graph.set_outputs(outputs)
        return graph

    def expect_value(self) -> Token:
        tok = self.advance()
        if tok[0] != _VAL:
            raise self.unexpected(tok, "a value ('%name')")
        return tok

    def use_value(self, tok: Token) -> Value:
        entry = self.values.get(tok[1][1:])
        if entry is None:
            raise self.error(
                f"use of undefined value {tok[1]} (values must be defined before use)", tok[2]
            )
        return entry[0]

    def parse_op(self, graph: Graph) -> None:
        # The hot path of the parser: written with locals rather than helpers.
        toks = self.toks
        values = self.values
        result_toks: list[Token] = []
        if toks[self.i][0] == _VAL:
            result_toks.append(self.advance())
            while self.at_punct(","):
                self.advance()
                result_toks.append(self.expect_value())
            self.expect_punct("=", "'=' after the result names")
        kind_tok = self.advance()
        kind = _KINDS.get(kind_tok[1]) if kind_tok[0] == _WORD else None
        if kind is None:
            if kind_tok[0] != _WORD:
                raise self.unexpected(kind_tok, "an op kind")
            choices = list(_KINDS) if result_toks else [*_KINDS, "return"]
            raise self.error(
                f"unknown op kind {short(kind_tok[1])}{_suggest(kind_tok[1], choices)}", kind_tok[2]
            )
        items: list[tuple[str, AttrValue]] = []
        name_tok: Token | None = None
        if toks[self.i][0] == _STR:
            name_tok = self.advance()
            if kind not in SOURCES:
                raise self.error(
                    f"only source ops (input, param, buffer, constant) take a quoted name; "
                    f"write {{name=...}} for {kind.value}",
                    name_tok[2],
                )
        operands: list[Value] = []
        tok = toks[self.i]
        while tok[0] == _VAL:
            entry = values.get(tok[1][1:])
            if entry is None:
                raise self.error(
                    f"use of undefined value {tok[1]} (values must be defined before use)", tok[2]
                )
            operands.append(entry[0])
            self.i += 1
            tok = toks[self.i]
            if tok[0] != _PUNCT or tok[1] != ",":
                break
            self.i += 1
            tok = toks[self.i]
            if tok[0] != _VAL:
                raise self.unexpected(tok, "a value ('%name')")
        if tok[0] == _PUNCT and tok[1] == "{":
            items = self.parse_attrs()
        if name_tok is not None:
            if any(k == "name" for k, _ in items):
                raise self.error("attribute 'name' is given twice", name_tok[2])
            keys = [k for k, _ in items]
            # keep a sorted attribute list sorted (as Attrs.of builds it)
            at = bisect.bisect_right(keys, "name") if keys == sorted(keys) else 0
            items.insert(at, ("name", self.string_of(name_tok)))
        colon = self.expect_punct(":", "':' before the result types")
        types, shardings = self.parse_types()
        if len(types) != len(result_toks):
            raise self.error(
                f"{kind.value} has {len(result_toks)} result(s) but {len(types)} type(s)",
                colon[2],
            )
        phase = Phase.FWD
        tok = toks[self.i]
        if tok[0] == _WORD and tok[1] in _PHASES:
            phase = _PHASES[tok[1]]
            self.i += 1
            tok = toks[self.i]
        prov = None
        if tok[0] == _LOC:
            prov = self.fast_loc(tok)
            self.i += 1
            tok = toks[self.i]
        elif tok[0] == _WORD and tok[1] == "loc":
            prov = self.parse_loc()
            tok = toks[self.i]
        cost = None
        if tok[0] == _COST:
            m = _COST_RE.fullmatch(tok[1])
            assert m is not None  # the token regex matched the same shape
            cost = Cost(*(self.int_of(m[j], tok[2]) for j in (1, 2, 3)))
            self.i += 1
        elif tok[0] == _WORD and tok[1] == "cost":
            cost = self.parse_cost()
        tok = toks[self.i]
        par = None
        if tok[0] == _WORD and tok[1] == "par":
            par = self.parse_op_parallel(operands)
        fresh: dict[str, int] = {}
        for t in result_toks:
            name = t[1][1:]
            first = values[name][1] if name in values else fresh.get(name)
            if first is not None:
                raise self.error(
                    f"value {t[1]} is defined twice (first at line {self.line_of(first)})", t[2]
                )
            fresh[name] = t[2]
        op = graph.add_op(
            kind,
            operands,
            types,
            attrs=Attrs(tuple(items)),
            cost=cost,
            phase=phase,
            prov=prov,
            names=list(fresh),
            exact_names=True,
            par=par,
            shardings=shardings,
        )
        for v, t in zip(op.results, result_toks, strict=True):
            values[v.name] = (v, t[2])

    def fast_loc(self, tok: Token) -> Provenance:
        m = _LOC_RE.fullmatch(tok[1])
        assert m is not None  # the token regex matched the same shape
        module = self.string_of((_STR, m[1], tok[2] + m.start(1)))
        aten = self.string_of((_STR, m[2], tok[2] + m.start(2)))
        return Provenance(module, aten)

    def parse_types(self) -> tuple[list[TensorType], list[Sharding]]:
        """Result types, each optionally followed by its sharding ``{dp=split(0)}``."""
        types: list[TensorType] = []
        shardings: list[Sharding] = []
        tok = self.peek()
        if not self.starts_type(tok):
            return types, shardings
        while True:
            ty = self.parse_type()
            types.append(ty)
            shardings.append(
                self.parse_sharding(ty.shape) if self.at_punct("{") else REPLICATED_EVERYWHERE
            )
            if not self.at_punct(","):
                return types, shardings
            self.advance()
            tok = self.peek()
            if not self.starts_type(tok):
                raise self.unexpected(tok, "a tensor type like f32[2,3]")

    def starts_type(self, tok: Token) -> bool:
        if tok[0] == _TYPE:
            return True
        # a dtype word without a (well-formed) shape: parse_type explains
        return tok[0] == _WORD and (
            tok[1] in _DTYPES or (self.toks[self.i + 1][1] == "[" and tok[1] not in _PHASES)
        )

    def parse_type(self) -> TensorType:
        tok = self.advance()
        if tok[0] != _TYPE:
            raise self.error(
                f"bad type {short(tok[1])}: write the element type and shape like f32[2,3] "
                f"(f32[] for a scalar)",
                tok[2],
            )
        cached = self.type_cache.get(tok[1])
        if cached is not None:
            return cached
        ty = self.type_of(tok)
        self.type_cache[tok[1]] = ty
        return ty

    def type_of(self, tok: Token) -> TensorType:
        text, pos = tok[1], tok[2]
        bracket = text.index("[")
        dtype = _DTYPES.get(text[:bracket])
        if dtype is None:
            raise self.error(
                f"unknown element type {short(text[:bracket])}{_suggest(text[:bracket], list(_DTYPES))}"
                f" (known: {', '.join(_DTYPES)})",
                pos,
            )
        inner = text[bracket + 1 : -1]
        dims: list[int] = []
        if inner.strip():
            offset = bracket + 1
            for part in inner.split(","):
                stripped = part.strip()
                col = pos + offset + (len(part) - len(part.lstrip()))
                if not stripped.isascii() or not stripped.isdigit():
                    raise self.error(
                        f"bad dimension {short(stripped)} in type {short(text)}: dimensions are "
                        f"non-negative integers",
                        col,
                    )
                dims.append(self.int_of(stripped, col))
                offset += len(part) + 1
        try:
            return TensorType(tuple(dims), dtype)
        except ValueError as exc:
            raise self.error(f"bad type {short(text)}: {exc}", pos) from None

    def parse_attrs(self) -> list[tuple[str, AttrValue]]:
        open_tok = self.expect_punct("{")
        items: list[tuple[str, AttrValue]] = []
        seen: set[str] = set()
        if self.at_punct("}"):
            self.advance()
            return items
        while True:
            key_tok = self.advance()
            if key_tok[0] != _WORD:
                raise self.unexpected(key_tok, "an attribute name")
            key = key_tok[1]
            if key in seen:
                raise self.error(f"attribute {short(key)} is given twice", key_tok[2])
            seen.add(key)
            if self.at_punct("="):
                self.advance()
                value = self.parse_value()
            else:
                value = True  # a bare key is a flag
            items.append((key, value))
            tok = self.advance()
            if tok[0] == _PUNCT and tok[1] == "}":
                return items
            if tok[0] == _PUNCT and tok[1] == ",":
                continue
            if tok[0] == _EOF:
                raise self.error(
                    f"unclosed '{{' (opened at line {self.line_of(open_tok[2])}): "
                    f"expected ',' or '}}'",
                    tok[2],
                )
            raise self.unexpected(tok, "',' or '}' in the attribute list")

    def parse_value(self, depth: int = 1) -> AttrValue:
        tok = self.advance()
        kind, text, pos = tok
        if kind == _NUM:
            return self.number_of(tok)
        if kind == _STR:
            return self.string_of(tok)
        if kind == _WORD:
            if text == "true":
                return True
            if text == "false":
                return False
            if text == "none":
                return None
            if text == "inf":
                return float("inf")
            if text == "nan":
                return float("nan")
            raise self.error(
                f"bad attribute value {short(text)}: expected a number, true, false, none, "
                f'inf, nan, a "string" or a [list]',
                pos,
            )
        if kind == _PUNCT and text == "[":
            if depth > MAX_DEPTH:
                raise self.error(f"lists nested more than {MAX_DEPTH} deep", pos)
            elems: list[AttrValue] = []
            if self.at_punct("]"):
                self.advance()
                return ()
            while True:
                elems.append(self.parse_value(depth + 1))
                sep = self.advance()
                if sep[0] == _PUNCT and sep[1] == "]":
                    return tuple(elems)
                if not (sep[0] == _PUNCT and sep[1] == ","):
                    if sep[0] == _EOF:
                        raise self.error(
                            f"unclosed '[' (opened at line {self.line_of(pos)})", sep[2]
                        )
                    raise self.unexpected(sep, "',' or ']' in the list")
        raise self.unexpected(tok, "an attribute value")

    def number_of(self, tok: Token) -> int | float:
        text = tok[1]
        if _INT_RE.fullmatch(text):
            return self.int_of(text, tok[2])
        if text == "-inf":
            return float("-inf")
        if _FLOAT_RE.fullmatch(text):
            return float(text)
        raise self.error(f"bad number {short(text)}", tok[2])

    def int_of(self, text: str, pos: int) -> int:
        digits = len(text.lstrip("-"))
        if digits > MAX_INT_DIGITS:
            raise self.error(f"integer too long ({digits} digits, at most {MAX_INT_DIGITS})", pos)
        return int(text)

    def string_of(self, tok: Token) -> str:
        text = tok[1]
        if "\\" not in text:
            return text[1:-1]
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self.error(f"bad string escape: {exc.msg}", tok[2] + exc.pos) from None
        assert isinstance(value, str)
        return value

    def parse_loc(self) -> Provenance:
        self.advance()  # loc
        self.expect_punct("(", "'(' after loc")
        parts: list[str] = []
        for i in range(2):
            tok = self.advance()
            if tok[0] != _STR:
                raise self.unexpected(tok, 'a string: loc("module.path", "aten.op")')
            parts.append(self.string_of(tok))
            self.expect_punct("," if i == 0 else ")")
        return Provenance(parts[0], parts[1])

    def parse_cost(self) -> Cost:
        self.advance()  # cost
        self.expect_punct("(", "'(' after cost")
        found: dict[str, int] = {}
        while True:
            key_tok = self.advance()
            if key_tok[0] != _WORD or key_tok[1] not in _COST_KEYS:
                raise self.unexpected(key_tok, "flops=, read= or write= in cost(...)")
            if key_tok[1] in found:
                raise self.error(f"cost field {key_tok[1]!r} is given twice", key_tok[2])
            self.expect_punct("=")
            num = self.advance()
            if num[0] != _NUM or not _INT_RE.fullmatch(num[1]):
                raise self.unexpected(num, f"an integer for {key_tok[1]}")
            found[key_tok[1]] = self.int_of(num[1], num[2])
            sep = self.advance()
            if sep[0] == _PUNCT and sep[1] == ")":
                break
            if not (sep[0] == _PUNCT and sep[1] == ","):
                raise self.unexpected(sep, "',' or ')' in cost(...)")
        return Cost(found.get("flops", 0), found.get("read", 0), found.get("write", 0))
