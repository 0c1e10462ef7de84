"""Reading host scripts back: the tokenizer of §2.1 and the program model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backend_amcoda.test_emit import tiny_cnn
from tests.backend_amcoda.test_scripts import AUTHORS_BASIC_HOST_1, AUTHORS_DMM_HOST_3
from waferflow.backend_amcoda import (
    HOST,
    Op,
    Severity,
    generate_experiment,
    inp,
    keep,
    out,
    seed_cnn_layers,
)
from waferflow.backend_amcoda.emit import emit_experiment
from waferflow.backend_amcoda.reader import (
    RecordKind,
    load_folder,
    parse_host_script,
    read_experiment,
)
from waferflow.backend_amcoda.scripts import host_script, write_experiment
from waferflow.errors import ParseError

MINI = """wait_cycle message ---
10 0xff 0xf1 0x80000000 0x80000001 0x00000006 0x00 0xff ins_package:
0xf1 0xf0 0x2 0x00000000 0x0 0x0 0x0 0x0 0x0 0x0
0xf2 0xf0 0x1 0x80000000 0x0 0x0 0x0 0x0 0x0 0x0
0xf3 0xf8 0x0001 0x0001 0x0001 0x0020 0x0 0x0 0x0 0x0 0x00
0xf1 0xf0 0x1 0x80000000 0x0 0x0 0x0 0x0 0x0 0x0
0xf2 0xf0 0x3 0x00000000 0x0 0x0 0x0 0x0 0x0 0x0
0xf3 0xf1 0x0001 0x0001 0x0001 0x0020 0x0 0x0 0x0 0x0 0x00
1 0xff 0xf2 0x80000000 0x80000001 0x00000001 0x00 0xff
0 0xff 0xf5 0x80000000 0x80000001 0x00000000 0x01 0xff
0 0xff 0xf7 0x80000000 0x80000001 0x00000001 0x01 0xff input_file: x.txt
-2 output_file: y.txt
-1
"""


def rules(text: str) -> list[str]:
    return [p.rule for p in parse_host_script(text, 1).problems]


def test_a_minimal_script() -> None:
    s = parse_host_script(MINI, 1)
    assert s.problems == ()
    assert s.program is not None
    e0, e1 = s.program.entries
    assert (e0.out, e0.inp, e0.op) == (out(keep(0)), inp(HOST), Op.store(1, 1, 1, 32))
    assert e1.op == Op.add(1, 1, 1, 32) and e1.out.consumers == (0,)
    assert [t.name for t in s.program.host_inputs] == ["x.txt"]
    assert s.program.host_inputs[0].floats == 32
    assert s.program.host_outputs == ("y.txt",)
    assert [ln.op for ln in s.entry_lines] == [5, 8]


def test_the_first_three_tokens_are_skipped_whatever_they_are() -> None:
    assert parse_host_script("a\nb c\n" + MINI.split("\n", 1)[1], 1).problems == ()
    # only two title tokens: the wait of the first record is swallowed
    assert rules("w m\n" + MINI.split("\n", 1)[1]) != []


def test_comments_only_at_record_starts_with_a_space() -> None:
    text = MINI.replace("1 0xff 0xf2", "// start it\n// another one // with slashes\n1 0xff 0xf2")
    assert parse_host_script(text, 1).problems == ()
    bad = MINI.replace("1 0xff 0xf2", "//start\n1 0xff 0xf2")
    s = parse_host_script(bad, 1)
    assert s.program is None and s.fatal is not None and s.fatal.rule == "comment"
    inside = MINI.replace("0xf1 0xf0 0x1 0x80000000", "// e1\n0xf1 0xf0 0x1 0x80000000")
    assert rules(inside)[0] == "comment"


def test_numbers_hex_with_0x_decimal_without_and_wrapping() -> None:
    # OP written "6" reads the same in both bases: a warning
    s = parse_host_script(MINI.replace("0x00000006 0x00", "6 0x00"), 1)
    assert [(p.rule, p.severity) for p in s.problems] == [("hex-prefix", Severity.WARNING)]
    # "00000040" is forty, not 0x40 (§6.2 f4)
    s = parse_host_script(MINI.replace("0x00000001 0x01 0xff input", "00000040 0x01 0xff input"), 1)
    assert s.records[3].op == 40
    assert [(p.rule, p.severity) for p in s.problems] == [("hex-prefix", Severity.ERROR)]
    # 0x1ff in an 8-bit field wraps to 0xff
    s = parse_host_script(MINI.replace("0xf3 0xf1 0x0001", "0xf3 0x1f1 0x0001"), 1)
    assert "field-width" in [p.rule for p in s.problems]
    assert s.program is not None and s.program.entries[1].op == Op.add(1, 1, 1, 32)


def test_structural_errors() -> None:
    s = parse_host_script(MINI.rsplit("-1", 1)[0], 1)
    assert s.program is None and s.fatal is not None and s.fatal.rule == "idle-record"
    assert "idle-record" in rules(MINI + "0 0xff 0xf2 0x80000000 0x80000001 0x1 0x00 0xff\n")
    assert "ins-count" in rules(MINI.replace("0x00000006 0x00", "0x00000005 0x00"))
    assert "syntax" in rules(MINI.replace("input_file:", "input:"))
    assert "slot-index" in rules(MINI.replace("0x2 0x00000000 0x0", "0x2 0x00000020 0x0"))
    assert "operand" in rules(MINI.replace("0x1 0x80000000 0x0 0x0 0x0 0x0 0x0 0x0\n0xf3 0xf8",
                                           "0x1 0x80000020 0x0 0x0 0x0 0x0 0x0 0x0\n0xf3 0xf8"))  # fmt: skip
    missing_in = MINI.replace("0xf2 0xf0 0x3 0x00000000 0x0 0x0 0x0 0x0 0x0 0x0\n", "")
    s = parse_host_script(missing_in.replace("0x00000006", "0x00000005"), 1)
    assert [p.rule for p in s.problems] == ["entry-incomplete"]
    assert "mode" in rules(MINI.replace("0x0 0x0 0x0 0x0 0x00\n0xf1", "0x0 0x0 0x0 0x0 0xf1\n0xf1"))


def test_inline_and_random_data_records() -> None:
    inline = MINI.replace("input_file: x.txt", "data_package: " + " ".join(["0.5"] * 32))
    s = parse_host_script(inline, 1)
    assert s.problems == () and s.records[3].source == "<data_package>"
    short = MINI.replace("input_file: x.txt", "data_package: " + " ".join(["0.5"] * 31))
    assert "syntax" in rules(short)
    rnd = parse_host_script(MINI.replace("input_file: x.txt", "random_data_package"), 1)
    assert rnd.problems == () and rnd.records[3].kind is RecordKind.DATA


def test_the_authors_scripts_read_into_our_programs() -> None:
    basic = generate_experiment(seed_cnn_layers(), "pipe").program(1)
    s = parse_host_script(AUTHORS_BASIC_HOST_1, 1)
    assert s.problems == () and s.program is not None
    assert [(e.out, e.inp, e.op) for e in s.program.entries] == [
        (e.out, e.inp, e.op) for e in basic.entries
    ]
    assert s.program.host_inputs == basic.host_inputs
    dtt = generate_experiment(seed_cnn_layers(), "layers=dtt,ways=2", mem_ports=2).program(3)
    s = parse_host_script(AUTHORS_DMM_HOST_3, 3)
    assert s.program is not None
    assert [(e.out, e.inp, e.op) for e in s.program.entries] == [
        (e.out, e.inp, e.op) for e in dtt.entries
    ]


@pytest.mark.parametrize("plan", ["pipe", "gpipe=4", "layers=dt,ways=2", "layers=tt,ways=4"])
def test_round_trip_with_and_without_annotations(tmp_path: Path, plan: str) -> None:
    exp = generate_experiment(tiny_cnn(), plan, hazard_guard=plan == "gpipe=4")
    assert read_experiment(emit_experiment(exp, tmp_path / "a")) == exp
    # plain scripts (no comments, no JSON): the same programs without labels and roles
    bare = read_experiment(write_experiment(exp, tmp_path / "b", data_files=True))
    assert [[(e.out, e.inp, e.op) for e in p.entries] for p in bare.programs] == [
        [(e.out, e.inp, e.op) for e in p.entries] for p in exp.programs
    ]
    assert [p.host_inputs for p in bare.programs] == [p.host_inputs for p in exp.programs]
    assert bare.name == "b"
    for p in exp.programs:
        again = parse_host_script(host_script(p, annotate=True, experiment=exp.name), p.actor)
        assert again.program == p and again.experiment == exp.name


def test_read_experiment_reports_where_it_fails(tmp_path: Path) -> None:
    root = emit_experiment(generate_experiment(tiny_cnn(), "pipe"), tmp_path / "x")
    f = root / "script" / "host_2.txt"
    f.write_text(f.read_text().replace("// e0", "//e0", 1))
    with pytest.raises(ParseError, match=r"host_2\.txt:\d+:1: .*comment"):
        read_experiment(root)
    f.unlink()
    with pytest.raises(ParseError, match=r"host_2\.txt is missing"):
        read_experiment(root)
    with pytest.raises(ParseError, match="is not a folder"):
        load_folder(tmp_path / "nothing")


def test_memwidth_of_a_folder_without_settings(tmp_path: Path) -> None:
    """The authors keep MemWidth in the folder name (file_dis_2_ddd/MemWidth_2)."""
    from waferflow.backend_amcoda import check_experiment

    exp = generate_experiment(tiny_cnn(), "layers=dd,ways=2", mem_ports=2)
    root = write_experiment(exp, tmp_path / "file_dis_2_dd" / "MemWidth_2", data_files=True)
    back = read_experiment(root)
    assert back.mem_ports == 2 and back.name == "MemWidth_2"
    issues = check_experiment(root)
    assert [(i.rule, i.severity) for i in issues] == [("settings", Severity.WARNING)]
