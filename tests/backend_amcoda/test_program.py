"""Derived sizes and ALU times of the seed machine's ops (§3.5, §3.6, §7)."""

from __future__ import annotations

import pytest

from waferflow.backend_amcoda import (
    HOST,
    AluOp,
    Entry,
    Mode,
    Op,
    OutMode,
    actor,
    inp,
    keep,
    out,
    packages,
    release,
    split_floats,
)
from waferflow.backend_amcoda.program import Operand, OperandKind, blocks


def test_conv1_forward_alu_time_is_the_spec_check() -> None:
    op = Op.conv(32, 16, 56, 3, 16, 1, 1, Mode.FP)
    # R = 1,605,632 / 32, C = 231,211,008 / 1024, W = R, + 2
    assert (packages(op.input_size(0)), op.macs // 1024, packages(op.output_size)) == (
        50_176,
        225_792,
        50_176,
    )
    assert op.alu_cycles == 326_146


def test_conv_sizes_per_mode() -> None:
    fp = Op.conv(32, 16, 56, 3, 32, 2, 1, Mode.FP)  # conv2: 56 -> 28
    bp = Op.conv(32, 16, 56, 3, 32, 2, 1, Mode.BP)
    dw = Op.conv(32, 16, 56, 3, 32, 2, 1, Mode.DIVW)
    x, w, y = 32 * 16 * 56 * 56, 32 * 16 * 9, 32 * 32 * 28 * 28
    assert fp.hw_out == 28
    assert (fp.input_size(0), fp.input_size(1), fp.output_size) == (x, w, y)
    assert (bp.input_size(0), bp.input_size(1), bp.output_size) == (y, w, x)
    assert (dw.input_size(0), dw.input_size(1), dw.output_size) == (x, y, w)
    # the three modes charge the same MACs; divw writes only the weights
    assert fp.macs == bp.macs == dw.macs == 32 * 16 * 28 * 28 * 9 * 32
    assert dw.alu_cycles == packages(x) + dw.macs // 1024 + packages(w) + 2


def test_fc_divw_reads_the_larger_of_x_and_dy() -> None:
    op = Op.fc(32, 512, 16, Mode.DIVW)
    assert op.alu_cycles == 16_384 // 32 + 32 * 512 * 16 // 1024 + 8192 // 32 + 2


def test_pool_act_add_loss_have_no_compute_but_reads_and_writes() -> None:
    pool = Op.pool(32, 32, 28, 7, 7, 0, Mode.AVE_FP)
    assert pool.hw_out == 4
    assert pool.alu_cycles == 25_088 + 32 * 32 * 16 * 49 // 1024 + 512 + 2
    relu = Op.act(32, 16, 56, 56, Mode.RELU_FP)
    assert relu.alu_cycles == 2 * 50_176 + 2
    assert Op.act(8, 2, 4, 4, Mode.RELU_BP).n_inputs == 2
    assert Op.add(16, 16, 3, 3).alu_cycles == 72 + 72 + 2
    assert Op.loss(32, 1, 1, 16).alu_cycles == 16 + 16 + 2
    assert Op.mul(2, 3, 4).alu_cycles == 1 + 2 * 3 * 4 + 1 + 2  # MUL is not divided by 1024
    assert Op.store(1, 1, 512, 16).alu_cycles == 0
    assert not Op.load(1, 1, 1, 32).uses_alu


def test_packages_split_and_blocks() -> None:
    assert packages(1) == 1 and packages(32) == 1 and packages(33) == 2
    assert split_floats(401_408 * 2, 2) == 401_408
    assert split_floats(10, 3) == 3  # floor, as the SU divides
    assert blocks(65_536) == 1 and blocks(65_537) == 2 and blocks(1_605_632) == 25


def test_entry_wire_sizes() -> None:
    bcast = Entry(out(actor(3), actor(4)), inp(keep(2)), Op.act(16, 32, 28, 28, Mode.RELU_FP))
    # the ddd pool's LOAD: each conv3 replica gets 12,544 packages (§4.4)
    split = Entry(
        out(actor(5), actor(6), mode=OutMode.SPLIT1), inp(release(1)), Op.load(32, 32, 28, 28)
    )
    assert bcast.out_floats_per_consumer == 16 * 32 * 28 * 28
    assert split.out_floats_per_consumer == 16 * 32 * 28 * 28
    assert split.out_packages == 12_544
    gather = Entry(out(keep(1)), inp(actor(1), actor(2)), Op.store(32, 16, 56, 56))
    assert gather.input_operand_size(1) == 16 * 16 * 56 * 56
    assert bcast.instruction_lines == 3
    wide = Entry(out(keep(0), *(actor(i) for i in range(1, 5))), inp(HOST), Op.store(1, 1, 1, 32))
    assert wide.instruction_lines == 4  # five Out operands need a continue line


def test_operand_and_op_validation() -> None:
    with pytest.raises(ValueError, match=r"1\.\.16"):
        actor(17)
    with pytest.raises(ValueError, match="slot"):
        keep(32)
    with pytest.raises(ValueError, match="takes no mode"):
        Op(AluOp.ACT, Mode.FP, (1,) * 8)
    with pytest.raises(ValueError, match="16-bit"):
        Op.store(70_000, 1, 1, 1)
    assert HOST.peer == 0 and actor(5).peer == 5
    assert str(release(3)) == "s3!" and str(Operand(OperandKind.KEEP, 2)) == "s2"
    assert Mode.AVE_BP.code == 0xF4 and Mode.RELU_FP.code == Mode.FP.code == 0xF1
