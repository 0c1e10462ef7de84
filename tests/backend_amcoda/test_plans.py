"""Plan strings and the generator's refusals (the format's limits)."""

from __future__ import annotations

import pytest

from waferflow.backend_amcoda import (
    HOST,
    ActorProgram,
    Cnn,
    ConvLayer,
    Entry,
    Experiment,
    FcLayer,
    HostTransfer,
    LossLayer,
    Op,
    Par,
    PlanKind,
    PoolLayer,
    SeedPlan,
    generate_experiment,
    inp,
    keep,
    out,
    parse_seed_plan,
    release,
    seed_cnn_layers,
    validate_experiment,
)
from waferflow.errors import PlanError


def test_parse_plans() -> None:
    assert parse_seed_plan("pipe") == SeedPlan(PlanKind.PIPE)
    assert parse_seed_plan(" GPipe=4 ") == SeedPlan(PlanKind.GPIPE, micro_batches=4)
    p = parse_seed_plan("layers=ddt,ways=4")
    assert p.pattern == (Par.DATA, Par.DATA, Par.TENSOR) and p.ways == 4
    assert parse_seed_plan("ways=2,layers=dtt") == parse_seed_plan("layers=dtt,ways=2")
    for text in ("pipe", "gpipe=2", "layers=ddt,ways=4"):
        assert str(parse_seed_plan(text)) == text
    assert parse_seed_plan("layers=dtt,ways=2").short_name == "dtt2"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("ring", "cannot read plan"),
        ("gpipe", "cannot read plan"),
        ("gpipe=x", "not an integer"),
        ("gpipe=0", "at least 1"),
        ("gpipe=5", "ADD takes at most 4 operands"),
        ("layers=ddx,ways=2", "one letter per conv layer"),
        ("layers=ddd", "needs both"),
        ("layers=ddd,ways=2,ways=4", "cannot read plan"),
    ],
)
def test_parse_errors(text: str, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        parse_seed_plan(text)


def test_plan_checked_against_the_model() -> None:
    cnn = seed_cnn_layers()
    with pytest.raises(PlanError, match="has 2 letters but the model has 3 conv layers"):
        parse_seed_plan("layers=dd,ways=2", cnn)
    with pytest.raises(PlanError, match="does not divide the batch of 32"):
        parse_seed_plan("layers=ddd,ways=3", cnn)
    with pytest.raises(PlanError, match="does not divide the batch of 30 into equal"):
        generate_experiment(seed_cnn_layers(batch=30), "gpipe=4")
    with pytest.raises(PlanError, match="16 output channels of the tensor-parallel conv1"):
        parse_seed_plan("layers=tdd,ways=3", seed_cnn_layers(batch=48))


def _deep(n_conv: int, batch: int = 8) -> Cnn:
    convs = tuple(ConvLayer(8, 8, 3, 1, 1, 8, f"c{i + 1}") for i in range(n_conv))
    return Cnn(batch, (*convs, PoolLayer(8, 8, 0, 8, 8), FcLayer(8, 4), LossLayer(4)))


def test_refuses_more_than_16_actors() -> None:
    generate_experiment(_deep(13), "pipe")  # 16 actors: fine
    with pytest.raises(PlanError, match="needs 17 actors; the seed machine has at most 16"):
        generate_experiment(_deep(14), "pipe")
    with pytest.raises(PlanError, match="needs 27 actors"):
        generate_experiment(seed_cnn_layers(), "layers=ddd,ways=8")


def test_refuses_a_five_operand_reduction() -> None:
    cnn = _deep(1, batch=40)
    with pytest.raises(PlanError, match="reads 5 operands; an In_Config holds at most 4"):
        generate_experiment(cnn, "layers=d,ways=5")


def test_refuses_more_than_341_entries() -> None:
    store = Entry(out(keep(0)), inp(HOST), Op.store(1, 1, 1, 32))
    drop = Entry(out(keep(1)), inp(release(0)), Op.add(1, 1, 1, 32))
    done = Entry(out(HOST), inp(release(1)), Op.add(1, 1, 1, 32))
    body = [store, drop, Entry(out(HOST), inp(release(1)), Op.add(1, 1, 1, 32))] * 114
    prog = ActorProgram(
        1,
        tuple([*body[:-1], done]),
        tuple(HostTransfer("x", 32) for _ in range(114)),
        tuple("y" for _ in range(114)),
    )
    assert len(prog.entries) == 342
    with pytest.raises(PlanError, match="342 entries; the instruction cache holds at most 341"):
        validate_experiment(Experiment("big", (prog,)))


def test_authors_slip_only_where_it_exists() -> None:
    with pytest.raises(PlanError, match="authors_slip applies only"):
        generate_experiment(seed_cnn_layers(), "pipe", authors_slip=True)
    with pytest.raises(PlanError, match="authors_slip applies only"):
        generate_experiment(seed_cnn_layers(), "layers=tdd,ways=2", authors_slip=True)


def test_refuses_bad_mem_ports() -> None:
    with pytest.raises(PlanError, match="MemWidth"):
        generate_experiment(seed_cnn_layers(), "pipe", mem_ports=0)
