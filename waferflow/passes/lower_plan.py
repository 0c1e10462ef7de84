"""A naive Graph -> Plan lowering: one actor per compute op, laid out along a snake.

This is the baseline that real placement is measured against, and the quickest way
to put any graph through the simulator:

* every op that is neither a source (input / param / buffer / constant) nor a view
  (``VIEWS``: it reads its operand in place) becomes one actor, with the op's cost,
  phase, kind, dtype (its first result's), module and datapath passes (``op_work``);
* a view folds into its producer: a consumer of a view receives from the op that
  produced the viewed value (following chains of views), and the message carries the
  producer's whole result;
* the alive cores are walked in snake (boustrophedon) order, row 0 left to right,
  row 1 right to left, ...; actor ``i`` of ``n`` goes to snake position
  ``i * min(n_alive, n) // n``: one actor per core along the snake when they fit,
  else contiguous blocks of actors per core, so that neighbours in the graph stay
  neighbours on the wafer;
* one message per (producer value, consumer core) pair, to the first actor on that
  core that uses the value (later ones run after it on the same core); same-core uses
  need no message;
* a source value used (directly or through views) by actors on a core is resident
  there: its bytes count once in the ``mem_bytes`` of the first actor on that core
  that uses it; no message carries it;
* each core runs its actors in graph order. Deterministic.
"""

from __future__ import annotations

from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Graph, Op, Value
from waferflow.ir.opkind import SOURCES, VIEWS
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target.wafer import Wafer
from waferflow.ir.work import op_work


def snake_cores(wafer: Wafer) -> list[int]:
    """Alive core ids in boustrophedon order."""
    dead = wafer.dead_cores
    out: list[int] = []
    for r in range(wafer.rows):
        cols = range(wafer.cols) if r % 2 == 0 else range(wafer.cols - 1, -1, -1)
        out.extend(r * wafer.cols + c for c in cols if not dead or (r, c) not in dead)
    return out


def _root(v: Value) -> Value:
    """Follow views back to the value that holds the data."""
    seen = 0
    while v.producer is not None and v.producer.kind in VIEWS and v.producer.operands:
        v = v.producer.operands[0]
        seen += 1
        if seen > 1_000_000:  # a cycle of views would be a malformed graph
            raise PlanError("lower_to_plan: a chain of views does not end; verify the graph")
    return v


def lower_to_plan(graph: Graph, wafer: Wafer, *, name: str | None = None) -> Plan:
    """Lower ``graph`` to a ``Plan`` on ``wafer`` (see the module docstring)."""
    compute_ops: list[Op] = [op for op in graph.ops if not op.is_source and op.kind not in VIEWS]
    cores = snake_cores(wafer)
    n = len(compute_ops)
    if n and not cores:
        raise PlanError(f"lower_to_plan: wafer {wafer.name!r} has no alive core")
    width = min(len(cores), n)
    actor_of_op: dict[int, int] = {id(op): i for i, op in enumerate(compute_ops)}
    core_of = [cores[i * width // n] for i in range(n)]

    sent: dict[tuple[int, int], int] = {}  # (id(value), core) -> message id
    resident: set[tuple[int, int]] = set()  # (id(source value), core)
    mem = [0] * n
    msgs: list[Message] = []
    for i, op in enumerate(compute_ops):
        core = core_of[i]
        for operand in op.operands:
            v = _root(operand)
            prod = v.producer
            if prod is None or prod.kind in SOURCES:
                key = (id(v), core)
                if key not in resident:
                    resident.add(key)
                    mem[i] += v.type.nbytes
                continue
            src = actor_of_op.get(id(prod))
            if src is None:
                raise PlanError(
                    f"lower_to_plan: op {op!r} uses %{v.name}, whose producer is not in "
                    f"graph @{graph.name}; verify the graph"
                )
            if core_of[src] == core or (id(v), core) in sent:
                continue
            sent[(id(v), core)] = len(msgs)
            msgs.append(Message(len(msgs), src, i, v.type.nbytes))

    actors = tuple(
        Actor(
            id=i,
            name=_actor_name(op, i),
            core=core_of[i],
            flops=op.cost.flops,
            bytes_read=op.cost.bytes_read,
            bytes_written=op.cost.bytes_written,
            dtype=op.results[0].type.dtype if op.results else DType.F32,
            phase=op.phase,
            op_kind=op.kind,
            module=op.prov.module,
            mem_bytes=mem[i],
            out_bytes=sum(r.type.nbytes for r in op.results),
            layer=op.prov.module,
            work=op_work(
                op,
                [v.type.nbytes for v in op.operands],
                [r.type.nbytes for r in op.results],
                op.cost.flops,
            ),
        )
        for i, op in enumerate(compute_ops)
    )
    order: dict[int, list[int]] = {}
    for i in range(n):
        order.setdefault(core_of[i], []).append(i)
    return Plan.build(
        name or graph.name,
        wafer.name,
        actors,
        msgs,
        order,
        notes=(f"naive snake lowering of @{graph.name}: {n} actors on {width} cores",),
        source="lower_to_plan",
    )


def _actor_name(op: Op, i: int) -> str:
    if op.results:
        return op.results[0].name
    return f"{op.kind.value}_{i}"


__all__ = ["lower_to_plan", "snake_cores"]
