"""The Plan: construction, verification (incl. the deadlock check) and JSON."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from waferflow.errors import ParseError, PlanError, VerificationError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import (
    Actor,
    HostTransfer,
    Message,
    OpWork,
    Plan,
    load_plan,
    plan_from_json,
    plan_to_json,
    save_plan,
    verify_plan,
)
from waferflow.ir.target.wafer import LinkSpec, Topology, Wafer


def _wafer(dead: frozenset = frozenset()) -> Wafer:
    return Wafer(
        name="w", rows=2, cols=2, topology=Topology.MESH, clock_hz=1e9,
        peak_flops=((DType.F32, 1e12),), sram_bytes=1 << 20, sram_bandwidth=1e12,
        link=LinkSpec(1e9, 1e-9), dead_cores=dead,
    )  # fmt: skip


def _plan() -> Plan:
    actors = [
        Actor(0, "embed", 0, flops=10, dtype=DType.BF16, op_kind=OpKind.EMBEDDING,
              module="emb", mem_bytes=4096, out_bytes=256, layer="emb"),
        Actor(1, "mm ✓", 1, flops=2_000_000, bytes_read=300, bytes_written=200,
              phase=Phase.BWD, op_kind=OpKind.MATMUL, stage=1, microbatch=3),
        Actor(2, "loss", 1, op_kind=OpKind.NLL_LOSS),
        Actor(3, "upd", 3, phase=Phase.OPT, op_kind=OpKind.ADAM_UPDATE),
    ]  # fmt: skip
    msgs = [
        Message(0, 0, 1, 256),
        Message(1, 1, 2, 64),
        Message(2, 2, 3, 128, route=(1, 3)),
    ]
    return Plan.build("p", "w", actors, msgs, notes=("hand-made", "second note"), source="hand")


def test_build_and_queries() -> None:
    plan = _plan()
    assert plan.order == ((0, (0,)), (1, (1, 2)), (3, (3,)))
    assert plan.cores == (0, 1, 3)
    assert plan.order_of(1) == (1, 2) and plan.order_of(2) == ()
    assert plan.total_flops == 2_000_010
    assert plan.total_message_bytes == 448
    verify_plan(plan, _wafer())


def test_json_round_trip_is_byte_identical(tmp_path: Path) -> None:
    plan = _plan()
    text = plan_to_json(plan)
    back = plan_from_json(text)
    assert back == plan
    assert plan_to_json(back) == text
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    assert path.read_text(encoding="utf-8") == text
    assert load_plan(path) == plan
    assert text.startswith('{\n  "format": "waferflow.plan",\n  "version": 1,\n')
    assert '"route": [1, 3]' in text and '"route": null' in text


def test_json_rows_are_what_a_json_encoder_writes() -> None:
    """Rows are formatted directly (no dict per row): each is the standard encoder's
    text of its own object, escapes and optional fields included."""
    import json

    actors = [Actor(0, 'a "q" \\ ✓\n', 0, module="m\t", layer="l/1"), Actor(1, "b", 1)]
    msgs = [Message(0, 0, 1, 8, route=(0, 1), holds=False, bcast=2, last_use=1)]
    text = plan_to_json(Plan.build("p", "w", actors, msgs))
    rows = [line.strip().rstrip(",") for line in text.splitlines() if line.startswith("    {")]
    assert len(rows) == 5  # two actors, a message, an order row per core (two)
    for row in rows:
        assert json.dumps(json.loads(row), ensure_ascii=False, separators=(", ", ": ")) == row
    assert '"holds": false, "bcast": 2, "last_use": 1' in text


def _seedlike_plan() -> Plan:
    """Work passes, a broadcast, a received buffer kept for a later reader, the host."""
    work = (OpWork(OpKind.CONV_BACKWARD, 10, (64, 32), (64,)), OpWork(OpKind.ADD, 0, (), ()))
    actors = [Actor(0, "src", 0, work=work), Actor(1, "a", 1), Actor(2, "b", 1),
              Actor(3, "c", 3)]  # fmt: skip
    msgs = [Message(0, 0, 1, 64, bcast=0, last_use=2), Message(1, 0, 3, 64, bcast=0)]
    host = (HostTransfer(0, 128, "w", last_use=-1), HostTransfer(1, 16, "x", last_use=2),
            HostTransfer(3, 8, "out", to_host=True))  # fmt: skip
    return Plan.build("seedlike", "w", actors, msgs, host=host)


def test_json_round_trip_of_work_broadcasts_reuse_and_host() -> None:
    plan = _seedlike_plan()
    text = plan_to_json(plan)
    assert plan_from_json(text) == plan and plan_to_json(plan_from_json(text)) == text
    assert '"work": [["conv_backward", 10, [64, 32], [64]], ["add", 0, [], []]]' in text
    assert '"bcast": 0, "last_use": 2' in text and '"to_host": true' in text
    # the fields are written only when set: a plain plan's JSON has none of them
    plain = plan_to_json(_plan())
    assert '"host"' not in plain and "bcast" not in plain and "work" not in plain
    verify_plan(plan, _wafer())


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"last_use": 3}, r"messages\[0\]\.last_use = 3 must run on the same core"),
        ({"last_use": 9}, "is not an actor id"),
        ({"bcast": -2}, r"bcast must be an int >= -1"),
    ],
)
def test_reuse_and_broadcast_are_verified(change: dict, needle: str) -> None:
    plan = _seedlike_plan()
    bad = replace(plan, messages=(replace(plan.messages[0], **change), plan.messages[1]))
    with pytest.raises(VerificationError, match=needle):
        verify_plan(bad)


def test_json_errors_name_the_field() -> None:
    text = plan_to_json(_plan())
    with pytest.raises(VerificationError, match=r"\$\.actors\[0\]\.dtype: 'f33' is not a valid"):
        plan_from_json(text.replace('"dtype": "bf16"', '"dtype": "f33"'))
    with pytest.raises(VerificationError, match=r"actors\[1\]\.phase"):
        plan_from_json(text.replace('"phase": "bwd"', '"phase": "sideways"'))
    with pytest.raises(VerificationError, match="format"):
        plan_from_json(text.replace("waferflow.plan", "other"))
    with pytest.raises(VerificationError, match="version"):
        plan_from_json(text.replace('"version": 1', '"version": 9'))
    with pytest.raises(VerificationError, match=r"messages\[1\]\.bytes: expected an integer"):
        plan_from_json(text.replace('"bytes": 64', '"bytes": "64"'))
    with pytest.raises(VerificationError, match=r"actors\[2\]: missing field 'core'"):
        plan_from_json(text.replace('"name": "loss", "core": 1, ', '"name": "loss", '))
    with pytest.raises(ParseError, match="malformed JSON"):
        plan_from_json(text[:-5])


def test_verify_rejects_bad_references_and_orders() -> None:
    plan = _plan()
    bad_msg = replace(plan, messages=(*plan.messages[:2], Message(2, 2, 9, 1)))
    with pytest.raises(VerificationError, match=r"messages\[2\]\.dst_actor = 9"):
        verify_plan(bad_msg)
    with pytest.raises(VerificationError, match=r"actors\[1\]\.id is 5"):
        verify_plan(
            replace(plan, actors=(plan.actors[0], replace(plan.actors[1], id=5), *plan.actors[2:]))
        )
    missing = replace(plan, order=((0, (0,)), (1, (1,)), (3, (3,))))
    with pytest.raises(VerificationError, match=r"does not list actor\(s\) 2"):
        verify_plan(missing)
    twice = replace(plan, order=((0, (0,)), (1, (1, 2, 1)), (3, (3,))))
    with pytest.raises(VerificationError, match="more than once"):
        verify_plan(twice)
    wrong_core = replace(plan, order=((0, (0, 1)), (1, (2,)), (3, (3,))))
    with pytest.raises(VerificationError, match=r"order\[core 0\] lists actor 1 .* on core 1"):
        verify_plan(wrong_core)
    with pytest.raises(VerificationError, match="route"):
        verify_plan(replace(plan, messages=(*plan.messages[:2], Message(2, 2, 3, 1, route=(0, 3)))))
    with pytest.raises(VerificationError, match=r"actors\[0\]\.dtype"):
        verify_plan(replace(plan, actors=(replace(plan.actors[0], dtype="f32"), *plan.actors[1:])))  # type: ignore[arg-type]


def test_deadlock_check_rejects_cycles() -> None:
    a = [Actor(0, "x", 0), Actor(1, "y", 1)]
    both_ways = Plan.build("cyc", "w", a, [Message(0, 0, 1, 8), Message(1, 1, 0, 8)])
    with pytest.raises(VerificationError, match="deadlock"):
        verify_plan(both_ways)
    # the cycle can also go through a core's order: x2 waits for y, y waits for x1,
    # but x2 is ordered before x1 on core 0
    b = [Actor(0, "x1", 0), Actor(1, "x2", 0), Actor(2, "y", 1)]
    msgs = [Message(0, 0, 2, 8), Message(1, 2, 1, 8)]
    with pytest.raises(VerificationError, match=r"deadlock.*x2"):
        verify_plan(Plan.build("cyc2", "w", b, msgs, {0: [1, 0], 1: [2]}))
    verify_plan(Plan.build("ok", "w", b, msgs, {0: [0, 1], 1: [2]}))
    with pytest.raises(VerificationError, match="itself"):
        verify_plan(Plan.build("self", "w", a, [Message(0, 0, 0, 8)]))


def test_verify_against_the_wafer() -> None:
    plan = _plan()
    with pytest.raises(PlanError, match=r"actors\[3\]\.core = 3 .*dead core|dead core \(1, 1\)"):
        verify_plan(plan, _wafer(frozenset({(1, 1)})))
    far = replace(plan, actors=(*plan.actors[:3], replace(plan.actors[3], core=7)),
                  messages=(*plan.messages[:2], Message(2, 2, 3, 128)),
                  order=((0, (0,)), (1, (1, 2)), (7, (3,))))  # fmt: skip
    with pytest.raises(PlanError, match=r"actors\[3\]\.core = 7 is not on wafer 'w'"):
        verify_plan(far, _wafer())


def test_a_core_local_message_may_not_carry_a_route() -> None:
    """Actors 1 and 2 share core 1: a route through other cores would be ignored by the
    simulator, so the verifier refuses it (``[1]`` or null are fine)."""
    plan = _plan()
    local = replace(plan.messages[1], route=(1, 0, 1))
    bad = replace(plan, messages=(plan.messages[0], local, plan.messages[2]))
    with pytest.raises(VerificationError, match=r"messages\[1\] stays on core 1 .* visits 3 cores"):
        verify_plan(bad)
    with pytest.raises(VerificationError, match="stays on core 1"):
        plan_from_json(plan_to_json(bad))
    ok = replace(plan, messages=(plan.messages[0], replace(local, route=(1,)), plan.messages[2]))
    verify_plan(ok, _wafer())
