"""The actor program: actors bound to cores, messages between them, per-core order.

A ``Plan`` is what the simulator runs and what a code generator emits. Actor and
message ids are dense: ``plan.actors[i].id == i`` and ``plan.messages[i].id == i``,
so that everything downstream can index arrays by id. The wafer is referenced by
name only and supplied separately (``simulate(plan, wafer)``).

JSON (``plan_to_json``) has ``"format": "waferflow.plan"``, ``"version": 1``, a fixed
key order and one actor / message per line: the same plan gives the same bytes.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from waferflow.errors import ParseError, PlanError, VerificationError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan_parts import (
    HostTransfer,
    OpWork,
    host_doc,
    host_from,
    verify_uses,
    work_doc,
    work_from,
)
from waferflow.ir.target.wafer import Wafer

PLAN_FORMAT = "waferflow.plan"
PLAN_VERSION = 1


@dataclass(frozen=True, slots=True)
class Actor:
    """One op (or op shard) bound to one core; runs once per step. ``work`` lists its
    datapath passes (``OpWork``), one per op (more for an op that computes several
    results in turn, such as a convolution's input and weight gradients)."""

    id: int
    name: str
    core: int  # row-major core id on the wafer
    flops: int = 0
    bytes_read: int = 0  # SRAM traffic of the computation
    bytes_written: int = 0
    dtype: DType = DType.F32
    phase: Phase = Phase.FWD
    op_kind: OpKind = OpKind.OPAQUE
    module: str = ""  # nn.Module path it came from
    mem_bytes: int = 0  # resident on its core for the whole step (weights, ...)
    out_bytes: int = 0  # output buffer, live from the actor's start until consumed
    stage: int = 0  # pipeline stage
    microbatch: int = 0
    layer: str = ""
    work: tuple[OpWork, ...] = ()


@dataclass(frozen=True, slots=True)
class Message:
    """``bytes`` from ``src_actor`` to ``dst_actor``, sent when the source finishes.

    ``route`` is the sequence of core ids visited, endpoints included; ``None`` means
    the simulator's default routing (dimension-order with detours). ``holds`` is False
    when the consumer recomputes the value instead of reading the producer's buffer
    (activation recompute): the producer's buffer is then not kept for it (JSON writes
    the field only when False). Messages of one producer with the same ``bcast`` >= 0
    carry the same data to several cores (a broadcast: one outgoing stream serves
    them all). ``last_use`` is the last actor on the destination core that reads the
    data, which keeps the received buffer until it ends (-1: the destination actor
    itself). JSON writes both only when set."""

    id: int
    src_actor: int
    dst_actor: int
    bytes: int
    route: tuple[int, ...] | None = None
    holds: bool = True
    bcast: int = -1
    last_use: int = -1


@dataclass(frozen=True, slots=True)
class Plan:
    """An actor program. ``order`` lists, per core (sorted by core id), the ids of the
    actors that core runs, in execution order. ``host`` lists what the host streams in
    and receives (empty when the plan was made for a wafer without a host)."""

    name: str
    wafer_name: str
    actors: tuple[Actor, ...]
    messages: tuple[Message, ...]
    order: tuple[tuple[int, tuple[int, ...]], ...]
    notes: tuple[str, ...] = ()
    source: str = ""  # what produced the plan (a pass name, "hand", ...)
    host: tuple[HostTransfer, ...] = ()

    @staticmethod
    def build(
        name: str,
        wafer_name: str,
        actors: Sequence[Actor],
        messages: Sequence[Message],
        order: Mapping[int, Sequence[int]] | None = None,
        *,
        notes: Sequence[str] = (),
        source: str = "",
        host: Sequence[HostTransfer] = (),
    ) -> Plan:
        """Make a plan; ``order=None`` runs each core's actors in id order."""
        if order is None:
            per_core: dict[int, list[int]] = {}
            for a in actors:
                per_core.setdefault(a.core, []).append(a.id)
            order = per_core
        return Plan(
            name=name,
            wafer_name=wafer_name,
            actors=tuple(actors),
            messages=tuple(messages),
            order=tuple(sorted((int(c), tuple(ids)) for c, ids in order.items())),
            notes=tuple(notes),
            source=source,
            host=tuple(host),
        )

    def order_of(self, core: int) -> tuple[int, ...]:
        for c, ids in self.order:
            if c == core:
                return ids
        return ()

    @property
    def cores(self) -> tuple[int, ...]:
        """The cores that run at least one actor, ascending."""
        return tuple(c for c, ids in self.order if ids)

    @property
    def total_flops(self) -> int:
        return sum(a.flops for a in self.actors)

    @property
    def total_message_bytes(self) -> int:
        return sum(m.bytes for m in self.messages)

    def __repr__(self) -> str:
        return (
            f"<Plan {self.name!r} on {self.wafer_name!r}: {len(self.actors)} actors, "
            f"{len(self.messages)} messages, {len(self.cores)} cores>"
        )


# --- validation ----------------------------------------------------------------------


def verify_plan(plan: Plan, wafer: Wafer | None = None) -> None:
    """Check the plan's invariants; raise ``VerificationError`` (structure) or
    ``PlanError`` (does not fit ``wafer``) naming the bad field.

    Structure: dense ids, typed fields, messages between existing actors, the order
    lists every actor exactly once on its own core, and no cycle in messages plus
    per-core order (a cycle would deadlock the machine). With a wafer: cores exist and
    are alive, explicit routes start and end at the right cores.
    """
    n = len(plan.actors)
    for i, a in enumerate(plan.actors):
        where = f"actors[{i}]"
        if a.id != i:
            raise VerificationError(f"{where}.id is {a.id}; actor ids must be 0..n-1 in order")
        if not isinstance(a.dtype, DType):
            raise VerificationError(f"{where}.dtype is {a.dtype!r}, not a DType")
        if not isinstance(a.phase, Phase):
            raise VerificationError(f"{where}.phase is {a.phase!r}, not a Phase")
        if not isinstance(a.op_kind, OpKind):
            raise VerificationError(f"{where}.op_kind is {a.op_kind!r}, not an OpKind")
        for fname in ("core", "flops", "bytes_read", "bytes_written", "mem_bytes", "out_bytes"):
            v = getattr(a, fname)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise VerificationError(f"{where}.{fname} must be a non-negative int, got {v!r}")
    for i, m in enumerate(plan.messages):
        where = f"messages[{i}]"
        if m.id != i:
            raise VerificationError(f"{where}.id is {m.id}; message ids must be 0..n-1 in order")
        for fname in ("src_actor", "dst_actor"):
            v = getattr(m, fname)
            if not isinstance(v, int) or not 0 <= v < n:
                raise VerificationError(f"{where}.{fname} = {v!r} is not an actor id (0..{n - 1})")
        if m.src_actor == m.dst_actor:
            raise VerificationError(f"{where} sends actor {m.src_actor} a message from itself")
        if not isinstance(m.bytes, int) or m.bytes < 0:
            raise VerificationError(f"{where}.bytes must be a non-negative int, got {m.bytes!r}")
        if m.route is not None:
            src_core = plan.actors[m.src_actor].core
            dst_core = plan.actors[m.dst_actor].core
            if len(m.route) < 1 or m.route[0] != src_core or m.route[-1] != dst_core:
                raise VerificationError(
                    f"{where}.route {list(m.route)} must run from core {src_core} "
                    f"to core {dst_core} (the endpoints' cores)"
                )
    _verify_order(plan)
    verify_uses(plan)
    _verify_acyclic(plan)
    if wafer is not None:
        _verify_fits(plan, wafer)


def _verify_order(plan: Plan) -> None:
    seen = [False] * len(plan.actors)
    prev_core = -1
    for c, ids in plan.order:
        if c <= prev_core:
            raise VerificationError(f"order: core {c} is listed twice or out of order")
        prev_core = c
        for aid in ids:
            if not isinstance(aid, int) or not 0 <= aid < len(plan.actors):
                raise VerificationError(f"order[core {c}] lists {aid!r}, not an actor id")
            if seen[aid]:
                raise VerificationError(f"order lists actor {aid} more than once")
            seen[aid] = True
            if plan.actors[aid].core != c:
                raise VerificationError(
                    f"order[core {c}] lists actor {aid} ({plan.actors[aid].name!r}) "
                    f"which is placed on core {plan.actors[aid].core}"
                )
    missing = [i for i, s in enumerate(seen) if not s]
    if missing:
        names = ", ".join(f"{i} ({plan.actors[i].name!r})" for i in missing[:5])
        raise VerificationError(f"order does not list actor(s) {names}; every actor runs once")


def _verify_acyclic(plan: Plan) -> None:
    """Kahn's algorithm over message edges and per-core order edges."""
    n = len(plan.actors)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for m in plan.messages:
        succ[m.src_actor].append(m.dst_actor)
        indeg[m.dst_actor] += 1
    for _, ids in plan.order:
        for a, b in itertools.pairwise(ids):
            succ[a].append(b)
            indeg[b] += 1
    ready = [i for i in range(n) if indeg[i] == 0]
    done = 0
    while ready:
        a = ready.pop()
        done += 1
        for b in succ[a]:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)
    if done < n:
        stuck = [i for i in range(n) if indeg[i] > 0][:5]
        names = ", ".join(f"{i} ({plan.actors[i].name!r})" for i in stuck)
        raise VerificationError(
            f"plan {plan.name!r} would deadlock: messages and per-core order form a cycle "
            f"through actors {names}; reorder the cores' actors or remove the message"
        )


def _verify_fits(plan: Plan, wafer: Wafer) -> None:
    if plan.wafer_name != wafer.name and "@" in plan.wafer_name + wafer.name:
        raise PlanError(
            f"plan {plan.name!r} was made for wafer view {plan.wafer_name!r}, not "
            f"{wafer.name!r}; run it on the view it was made for (--wafer {plan.wafer_name}, "
            "or CompiledPlan.wafer / ParallelResult.wafer: a plan's span coarsens the wafer "
            "it is given)"
        )
    ncores = wafer.rows * wafer.cols
    dead = wafer.dead_cores
    for i, a in enumerate(plan.actors):
        if not 0 <= a.core < ncores:
            raise PlanError(
                f"actors[{i}].core = {a.core} is not on wafer {wafer.name!r} "
                f"({wafer.rows}x{wafer.cols} = {ncores} cores)"
            )
        if dead and divmod(a.core, wafer.cols) in dead:
            raise PlanError(
                f"actors[{i}] ({a.name!r}) is placed on dead core "
                f"{divmod(a.core, wafer.cols)} of wafer {wafer.name!r}"
            )
    for i, m in enumerate(plan.messages):
        if m.route is not None:
            for c in m.route:
                if not 0 <= c < ncores:
                    raise PlanError(f"messages[{i}].route visits core {c}, not on the wafer")


# --- JSON ------------------------------------------------------------------------------

_ACTOR_FIELDS = tuple(f.name for f in fields(Actor))
_MESSAGE_FIELDS = tuple(f.name for f in fields(Message))


def _actor_doc(a: Actor) -> dict[str, Any]:
    return {
        "id": a.id,
        "name": a.name,
        "core": a.core,
        "flops": a.flops,
        "bytes_read": a.bytes_read,
        "bytes_written": a.bytes_written,
        "dtype": a.dtype.value,
        "phase": a.phase.value,
        "op_kind": a.op_kind.value,
        "module": a.module,
        "mem_bytes": a.mem_bytes,
        "out_bytes": a.out_bytes,
        "stage": a.stage,
        "microbatch": a.microbatch,
        "layer": a.layer,
        **({"work": [work_doc(w) for w in a.work]} if a.work else {}),
    }


def _message_doc(m: Message) -> dict[str, Any]:
    return {
        "id": m.id,
        "src_actor": m.src_actor,
        "dst_actor": m.dst_actor,
        "bytes": m.bytes,
        "route": None if m.route is None else list(m.route),
        **({} if m.holds else {"holds": False}),
        **({"bcast": m.bcast} if m.bcast != -1 else {}),
        **({"last_use": m.last_use} if m.last_use != -1 else {}),
    }


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def plan_to_json(plan: Plan) -> str:
    """The plan as JSON text: fixed key order, one actor / message / core per line."""
    lines = ["{"]
    head = {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "name": plan.name,
        "wafer": plan.wafer_name,
        "source": plan.source,
        "notes": list(plan.notes),
    }
    for k, v in head.items():
        lines.append(f"  {_dump(k)}: {_dump(v)},")

    def block(key: str, rows: list[str], last: bool = False) -> None:
        if not rows:
            lines.append(f"  {_dump(key)}: []" + ("" if last else ","))
            return
        lines.append(f"  {_dump(key)}: [")
        for j, r in enumerate(rows):
            lines.append("    " + r + ("," if j < len(rows) - 1 else ""))
        lines.append("  ]" + ("" if last else ","))

    block("actors", [_dump(_actor_doc(a)) for a in plan.actors])
    block("messages", [_dump(_message_doc(m)) for m in plan.messages])
    if plan.host:
        block("host", [_dump(host_doc(h)) for h in plan.host])
    block("order", [_dump({"core": c, "actors": list(ids)}) for c, ids in plan.order], True)
    lines.append("}")
    return "\n".join(lines) + "\n"


def plan_from_json(text: str, *, source: str = "<json>") -> Plan:
    """Parse and verify a plan; malformed JSON is a ``ParseError``, a bad field a
    ``VerificationError`` naming it."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ParseError(f"invalid JSON: {e.msg}", e.lineno, e.colno, source) from None
    if not isinstance(doc, dict):
        raise VerificationError(f"{source}: a plan must be a JSON object")
    if doc.get("format") != PLAN_FORMAT:
        raise VerificationError(
            f"{source}: format is {doc.get('format')!r}, expected {PLAN_FORMAT!r}"
        )
    if doc.get("version") != PLAN_VERSION:
        raise VerificationError(
            f"{source}: version is {doc.get('version')!r}; this waferflow reads version "
            f"{PLAN_VERSION}"
        )
    name = _field(doc, "name", str, source)
    wafer_name = _field(doc, "wafer", str, source)
    plan_source = _field(doc, "source", str, source, default="")
    notes = _field(doc, "notes", list, source, default=[])
    if not all(isinstance(x, str) for x in notes):
        raise VerificationError(f"{source}: notes must be a list of strings")
    actors = tuple(
        _actor_from(d, f"actors[{i}]", source)
        for i, d in enumerate(_field(doc, "actors", list, source))
    )
    messages = tuple(
        _message_from(d, f"messages[{i}]", source)
        for i, d in enumerate(_field(doc, "messages", list, source))
    )
    order: list[tuple[int, tuple[int, ...]]] = []
    for i, d in enumerate(_field(doc, "order", list, source)):
        where = f"order[{i}]"
        core = _field(d, "core", int, source, where)
        ids = _field(d, "actors", list, source, where)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in ids):
            raise VerificationError(f"{source}: {where}.actors must be a list of ints")
        order.append((core, tuple(ids)))
    host = tuple(
        host_from(d, f"host[{i}]", source)
        for i, d in enumerate(_field(doc, "host", list, source, default=[]))
    )
    plan = Plan(name, wafer_name, actors, messages, tuple(order), tuple(notes), plan_source, host)
    verify_plan(plan)
    return plan


_MISSING = object()


def _field(
    d: Any, key: str, ty: type, source: str, where: str = "", default: Any = _MISSING
) -> Any:
    label = f"{where}.{key}" if where else key
    if not isinstance(d, dict):
        raise VerificationError(f"{source}: {where or 'document'} must be a JSON object")
    if key not in d:
        if default is not _MISSING:
            return default
        raise VerificationError(f"{source}: missing field {label}")
    v = d[key]
    bad = not isinstance(v, ty) or (ty is int and isinstance(v, bool))
    if bad:
        raise VerificationError(f"{source}: {label} must be {ty.__name__}, got {v!r}")
    return v


def _enum(cls: Any, value: Any, label: str, source: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        raise VerificationError(
            f"{source}: {label} = {value!r} is not a valid {cls.__name__}"
        ) from None


def _actor_from(d: Any, where: str, source: str) -> Actor:
    unknown = set(d) - set(_ACTOR_FIELDS) if isinstance(d, dict) else set()
    if unknown:
        raise VerificationError(f"{source}: {where} has unknown field(s) {sorted(unknown)}")
    ints = {
        k: _field(d, k, int, source, where, default=0)
        for k in ("flops", "bytes_read", "bytes_written", "mem_bytes", "out_bytes")
    }
    return Actor(
        id=_field(d, "id", int, source, where),
        name=_field(d, "name", str, source, where),
        core=_field(d, "core", int, source, where),
        dtype=_enum(DType, _field(d, "dtype", str, source, where), f"{where}.dtype", source),
        phase=_enum(Phase, _field(d, "phase", str, source, where), f"{where}.phase", source),
        op_kind=_enum(OpKind, _field(d, "op_kind", str, source, where), f"{where}.op_kind", source),
        module=_field(d, "module", str, source, where, default=""),
        stage=_field(d, "stage", int, source, where, default=0),
        microbatch=_field(d, "microbatch", int, source, where, default=0),
        layer=_field(d, "layer", str, source, where, default=""),
        work=tuple(
            work_from(w, f"{where}.work[{j}]", source)
            for j, w in enumerate(_field(d, "work", list, source, where, default=[]))
        ),
        **ints,
    )


def _message_from(d: Any, where: str, source: str) -> Message:
    unknown = set(d) - set(_MESSAGE_FIELDS) if isinstance(d, dict) else set()
    if unknown:
        raise VerificationError(f"{source}: {where} has unknown field(s) {sorted(unknown)}")
    route = d.get("route") if isinstance(d, dict) else None
    if route is not None and (
        not isinstance(route, list)
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in route)
    ):
        raise VerificationError(f"{source}: {where}.route must be null or a list of core ids")
    return Message(
        id=_field(d, "id", int, source, where),
        src_actor=_field(d, "src_actor", int, source, where),
        dst_actor=_field(d, "dst_actor", int, source, where),
        bytes=_field(d, "bytes", int, source, where),
        route=None if route is None else tuple(route),
        holds=_field(d, "holds", bool, source, where, default=True),
        bcast=_field(d, "bcast", int, source, where, default=-1),
        last_use=_field(d, "last_use", int, source, where, default=-1),
    )


def save_plan(plan: Plan, path: str | Path) -> None:
    Path(path).write_text(plan_to_json(plan), encoding="utf-8")


def load_plan(path: str | Path) -> Plan:
    p = Path(path)
    return plan_from_json(p.read_text(encoding="utf-8"), source=str(p))


__all__ = [
    "PLAN_FORMAT",
    "PLAN_VERSION",
    "Actor",
    "HostTransfer",
    "Message",
    "OpWork",
    "Plan",
    "load_plan",
    "plan_from_json",
    "plan_to_json",
    "save_plan",
    "verify_plan",
]
