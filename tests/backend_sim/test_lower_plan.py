"""lower_to_plan on small hand-built graphs."""

from __future__ import annotations

from waferflow.backend_sim import simulate
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Cost, Graph, Phase, Provenance
from waferflow.ir.opkind import OpKind as K
from waferflow.ir.plan import Message, plan_to_json
from waferflow.passes.lower_plan import lower_to_plan, snake_cores

from ._helpers import wafer


def f32(*shape: int) -> TensorType:
    return TensorType(shape, DType.F32)


def _graph() -> Graph:
    g = Graph("mlp")
    x = g.add_op(K.INPUT, (), [f32(4, 8)], names=["x"]).result
    w1 = g.add_op(K.PARAM, (), [f32(8, 16)], names=["w1"]).result
    mm = g.add_op(K.MATMUL, [x, w1], [f32(4, 16)], cost=Cost(1024, 640, 256),
                  prov=Provenance("fc1", "aten.mm"), names=["mm"]).result  # fmt: skip
    v = g.add_op(K.VIEW, [mm], [f32(64)], names=["v"]).result
    r = g.add_op(K.RELU, [v], [f32(64)], cost=Cost(64, 256, 256), names=["r"]).result
    t = g.add_op(K.ADD, [r, mm], [f32(64)], cost=Cost(64, 512, 256), names=["t"]).result
    vt = g.add_op(K.TRANSPOSE, [v], [f32(64)], names=["vt"]).result
    u = g.add_op(K.MUL, [t, vt, w1], [f32(64)], cost=Cost(64), phase=Phase.BWD,
                 names=["u"]).result  # fmt: skip
    g.set_outputs([u])
    return g


def test_one_actor_per_core_along_the_snake() -> None:
    w = wafer(2, 2)
    assert snake_cores(w) == [0, 1, 3, 2]
    plan = lower_to_plan(_graph(), w)
    assert [(a.name, a.core, a.op_kind) for a in plan.actors] == [
        ("mm", 0, K.MATMUL), ("r", 1, K.RELU), ("t", 3, K.ADD), ("u", 2, K.MUL),
    ]  # fmt: skip
    mm = plan.actors[0]
    assert (mm.flops, mm.bytes_read, mm.bytes_written, mm.module) == (1024, 640, 256, "fc1")
    assert mm.mem_bytes == 4 * 8 * 4 + 8 * 16 * 4  # x and w1 resident on core 0
    assert mm.out_bytes == 256
    assert plan.actors[3].mem_bytes == 8 * 16 * 4  # w1 again, on core 2
    assert plan.actors[3].phase is Phase.BWD
    # views fold into their producer: r and u receive mm's result, 256 bytes
    assert plan.messages == (
        Message(0, 0, 1, 256),  # mm -> r (through the view v)
        Message(1, 1, 2, 256),  # r -> t
        Message(2, 0, 2, 256),  # mm -> t
        Message(3, 2, 3, 256),  # t -> u
        Message(4, 0, 3, 256),  # mm -> u (through vt of v)
    )
    assert plan.order == ((0, (0,)), (1, (1,)), (2, (3,)), (3, (2,)))
    assert plan.wafer_name == "test" and plan.name == "mlp"
    assert simulate(plan, w).step_time_ps > 0


def test_blocks_of_actors_per_core_and_one_message_per_value_and_core() -> None:
    w = wafer(1, 2)
    plan = lower_to_plan(_graph(), w, name="two")
    assert [a.core for a in plan.actors] == [0, 0, 1, 1]
    # t (core 1) needs r and mm from core 0; u on core 1 reuses mm's copy there
    assert plan.messages == (Message(0, 1, 2, 256), Message(1, 0, 2, 256))
    assert plan.actors[2].mem_bytes == 0 and plan.actors[3].mem_bytes == 512
    assert plan.order == ((0, (0, 1)), (1, (2, 3)))
    assert plan.name == "two"


def test_dead_cores_are_skipped_and_lowering_is_deterministic() -> None:
    w = wafer(2, 2, dead_cores=[(0, 1)])
    assert snake_cores(w) == [0, 3, 2]
    plan = lower_to_plan(_graph(), w)
    assert [a.core for a in plan.actors] == [0, 0, 3, 2]  # 4 actors over 3 cores
    assert plan_to_json(lower_to_plan(_graph(), w)) == plan_to_json(plan)
    simulate(plan, w)


def test_graph_without_compute() -> None:
    g = Graph("empty")
    g.add_op(K.INPUT, (), [f32(2)], names=["x"])
    plan = lower_to_plan(g, wafer(1, 2))
    assert plan.actors == () and plan.messages == ()
