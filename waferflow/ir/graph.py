"""The dataflow graph: ``Graph`` of ``Op``s connected by SSA ``Value``s.

Ops are kept in a list in a valid topological order (the order they print in).
Values are named; names are unique within a graph. networkx is used for the
graph algorithms (``to_networkx``), the payloads stay typed.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import networkx as nx

from waferflow.ir.dtypes import TensorType
from waferflow.ir.opkind import SOURCES, OpKind
from waferflow.ir.parallel import GraphParallel, OpParallel
from waferflow.ir.sharding import Sharding

REPLICATED_EVERYWHERE = Sharding()

AttrValue = int | float | bool | str | None | tuple["AttrValue", ...]


class Phase(Enum):
    """Which part of a training step an op belongs to."""

    FWD = "fwd"
    BWD = "bwd"
    OPT = "opt"


@dataclass(frozen=True, slots=True)
class Attrs:
    """Frozen, sorted op attributes. Values are ints, floats, bools, strings,
    None, or tuples of those."""

    items: tuple[tuple[str, AttrValue], ...] = ()

    @staticmethod
    def of(mapping: Mapping[str, AttrValue] | None = None, **kw: AttrValue) -> Attrs:
        merged: dict[str, AttrValue] = dict(mapping or {})
        merged.update(kw)
        for key, value in merged.items():
            _check_attr(key, value)
        return Attrs(tuple(sorted(merged.items())))

    def get(self, key: str, default: AttrValue = None) -> AttrValue:
        for k, v in self.items:
            if k == key:
                return v
        return default

    def __contains__(self, key: object) -> bool:
        return any(k == key for k, _ in self.items)

    def __iter__(self) -> Iterator[tuple[str, AttrValue]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def with_(self, **kw: AttrValue) -> Attrs:
        return Attrs.of(dict(self.items), **kw)

    def as_dict(self) -> dict[str, AttrValue]:
        return dict(self.items)


def _check_attr(key: str, value: AttrValue) -> None:
    if not key.isidentifier():
        raise ValueError(f"attribute name {key!r} is not an identifier")
    if isinstance(value, tuple):
        for v in value:
            _check_attr(key, v)
    elif value is not None and not isinstance(value, (int, float, bool, str)):
        raise TypeError(f"attribute {key!r} has unsupported type {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Cost:
    """Work of one op: FLOPs (a multiply-add is 2) and bytes moved to and from memory."""

    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.flops + other.flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
        )

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where an op came from: the nn.Module path and the ATen op."""

    module: str = ""
    aten: str = ""


@dataclass(eq=False, slots=True)
class Value:
    """An SSA value. Identity is by object; ``name`` is unique in its graph.
    ``sharding`` says how a parallel plan spreads it over the ranks (replicated
    unless a parallel pass decided otherwise)."""

    name: str
    type: TensorType
    producer: Op | None = field(default=None, repr=False)
    sharding: Sharding = field(default=REPLICATED_EVERYWHERE, repr=False)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False, slots=True)
class Op:
    """One operation. ``results`` are owned by the op; ``operands`` are uses.
    ``par`` is set by the parallel passes (stage, micro-batch mode, ...)."""

    kind: OpKind
    operands: tuple[Value, ...]
    results: tuple[Value, ...]
    attrs: Attrs = Attrs()
    cost: Cost = Cost()
    phase: Phase = Phase.FWD
    prov: Provenance = Provenance()
    par: OpParallel | None = None

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.kind.value} has {len(self.results)} results, not 1")
        return self.results[0]

    @property
    def is_source(self) -> bool:
        return self.kind in SOURCES

    def __repr__(self) -> str:
        res = ", ".join(f"%{v.name}" for v in self.results)
        ops = ", ".join(f"%{v.name}" for v in self.operands)
        return f"<Op {res} = {self.kind.value} {ops}>"


class Graph:
    """A named dataflow graph with ops in topological order and a list of outputs.
    ``parallel`` is the plan the graph is sharded for (None: not parallelised)."""

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.ops: list[Op] = []
        self.outputs: list[Value] = []
        self.parallel: GraphParallel | None = None
        self._names: set[str] = set()
        self._counter = itertools.count()

    # -- construction -------------------------------------------------------------
    def fresh_name(self, hint: str | None = None) -> str:
        """A value name not yet used in this graph (numbers unless a hint is given)."""
        if hint is not None:
            base = _sanitize(hint)
            if base not in self._names:
                return base
            for i in itertools.count(1):
                cand = f"{base}_{i}"
                if cand not in self._names:
                    return cand
        while True:
            cand = str(next(self._counter))
            if cand not in self._names:
                return cand

    def add_op(
        self,
        kind: OpKind,
        operands: Iterable[Value] = (),
        result_types: Iterable[TensorType] = (),
        *,
        attrs: Attrs | None = None,
        cost: Cost | None = None,
        phase: Phase = Phase.FWD,
        prov: Provenance | None = None,
        names: Iterable[str | None] | None = None,
        exact_names: bool = False,
        par: OpParallel | None = None,
        shardings: Iterable[Sharding] | None = None,
    ) -> Op:
        """Append an op; result values are created and named here.

        ``names`` are hints (made unique) unless ``exact_names`` is set, in which
        case a clash is an error (the parser uses this).
        """
        types = list(result_types)
        hints = list(names) if names is not None else [None] * len(types)
        if len(hints) != len(types):
            raise ValueError("names and result_types differ in length")
        results: list[Value] = []
        placed = list(shardings) if shardings is not None else [REPLICATED_EVERYWHERE] * len(types)
        if len(placed) != len(types):
            raise ValueError("shardings and result_types differ in length")
        for hint, ty, sh in zip(hints, types, placed, strict=True):
            if exact_names and hint is not None:
                if hint in self._names:
                    raise ValueError(f"value %{hint} is defined twice")
                name = hint
            else:
                name = self.fresh_name(hint)
            self._names.add(name)
            results.append(Value(name, ty, sharding=sh))
        op = Op(
            kind=kind,
            operands=tuple(operands),
            results=tuple(results),
            attrs=attrs if attrs is not None else Attrs(),
            cost=cost if cost is not None else Cost(),
            phase=phase,
            prov=prov if prov is not None else Provenance(),
            par=par,
        )
        for v in results:
            v.producer = op
        self.ops.append(op)
        return op

    def set_outputs(self, values: Iterable[Value]) -> None:
        self.outputs = list(values)

    # -- queries ------------------------------------------------------------------
    def values(self) -> Iterator[Value]:
        for op in self.ops:
            yield from op.results

    def value(self, name: str) -> Value:
        for v in self.values():
            if v.name == name:
                return v
        raise KeyError(f"no value %{name} in graph @{self.name}")

    def sources(self, kind: OpKind | None = None) -> list[Op]:
        return [op for op in self.ops if op.is_source and (kind is None or op.kind == kind)]

    def users(self) -> dict[Value, list[Op]]:
        """Map from each value to the ops that use it (in op order)."""
        out: dict[Value, list[Op]] = {v: [] for v in self.values()}
        for op in self.ops:
            for v in op.operands:
                out.setdefault(v, []).append(op)
        return out

    def total_cost(self) -> Cost:
        total = Cost()
        for op in self.ops:
            total = total + op.cost
        return total

    def to_networkx(self) -> nx.MultiDiGraph:
        """Ops as nodes (by index), one edge per use, keyed by the value's name."""
        import networkx as nx  # on first use: most commands never build one

        g = nx.MultiDiGraph()
        index = {id(op): i for i, op in enumerate(self.ops)}
        for i, op in enumerate(self.ops):
            g.add_node(i, op=op)
        for i, op in enumerate(self.ops):
            for v in op.operands:
                if v.producer is not None and id(v.producer) in index:
                    g.add_edge(index[id(v.producer)], i, key=v.name, value=v)
        return g

    def clone(self) -> Graph:
        """A deep copy (new ops and values, same names and annotations): passes may
        then mutate it without touching this graph."""
        g = Graph(self.name)
        g.parallel = self.parallel
        vmap: dict[int, Value] = {}
        for op in self.ops:
            new = g.add_op(
                op.kind,
                [vmap[id(v)] for v in op.operands],
                [r.type for r in op.results],
                attrs=op.attrs,
                cost=op.cost,
                phase=op.phase,
                prov=op.prov,
                names=[r.name for r in op.results],
                exact_names=True,
                par=op.par,
                shardings=[r.sharding for r in op.results],
            )
            for r, nr in zip(op.results, new.results, strict=True):
                vmap[id(r)] = nr
        g.set_outputs(vmap[id(v)] for v in self.outputs)
        return g

    # -- rewriting ----------------------------------------------------------------
    def replace_all_uses(self, old: Value, new: Value) -> None:
        for op in self.ops:
            if any(v is old for v in op.operands):
                op.operands = tuple(new if v is old else v for v in op.operands)
        self.outputs = [new if v is old else v for v in self.outputs]

    def erase_ops(self, dead: Iterable[Op]) -> None:
        """Remove ops (their results must be unused afterwards; the verifier checks)."""
        gone = {id(op) for op in dead}
        for op in self.ops:
            if id(op) in gone:
                for v in op.results:
                    self._names.discard(v.name)
        self.ops = [op for op in self.ops if id(op) not in gone]

    def insert_op_before(self, anchor: Op, op: Op) -> None:
        """Move an already-built op (from ``add_op``) to just before ``anchor``."""
        self.ops.remove(op)
        self.ops.insert(self.ops.index(anchor), op)

    def replace_op(self, op: Op, **changes: object) -> Op:
        """Swap ``op`` for a copy with fields changed, keeping its result values."""
        new = replace(op, **changes)  # type: ignore[arg-type]
        for v in new.results:
            v.producer = new
        self.ops[self.ops.index(op)] = new
        return new

    def __repr__(self) -> str:
        return f"<Graph @{self.name}: {len(self.ops)} ops, {len(self.outputs)} outputs>"


def _sanitize(hint: str) -> str:
    """Value names are [A-Za-z0-9_.]+ so that the text form stays simple."""
    out = "".join(c if (c.isalnum() or c in "_.") else "_" for c in hint)
    return out or "v"
