"""The graph verifier: structural invariants and cheap type rules.

``verify_graph`` raises ``VerificationError`` listing the problems it found (the
first ``MAX_REPORTED``, one per line, each naming the op by its index, printed
result names and kind). ``graph_problems`` returns them all as strings.

Type rules live in ``TYPE_RULES``: a table of (op kinds, check) pairs. A check
looks at one op and returns a problem or ``None``; add a row to extend it.
Kinds with no row (collectives, send/recv, opaque, ...) are not type-checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType

from waferflow.errors import VerificationError
from waferflow.ir.graph import Graph, Op, Value
from waferflow.ir.opkind import ELEMENTWISE, OpKind
from waferflow.ir.verify_parallel import parallel_problems

__all__ = [
    "MAX_REPORTED",
    "TYPE_RULES",
    "TypeRule",
    "VerificationError",
    "graph_problems",
    "verify_graph",
]

MAX_REPORTED = 20

# What the text form can spell (see parser.py): value names after '%', graph names after '@'.
_VALUE_NAME_RE = re.compile(r"[\w.]+")
_GRAPH_NAME_RE = re.compile(r'[^\s{}#"]*')


def verify_graph(graph: Graph) -> None:
    """Raise ``VerificationError`` if ``graph`` breaks an IR invariant."""
    problems = graph_problems(graph)
    if not problems:
        return
    shown = problems[:MAX_REPORTED]
    lines = [f"graph @{graph.name} is invalid ({len(problems)} problem(s)):"]
    lines.extend(f"  {p}" for p in shown)
    if len(problems) > len(shown):
        lines.append(f"  ... and {len(problems) - len(shown)} more")
    raise VerificationError("\n".join(lines))


def _label(index: int, op: Op) -> str:
    names = ", ".join(f"%{v.name}" for v in op.results)
    what = f"{names} = {op.kind.value}" if names else op.kind.value
    return f"op {index} ({what})"


def graph_problems(graph: Graph) -> list[str]:
    """Every invariant ``graph`` breaks, in op order, as one message each."""
    problems: list[str] = []
    if not _GRAPH_NAME_RE.fullmatch(graph.name):
        problems.append(
            f"graph name {graph.name!r} cannot be printed: no whitespace, braces, '#' or '\"'"
        )
    # Every result of the graph, by identity, with the index of its op.
    position: dict[int, int] = {}
    for index, op in enumerate(graph.ops):
        for v in op.results:
            position.setdefault(id(v), index)
    defined: set[int] = set()
    seen_ops: dict[int, int] = {}
    names: dict[str, int] = {}
    out_of_order = False
    for index, op in enumerate(graph.ops):
        label = _label(index, op)
        if id(op) in seen_ops:
            problems.append(f"{label}: the same op object also appears as op {seen_ops[id(op)]}")
            continue
        seen_ops[id(op)] = index
        for v in op.operands:
            if id(v) in defined:
                continue
            later = position.get(id(v))
            if later is None:
                problems.append(
                    f"{label}: operand %{v.name} is not defined by any op of this graph"
                )
            else:
                out_of_order = True
                problems.append(
                    f"{label}: operand %{v.name} is used before op {later} defines it "
                    f"(ops must be in topological order)"
                )
        for v in op.results:
            if v.producer is not op:
                problems.append(f"{label}: result %{v.name} does not name this op as its producer")
            if id(v) in defined:
                problems.append(f"{label}: result %{v.name} is also the result of an earlier op")
            defined.add(id(v))
            if v.name in names:
                problems.append(
                    f"{label}: value name %{v.name} is already used by op {names[v.name]}"
                )
            else:
                names[v.name] = index
            if not _VALUE_NAME_RE.fullmatch(v.name):
                problems.append(
                    f"{label}: value name {v.name!r} cannot be printed "
                    f"(use letters, digits, '_' and '.')"
                )
        problems.extend(f"{label}: {p}" for p in _op_problems(op))
    if out_of_order:
        problems.extend(_cycle_problems(graph))
    if not graph.outputs:
        problems.append("the graph has no outputs (a 'return' with at least one value)")
    for v in graph.outputs:
        if id(v) not in defined:
            problems.append(f"output %{v.name} is not defined by any op of this graph")
    if not problems:  # the parallel rules walk producers and operands: only on sound graphs
        problems.extend(parallel_problems(graph))
    return problems


def _cycle_problems(graph: Graph) -> list[str]:
    import networkx as nx  # on first use: commands that verify nothing never load it

    try:
        cycle = nx.find_cycle(graph.to_networkx())
    except nx.NetworkXNoCycle:
        return []
    ops = [u for u, _v, *_ in cycle] + [cycle[0][0]]
    path = " -> ".join(_label(i, graph.ops[i]) for i in ops)
    return [f"the graph has a cycle: {path}"]


def _op_problems(op: Op) -> list[str]:
    out: list[str] = []
    if op.is_source:
        if op.operands:
            out.append(f"source op has {len(op.operands)} operand(s); sources take none")
        if not isinstance(op.attrs.get("name"), str):
            out.append("source op needs a string attribute 'name'")
    for field, amount in (
        ("flops", op.cost.flops),
        ("bytes_read", op.cost.bytes_read),
        ("bytes_written", op.cost.bytes_written),
    ):
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
            out.append(f"cost {field} must be a non-negative integer, got {amount!r}")
    keys: set[str] = set()
    for key, value in op.attrs:
        if key in keys:
            out.append(f"attribute {key!r} is given twice")
        keys.add(key)
        if not isinstance(key, str) or not key.isidentifier():
            out.append(f"attribute name {key!r} is not an identifier")
        if not _is_attr_value(value):
            out.append(f"attribute {key!r} has a value of unsupported type: {value!r}")
    for check in _RULES_BY_KIND.get(op.kind, ()):
        problem = check(op)
        if problem is not None:
            out.append(problem)
    return out


def _is_attr_value(value: object) -> bool:
    if isinstance(value, tuple):
        return all(_is_attr_value(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


# -- type rules ------------------------------------------------------------------------


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """NumPy-style broadcast of ``shapes``, or None when they do not broadcast."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for shape in shapes:
        for i, d in enumerate(shape, start=rank - len(shape)):
            if d == out[i] or d == 1:
                continue
            if out[i] != 1:
                return None
            out[i] = d
    return tuple(out)


def _check_broadcast(op: Op) -> str | None:
    """Elementwise ops with two or more operands: every result has the broadcast shape."""
    if len(op.operands) < 2:
        return None
    shapes = [v.type.shape for v in op.operands]
    expected = _broadcast(shapes)
    listed = ", ".join(str(v.type) for v in op.operands)
    if expected is None:
        return f"operand shapes do not broadcast: {listed}"
    for v in op.results:
        if v.type.shape != expected:
            want = ",".join(map(str, expected))
            return (
                f"result %{v.name}: {v.type} should have shape [{want}], the broadcast of {listed}"
            )
    return None


def _single(op: Op) -> tuple[Value, Value] | None:
    if len(op.operands) < 1 or len(op.results) != 1:
        return None
    return op.operands[0], op.results[0]


def _check_numel(op: Op) -> str | None:
    """A view keeps the number of elements."""
    pair = _single(op)
    if pair is None or pair[0].type.numel == pair[1].type.numel:
        return None
    src, dst = pair
    return f"a view keeps the element count: {src.type} has {src.type.numel}, {dst.type} has {dst.type.numel}"


def _check_permutation(op: Op) -> str | None:
    """Permute and transpose reorder dimensions: the same sizes in another order."""
    pair = _single(op)
    if pair is None or sorted(pair[0].type.shape) == sorted(pair[1].type.shape):
        return None
    return f"result {pair[1].type} is not a reordering of the dimensions of {pair[0].type}"


def _check_same_shape(op: Op) -> str | None:
    """Alias, detach and clone give a tensor of their operand's shape."""
    pair = _single(op)
    if pair is None or pair[0].type.shape == pair[1].type.shape:
        return None
    return f"result {pair[1].type} should have the shape of its operand {pair[0].type}"


def _matmul_rule(rank: int, lhs: int) -> Callable[[Op], str | None]:
    """Operands ``lhs`` and ``lhs + 1`` of rank ``rank`` multiply as [..., m, k] x
    [..., k, n] (after optional ``transpose_a`` / ``transpose_b``), giving [..., m, n]."""

    def check(op: Op) -> str | None:
        flags: list[bool] = []
        for attr in ("transpose_a", "transpose_b"):
            flag = op.attrs.get(attr, False)
            if not isinstance(flag, bool):
                return f"attribute {attr} must be true or false, got {flag!r}"
            flags.append(flag)
        if len(op.operands) < lhs + 2:
            return None
        a, b = op.operands[lhs].type, op.operands[lhs + 1].type
        if a.rank != rank or b.rank != rank:
            return None
        sa = list(a.shape)
        sb = list(b.shape)
        if flags[0]:
            sa[-2], sa[-1] = sa[-1], sa[-2]
        if flags[1]:
            sb[-2], sb[-1] = sb[-1], sb[-2]
        if sa[-1] != sb[-2]:
            return f"inner dimensions differ: {a} x {b} (transpose_a={str(flags[0]).lower()}, transpose_b={str(flags[1]).lower()})"
        if sa[:-2] != sb[:-2]:
            return f"batch dimensions differ: {a} x {b}"
        expected = (*sa[:-1], sb[-1])
        if len(op.results) == 1 and op.results[0].type.shape != expected:
            want = ",".join(map(str, expected))
            return f"result {op.results[0].type} should have shape [{want}] for {a} x {b}"
        return None

    return check


@dataclass(frozen=True, slots=True)
class TypeRule:
    """A type check for a set of op kinds; ``check`` returns a problem or None."""

    kinds: frozenset[OpKind]
    check: Callable[[Op], str | None]


K = OpKind
TYPE_RULES: tuple[TypeRule, ...] = (
    # FUSED is left out: a fused region's results need not be one broadcast shape.
    TypeRule(ELEMENTWISE - {K.FUSED}, _check_broadcast),
    TypeRule(frozenset({K.VIEW}), _check_numel),
    TypeRule(frozenset({K.PERMUTE, K.TRANSPOSE}), _check_permutation),
    TypeRule(frozenset({K.ALIAS, K.DETACH, K.CLONE}), _check_same_shape),
    TypeRule(frozenset({K.MATMUL}), _matmul_rule(rank=2, lhs=0)),
    TypeRule(frozenset({K.ADDMM}), _matmul_rule(rank=2, lhs=1)),
    TypeRule(frozenset({K.BMM}), _matmul_rule(rank=3, lhs=0)),
)


def _index_rules() -> MappingProxyType[OpKind, tuple[Callable[[Op], str | None], ...]]:
    table: dict[OpKind, tuple[Callable[[Op], str | None], ...]] = {}
    for rule in TYPE_RULES:
        for kind in rule.kinds:
            table[kind] = (*table.get(kind, ()), rule.check)
    return MappingProxyType(table)


_RULES_BY_KIND = _index_rules()
