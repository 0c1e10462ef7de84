"""Generated programs follow the seed's templates (§3.8) and walk-throughs (§4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from waferflow.backend_amcoda import (
    HOST,
    AluOp,
    Entry,
    InMode,
    Mode,
    Op,
    OutMode,
    actor,
    generate_experiment,
    hazard_b_sites,
    inp,
    keep,
    out,
    release,
    seed_cnn_layers,
    validate_experiment,
)
from waferflow.backend_amcoda.program import Experiment
from waferflow.errors import PlanError

CNN = seed_cnn_layers()


def _strip(entries: tuple[Entry, ...]) -> list[Entry]:
    return [replace(e, label="") for e in entries]


def test_basic_conv1_is_the_walkthrough_table() -> None:
    """§4.1, actor 1 of file_basic."""
    p = generate_experiment(CNN, "pipe").program(1)
    conv = (32, 16, 56, 3, 16, 1, 1)
    assert _strip(p.entries) == [
        Entry(out(keep(0)), inp(HOST), Op.store(16, 16, 3, 3)),
        Entry(out(keep(1)), inp(HOST), Op.store(32, 16, 56, 56)),
        Entry(out(keep(2)), inp(keep(1), release(0)), Op.conv(*conv, Mode.FP)),
        Entry(out(actor(2)), inp(keep(2)), Op.act(32, 16, 56, 56, Mode.RELU_FP)),
        Entry(out(keep(3)), inp(actor(2), release(2)), Op.act(32, 16, 56, 56, Mode.RELU_BP)),
        Entry(out(HOST), inp(release(1), release(3)), Op.conv(*conv, Mode.DIVW)),
    ]
    assert p.instruction_lines == 0x12
    assert [(t.name, t.packages) for t in p.host_inputs] == [
        ("weight1.txt", 0x48),
        ("data.txt", 0xC400),
    ]
    assert p.host_outputs == ("divw1.txt",)


def test_basic_fc_loss_and_pool() -> None:
    """§4.1 / §4.2: FC (6 entries), loss (2), pool (2); conv2/3 use 7 entries."""
    e = generate_experiment(CNN, "pipe")
    assert [len(p.entries) for p in e.programs] == [6, 7, 7, 2, 6, 2]
    fc, loss, pool = e.program(5), e.program(6), e.program(4)
    assert _strip(fc.entries) == [
        Entry(out(keep(0)), inp(HOST), Op.store(1, 1, 512, 16)),
        Entry(out(keep(1)), inp(actor(4)), Op.store(32, 32, 4, 4)),
        Entry(out(actor(6)), inp(keep(1), keep(0)), Op.fc(32, 512, 16, Mode.FP)),
        Entry(out(keep(2)), inp(actor(6)), Op.store(32, 1, 1, 16)),
        Entry(out(actor(4)), inp(keep(2), release(0)), Op.fc(32, 512, 16, Mode.BP)),
        Entry(out(HOST), inp(release(1), release(2)), Op.fc(32, 512, 16, Mode.DIVW)),
    ]
    assert fc.host_inputs[0].name == "weight5.txt" and fc.host_inputs[0].packages == 256
    assert _strip(loss.entries) == [
        Entry(out(keep(0)), inp(HOST), Op.store(32, 1, 1, 16)),
        Entry(out(actor(5)), inp(actor(5), release(0)), Op.loss(32, 1, 1, 16)),
    ]
    assert loss.host_outputs == () and loss.host_inputs[0].name == "label.txt"
    assert [str(x.op) for x in pool.entries] == [
        "POOL.ave_fp(32,32,28,7,0,7,0)",
        "POOL.ave_bp(32,32,28,7,0,7,0)",
    ]
    conv2 = e.program(2).entries
    assert conv2[2].inp.operands[1] == keep(0)  # W kept: conv2 has a bp
    assert conv2[5].op.mode is Mode.BP and conv2[5].inp.operands == (keep(3), release(0))


def test_layers_with_one_way_is_the_pipeline() -> None:
    a = generate_experiment(CNN, "pipe")
    b = generate_experiment(CNN, "layers=ddd,ways=1")
    assert [_strip(p.entries) for p in a.programs] == [_strip(p.entries) for p in b.programs]


def test_gpipe2_matches_section_4_3() -> None:
    e = generate_experiment(CNN, "gpipe=2")
    assert [len(p.entries) for p in e.programs] == [12, 14, 14, 4, 12, 6]
    c1 = e.program(1).entries
    fps = [x for x in c1 if x.op.alu is AluOp.CONV and x.op.mode is Mode.FP]
    assert [x.inp.operands[1] for x in fps] == [keep(0), release(0)]  # W released in fp2
    assert c1[-1].op == Op.add(16, 16, 3, 3) and c1[-1].inp.operands == (release(4), release(8))
    c2 = e.program(2).entries
    bps = [x for x in c2 if x.op.alu is AluOp.CONV and x.op.mode is Mode.BP]
    assert [x.inp.operands[1] for x in bps] == [keep(0), release(0)]  # released in the last bp
    fc = e.program(5).entries
    assert fc[-1].inp.operands == (release(3), release(6))
    loss = e.program(6)
    assert [str(x.op) for x in loss.entries][2:] == ["LOSS(16,1,1,16)"] * 2 + [
        "LOAD(16,1,1,16)"
    ] * 2
    assert [x.out.keep_slot for x in loss.entries[2:4]] == [2, 3]
    assert [t.name for t in loss.host_inputs] == ["label_1.txt", "label_2.txt"]
    assert [(t.name, t.packages) for t in e.program(1).host_inputs] == [
        ("weight1.txt", 72),
        ("data_1.txt", 25_088),
        ("data_2.txt", 25_088),
    ]


def test_gpipe4_uses_four_operand_adds() -> None:
    e = generate_experiment(CNN, "gpipe=4")
    assert len(e.program(1).entries[-1].inp.operands) == 4
    assert max(s for p in e.programs for x in p.entries if (s := x.out.keep_slot) is not None) == 16


def test_two_way_ddd_matches_section_4_4() -> None:
    e = generate_experiment(CNN, "layers=ddd,ways=2")
    assert [len(p.entries) for p in e.programs] == [7, 6, 8, 7, 8, 7, 4, 6, 2]
    root, other = e.program(1), e.program(2)
    assert root.entries[-1].inp.operands == (release(4), actor(2))
    assert root.entries[-1].out.consumers == (0,)
    assert other.entries[-1].out.consumers == (1,) and other.host_outputs == ()
    assert [t.name for t in other.host_inputs] == ["weight1.txt", "data_2.txt"]
    pool = e.program(7).entries
    assert pool[0].inp.mode is InMode.GATHER1 and pool[0].inp.producers == (5, 6)
    assert pool[3].op.alu is AluOp.LOAD and pool[3].out.mode is OutMode.SPLIT1
    assert pool[3].out_packages == 12_544


def test_two_way_ddt_matches_section_4_4() -> None:
    e = generate_experiment(CNN, "layers=ddt,ways=2")
    conv2 = e.program(3).entries
    assert conv2[3].out.consumers == (5, 6) and conv2[3].out.mode is OutMode.BROADCAST
    assert conv2[4].op == Op.add(16, 32, 28, 28) and conv2[4].inp.producers == (5, 6)
    assert conv2[-1].inp.operands == (release(5), actor(4))  # divw in s5, shifted by one
    part = e.program(5)
    assert part.host_inputs[0].name == "weight3_1.txt" and part.host_inputs[0].packages == 144
    assert part.entries[1].inp.mode is InMode.GATHER1
    assert part.entries[6].op == Op.load(32, 32, 28, 28)
    assert part.entries[6].out.mode is OutMode.SPLIT1 and part.entries[6].inp.operands == (
        release(4),
    )
    assert part.host_outputs == ("divw3_1.txt",)
    assert e.program(7).entries[0].inp.mode is InMode.GATHER2


def test_two_way_dtt_matches_the_authors_dmm_scripts() -> None:
    """file_dis_2_dmm host_3 (conv2 part), host_5 (conv3 part), host_7 (pool)."""
    e = generate_experiment(CNN, "layers=dtt,ways=2")
    conv2 = [str(x) for x in e.program(3).entries]
    assert conv2 == [
        "STORE(16,16,3,3) <- host -> s0",
        "STORE(32,16,56,56) <- gather1 A1, A2 -> s1",
        "CONV.fp(32,16,56,3,16,2,1) <- s1, s0 -> s2",
        "ACT.relu_fp(32,16,28,28) <- s2 -> A5, A6",
        "ADD(32,16,28,28) <- A5, A6 -> s3",
        "ACT.relu_bp(32,16,28,28) <- s3!, s2! -> s4",
        "CONV.bp(32,16,56,3,16,2,1) <- s4, s0! -> s5",
        "LOAD(32,16,56,56) <- s5! -> split1 A1, A2",
        "CONV.divw(32,16,56,3,16,2,1) <- s1!, s4! -> host",
    ]
    conv3 = [str(x) for x in e.program(5).entries]
    assert conv3[1] == "STORE(32,32,28,28) <- gather2 A3, A4 -> s1"
    assert conv3[6] == "LOAD(32,32,28,28) <- s4! -> split2 A3, A4"
    assert [str(x) for x in e.program(7).entries] == [
        "STORE(32,32,28,28) <- gather2 A5, A6 -> s0",
        "POOL.ave_fp(32,32,28,7,0,7,0) <- s0! -> A8",
        "POOL.ave_bp(32,32,28,7,0,7,0) <- A8 -> s1",
        "LOAD(32,32,28,28) <- s1! -> split2 A5, A6",
    ]


def test_four_way_numbering_and_slip() -> None:
    e = generate_experiment(CNN, "layers=ddt,ways=4")
    assert e.n_actors == 15
    assert [p.layer for p in e.programs] == ["conv1"] * 4 + ["conv2"] * 4 + ["conv3"] * 4 + [
        "pool", "fc", "loss",
    ]  # fmt: skip
    assert e.program(1).entries[-1].inp.operands == (release(4), actor(2), actor(3), actor(4))
    slip = generate_experiment(CNN, "layers=ddt,ways=4", authors_slip=True)
    for a in range(1, 16):
        plain, slipped = e.program(a).entries, slip.program(a).entries
        for x, y in zip(plain, slipped, strict=True):
            if a in (2, 3, 4) and x.op.mode is Mode.DIVW:
                assert (x.op.params[0], y.op.params[0]) == (8, 16)
            else:
                assert x == y


def test_tensor_to_data_layers_generalise() -> None:
    """Not among the authors' plans: parts feeding replicas split by sample, and
    replicas return their input gradient split by channel."""
    e = generate_experiment(CNN, "layers=ttd,ways=2")
    conv2 = e.program(3).entries
    assert conv2[3].out.mode is OutMode.SPLIT1 and conv2[3].out.consumers == (5, 6)
    assert conv2[4].op.alu is AluOp.STORE and conv2[4].inp.mode is InMode.GATHER1
    conv3 = e.program(5).entries
    assert conv3[1].inp.mode is InMode.GATHER2
    assert conv3[5].out.keep_slot == 4 and conv3[6].out.mode is OutMode.SPLIT2


def test_hazard_guard_replaces_mid_program_stores_and_loads() -> None:
    plain = generate_experiment(CNN, "gpipe=2")
    assert (1, 4) in hazard_b_sites(plain)  # STORE X1 sits between two ALU ops
    for plan in ("pipe", "gpipe=2", "gpipe=4", "layers=dtt,ways=4"):
        guarded = generate_experiment(CNN, plan, hazard_guard=True)
        assert hazard_b_sites(guarded) == []
    g = generate_experiment(CNN, "gpipe=2", hazard_guard=True).program(1).entries[4]
    assert g.op == Op.add(16, 16, 56, 56) and g.label.endswith("+guard")


def test_link_order_rule_refuses_direct_gpipe_loss_returns() -> None:
    """§6.3 (a): the loss actor must collect every logit before sending a gradient."""
    e = generate_experiment(CNN, "gpipe=2")
    loss = e.programs[-1]
    es = [Entry(out(keep(j)), inp(HOST), Op.store(16, 1, 1, 16)) for j in range(2)]
    es += [Entry(out(actor(5)), inp(actor(5), release(j)), Op.loss(16, 1, 1, 16)) for j in range(2)]
    bad = replace(e, programs=(*e.programs[:-1], replace(loss, entries=tuple(es))))
    with pytest.raises(PlanError, match=r"actors 5 and 6 .*hazard \(a\)"):
        validate_experiment(bad)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            lambda es: [*es[:2], replace(es[2], inp=inp(keep(7), release(0))), *es[3:]],
            "reads slot s7",
        ),
        (lambda es: [*es[:1], replace(es[1], out=out(keep(0))), *es[2:]], "writes slot s0"),
        (lambda es: es[:-1], "never releases s1"),
    ],
)
def test_slot_discipline(change, match: str) -> None:
    e = generate_experiment(CNN, "pipe")
    p = e.program(1)
    bad = replace(p, entries=tuple(change(list(p.entries))))
    with pytest.raises(PlanError, match=match):
        validate_experiment(Experiment("bad", (bad, *e.programs[1:])))


def test_edge_sizes_must_agree() -> None:
    e = generate_experiment(CNN, "pipe")
    p2 = e.program(2)
    es = list(p2.entries)
    es[1] = replace(es[1], op=Op.store(16, 16, 56, 56))  # expects half of what A1 sends
    bad = replace(p2, entries=tuple(es))
    with pytest.raises(PlanError, match="sends 1605632 values to actor 2 e1, which expects 802816"):
        validate_experiment(replace(e, programs=(e.programs[0], bad, *e.programs[2:])))
