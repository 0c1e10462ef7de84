"""fuse-elementwise: fold groups of elementwise ops into one FUSED op.

Groups grow backwards from a root (the latest op of the group) by absorbing
producers. A producer joins when it is elementwise with one result, has the
root's phase, its result is not a graph output, every op using its result is
already in the group, and the group stays within ``max`` ops. So only the root's
result leaves the group: chains and DAGs with a single consumer fuse, a value
used outside the group is never hidden, and the graph stays acyclic.

The FUSED op takes the root's place and result values; its operands are the
group's external inputs (in order of first use); ``ops`` lists the member kinds
in op order (a FUSED member contributes its own list) and, when any member has
attributes, ``member_attrs`` lists each member's as ``[key, value]`` pairs, in the
same order (a fused ``mul`` keeps its scalar); provenance is the first member's. Cost: FLOPs are summed over the members (a member with no cost yet is
counted by annotate-cost's rule), bytes read are the external inputs' bytes and
bytes written the result's: the intermediates no longer go through memory.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace
from typing import ClassVar

from waferflow.errors import PassError
from waferflow.ir.graph import Attrs, AttrValue, Cost, Graph, Op, Value
from waferflow.ir.opkind import ELEMENTWISE, OpKind
from waferflow.ir.parallel import sorted_axes
from waferflow.ir.sharding import Sharding
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.cost_rules import ir_flops
from waferflow.passes.registry import register_pass


def _size(op: Op) -> int:
    """How many primitive ops ``op`` stands for (a FUSED op: its fused kinds)."""
    if op.kind is OpKind.FUSED:
        fused = op.attrs.get("ops")
        if isinstance(fused, tuple) and fused:
            return len(fused)
    return 1


def _kinds(op: Op) -> tuple[str, ...]:
    if op.kind is OpKind.FUSED:
        fused = op.attrs.get("ops")
        if isinstance(fused, tuple) and all(isinstance(k, str) for k in fused):
            return tuple(str(k) for k in fused)
    return (op.kind.value,)


def _fusable(op: Op) -> bool:
    return op.kind in ELEMENTWISE and len(op.results) == 1


@register_pass
@dataclass(frozen=True)
class FuseElementwise(Pass):
    """Fold chains and single-consumer DAGs of elementwise ops into FUSED ops."""

    name: ClassVar[str] = "fuse-elementwise"
    writes: ClassVar[str] = "the ops (elementwise groups become fused ops)"
    max: int = option(16, "most ops in one fused group")

    def check_options(self) -> None:
        if self.max < 1:
            raise PassError(f"option 'max' of pass {self.name!r} must be >= 1, got {self.max}")

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        index = {id(op): i for i, op in enumerate(graph.ops)}
        users: dict[int, set[int]] = {}
        for op in graph.ops:
            for v in op.operands:
                users.setdefault(id(v), set()).add(id(op))
        outputs = {id(v) for v in graph.outputs}
        taken: set[int] = set()
        groups: list[list[Op]] = []
        for root in reversed(graph.ops):
            if id(root) in taken or not _fusable(root):
                continue
            members = self._grow(root, index, users, outputs, taken)
            taken.update(id(m) for m in members)
            if len(members) > 1:
                groups.append(sorted(members, key=lambda m: index[id(m)]))
        dead: list[Op] = []
        for group in reversed(groups):  # in op order, for readable diffs when debugging
            _rewrite(graph, group)
            dead.extend(group[:-1])
        if dead:
            graph.erase_ops(dead)
        return graph

    def _grow(
        self,
        root: Op,
        index: dict[int, int],
        users: dict[int, set[int]],
        outputs: set[int],
        taken: set[int],
    ) -> list[Op]:
        members = [root]
        ids = {id(root)}
        size = _size(root)
        # Visit candidate producers latest first: by the time a producer is looked
        # at, every user of it that can join the group has had its turn, so "all
        # users in the group" is decided once.
        heap: list[tuple[int, int, Op]] = []

        def push(op: Op) -> None:
            for v in op.operands:
                p = v.producer
                if p is not None and id(p) in index:
                    heapq.heappush(heap, (-index[id(p)], id(p), p))

        push(root)
        while heap:
            _, pid, p = heapq.heappop(heap)
            if pid in ids or pid in taken or not _fusable(p) or p.phase is not root.phase:
                continue
            res = p.results[0]
            if id(res) in outputs or not users.get(id(res), set()) <= ids:
                continue
            if size + _size(p) > self.max:
                continue
            members.append(p)
            ids.add(pid)
            size += _size(p)
            push(p)
        return members


def _member_attrs(op: Op) -> list[AttrValue]:
    """One entry per fused kind: that member's attributes as ``[key, value]`` pairs."""
    if op.kind is OpKind.FUSED:
        nested = op.attrs.get("member_attrs")
        if isinstance(nested, tuple) and len(nested) == len(_kinds(op)):
            return list(nested)
        return [()] * len(_kinds(op))
    return [tuple((k, v) for k, v in op.attrs)]


def _rewrite(graph: Graph, group: list[Op]) -> None:
    """Turn the last op of ``group`` (in op order) into the FUSED op of the group."""
    root = group[-1]
    ids = {id(m) for m in group}
    inputs: list[Value] = []
    needs: list[Sharding] = []  # what the group needs of each input (a parallel graph)
    seen: set[int] = set()
    kinds: list[str] = []
    members: list[AttrValue] = []
    flops = 0
    for m in group:
        for i, v in enumerate(m.operands):
            if (v.producer is None or id(v.producer) not in ids) and id(v) not in seen:
                seen.add(id(v))
                inputs.append(v)
                needs.append(m.par.inputs[i] if m.par is not None else v.sharding)
        kinds.extend(_kinds(m))
        members.extend(_member_attrs(m))
        flops += m.cost.flops if m.cost != Cost() else ir_flops(m)
    cost = Cost(
        flops=flops,
        bytes_read=sum(v.type.nbytes for v in inputs),
        bytes_written=sum(v.type.nbytes for v in root.results),
    )
    # members keep their attributes (a fused `mul` keeps its 1/sqrt(d) scalar)
    attrs = Attrs.of(ops=tuple(kinds))
    if any(members):
        attrs = attrs.with_(member_attrs=tuple(members))
    par = root.par
    if par is not None:
        divided = {a for m in group if m.par is not None for a in m.par.divided}
        par = replace(par, inputs=tuple(needs), divided=sorted_axes(divided))
    graph.replace_op(
        root,
        kind=OpKind.FUSED,
        operands=tuple(inputs),
        attrs=attrs,
        cost=cost,
        prov=group[0].prov,
        par=par,
    )
