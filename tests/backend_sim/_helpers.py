"""Small wafers and plans built by hand for the simulator tests.

Figures are picked so that every duration is a whole number of picoseconds:
1 GB/s moves one byte per 1000 ps.
"""

from __future__ import annotations

from collections.abc import Sequence

from waferflow.ir.dtypes import DType
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target.wafer import Coord, FlowControl, LinkSpec, Topology, Wafer

GBPS = 1e9  # 1 byte per ns: 1000 ps per byte
NS = 1e-9


def wafer(
    rows: int = 1,
    cols: int = 8,
    *,
    topology: Topology = Topology.MESH,
    bw: float = GBPS,
    lat: float = 7 * NS,
    die_rows: int = 1,
    die_cols: int = 1,
    d2d: LinkSpec | None = None,
    dead_cores: Sequence[Coord] = (),
    dead_links: Sequence[tuple[Coord, Coord]] = (),
    flow: FlowControl | None = None,
    peak: float = 1e12,
    sram_bw: float = 1e12,
    name: str = "test",
) -> Wafer:
    return Wafer(
        name=name,
        rows=rows,
        cols=cols,
        topology=topology,
        clock_hz=1e9,
        peak_flops=((DType.F32, peak),),
        sram_bytes=1 << 20,
        sram_bandwidth=sram_bw,
        link=LinkSpec(bw, lat),
        die_rows=die_rows,
        die_cols=die_cols,
        d2d_link=d2d,
        dead_cores=frozenset(dead_cores),
        dead_links=frozenset(dead_links),
        flow=flow,
    )


def actor(i: int, core: int, flops: int = 0, **kw: object) -> Actor:
    return Actor(id=i, name=kw.pop("name", f"a{i}"), core=core, flops=flops, **kw)  # type: ignore[arg-type]


def one_message_plan(src_core: int, dst_core: int, nbytes: int, route=None) -> Plan:
    """A zero-cost producer on ``src_core`` sends ``nbytes`` to a zero-cost consumer."""
    return Plan.build(
        "one",
        "test",
        [actor(0, src_core), actor(1, dst_core)],
        [Message(0, 0, 1, nbytes, route)],
    )


def ring_allreduce_plan(cores: Sequence[int], total_bytes: int) -> Plan:
    """Ring all-reduce of ``total_bytes`` over ``cores`` (in ring order), built as
    2(n-1) steps of point-to-point messages of total/n bytes, each received by a
    zero-flop ADD actor (reduce-scatter) or copy (all-gather) that sends the next."""
    n = len(cores)
    steps = 2 * (n - 1)
    chunk = total_bytes // n
    actors: list[Actor] = []
    ident: dict[tuple[int, int], int] = {}
    for i, c in enumerate(cores):
        for s in range(steps + 1):
            ident[(i, s)] = len(actors)
            kind = OpKind.ADD if 0 < s < n else OpKind.COPY
            actors.append(Actor(id=len(actors), name=f"r{i}s{s}", core=c, op_kind=kind, stage=s))
    msgs: list[Message] = []
    for s in range(steps):
        for i in range(n):
            src, dst = ident[(i, s)], ident[((i + 1) % n, s + 1)]
            msgs.append(Message(len(msgs), src, dst, chunk))
    return Plan.build("ring", "test", actors, msgs)
