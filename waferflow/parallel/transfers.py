"""What crosses a core's boundary in a lowered plan beyond the messages of one stage:
resharding between the stages of a per-layer plan (``redistribute``) and the host's
transfers. A mixin of the assembler (``assemble._Assembler``), which owns the state."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from waferflow.ir.graph import Op, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import HostTransfer, OpWork
from waferflow.ir.sharding import MeshAxis, Replicated
from waferflow.parallel.build import ActorSpec, Item, MbMode, Program
from waferflow.parallel.draft import BufKey
from waferflow.parallel.plan_spec import StageCut
from waferflow.parallel.redistribute import Region, pieces
from waferflow.parallel.shardcost import instance_degrees, value_bytes
from waferflow.parallel.stages import root_value

if TYPE_CHECKING:
    from waferflow.parallel.draft import Draft

K = OpKind


class Transfers:
    """Resharding pieces, the consumer's ADD of partial sums, the host's results."""

    p: Program
    m: int
    acts: list[Draft]
    host: list[HostTransfer]

    def _producers(
        self, consumer: Op, v: Value, rank: int, inst: int, consumer_per_mb: bool
    ) -> list[tuple[int, BufKey, int]]:
        raise NotImplementedError

    def _item_ref(self, it: Item) -> int:
        """A reference to the actor holding ``it``'s result (resolved per layout)."""
        raise NotImplementedError

    def _item_actor(self, it: Item) -> int:
        raise NotImplementedError

    def _add_pass(self, aid: int, v: Value, parts: list[int]) -> None:
        a = self.acts[aid]
        elems = parts[0] // v.type.dtype.itemsize
        a.work.insert(0, OpWork(K.ADD, elems * (len(parts) - 1), tuple(parts), (parts[0],)))
        a.flops += elems * (len(parts) - 1)
        a.bytes_read += sum(parts)
        a.bytes_written += parts[0]

    def _pieces(
        self, op: Op, i: int, spec: ActorSpec, per_mb: bool
    ) -> list[tuple[int, BufKey, int, Region, bool]]:
        """(actor reference, buffer, bytes, region, partial) of every piece of operand
        ``i`` of ``op`` that ``spec``'s rank reads: the producer's own instances on the
        same rank, or, across the stages of a per-layer plan, the pieces the resharding
        takes from the producing stage's ranks (``redistribute``)."""
        v = op.operands[i]
        root = root_value(v)
        prod = root.producer
        p = self.p
        if (
            prod is None
            or prod.is_source
            or p.plan.cut is not StageCut.LAYER
            or p.info[prod].stage == spec.stage
        ):
            found = self._producers(op, v, spec.rank, spec.instance, per_mb)
            return [(a, k, b, (), False) for a, k, b in found]
        held = p.sharding.of(v)
        need = p.sharding.ops[op].inputs[i]
        pi = p.info[prod]
        prod_mb = pi.mode is MbMode.PER_MB
        insts = [-1]
        if prod_mb:
            insts = [spec.instance] if per_mb and spec.instance >= 0 else list(range(self.m))
        width = p.stages.width(pi.stage, p.mesh.size)
        holders = [r for r in range(width) if any((prod, r, k) in p.producer for k in insts)]
        acc = prod_mb and root.name in p.accumulators
        if acc:
            insts = insts[-1:]  # accumulated in place: the last instance holds the sum
        size = v.type.nbytes // max(1, math.prod(v.type.shape))
        scale = self.m if prod_mb and self.m > 1 else 1
        out = []
        for piece in pieces(v.type.shape, held, need, p.mesh, holders, spec.rank):
            for k in insts:
                it = p.producer.get((prod, piece.src_rank, k))
                if it is None:
                    continue
                key = (f"{root.name}@{piece.src_rank}", spec.rank, -2 if acc else k)
                nbytes = piece.elements * size // scale
                out.append((self._item_ref(it), key, nbytes, piece.region, piece.partial))
        return out

    def _host_outputs(self) -> None:
        """The step's results (updated weights, the loss) go to the host: from every
        rank that holds a distinct part of one (a replicated copy is sent once)."""
        p = self.p
        for out in p.graph.outputs:
            root = root_value(out)
            prod = root.producer
            if prod is None or prod.is_source or prod not in p.info:
                continue
            per_mb = p.info[prod].mode is MbMode.PER_MB
            sh = p.sharding.of(root)
            nbytes = value_bytes(root, sh, instance_degrees(p.mesh, per_mb))
            insts = list(range(self.m)) if per_mb else [-1]
            seen: set[tuple[tuple[int, ...], int]] = set()
            for r in range(p.mesh.size):
                cls = tuple(
                    p.mesh.index(r, a)
                    for a in (MeshAxis.DP, MeshAxis.TP)
                    if not isinstance(sh.get(a), Replicated)
                )
                for k in insts:
                    it = p.producer.get((prod, r, k))
                    if it is None or (cls, k) in seen:
                        continue
                    seen.add((cls, k))
                    self.host.append(
                        HostTransfer(self._item_actor(it), nbytes, root.name, to_host=True)
                    )


__all__ = ["BufKey", "Transfers"]
