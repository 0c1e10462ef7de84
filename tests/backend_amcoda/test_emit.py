"""Emitting experiment folders: the spec's worked example, round trips, limits."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.backend_amcoda.test_scripts import AUTHORS_BASIC_HOST_1
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
    Mode,
    Op,
    PoolLayer,
    actor,
    generate_experiment,
    inp,
    keep,
    out,
    release,
    seed_cnn_layers,
    simulate_experiment,
)
from waferflow.backend_amcoda.checker import check_experiment, format_issues
from waferflow.backend_amcoda.emit import check_format_limits, emit_experiment
from waferflow.backend_amcoda.reader import RecordKind, parse_host_script, read_experiment
from waferflow.backend_amcoda.report import choose_test_time, compile_seed_plan
from waferflow.errors import PlanError

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "amcoda"
UPDATE = os.environ.get("WAFERFLOW_UPDATE_GOLDEN") == "1"


def tiny_cnn(batch: int = 4) -> Cnn:
    """Two convs (4->8 on 8x8, 8->8 stride 2), 2x2 pool, fc 32->4: every tensor is small."""
    return Cnn(
        batch,
        (
            ConvLayer(4, 8, 3, 1, 1, 8, "conv1"),
            ConvLayer(8, 8, 3, 2, 1, 8, "conv2"),
            PoolLayer(2, 2, 0, 8, 4, "pool"),
            FcLayer(32, 4, "fc"),
            LossLayer(4, "loss"),
        ),
    )


def check_golden(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(f"missing golden file {path}; write it with WAFERFLOW_UPDATE_GOLDEN=1")
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True), text.splitlines(keepends=True), "golden", "now"
            )
        )
        pytest.fail(f"{path.name} differs from its golden file:\n{diff}")


def no_comments(text: str) -> list[str]:
    return [t for ln in text.splitlines() if not ln.lstrip().startswith("//") for t in ln.split()]


# -- the spec's worked example (§4.1), full size ---------------------------------------------


@pytest.fixture(scope="module")
def basic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Experiment, Path]:
    exp = generate_experiment(seed_cnn_layers(), "pipe")
    return exp, emit_experiment(exp, tmp_path_factory.mktemp("amcoda") / "file_basic")


SPEC_41_ENTRIES = (  # §4.1's table: Out, In, Op (para1..8, para9)
    Entry(out(keep(0)), inp(HOST), Op.store(16, 16, 3, 3)),
    Entry(out(keep(1)), inp(HOST), Op.store(32, 16, 56, 56)),
    Entry(out(keep(2)), inp(keep(1), release(0)), Op.conv(32, 16, 56, 3, 16, 1, 1, Mode.FP)),
    Entry(out(actor(2)), inp(keep(2)), Op.act(32, 16, 56, 56, Mode.RELU_FP)),
    Entry(out(keep(3)), inp(actor(2), release(2)), Op.act(32, 16, 56, 56, Mode.RELU_BP)),
    Entry(out(HOST), inp(release(1), release(3)), Op.conv(32, 16, 56, 3, 16, 1, 1, Mode.DIVW)),
)

SPEC_41_CONV_LINES = """
0xf1 0xf0 0x2 0x00000002 0x0 0x00000000 0x0 0x00000000 0x0 0x00000000
0xf2 0xf0 0x2 0x00000001 0x3 0x00000000 0x0 0x00000000 0x0 0x00000000
0xf3 0xf4 0x0020 0x0010 0x0038 0x0003 0x0010 0x0001 0x0001 0x0000 0xf1
"""


def test_conv1_of_the_pipeline_is_the_spec_worked_example(basic: tuple[Experiment, Path]) -> None:
    _, root = basic
    text = (root / "script" / "host_1.txt").read_text()
    check_golden(GOLDEN / "file_basic_host_1.txt", text)
    # every record and instruction, token for token, is the authors' file_basic host_1
    assert no_comments(text) == AUTHORS_BASIC_HOST_1.split()
    script = parse_host_script(text, 1)
    assert script.problems == ()
    init = script.records[0]
    assert init.kind is RecordKind.INS_INIT and init.wait == 10
    assert init.op == 0x12 == len(init.instructions) == 18
    assert "0x00000012" in text.split()
    prog = script.program
    assert prog is not None
    assert [(e.out, e.inp, e.op) for e in prog.entries] == [
        (e.out, e.inp, e.op) for e in SPEC_41_ENTRIES
    ]
    conv_lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    i = next(k for k, ln in enumerate(conv_lines) if ln[:2] == ["0xf3", "0xf4"])
    assert conv_lines[i - 2 : i + 1] == [ln.split() for ln in SPEC_41_CONV_LINES.split("\n") if ln]
    # the host part: start (OP 1), weight then data, the one -2, the final -1
    host = [(r.kind, r.wait, r.op, r.source or r.name) for r in script.records[1:]]
    assert host == [
        (RecordKind.START, 1, 1, ""),
        (RecordKind.REQ, 0, 0, ""),
        (RecordKind.DATA, 0, 0x48, "weight1.txt"),
        (RecordKind.REQ, 0, 0, ""),
        (RecordKind.DATA, 0, 0xC400, "data.txt"),
        (RecordKind.OUTPUT, -2, 0, "divw1.txt"),
        (RecordKind.IDLE, -1, 0, ""),
    ]


def test_basic_folder_files_settings_and_prediction(basic: tuple[Experiment, Path]) -> None:
    exp, root = basic
    assert (root / "result").is_dir() and (root / "report").is_dir()
    assert not any((root / "result").iterdir())
    script = root / "script"
    data = (script / "data.txt").read_text().splitlines()
    assert len(data) == 32 * 16 * 56 and all(len(ln.split()) == 56 for ln in data[:3])
    assert sum(len(ln.split()) for ln in data) == 1_605_632
    w1 = (script / "weight1.txt").read_text().splitlines()
    assert len(w1) == 16 * 16 and {len(ln.split()) for ln in w1} == {9}  # one 3x3 kernel a line
    w5 = (script / "weight5.txt").read_text().splitlines()
    assert len(w5) == 512 and {len(ln.split()) for ln in w5} == {16}  # one FC row a line
    labels = [
        [float(v) for v in ln.split()] for ln in (script / "label.txt").read_text().splitlines()
    ]
    assert len(labels) == 32 and all(sorted(r) == [0.0] * 15 + [1.0] for r in labels)
    settings = json.loads((root / "settings.json").read_text())
    assert settings["test_actor_num"] == 6
    assert settings["SU_write_num"] == settings["SU_read_num"] == 4
    assert settings["file_name"] == "file_basic"
    assert 1.05 * 22_387_180 <= settings["test_time"] <= 1.10 * 22_387_180
    assert "#define test_actor_num 6" in settings["basic_h"]
    pred = json.loads((root / "predicted.json").read_text())
    assert pred["batch_ns"] == pred["actor1_last_ns"] == 22_387_180  # the published Total_time
    assert pred["plan"] == "pipe" and pred["mem_ports"] == 4 and pred["waferflow_version"]
    assert [a["actor"] for a in pred["actors"]] == [1, 2, 3, 4, 5, 6]
    assert pred["actors"][0]["compute_ns"] == 8_028_960
    assert read_experiment(root) == exp
    assert check_experiment(root) == []


# -- every plan on a tiny CNN ----------------------------------------------------------------

TINY_PLANS = [
    ("pipe", 4, False),
    ("gpipe=2", 4, False),
    ("gpipe=4", 4, False),
    ("gpipe=2", 1, True),
    ("layers=dd,ways=2", 4, False),
    ("layers=dt,ways=2", 4, False),
    ("layers=td,ways=2", 4, False),
    ("layers=tt,ways=2", 2, False),
    ("layers=dd,ways=4", 4, False),
    ("layers=tt,ways=4", 4, False),
    ("layers=dt,ways=2", 1, True),
]


@pytest.mark.parametrize(("plan", "ports", "guard"), TINY_PLANS)
def test_tiny_plans_emit_read_back_and_check_clean(
    tmp_path: Path, plan: str, ports: int, guard: bool
) -> None:
    exp = generate_experiment(tiny_cnn(), plan, mem_ports=ports, hazard_guard=guard)
    root = emit_experiment(exp, tmp_path / "exp", cnn=tiny_cnn())
    assert read_experiment(root) == exp
    issues = check_experiment(root)
    assert issues == [], format_issues(issues)
    settings = json.loads((root / "settings.json").read_text())
    assert settings["test_actor_num"] == exp.n_actors
    assert settings["SU_write_num"] == ports


def test_emission_is_deterministic_in_the_seed(tmp_path: Path) -> None:
    exp = generate_experiment(tiny_cnn(), "layers=dd,ways=2")
    a = emit_experiment(exp, tmp_path / "a", seed=3)
    b = emit_experiment(exp, tmp_path / "b", seed=3)
    c = emit_experiment(exp, tmp_path / "c", seed=4)
    files = sorted(p.name for p in (a / "script").iterdir())
    for name in files:
        assert (a / "script" / name).read_bytes() == (b / "script" / name).read_bytes()
    assert (a / "script" / "host_1.txt").read_text() == (c / "script" / "host_1.txt").read_text()
    assert (a / "script" / "data_1.txt").read_text() != (c / "script" / "data_1.txt").read_text()


def test_stale_scripts_of_a_larger_experiment_are_removed(tmp_path: Path) -> None:
    emit_experiment(generate_experiment(tiny_cnn(), "layers=dd,ways=2"), tmp_path / "x")
    root = emit_experiment(generate_experiment(tiny_cnn(), "pipe"), tmp_path / "x")
    assert sorted(p.name for p in (root / "script").glob("host_*.txt")) == [
        f"host_{i}.txt" for i in range(1, 6)
    ]


# -- what the format cannot express -----------------------------------------------------------


def _store_prog(a: int, n_entries: int) -> ActorProgram:
    """STORE <- host, then ADDs on the slot, the last one to the host: ``n_entries`` long."""
    e = Entry(out(keep(0)), inp(HOST), Op.store(1, 1, 1, 32))
    last = Entry(out(HOST), inp(release(0)), Op.add(1, 1, 1, 32))
    mid = Entry(out(keep(0)), inp(release(0)), Op.add(1, 1, 1, 32))
    entries = (e, *[mid] * (n_entries - 2))
    return ActorProgram(a, (*entries, last), (HostTransfer("x.txt", 32),), ("y.txt",))


def test_format_limits_are_refused_by_name() -> None:
    with pytest.raises(PlanError, match="at most 16"):
        check_format_limits(Experiment("big", tuple(_store_prog(i, 2) for i in range(1, 18))))
    with pytest.raises(PlanError, match="at most 341"):
        check_format_limits(Experiment("long", (_store_prog(1, 342),)))
    check_format_limits(Experiment("ok", (_store_prog(1, 341),)))
    wide = ActorProgram(
        1,
        (Entry(out(HOST), inp(*(keep(i) for i in range(5))), Op.add(1, 1, 1, 32)),),
    )
    with pytest.raises(PlanError, match="at most 4"):
        check_format_limits(Experiment("wide", (wide,)))
    with pytest.raises(PlanError, match="16-bit"):
        compile_seed_plan(seed_cnn_layers(batch=70_000), "pipe")
    with pytest.raises(PlanError, match="at most 16"):
        generate_experiment(Cnn(28, tiny_cnn().layers), "layers=dd,ways=7")
    with pytest.raises(PlanError, match=r"5 operands.*at most 4"):
        generate_experiment(Cnn(5, tiny_cnn().layers), "layers=dd,ways=5")


def test_emit_refuses_an_invalid_or_mismatched_experiment(tmp_path: Path) -> None:
    exp = generate_experiment(tiny_cnn(), "pipe")
    other = simulate_experiment(generate_experiment(tiny_cnn(), "gpipe=2"))
    with pytest.raises(PlanError, match="predicted result is for"):
        emit_experiment(exp, tmp_path / "x", predicted=other)
    lossy = generate_experiment(tiny_cnn(8), "layers=dt,ways=2", mem_ports=1)
    with pytest.raises(PlanError, match="hazard \\(b\\)"):
        emit_experiment(lossy, tmp_path / "y")
    with pytest.raises(PlanError, match="hazard_guard"):
        compile_seed_plan(tiny_cnn(8), "layers=dt,ways=2", mem_ports=1)


@given(st.integers(min_value=1, max_value=10**10))
def test_test_time_keeps_a_five_to_ten_percent_margin(batch_ns: int) -> None:
    t = choose_test_time(batch_ns)
    assert 1.05 * batch_ns <= t <= 1.10 * batch_ns + 10
    assert t % 10 == 0


def test_compile_summary_names_every_actor() -> None:
    r = compile_seed_plan(tiny_cnn(), "layers=dt,ways=2")
    text = r.summary()
    assert f"batch time {r.batch_ns / 1e6:.6f} ms" in text
    for a in r.result.actors:
        assert f"A{a.actor} " in text and a.role in text
    assert "blocks" in text and "util" in text
