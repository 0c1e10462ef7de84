"""The parts of an actor program beyond actors and messages: an actor's datapath passes
(``OpWork``) and the host's transfers (``HostTransfer``), their JSON forms and their
checks. ``waferflow.ir.plan`` re-exports both classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from waferflow.errors import VerificationError
from waferflow.fileio import ErrorFactory, want, want_int, want_object
from waferflow.ir.opkind import OpKind

if TYPE_CHECKING:
    from waferflow.ir.plan import Plan


@dataclass(frozen=True, slots=True)
class Gemm:
    """A matrix product inside a pass: ``batch`` independent products of an ``m x k``
    and a ``k x n`` matrix (``batch * m * n * k`` multiply-accumulates). A convolution
    is one as its im2col form: m = output pixels (images x height x width), n = output
    channels per group, k = input channels per group x kernel height x width, batch =
    groups (``ir.work``)."""

    m: int
    n: int
    k: int
    batch: int = 1

    @property
    def macs(self) -> int:
        return self.batch * self.m * self.n * self.k


@dataclass(frozen=True, slots=True)
class OpWork:
    """One pass of a core's datapath inside an actor, what a core model times (the
    wafer's ``[core]``; the roofline uses the actor's totals instead): the op's kind,
    its FLOPs, the bytes of each operand it reads and each result it writes, and for a
    matmul or convolution the matrix products it computes (``gemms``; empty when the
    shape is not known, e.g. a plan written before they were recorded)."""

    kind: OpKind
    flops: int
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    gemms: tuple[Gemm, ...] = ()
    # the hash, computed on first use: a simulation looks every actor's passes up by
    # value (``costs.ActorTimes``), and hashing the fields (an enum, tuples of
    # dataclasses) each time cost more than timing the passes
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        h = self._hash
        if not h:
            h = hash((self.kind, self.flops, self.reads, self.writes, self.gemms)) or 1
            object.__setattr__(self, "_hash", h)
        return h


@dataclass(frozen=True, slots=True)
class HostTransfer:
    """Data the host streams to ``actor`` before it can run (a source the step reads:
    a weight, an input, optimizer state), or, with ``to_host``, a result of the step
    that ``actor`` sends to the host when it ends. Only a wafer with a host link
    (``Wafer.host``) times them. ``last_use`` as for a ``Message``."""

    actor: int
    bytes: int
    name: str = ""
    to_host: bool = False
    last_use: int = -1


# --- checks ----------------------------------------------------------------------------


def verify_uses(plan: Plan) -> None:
    """Work passes, broadcast groups, ``last_use`` and host transfers."""
    checked: set[int] = set()  # ids of passes found valid: most are shared by many actors
    for i, a in enumerate(plan.actors):
        for j, w in enumerate(a.work):
            if id(w) in checked:
                continue
            where = f"actors[{i}].work[{j}]"
            if not isinstance(w, OpWork) or not isinstance(w.kind, OpKind):
                raise VerificationError(f"{where} must be an OpWork with an OpKind")
            sizes = (w.flops, *w.reads, *w.writes)
            if any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in sizes):
                raise VerificationError(f"{where}: flops and byte counts must be ints >= 0")
            for g in w.gemms:
                dims = (g.m, g.n, g.k, g.batch) if isinstance(g, Gemm) else ()
                if not dims or any(not isinstance(x, int) or isinstance(x, bool) or x < 1
                                   for x in dims):  # fmt: skip
                    raise VerificationError(
                        f"{where}: a gemm is Gemm(m, n, k, batch) with ints >= 1, got {g!r}"
                    )
            checked.add(id(w))  # the plan holds w alive: its id is not reused meanwhile
    pos = {aid: k for _, ids in plan.order for k, aid in enumerate(ids)}

    def check_last(where: str, reader: int, last: int) -> None:
        if last == -1:
            return
        n = len(plan.actors)
        if not isinstance(last, int) or not 0 <= last < n:
            raise VerificationError(f"{where}.last_use = {last!r} is not an actor id")
        if plan.actors[last].core != plan.actors[reader].core or pos[last] < pos[reader]:
            raise VerificationError(
                f"{where}.last_use = {last} must run on the same core as actor {reader}, "
                "at or after it"
            )

    for i, m in enumerate(plan.messages):
        if not isinstance(m.bcast, int) or isinstance(m.bcast, bool) or m.bcast < -1:
            raise VerificationError(f"messages[{i}].bcast must be an int >= -1, got {m.bcast!r}")
        if m.last_use != -1:
            check_last(f"messages[{i}]", m.dst_actor, m.last_use)
    for i, h in enumerate(plan.host):
        where = f"host[{i}]"
        if not isinstance(h, HostTransfer):
            raise VerificationError(f"{where} must be a HostTransfer")
        if not isinstance(h.actor, int) or not 0 <= h.actor < len(plan.actors):
            raise VerificationError(f"{where}.actor = {h.actor!r} is not an actor id")
        if not isinstance(h.bytes, int) or isinstance(h.bytes, bool) or h.bytes < 0:
            raise VerificationError(f"{where}.bytes must be a non-negative int, got {h.bytes!r}")
        if h.to_host and h.last_use != -1:
            raise VerificationError(f"{where}: a transfer to the host has no last_use")
        check_last(where, h.actor, h.last_use)


# --- JSON ------------------------------------------------------------------------------


def work_doc(w: OpWork) -> list[Any]:
    """``[kind, flops, [reads], [writes]]``, then ``[[m, n, k, batch], ...]`` when the
    pass has matrix products."""
    doc: list[Any] = [w.kind.value, w.flops, list(w.reads), list(w.writes)]
    if w.gemms:
        doc.append([[g.m, g.n, g.k, g.batch] for g in w.gemms])
    return doc


def host_doc(h: HostTransfer) -> dict[str, Any]:
    return {
        "actor": h.actor,
        "bytes": h.bytes,
        "name": h.name,
        **({"to_host": True} if h.to_host else {}),
        **({"last_use": h.last_use} if h.last_use != -1 else {}),
    }


def work_from(w: Any, where: str, err: ErrorFactory) -> OpWork:
    """An ``OpWork`` from its JSON ``[op kind, flops, [reads], [writes]]`` and, when it
    has matrix products, ``[[m, n, k, batch], ...]``."""
    from waferflow.ir.plan import json_enum  # the plan's JSON readers

    want(w, where, lambda v: isinstance(v, list) and len(v) in (4, 5), "[op kind, flops, [reads], [writes]] and optionally [[m, n, k, batch], ...]", error=err)  # fmt: skip
    sizes = []
    for k, label in ((2, "reads"), (3, "writes")):
        raw = want(w[k], f"{where}[{k}]", list, f"an array of byte counts ({label})", error=err)
        sizes.append(tuple(want_int(x, f"{where}[{k}][{j}]", error=err) for j, x in enumerate(raw)))
    gemms: list[Gemm] = []
    if len(w) == 5:
        raw = want(w[4], f"{where}[4]", list, "an array of [m, n, k, batch]", error=err)
        for j, g in enumerate(raw):
            at = f"{where}[4][{j}]"
            want(g, at, lambda v: isinstance(v, list) and len(v) == 4, "[m, n, k, batch]", error=err)  # fmt: skip
            dims = [want_int(x, f"{at}[{i}]", 1, error=err) for i, x in enumerate(g)]
            gemms.append(Gemm(*dims))
    return OpWork(
        json_enum(OpKind, w[0], f"{where}[0]", err),
        want_int(w[1], f"{where}[1]", error=err),
        sizes[0],
        sizes[1],
        tuple(gemms),
    )


_HOST_KEYS = ("actor", "bytes", "name", "to_host", "last_use")


def host_from(d: Any, where: str, err: ErrorFactory) -> HostTransfer:
    """A ``HostTransfer`` from its JSON object."""
    want_object(d, where, _HOST_KEYS, 2, error=err)
    return HostTransfer(
        actor=want_int(d["actor"], f"{where}.actor", error=err),
        bytes=want_int(d["bytes"], f"{where}.bytes", error=err),
        name=want(d.get("name", ""), f"{where}.name", str, "a string", error=err),
        to_host=want(d.get("to_host", False), f"{where}.to_host", bool, "true or false", error=err),
        last_use=want_int(d.get("last_use", -1), f"{where}.last_use", -1, error=err),
    )


__all__ = [
    "Gemm",
    "HostTransfer",
    "OpWork",
    "host_doc",
    "host_from",
    "verify_uses",
    "work_doc",
    "work_from",
]
