"""The assembler's working records, shared by ``assemble`` and its mixins.

* ``Draft``: an actor while the plan is assembled (mutable: collectives and the
  residency add to it); ``assemble`` turns each into an ``ir.plan.Actor`` at the end;
* ``ActorMeta``: the buffers of one actor, kept beside the plan for ``plan-memory``;
* ``Ref`` and ``DataRecord``: an item's result and a data message as recorded on one
  layout and resolved on every layout the program is retargeted to.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import OpWork
from waferflow.parallel.redistribute import Region

BufKey = tuple[str, int, int]  # (value name, rank, instance); instance -2: an accumulator


@dataclass
class ActorMeta:
    """Buffers of one actor, for liveness: what it creates, what it reads, what it
    needs resident (sources), and the block it runs in."""

    block: str
    produces: list[tuple[BufKey, int, str]] = field(default_factory=list)
    uses: list[BufKey] = field(default_factory=list)
    received: dict[BufKey, int] = field(default_factory=dict)
    resident: list[tuple[str, int, str]] = field(default_factory=list)
    recompute: bool = False  # a backward actor that recomputes its forward


@dataclass(slots=True)
class Draft:
    name: str
    core: int
    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    dtype: DType = DType.F32
    phase: Phase = Phase.FWD
    op_kind: OpKind = OpKind.OPAQUE
    module: str = ""
    mem_bytes: int = 0
    out_bytes: int = 0
    stage: int = 0
    microbatch: int = 0
    layer: str = ""
    work: list[OpWork] = field(default_factory=list)
    own_work: list[OpWork] = field(default_factory=list)  # its ops' passes (no accumulation)


# A reference to the actor that holds an item's result, resolved per layout:
# >= 0 a compute actor id; < 0 the final actor of member k of collective i, -1 - slot
Ref = int
# a data message before de-duplication: (source, actor, bytes, value, remote, region)
DataRecord = tuple[Ref, int, int, str, bool, Region]


def relocated(a: Draft, core: int) -> Draft:
    return Draft(a.name, core, a.flops, a.bytes_read, a.bytes_written, a.dtype, a.phase,
              a.op_kind, a.module, a.mem_bytes, a.out_bytes, a.stage, a.microbatch, a.layer,
              list(a.work))  # fmt: skip
