"""Data messages and residency: what each compute actor reads, from where.

A mixin of ``assemble._Assembler`` (which owns the state):

* a value used on another core is one message per (producer, value, core), to the
  first actor of that core that uses it; uses on the same core are zero-cost local
  messages (they let the simulator keep the producer's buffer until its last local
  use); a piece sent to several cores is a broadcast;
* sources are resident, counted once per core on their first reader; with a host,
  the host streams them in;
* the messages are recorded per core slot with their sources as references
  (``draft.Ref``), so a retargeted program replays them instead of working them out.
"""

from __future__ import annotations

from typing import Any

from waferflow.errors import PlanError
from waferflow.ir.graph import Op, Phase, Value
from waferflow.ir.opkind import OpKind
from waferflow.ir.parallel import reads_value
from waferflow.ir.plan import HostTransfer
from waferflow.ir.sharding import MeshAxis, Replicated
from waferflow.parallel.build import MbMode, Program
from waferflow.parallel.draft import ActorMeta, BufKey, DataRecord, Draft, Ref
from waferflow.parallel.redistribute import Region
from waferflow.parallel.shardcost import instance_degrees, value_bytes
from waferflow.parallel.stages import root_value

K = OpKind


class DataMessages:
    """The data messages into compute actors and the sources resident on each core
    (the assembler provides the state annotated here, ``_resolve`` and ``_item_ref``;
    ``transfers.Transfers`` provides ``_pieces``, ``_add_pass`` and ``_host_outputs``)."""

    p: Program
    wafer: Any
    memo: Any
    acts: list[Draft]
    meta: list[ActorMeta]
    msgs: list[tuple[int, int, int, bool]]
    bcast: dict[int, int]
    last_use: dict[int, int]
    host: list[HostTransfer]
    compute_id: list[int]
    m: int
    _value_static: dict[int, tuple]

    def _producers(
        self, consumer: Op, v: Value, rank: int, inst: int, consumer_per_mb: bool
    ) -> list[tuple[Ref, BufKey, int]]:
        """(reference, buffer, bytes) of every instance of ``v`` the consumer reads."""
        st = self._value_static.get(id(v))
        if st is None:
            root = root_value(v)
            prod = root.producer
            if prod is None or prod.is_source:
                st = (root, None, False, 0, False)
            else:
                per_mb = self.p.info[prod].mode is MbMode.PER_MB
                sh = self.p.sharding.of(root)
                nbytes = value_bytes(root, sh, instance_degrees(self.p.mesh, per_mb))
                acc = per_mb and root.name in self.p.accumulators
                st = (root, prod, per_mb, nbytes, acc)
            self._value_static[id(v)] = st
        root, prod, per_mb, nbytes, acc = st
        if prod is None:
            return []
        if per_mb:
            insts = [inst] if (consumer_per_mb and inst >= 0) else list(range(self.m))
        else:
            insts = [-1]
        out = []
        producer = self.p.producer
        for k in insts:
            it = producer.get((prod, rank, k))
            if it is None:
                raise PlanError(
                    f"internal: no instance {k} of %{root.name} on rank {rank} for "
                    f"{consumer.kind.value} %{consumer.results[0].name if consumer.results else ''}"
                )
            out.append((self._item_ref(it), (root.name, rank, -2 if acc else k), nbytes))
        if acc and len(out) > 1:
            out = out[-1:]  # accumulated in place: the last instance holds the sum
        return out

    def _data_messages(self, order: dict[int, list[int]]) -> bool:
        """The messages into compute actors, core by core. Records them (sources as
        references, before de-duplication) per core slot for the other layouts; False
        when a source is its own consumer (then the record is not reusable)."""
        spec_of = {aid: spec for spec, aid in zip(self.p.actors, self.compute_id, strict=True)}
        slot_of = {core: i for i, core in enumerate(self.p.items)}
        data: list[list[DataRecord]] = [[] for _ in slot_of]
        core_of = [a.core for a in self.acts]
        reusable = True
        for core in sorted(order):
            rec = data[slot_of[core]]
            for aid in order[core]:
                spec = spec_of.get(aid)
                if spec is None:
                    continue
                meta = self.meta[aid]
                in_group = {id(op) for op in spec.group.ops}
                for op in spec.group.ops:
                    per_mb = self.p.info[op].mode is MbMode.PER_MB
                    for i, v in enumerate(op.operands):
                        if not reads_value(op, i):
                            continue  # a FILL takes the shape only: nothing to wait for
                        prod = root_value(v).producer
                        if prod is not None and id(prod) in in_group:
                            continue
                        found = self._pieces(op, i, spec, per_mb)
                        sums: dict[Region, list[int]] = {}
                        for ref, key, nbytes, region, partial in found:
                            src = self._resolve(ref)
                            if src == aid:
                                reusable = False
                                continue
                            meta.uses.append(key)
                            if partial:
                                sums.setdefault(region, []).append(nbytes)
                            remote = core_of[src] != core
                            if remote:
                                meta.received.setdefault(key, nbytes)
                            rec.append((ref, aid, nbytes, key[0], remote, region))
                        for parts in sums.values():
                            if len(parts) > 1:  # the consumer adds the partial sums first
                                self._add_pass(aid, v, parts)
        self._emit_data(data, slot_of)
        self.memo.data = data if reusable else None
        return reusable

    def _replay(self, order: dict[int, list[int]]) -> bool:
        """The recorded data messages and host transfers on this layout; False when a
        message does not cross cores as it did where it was recorded."""
        data, host = self.memo.data, self.memo.host
        if data is None or host is None:
            return False
        slot_of = {core: i for i, core in enumerate(self.p.items)}
        core_of = [a.core for a in self.acts]
        for core in order:
            for ref, aid, _, _, remote, _ in data[slot_of[core]]:
                src = self._resolve(ref)
                if src == aid or (core_of[src] != core) != remote:
                    return False
        self._emit_data(data, slot_of)
        for core in sorted(order):
            self.host.extend(host[slot_of[core]])
        if self.wafer.host is not None:
            self._host_outputs()
        return True

    def _emit_data(self, data: list[list[DataRecord]], slot_of: dict[int, int]) -> None:
        sent: dict[tuple[int, str, int], int] = {}  # (src, value, core) -> message
        local: set[tuple[int, int]] = set()
        groups: dict[tuple[int, str, Region], list[int]] = {}  # same piece to many cores
        recompute = self.p.plan.recompute
        meta = self.meta
        for core in sorted(slot_of):
            for ref, aid, nbytes, value, remote, region in data[slot_of[core]]:
                src = self._resolve(ref)
                if remote:
                    m = sent.get((src, value, core))
                    if m is not None:
                        self.last_use[m] = aid
                        continue
                    m = sent[(src, value, core)] = len(self.msgs)
                    self.msgs.append((src, aid, nbytes, True))
                    if region:
                        groups.setdefault((src, value, region), []).append(m)
                elif (src, aid) not in local:
                    local.add((src, aid))
                    # with recompute a backward actor rebuilds the forward values it
                    # reads: the forward buffer is not kept for it
                    holds = not (
                        recompute
                        and meta[src].block.startswith("F")
                        and meta[aid].block.startswith("B")
                    )
                    self.msgs.append((src, aid, 0, holds))
        for ids in groups.values():
            if len(ids) > 1:
                for m in ids:
                    self.bcast[m] = ids[0]

    def _residency(self, order: dict[int, list[int]]) -> None:
        spec_of = {aid: spec for spec, aid in zip(self.p.actors, self.compute_id, strict=True)}
        host = self.wafer.host is not None
        slot_of = {core: i for i, core in enumerate(self.p.items)}
        recorded: list[list[HostTransfer]] = [[] for _ in slot_of]
        for core in sorted(order):
            first: dict[str, tuple[int, int, str]] = {}
            # what the host streams in: per source, or per micro-batch of a source split
            # along mb (a batch input): (first reader, bytes), and the last reader
            sent: dict[tuple[str, int], tuple[int, int]] = {}
            last_user: dict[tuple[str, int], int] = {}
            for aid in order[core]:
                spec = spec_of.get(aid)
                if spec is None:
                    continue
                for op in spec.group.ops:
                    osh = self.p.sharding.ops[op]
                    per_mb = self.p.info[op].mode is MbMode.PER_MB
                    for v, s in zip(op.operands, osh.inputs, strict=True):
                        root = root_value(v)
                        src = root.producer
                        if src is None or not src.is_source:
                            continue
                        nbytes = value_bytes(v, s, instance_degrees(self.p.mesh, False))
                        cat = _category(src, op)
                        have = first.get(root.name)
                        if have is None or have[1] < nbytes:
                            first[root.name] = (have[0] if have else aid, nbytes, cat)
                        if not host:
                            continue
                        inst = -1
                        if per_mb and not isinstance(s.get(MeshAxis.MB), Replicated):
                            inst = spec.instance
                            nbytes = value_bytes(v, s, instance_degrees(self.p.mesh, True))
                        key = (root.name, inst)
                        last_user[key] = aid
                        got = sent.get(key)
                        if got is None or got[1] < nbytes:
                            sent[key] = (got[0] if got else aid, nbytes)
            for name, (aid, nbytes, cat) in first.items():
                self.acts[aid].mem_bytes += nbytes
                self.meta[aid].resident.append((name, nbytes, cat))
            for (name, _), (aid, nbytes) in sent.items():
                last = last_user[(name, _)]
                recorded[slot_of[core]].append(
                    HostTransfer(aid, nbytes, name, last_use=-1 if last == aid else last)
                )
            self.host.extend(recorded[slot_of[core]])
        self.memo.host = recorded
        if host:
            self._host_outputs()


def _category(src: Op, user: Op) -> str:
    if src.kind is K.PARAM:
        return "weights"
    if src.kind is K.BUFFER and user.phase is Phase.OPT:
        return "optimizer"
    return "inputs"
