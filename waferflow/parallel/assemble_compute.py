"""Compute actors: each rank's share of its ops' work, buffers and accumulation.

A mixin of ``assemble._Assembler`` (which owns the state): one ``Draft`` per
``ActorSpec``, with its rank's share of the FLOPs and bytes (``shardcost``), its ops'
passes, the partial gradients it adds into over micro-batches and, with recompute, the
forward work the first backward actor of a stage redoes.
"""

from __future__ import annotations

from typing import Any

from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Op, Value
from waferflow.ir.opkind import VIEWS, OpKind
from waferflow.ir.plan import OpWork
from waferflow.ir.sharding import shard_shape
from waferflow.ir.work import op_work
from waferflow.parallel.build import ActorSpec, MbMode, Program
from waferflow.parallel.draft import ActorMeta, BufKey, Draft
from waferflow.parallel.shardcost import division, instance_degrees, share, value_bytes
from waferflow.parallel.shift import reads_shift
from waferflow.parallel.stages import layer_key

K = OpKind


class ComputeActors:
    """The compute actors of a program (the assembler provides ``p``, ``acts``,
    ``meta``, ``compute_id``, ``acc_flops``, the per-op caches and ``_shift_pieces``)."""

    p: Program
    acts: list[Draft]
    meta: list[ActorMeta]
    compute_id: list[int]
    acc_flops: dict[int, int]
    _op_static: dict[tuple[int, bool], tuple]
    _users_of: dict[int, tuple[bool, tuple[int, ...]]]
    _division: dict[tuple, tuple[int, int]]

    def _compute(self, spec: ActorSpec) -> int:
        p = self.p
        a = Draft(spec.name, spec.core, stage=spec.stage, microbatch=max(spec.instance, 0))
        meta = ActorMeta(str(spec.block))
        heaviest: Op | None = None
        ops = spec.group.ops
        in_group = {id(op) for op in ops}
        for op in ops:
            per_mb = p.info[op].mode is MbMode.PER_MB
            static = self._static(op, per_mb)
            osh, reads, writes, results, full_in, part_in, full_out, part_out, shapes, works = (
                static
            )
            parts, index = self._divide(osh, spec.rank, spec.instance, per_mb)
            cost = op.cost
            f = share(cost.flops, parts, index)
            br = cost.bytes_read * part_in // full_in if full_in else cost.bytes_read // parts
            bw = (
                cost.bytes_written * part_out // full_out
                if full_out
                else cost.bytes_written // parts
            )
            work = works.get(f)
            if work is None:
                work = works[f] = op_work(op, reads, writes, f, shapes)
            a.work.extend(work)
            a.own_work.extend(work)
            for r, nbytes, acc, grad in results:
                key: BufKey = (r.name, spec.rank, -2 if acc else spec.instance)
                meta.produces.append((key, nbytes, "gradients" if grad else "activations"))
                if acc and spec.instance > 0:  # add into the accumulated sum
                    f += nbytes // r.type.dtype.itemsize
                    self.acc_flops[len(self.acts)] = (
                        self.acc_flops.get(len(self.acts), 0) + nbytes // r.type.dtype.itemsize
                    )
                    br += 2 * nbytes
                    bw += nbytes
                    a.work.append(OpWork(K.ADD, nbytes // r.type.dtype.itemsize,
                                         (nbytes, nbytes), (nbytes,)))  # fmt: skip
                if self._used_outside(r, in_group):
                    a.out_bytes += nbytes
            a.flops += f
            a.bytes_read += br
            a.bytes_written += bw
            if heaviest is None or op.cost.flops > heaviest.cost.flops:
                heaviest = op
        assert heaviest is not None
        a.dtype = _dtype(heaviest)
        a.phase = heaviest.phase
        a.op_kind = heaviest.kind
        a.module = ops[0].prov.module
        a.layer = layer_key(a.module)
        gather = reads_shift(ops[0]) if len(ops) == 1 else None
        if gather is not None:
            return self._shift_pieces(a, meta, gather, spec)
        self.acts.append(a)
        self.meta.append(meta)
        return len(self.acts) - 1

    def _static(self, op: Op, per_mb: bool) -> tuple:
        """The rank-independent figures of one instance of ``op``: its sharding, the
        bytes of its operands and results on a rank, each result's (value, bytes,
        accumulated, gradient), the totals of ``shardcost.op_cost``, the (operand, result)
        shapes on a rank, and its work per FLOP share (filled as shares come up)."""
        key = (id(op), per_mb)
        got = self._op_static.get(key)
        if got is None:
            p = self.p
            osh = p.sharding.ops[op]
            deg = instance_degrees(p.mesh, per_mb)
            res_sh = [p.sharding.of(r) for r in op.results]
            reads = [value_bytes(v, s, deg) for v, s in zip(op.operands, osh.inputs, strict=True)]
            writes = [value_bytes(r, s, deg) for r, s in zip(op.results, res_sh, strict=True)]
            results = []
            for r, nbytes in zip(op.results, writes, strict=True):
                acc = per_mb and r.name in p.accumulators
                # an accumulated sum is a gradient unless the step returns it (the loss)
                grad = (acc and r not in p.graph.outputs) or r.name in p.gradients
                results.append((r, nbytes, acc, grad))
            full_in = sum(v.type.nbytes for v in op.operands)
            full_out = sum(v.type.nbytes for v in op.results)
            shapes = (
                [shard_shape(v.type.shape, s, deg) for v, s in zip(op.operands, osh.inputs, strict=True)],
                [shard_shape(r.type.shape, s, deg) for r, s in zip(op.results, res_sh, strict=True)],
            )  # fmt: skip
            got = (
                osh, reads, writes, results, full_in, sum(reads), full_out, sum(writes), shapes, {}
            )  # fmt: skip
            self._op_static[key] = got
        return got

    def _divide(self, osh: Any, rank: int, instance: int, per_mb: bool) -> tuple[int, int]:
        key = (osh.divided, rank, instance, per_mb)
        got = self._division.get(key)
        if got is None:
            got = self._division[key] = division(osh, self.p.mesh, rank, instance, per_mb)
        return got

    def _used_outside(self, v: Value, in_group: set[int]) -> bool:
        got = self._users_of.get(id(v))
        if got is None:  # whether v (through views) is an output, and its other users
            out, found = False, []
            stack = [v]
            users = self.p.users
            outputs = self.p.graph.outputs
            while stack:
                x = stack.pop()
                if x in outputs:
                    out = True
                for u in users.get(x, []):
                    if u.kind in VIEWS:
                        stack.extend(u.results)
                    else:
                        found.append(id(u))
            got = self._users_of[id(v)] = (out, tuple(found))
        return got[0] or any(u not in in_group for u in got[1])

    def _recompute(self) -> None:
        fwd: dict[tuple[int, int, int], int] = {}
        fwd_work: dict[tuple[int, int, int], list[OpWork]] = {}
        first_b: dict[tuple[int, int, int], int] = {}
        for spec, aid in zip(self.p.actors, self.compute_id, strict=True):
            key = (spec.stage, spec.rank, spec.block.mb)
            if spec.block.kind == "F" and spec.instance >= 0:
                # the forward's own work; adding into an accumulated sum is not redone
                fwd[key] = fwd.get(key, 0) + self.acts[aid].flops - self.acc_flops.get(aid, 0)
                fwd_work.setdefault(key, []).extend(self.acts[aid].own_work)
            elif spec.block.kind == "B" and key not in first_b:
                first_b[key] = aid
        for key, aid in first_b.items():
            self.acts[aid].flops += fwd.get(key, 0)
            self.acts[aid].work[:0] = fwd_work.get(key, [])  # recomputed before its own work
            self.meta[aid].recompute = True


def _dtype(op: Op) -> DType:
    for r in op.results:
        if r.type.dtype.is_float:
            return r.type.dtype
    for v in op.operands:
        if v.type.dtype.is_float:
            return v.type.dtype
    return DType.F32
