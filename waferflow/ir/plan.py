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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from waferflow.errors import FormatError, PlanError, VerificationError
from waferflow.fileio import (
    ErrorFactory,
    loads_json,
    read_text,
    short,
    want,
    want_int,
    want_object,
    write_parts,
)
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan_parts import (
    Gemm,
    HostTransfer,
    OpWork,
    host_doc,
    host_from,
    verify_uses,
    work_doc,
    work_from,
)
from waferflow.ir.target.catalog import list_presets, split_view
from waferflow.ir.target.wafer import Wafer

PLAN_FORMAT = "waferflow.plan"
PLAN_VERSION = 1


# Actor and Message are values (change one with ``dataclasses.replace``) but not frozen:
# a frozen dataclass sets each field through ``object.__setattr__``, which made building
# a plan's 10^5-10^6 of them 5x slower; hashing and equality stay by value.
@dataclass(slots=True, unsafe_hash=True)
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


@dataclass(slots=True, unsafe_hash=True)
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
        counts = (a.core, a.flops, a.bytes_read, a.bytes_written, a.mem_bytes, a.out_bytes)
        if (  # the common case at a glance; anything else is checked field by field
            a.id == i
            and type(a.dtype) is DType
            and type(a.phase) is Phase
            and type(a.op_kind) is OpKind
            and all(type(v) is int and v >= 0 for v in counts)
        ):
            continue
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
    actors = plan.actors
    for i, m in enumerate(plan.messages):
        if not (  # the common case at a glance; anything else is checked field by field
            m.id == i
            and type(m.src_actor) is int
            and type(m.dst_actor) is int
            and 0 <= m.src_actor < n
            and 0 <= m.dst_actor < n
            and m.src_actor != m.dst_actor
            and type(m.bytes) is int
            and m.bytes >= 0
        ):
            _verify_message_fields(m, i, n)
        if m.route is not None:
            src_core = actors[m.src_actor].core
            dst_core = actors[m.dst_actor].core
            route = m.route
            if len(route) < 1 or route[0] != src_core or route[-1] != dst_core:
                raise VerificationError(
                    f"messages[{i}].route {short(list(route))} must run from core {src_core} "
                    f"to core {dst_core} (the endpoints' cores)"
                )
            if src_core == dst_core and len(route) > 1:
                raise VerificationError(
                    f"messages[{i}] stays on core {src_core} (both actors run there) but its "
                    f"route visits {len(route)} cores; a core-local message crosses no "
                    f"link: write its route as [{src_core}] or null"
                )
    _verify_order(plan)
    verify_uses(plan)
    _verify_acyclic(plan)
    if wafer is not None:
        _verify_fits(plan, wafer)


def _verify_message_fields(m: Message, i: int, n: int) -> None:
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
                    f"order[core {c}] lists actor {aid} ({short(plan.actors[aid].name)}) "
                    f"which is placed on core {plan.actors[aid].core}"
                )
    missing = [i for i, s in enumerate(seen) if not s]
    if missing:
        names = ", ".join(f"{i} ({short(plan.actors[i].name)})" for i in missing[:5])
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
        names = ", ".join(f"{i} ({short(plan.actors[i].name)})" for i in stuck)
        raise VerificationError(
            f"plan {short(plan.name)} would deadlock: messages and per-core order form a cycle "
            f"through actors {names}; reorder the cores' actors or remove the message"
        )


def _view_spelling(plan: Plan) -> str:
    """How to name the view a plan was made for: ``--wafer NAME@Kx`` for a preset's,
    else the wafer file's, or in Python the wafer coarsened by K."""
    base, k = split_view(plan.wafer_name)
    if k is None or base.lower() in list_presets():
        return f"--wafer {plan.wafer_name[:80]}"
    return (
        f"--wafer PATH@{k}x, PATH being the wafer file of {short(base)}; in Python that "
        f"wafer coarsened, wafer.coarsen({k})"
    )


def _verify_fits(plan: Plan, wafer: Wafer) -> None:
    if plan.wafer_name != wafer.name and "@" in plan.wafer_name + wafer.name:
        raise PlanError(
            f"plan {short(plan.name)} was made for wafer view {short(plan.wafer_name)}, not "
            f"{wafer.name!r}; run it on the view it was made for ({_view_spelling(plan)}, "
            "or CompiledPlan.wafer / ParallelResult.wafer: a plan's span coarsens the wafer "
            "it is given)"
        )
    ncores = wafer.rows * wafer.cols
    dead = wafer.dead_cores
    for i, a in enumerate(plan.actors):
        if wafer.is_switch_node(a.core):
            continue  # an in-network step on a switch of a switched fabric
        if not 0 <= a.core < ncores:
            raise PlanError(
                f"actors[{i}].core = {a.core} is not on wafer {wafer.name!r} "
                f"({wafer.rows}x{wafer.cols} = {ncores} cores)"
            )
        if dead and divmod(a.core, wafer.cols) in dead:
            raise PlanError(
                f"actors[{i}] ({short(a.name)}) is placed on dead core "
                f"{divmod(a.core, wafer.cols)} of wafer {wafer.name!r}"
            )
    for i, m in enumerate(plan.messages):
        if m.route is not None:
            for c in m.route:
                if not 0 <= c < ncores and not wafer.is_switch_node(c):
                    raise PlanError(f"messages[{i}].route visits core {c}, not on the wafer")


# --- JSON ------------------------------------------------------------------------------

_ACTOR_FIELDS = tuple(f.name for f in fields(Actor))
_MESSAGE_FIELDS = tuple(f.name for f in fields(Message))


# Rows are formatted directly (the bytes ``_ENCODER`` would give their dicts, without
# building a dict per actor and message: 10^5 rows); each distinct ``OpWork`` (most
# repeat from rank to rank) is encoded once per plan.
_text = json.encoder.encode_basestring  # what a JSONEncoder(ensure_ascii=False) writes
# the enums' values as JSON text, looked up by ``_value_`` (a plain attribute: no
# property call and no Python-level ``Enum.__hash__`` per row)
_ENUM_TEXT = {e.value: _text(e.value) for enum in (DType, Phase, OpKind) for e in enum}


def _actor_row(a: Actor, work: Mapping[OpWork, str]) -> str:
    tail = ', "work": [' + ", ".join([work[w] for w in a.work]) + "]}" if a.work else "}"
    return (
        f'{{"id": {a.id}, "name": {_text(a.name)}, "core": {a.core}, "flops": {a.flops}, '
        f'"bytes_read": {a.bytes_read}, "bytes_written": {a.bytes_written}, '
        f'"dtype": {_ENUM_TEXT[a.dtype._value_]}, "phase": {_ENUM_TEXT[a.phase._value_]}, '
        f'"op_kind": {_ENUM_TEXT[a.op_kind._value_]}, "module": {_text(a.module)}, '
        f'"mem_bytes": {a.mem_bytes}, "out_bytes": {a.out_bytes}, "stage": {a.stage}, '
        f'"microbatch": {a.microbatch}, "layer": {_text(a.layer)}{tail}'
    )


def _message_row(m: Message) -> str:
    route = "null" if m.route is None else "[" + ", ".join(map(str, m.route)) + "]"
    extra = "" if m.holds else ', "holds": false'
    if m.bcast != -1:
        extra += f', "bcast": {m.bcast}'
    if m.last_use != -1:
        extra += f', "last_use": {m.last_use}'
    return (
        f'{{"id": {m.id}, "src_actor": {m.src_actor}, "dst_actor": {m.dst_actor}, '
        f'"bytes": {m.bytes}, "route": {route}{extra}}}'
    )


class _WorkText(dict[OpWork, str]):
    """An ``OpWork``'s JSON text, encoded on first use."""

    def __missing__(self, w: OpWork) -> str:
        text = self[w] = _dump(work_doc(w))
        return text


# one encoder for every row (json.dumps with options would build one per call)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False)


def _dump(obj: Any) -> str:
    return _ENCODER.encode(obj)


def plan_to_json(plan: Plan) -> str:
    """The plan as JSON text: fixed key order, one actor / message / core per line."""
    return "".join(plan_json_parts(plan))


def plan_json_parts(plan: Plan) -> Iterator[str]:
    """``plan_to_json`` in pieces, made as they are written (a block of rows at a time);
    the last piece is ``"}\n"``."""
    head = {
        "format": PLAN_FORMAT,
        "version": PLAN_VERSION,
        "name": plan.name,
        "wafer": plan.wafer_name,
        "source": plan.source,
        "notes": list(plan.notes),
    }
    yield "{\n" + "".join(f"  {_dump(k)}: {_dump(v)},\n" for k, v in head.items())

    def block(key: str, rows: list[str], last: bool = False) -> str:
        comma = "" if last else ","
        if not rows:
            return f"  {_dump(key)}: []{comma}\n"
        body = ",\n    ".join(rows)
        return f"  {_dump(key)}: [\n    {body}\n  ]{comma}\n"

    work = _WorkText()
    yield block("actors", [_actor_row(a, work) for a in plan.actors])
    yield block("messages", [_message_row(m) for m in plan.messages])
    if plan.host:
        yield block("host", [_dump(host_doc(h)) for h in plan.host])
    yield block("order", [_dump({"core": c, "actors": list(ids)}) for c, ids in plan.order], True)
    yield "}\n"


class PlanFormatError(FormatError, VerificationError):
    """A plan JSON document that breaks the format; ``path`` names the field
    (``$.actors[3].core``). A ``VerificationError`` too, as it always was."""


_TOP_KEYS = (
    "format", "version", "name", "wafer", "source", "notes", "actors", "messages", "host",
    "order",
)  # fmt: skip
_TOP_REQUIRED = ("format", "version", "name", "wafer", "actors", "messages", "order")
_ORDER_KEYS = ("core", "actors")
_ACTOR_REQUIRED = ("id", "name", "core", "dtype", "phase", "op_kind")
_MESSAGE_REQUIRED = ("id", "src_actor", "dst_actor", "bytes")


def plan_from_json(text: str, *, source: str = "<json>") -> Plan:
    """Parse and verify a plan; malformed JSON is a ``ParseError`` with line and
    column, a bad field a ``PlanFormatError`` naming it."""
    return plan_from_doc(loads_json(text, source), source=source)


def plan_from_doc(doc: Any, *, source: str = "<json>", path: str = "$") -> Plan:
    """Build and verify a plan from a parsed JSON document (``path`` is where the
    document sits in its file, for messages: ``$.plan`` inside a bundle)."""

    def err(where: str, message: str) -> PlanFormatError:
        return PlanFormatError(where, message, source)

    want_object(doc, path, _TOP_KEYS, _TOP_REQUIRED, error=err)
    if doc["format"] != PLAN_FORMAT:
        raise err(f"{path}.format", f"format is {short(doc['format'])}, expected {PLAN_FORMAT!r}")
    version = doc["version"]
    if isinstance(version, bool) or version != PLAN_VERSION:
        raise err(
            f"{path}.version",
            f"version is {short(version)}; this waferflow reads version {PLAN_VERSION}",
        )
    name = want(doc["name"], f"{path}.name", str, "a string", error=err)
    wafer_name = want(doc["wafer"], f"{path}.wafer", str, "a string", error=err)
    plan_source = want(doc.get("source", ""), f"{path}.source", str, "a string", error=err)
    notes = want(doc.get("notes", []), f"{path}.notes", list, "an array of strings", error=err)
    for i, note in enumerate(notes):
        want(note, f"{path}.notes[{i}]", str, "a string", error=err)
    actors_raw = want(doc["actors"], f"{path}.actors", list, "an array", error=err)
    actors = tuple(_actor_from(d, f"{path}.actors[{i}]", err) for i, d in enumerate(actors_raw))
    messages_raw = want(doc["messages"], f"{path}.messages", list, "an array", error=err)
    messages = tuple(
        _message_from(d, f"{path}.messages[{i}]", err) for i, d in enumerate(messages_raw)
    )
    host_raw = want(doc.get("host", []), f"{path}.host", list, "an array", error=err)
    host = tuple(host_from(d, f"{path}.host[{i}]", err) for i, d in enumerate(host_raw))
    order: list[tuple[int, tuple[int, ...]]] = []
    for i, d in enumerate(want(doc["order"], f"{path}.order", list, "an array", error=err)):
        where = f"{path}.order[{i}]"
        want_object(d, where, _ORDER_KEYS, _ORDER_KEYS, error=err)
        core = want_int(d["core"], f"{where}.core", error=err)
        ids = want(d["actors"], f"{where}.actors", list, "an array of actor ids", error=err)
        order.append(
            (core, tuple(want_int(x, f"{where}.actors[{j}]", error=err) for j, x in enumerate(ids)))
        )
    plan = Plan(name, wafer_name, actors, messages, tuple(order), tuple(notes), plan_source, host)
    verify_plan(plan)
    return plan


def json_enum(cls: Any, value: Any, where: str, err: ErrorFactory) -> Any:
    """``cls(value)`` for a JSON string, or an error naming ``where``."""
    want(value, where, str, f"a {cls.__name__} name (a string)", error=err)
    try:
        return cls(value)
    except ValueError:
        raise err(where, f"{short(value)} is not a valid {cls.__name__}") from None


def _actor_from(d: Any, where: str, err: ErrorFactory) -> Actor:
    want_object(d, where, _ACTOR_FIELDS, _ACTOR_REQUIRED, error=err)

    def count(key: str) -> int:
        return want_int(d.get(key, 0), f"{where}.{key}", error=err)

    def text(key: str) -> str:
        return want(d.get(key, ""), f"{where}.{key}", str, "a string", error=err)

    work = want(d.get("work", []), f"{where}.work", list, "an array", error=err)
    return Actor(
        id=count("id"),
        name=text("name"),
        core=count("core"),
        flops=count("flops"),
        bytes_read=count("bytes_read"),
        bytes_written=count("bytes_written"),
        dtype=json_enum(DType, d["dtype"], f"{where}.dtype", err),
        phase=json_enum(Phase, d["phase"], f"{where}.phase", err),
        op_kind=json_enum(OpKind, d["op_kind"], f"{where}.op_kind", err),
        module=text("module"),
        mem_bytes=count("mem_bytes"),
        out_bytes=count("out_bytes"),
        stage=count("stage"),
        microbatch=count("microbatch"),
        layer=text("layer"),
        work=tuple(work_from(w, f"{where}.work[{j}]", err) for j, w in enumerate(work)),
    )


def _message_from(d: Any, where: str, err: ErrorFactory) -> Message:
    want_object(d, where, _MESSAGE_FIELDS, _MESSAGE_REQUIRED, error=err)
    route = d.get("route")
    if route is not None:
        want(route, f"{where}.route", list, "null or an array of core ids", error=err)
        route = tuple(want_int(c, f"{where}.route[{j}]", error=err) for j, c in enumerate(route))
    return Message(
        id=want_int(d["id"], f"{where}.id", error=err),
        src_actor=want_int(d["src_actor"], f"{where}.src_actor", error=err),
        dst_actor=want_int(d["dst_actor"], f"{where}.dst_actor", error=err),
        bytes=want_int(d["bytes"], f"{where}.bytes", error=err),
        route=route,
        holds=want(d.get("holds", True), f"{where}.holds", bool, "true or false", error=err),
        bcast=want_int(d.get("bcast", -1), f"{where}.bcast", -1, error=err),
        last_use=want_int(d.get("last_use", -1), f"{where}.last_use", -1, error=err),
    )


def save_plan(plan: Plan, path: str | Path) -> None:
    """Write the plan JSON to ``path`` atomically, piece by piece."""
    write_parts(path, plan_json_parts(plan))


def load_plan(path: str | Path) -> Plan:
    text = read_text(path, "plan file", "write one with `waferflow compile -o`")
    return plan_from_json(text, source=str(path))


__all__ = [
    "PLAN_FORMAT",
    "PLAN_VERSION",
    "Actor",
    "Gemm",
    "HostTransfer",
    "Message",
    "OpWork",
    "Plan",
    "PlanFormatError",
    "load_plan",
    "plan_from_doc",
    "plan_from_json",
    "plan_json_parts",
    "plan_to_json",
    "save_plan",
    "verify_plan",
]
