"""The assembler's ways of running a collective that are not rank-to-rank schedules.

A mixin of ``assemble._Assembler``:

* compute-shift matmuls (``parallel/shift.py``): the matmul cut into n pieces that
  ``_steps_of`` interleaves with its all-gather's ring steps;
* in-network collectives (``parallel/innet.py``) on a switched fabric: steps on
  switch units, messages with explicit routes between neighbouring nodes, each unit
  a node of its own in the plan's order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import OpWork
from waferflow.ir.sharding import MeshAxis
from waferflow.ir.target.wafer import Coord
from waferflow.parallel.collective_lowering import KIND_OF
from waferflow.parallel.innet import INNET_KINDS, innet_seconds, wire_innet
from waferflow.parallel.plan_spec import CollectiveAlgo
from waferflow.parallel.shardcost import share


class ShiftAndSwitch:
    """State and methods the assembler mixes in (it provides ``p``, ``wafer``,
    ``cache``, ``acts``, ``meta``, ``msgs``, ``coll_steps``)."""

    p: Any
    wafer: Any
    cache: Any
    acts: list[Any]
    meta: list[Any]
    msgs: list[tuple[int, int, int, bool]]
    coll_steps: dict[int, list[list[int]]]

    def init_extras(self) -> None:
        # compute-shift matmuls: (gather op id, rank, instance) -> the matmul's n pieces
        self.shift_parts: dict[tuple[int, int, int], list[int]] = {}
        self._placed: set[int] = set()  # pieces already in a core's order
        # in-network steps: explicit routes of their messages, and their units' orders
        self.routes: dict[int, tuple[int, ...]] = {}
        self.unit_order: dict[int, list[int]] = {}
        self._unit_next: dict[int, int] = {}
        self._innet_choice: dict[tuple, bool] = {}

    # -- compute-shift matmuls --------------------------------------------------------
    def _shift_pieces(self, a: Any, meta: Any, gather: Any, spec: Any) -> int:
        """A compute-shift matmul as n pieces, each multiplying one block of the
        rotating operand (``parallel.shift``); ``_order`` interleaves them with the
        ring's steps. The last piece holds the result (and the actor's buffers)."""
        n = self.p.mesh.degree(MeshAxis(str(gather.attrs.get("axis"))))
        ids = []
        for j in range(n):
            piece = replace(
                a, name=f"{a.name}.k{j}", flops=share(a.flops, n, j),
                bytes_read=share(a.bytes_read, n, j), bytes_written=share(a.bytes_written, n, j),
                out_bytes=a.out_bytes if j == n - 1 else 0,
                work=[OpWork(w.kind, share(w.flops, n, j), tuple(share(r, n, j) for r in w.reads),
                             tuple(share(x, n, j) for x in w.writes)) for w in a.work],
            )  # fmt: skip
            self.acts.append(piece)
            self.meta.append(meta if j == n - 1 else type(meta)(meta.block))
            ids.append(len(self.acts) - 1)
        self.shift_parts[(id(gather), spec.rank, spec.instance)] = ids
        return ids[-1]

    def _steps_of(self, it: Any) -> list[int]:
        """A collective's step actors on one core; for a compute-shift gather, with its
        matmul's pieces between them: piece j multiplies the block that step j - 1
        brought while step j's block is on its way."""
        steps = self.coll_steps[it.coll][it.member]
        ci = self.p.collectives[it.coll]
        parts = self.shift_parts.get((id(ci.op), ci.ranks[it.member], ci.instance))
        if not parts:
            return steps
        recv = steps[len(steps) - (len(parts) - 1) :]  # the ring's n - 1 receiving steps
        out = [*steps[: len(steps) - len(recv)], parts[0]]  # a start actor first, if any
        for j, s in enumerate(recv):
            out += [s, parts[j + 1]]
        self._placed.add(parts[-1])  # the matmul's own item adds nothing more
        return out

    # -- in-network collectives -------------------------------------------------------
    def use_innet(self, kind: OpKind, cores: tuple[int, ...], per_rank: int, total: int) -> bool:
        """Whether this collective runs in the network: asked (``algo=innet``) or, with
        ``algo=auto``, faster by the closed forms than the best rank-to-rank schedule."""
        algo = self.cache.algo
        if self.wafer.tree is None or kind not in INNET_KINDS or len(cores) < 2:
            if algo is CollectiveAlgo.INNET:
                note = (f"algo=innet: {kind.value} over {len(cores)} rank(s) on {self.wafer.name} "
                        "cannot run in the network (only a switched fabric's all-reduce, "
                        "reduce-scatter or all-gather); the cheapest schedule is used")  # fmt: skip
                if note not in self.cache.notes:
                    self.cache.notes.append(note)
            return False
        if algo is CollectiveAlgo.INNET:
            return True
        if algo is not CollectiveAlgo.AUTO:
            return False
        key = (kind, cores, per_rank)
        got = self._innet_choice.get(key)
        if got is None:
            coords = [divmod(c, self.wafer.cols) for c in cores]
            innet = innet_seconds(self.wafer, coords, kind, per_rank)
            rank_s = self.cache.best_seconds(KIND_OF[kind], cores, total)
            got = self._innet_choice[key] = innet < rank_s
        return got

    def wire_in_network(
        self,
        kind: OpKind,
        cores: tuple[int, ...],
        per_rank: int,
        entries: list[int],
        make_final: Callable[[int, int], int],
        make_step: Callable[[int, str, int], Any],
    ) -> list[int]:
        """The switch steps (``make_step(node, label, got)`` returns an unplaced
        actor record, put on a unit of its own) and each rank's final actor."""
        tree = self.wafer.tree
        n_sw = tree.num_switches
        base = self.wafer.num_cores

        def make_unit(s: Coord, label: str, got: int) -> int:
            j = tree.node_id(s, self.wafer.cols) - base
            t = self._unit_next.get(j, 0)
            self._unit_next[j] = t + 1
            node = base + (t + 1) * n_sw + j  # num_nodes + t * switches + j
            self.acts.append(make_step(node, label, got))
            self.meta.append(type(self.meta[0])(""))
            aid = len(self.acts) - 1
            self.unit_order[node] = [aid]
            return aid

        def send(src: int, dst: int, nbytes: int, ends: tuple[int, int]) -> None:
            self.routes[len(self.msgs)] = ends
            self.msgs.append((src, dst, nbytes, True))

        return wire_innet(
            self.wafer, kind, list(cores), per_rank, entries, make_unit, make_final,
            lambda a: self.acts[a].core, send,
        )  # fmt: skip


__all__ = ["ShiftAndSwitch"]
