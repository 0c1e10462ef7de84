"""``prepare`` and ``actor_durations`` work per class of equal things (actors of equal
work, dtype and node capacity; messages of equal cores, route and payload): the same
figures as working them out one by one, on every kind of wafer those classes depend on."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from waferflow.backend_sim import SimConfig
from waferflow.backend_sim.config import for_wafer
from waferflow.backend_sim.costs import (
    actor_durations,
    compute_ps,
    duration_ps,
    packetize,
    seconds_to_ps,
)
from waferflow.backend_sim.network import link_spec, prepare
from waferflow.ir.dtypes import DType
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Actor, Gemm, Message, OpWork, Plan
from waferflow.ir.target import get_wafer
from waferflow.ir.target.wafer import LinkSpec, Wafer
from waferflow.mapper.routing import route

from ._helpers import wafer as small_wafer


def _works() -> list[tuple[OpWork, ...]]:
    mm = OpWork(OpKind.MATMUL, 2 * 64 * 64 * 64, (8192, 8192), (8192,), (Gemm(64, 64, 64),))
    add = OpWork(OpKind.ADD, 4096, (8192, 8192), (8192,))
    twin = OpWork(OpKind.ADD, 4096, (8192, 8192), (8192,))  # equal to add, not the same
    relu = OpWork(OpKind.RELU, 1024, (4096,), (4096,))
    shared = (mm, add)
    return [shared, shared, (mm,), (add,), (twin,), (mm, add), (add, relu), (relu,), shared]


def _actors(cores: list[int]) -> list[Actor]:
    """Actors over ``cores`` in the orders a lowering makes: one op's actors in a row
    sharing a ``work`` tuple (also from one core to the next), tuples rebuilt per rank
    around shared passes, equal passes that are other objects, the same work in two
    dtypes, actors without work."""
    works = _works()
    actors: list[Actor] = []
    for i, (dtype, core) in enumerate(itertools.product((DType.F32, DType.BF16), cores)):
        for j, work in enumerate(works):
            k = len(actors)
            if (i + j) % 7 == 3:  # no work: one pass over the totals
                actors.append(Actor(k, f"t{k}", core, flops=1000 * j, bytes_read=64, dtype=dtype))
            else:
                actors.append(Actor(k, f"w{k}", core, dtype=dtype, op_kind=work[0].kind, work=work))
    actors.append(Actor(len(actors), "idle", cores[0]))  # no work at all
    return actors


def _fred_with_cores() -> Wafer:
    """The switched fabric with a core model: steps on a switch take no time."""
    return replace(get_wafer("fred"), core=get_wafer("mesh4x4").core)


WAFERS = {
    "uniform": lambda: get_wafer("mesh4x4"),
    "ragged": lambda: get_wafer("mesh16x16").coarsen(3),  # partial nodes on the edge
    "dead": lambda: get_wafer("dojo-d1").coarsen(4),  # ragged and partly dead nodes
    "faulty": lambda: get_wafer("dojo-d1"),  # dead cores, full capacity elsewhere
    "switches": _fred_with_cores,
}


@pytest.mark.parametrize("name", sorted(WAFERS))
def test_durations_equal_the_compute_model_actor_by_actor(name: str) -> None:
    w = WAFERS[name]()
    alive = [c for c in range(w.num_cores) if w.capacity(divmod(c, w.cols)) > 0]
    cores = alive[:3] + alive[-3:]  # ragged and partly dead nodes sit at the end
    if w.tree is not None:
        cores += [w.num_cores, w.num_nodes - 1]  # switches
    actors = _actors(cores)
    want = [0 if w.is_switch_node(a.core) else compute_ps(a, w) for a in actors]
    assert actor_durations(actors, w, compute_ps) == want
    if name in ("ragged", "dead"):  # a partial node runs the same work slower
        per_core = {a.core: d for a, d in zip(actors, want, strict=True) if a.work}
        assert per_core[cores[-1]] > per_core[cores[0]]


def _reference(plan: Plan, w: Wafer, cfg: SimConfig) -> dict[str, list]:
    """Per message, in order: links numbered on first use, and their timings."""
    flow_pb = cfg.packet_bytes or 4096
    index: dict[tuple[int, int], int] = {}
    link_src: list[int] = []
    link_dst: list[int] = []
    got: dict[str, list] = {k: [] for k in ("links", "lat", "sf", "sl", "npk", "local")}
    for m in plan.messages:
        s, d = plan.actors[m.src_actor].core, plan.actors[m.dst_actor].core
        got["local"].append(s == d)
        if s == d:
            for k, v in (("links", ()), ("lat", ()), ("sf", ()), ("sl", ()), ("npk", 0)):
                got[k].append(v)
            continue
        path = m.route or [w.node_id(c) for c in route(w, divmod(s, w.cols), divmod(d, w.cols))]
        links, specs = [], []
        for a, b in itertools.pairwise(path):
            if (a, b) not in index:
                index[(a, b)] = len(link_src)
                link_src.append(a)
                link_dst.append(b)
            links.append(index[(a, b)])
            specs.append(link_spec(w, divmod(a, w.cols), divmod(b, w.cols)))
        n, full, last = packetize(m.bytes, flow_pb)
        got["links"].append(tuple(links))
        got["lat"].append(tuple(seconds_to_ps(x.latency) for x in specs))
        got["sf"].append(tuple(duration_ps(full, x.bandwidth) for x in specs))
        got["sl"].append(tuple(duration_ps(last, x.bandwidth) for x in specs))
        got["npk"].append(n)
    got["link_src"], got["link_dst"] = link_src, link_dst
    got["out"] = [tuple(m.id for m in plan.messages if m.src_actor == a.id) for a in plan.actors]
    return got


def test_prepare_equals_message_by_message() -> None:
    """Messages between the same cores by the default and by explicit routes (one the
    same path, one a detour), several payloads (one past 2**64 bytes), local ones, and
    senders of none to several messages, on two dies with a slower link between."""
    w = small_wafer(2, 4, die_cols=2, d2d=LinkSpec(0.5e9, 11e-9))
    actors = [Actor(i, f"a{i}", c) for i, c in enumerate([0, 3, 0, 7, 3, 5, 4])]
    huge = 2**64 + 5
    sends = [  # from a lower actor id to a higher: no cycle with the per-core order
        (0, 1, 100, None),
        (0, 1, 100, (0, 1, 2, 3)),  # the default path, spelt out
        (0, 1, 100, (0, 4, 5, 6, 7, 3)),  # a detour
        (0, 1, 5000, None),
        (0, 2, 64, None),  # local: core 0 to core 0
        (2, 3, 100, None),
        (3, 4, huge, None),
        (3, 4, huge + 1, None),
        (3, 4, huge, None),
        (4, 5, 100, None),
        (5, 6, 0, None),
        (0, 1, 5000, None),
        (1, 6, 100, (3, 2, 1, 0, 4)),
    ]
    msgs = [Message(i, s, d, b, r) for i, (s, d, b, r) in enumerate(sends)]
    plan = Plan.build("mixed", w.name, actors, msgs)
    cfg = for_wafer(SimConfig(), w)
    p = prepare(plan, w, cfg)
    want = _reference(plan, w, cfg)
    assert p.msg_links == want["links"]
    assert p.msg_lat == want["lat"]
    assert p.msg_ser_full == want["sf"]
    assert p.msg_ser_last == want["sl"]
    assert p.msg_npk == want["npk"]
    assert p.msg_local == want["local"]
    assert (p.link_src, p.link_dst) == (want["link_src"], want["link_dst"])
    assert p.out_msgs == want["out"]
    assert p.msg_bytes == [m.bytes for m in msgs]
    assert p.msg_ser_last[6] == p.msg_ser_last[8] != p.msg_ser_last[7]


def test_out_msgs_list_each_senders_messages_ascending() -> None:
    """Many senders of one and two messages and a few of three, interleaved in the
    message list."""
    w = small_wafer(1, 8)
    n = 80
    actors = [Actor(i, f"a{i}", i % 8) for i in range(n)]
    sends = [
        (i, i + 1 + j)
        for j in range(3)
        for i in range(n - 4)
        if j < 1 + (i % 3 == 0) + (i % 17 == 0)
    ]
    msgs = [Message(k, s, d, 64 * (k % 5)) for k, (s, d) in enumerate(sends)]
    p = prepare(Plan.build("fan", w.name, actors, msgs), w, for_wafer(SimConfig(), w))
    assert p.out_msgs == [tuple(m.id for m in msgs if m.src_actor == a.id) for a in actors]
    degrees = sorted(len(o) for o in p.out_msgs)
    assert degrees.count(1) >= 16 and degrees.count(2) >= 16 and 0 < degrees.count(3) < 16
