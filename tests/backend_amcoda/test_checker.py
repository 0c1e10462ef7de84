"""The checker: clean experiments pass; hand-broken ones fail with the named rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.backend_amcoda.test_emit import tiny_cnn
from waferflow.backend_amcoda import (
    HOST,
    ActorProgram,
    Entry,
    Experiment,
    HostTransfer,
    Op,
    Severity,
    actor,
    generate_experiment,
    inp,
    keep,
    out,
    release,
    simulate_experiment,
)
from waferflow.backend_amcoda.checker import CheckIssue, check_experiment, dry_run, format_issues
from waferflow.backend_amcoda.emit import emit_experiment
from waferflow.backend_amcoda.reader import parse_host_script
from waferflow.backend_amcoda.scripts import write_experiment

# tiny pipe actors: 1 conv1, 2 conv2, 3 pool, 4 fc, 5 loss
# conv1 entries: e0 W, e1 X, e2 fp, e3 relu -> A2, e4 relu_bp <- A2, e5 divw -> host


@pytest.fixture
def pipe(tmp_path: Path) -> Path:
    return emit_experiment(generate_experiment(tiny_cnn(), "pipe"), tmp_path / "pipe")


def script(root: Path, a: int) -> Path:
    return root / "script" / f"host_{a}.txt"


def entry_line(root: Path, a: int, k: int, which: str) -> int:
    s = parse_host_script(script(root, a).read_text(), a)
    return int(getattr(s.entry_lines[k], which))


def set_line(root: Path, a: int, line: int, text: str) -> None:
    lines = script(root, a).read_text().splitlines()
    lines[line - 1] = text
    script(root, a).write_text("\n".join(lines) + "\n")


def found(issues: list[CheckIssue]) -> set[tuple[int, str]]:
    return {(i.actor, i.rule) for i in issues if i.is_error}


def test_a_clean_experiment_has_no_issue(pipe: Path) -> None:
    assert check_experiment(pipe) == []
    # without the cycle model, the FC's mid-program STORE dY is only a possible hazard (b)
    static = check_experiment(pipe, simulate=False, data_files=False)
    assert [(i.actor, i.rule, i.severity) for i in static] == [
        (4, "hazard-b-site", Severity.WARNING)
    ]
    assert format_issues([]) == "0 error(s), 0 warning(s)"


def test_a_transfer_with_no_consumer(pipe: Path) -> None:
    line = entry_line(pipe, 1, 5, "out")
    set_line(pipe, 1, line, "0xf1 0xf0 0x1 0x80000002 0x0 0x0 0x0 0x0 0x0 0x0")
    issues = check_experiment(pipe)
    bad = next(i for i in issues if i.rule == "no-consumer")
    assert (bad.actor, bad.line) == (1, line)
    assert "actor 2" in bad.message
    assert (1, "host-output") in found(issues)  # the -2 record lost its entry
    assert f"host_1.txt:{line}: error [no-consumer]" in format_issues(issues)


def test_a_slot_read_before_its_store(pipe: Path) -> None:
    lines = script(pipe, 1).read_text().splitlines()
    e1 = entry_line(pipe, 1, 1, "out") - 1
    lines[e1 : e1 + 6] = lines[e1 + 3 : e1 + 6] + lines[e1 : e1 + 3]  # CONV fp before STORE X
    script(pipe, 1).write_text("\n".join(lines) + "\n")
    issues = check_experiment(pipe)
    bad = next(i for i in issues if i.rule == "slot-read")
    assert bad.actor == 1 and bad.line == e1 + 2 and "s1" in bad.message


def test_a_slot_written_while_valid_and_one_never_released(pipe: Path) -> None:
    line = entry_line(pipe, 1, 4, "out")  # relu_bp -> s3 becomes -> s1 (X still held)
    set_line(pipe, 1, line, "0xf1 0xf0 0x2 0x00000001 0x0 0x0 0x0 0x0 0x0 0x0")
    assert {(1, "slot-write"), (1, "slot-read")} <= found(check_experiment(pipe))
    pipe2 = pipe.parent / "again"
    emit_experiment(generate_experiment(tiny_cnn(), "pipe"), pipe2)
    line = entry_line(pipe2, 1, 5, "inp")  # divw keeps s1 instead of releasing it
    set_line(pipe2, 1, line, "0xf2 0xf0 0x2 0x00000001 0x3 0x00000003 0x0 0x0 0x0 0x0")
    assert found(check_experiment(pipe2)) == {(1, "slot-leak")}


def _add(*ops: object, to: object) -> Entry:
    return Entry(out(to), inp(*ops), Op.add(1, 1, 1, 32))  # type: ignore[arg-type]


def _store(slot: int) -> Entry:
    return Entry(out(keep(slot)), inp(HOST), Op.store(1, 1, 1, 32))


def _prog(a: int, entries: list[Entry]) -> ActorProgram:
    n_in = sum(1 for e in entries for o in e.inp.operands if o == HOST)
    n_out = sum(1 for e in entries if 0 in e.out.consumers)
    ins = tuple(HostTransfer(f"in{a}_{k}.txt", 32) for k in range(n_in))
    return ActorProgram(a, tuple(entries), ins, tuple(f"out{a}_{k}.txt" for k in range(n_out)))


def _write(tmp_path: Path, *progs: ActorProgram) -> Path:
    exp = Experiment("hand", progs, 4)
    return write_experiment(exp, tmp_path / "hand", data_files=True)


def test_an_overfull_reservation_table(tmp_path: Path) -> None:
    """Actor 1 must receive in e5 before its head e0 can retire: it needs a sixth entry
    in flight, but the table holds 5 (actor 2 sends to it first, then to actor 3, which
    takes actor 1's e0 only after actor 2's data)."""
    a1 = _prog(1, [_add(HOST, to=actor(3)), *(
        Entry(out(keep(k)), inp(HOST), Op.add(1, 1, 1, 32)) for k in range(1, 5)
    ), _add(actor(2), release(1), release(2), release(3), to=HOST), _add(release(4), to=HOST)])  # fmt: skip
    a2 = _prog(2, [_add(HOST, to=actor(1)), _add(HOST, to=actor(3))])
    a3 = _prog(3, [_add(actor(2), to=HOST), _add(actor(1), to=HOST)])
    root = _write(tmp_path, a1, a2, a3)
    issues = check_experiment(root)
    bad = [i for i in issues if i.is_error]
    assert [(i.actor, i.rule) for i in bad] == [(1, "reservation-table")]
    assert "e5 cannot be built" in bad[0].message
    assert all(d.finished() for d in dry_run(Experiment("x", (a1, a2, a3)), depth=6).values())


def test_too_many_operands(tmp_path: Path) -> None:
    a1 = _prog(1, [*(_store(k) for k in range(5)), _add(*(release(k) for k in range(5)), to=HOST)])
    root = _write(tmp_path, a1)
    issues = check_experiment(root)
    bad = next(i for i in issues if i.rule == "operands")
    lines = script(root, 1).read_text().splitlines()
    assert lines[bad.line - 1].split()[:2] == ["0xf2", "0xf0"]
    assert lines[bad.line].split()[:2] == ["0xf2", "0xff"]  # the continue line
    assert "5 operands" in bad.message


def test_a_replica_whose_weight_gradient_reads_twice_its_batch(tmp_path: Path) -> None:
    exp = generate_experiment(tiny_cnn(), "layers=dd,ways=2", authors_slip=True)
    root = emit_experiment(exp, tmp_path / "slip")
    issues = check_experiment(root)
    assert found(issues) == {(2, "divw-batch")}
    bad = next(i for i in issues if i.rule == "divw-batch")
    assert "batch 4" in bad.message and "[2]" in bad.message
    assert bad.line == entry_line(root, 2, len(exp.program(2).entries) - 1, "op")


def test_swapped_and_missing_host_records(pipe: Path) -> None:
    text = script(pipe, 1).read_text()
    swapped = text.replace("weight1.txt", "TMP").replace("data.txt", "weight1.txt")
    swapped = swapped.replace("TMP", "data.txt")
    w, d = "0x00000009 0x01 0xff", "0x00000020 0x01 0xff"  # 9 and 32 packages
    assert w in text and d in text
    swapped = swapped.replace(w, "TMP").replace(d, w).replace("TMP", d)
    script(pipe, 1).write_text(swapped)
    issues = check_experiment(pipe)
    assert [i.rule for i in issues if i.actor == 1] == ["host-size", "host-size"]
    script(pipe, 1).write_text(text.replace("-2\toutput_file: divw1.txt\n", ""))
    assert found(check_experiment(pipe)) == {(1, "host-output")}


def test_lexical_rules_name_the_line(pipe: Path) -> None:
    text = script(pipe, 2).read_text()
    script(pipe, 2).write_text(text.replace("// e0", "//e0", 1))
    assert found(check_experiment(pipe)) == {(2, "comment")}
    script(pipe, 2).write_text(text.rsplit("-1", 1)[0])
    assert found(check_experiment(pipe)) == {(2, "idle-record")}
    script(pipe, 2).write_text(text.replace("0x00000015 0x00", "0x00000014 0x00"))
    issues = check_experiment(pipe)
    assert (2, "ins-count") in found(issues)
    script(pipe, 2).write_text(text.replace("0x00000012 0x01 0xff", "18 0x01 0xff"))
    issues = check_experiment(pipe)
    assert (2, "hex-prefix") in found(issues)


def test_files_folders_and_settings(pipe: Path) -> None:
    (pipe / "script" / "weight2.txt").unlink()
    (pipe / "report").rmdir()
    settings = json.loads((pipe / "settings.json").read_text())
    settings["test_time"] = 100
    (pipe / "settings.json").write_text(json.dumps(settings))
    script(pipe, 5).unlink()
    assert found(check_experiment(pipe)) == {
        (2, "input-file"), (0, "folders"), (0, "test-time"), (5, "missing-script"),
    }  # fmt: skip


def test_edge_sizes_must_agree(pipe: Path) -> None:
    line = entry_line(pipe, 2, 1, "op")  # conv2's STORE X: 4 x 8 x 8 x 8 -> 4 x 8 x 8 x 4
    set_line(pipe, 2, line, "0xf3 0xf8 0x0004 0x0008 0x0008 0x0004 0x0 0x0 0x0 0x0 0x00")
    issues = check_experiment(pipe)
    bad = next(i for i in issues if i.rule == "edge-size")
    assert (bad.actor, bad.line) == (2, entry_line(pipe, 2, 1, "inp"))
    assert "expects 1024 values from actor 1" in bad.message and "carries 2048" in bad.message


def test_hazard_a_from_the_two_programs_orders(tmp_path: Path) -> None:
    a1 = _prog(1, [_add(HOST, to=actor(2)), _add(actor(2), to=HOST)])
    a2 = _prog(2, [_add(HOST, to=actor(1)), _add(actor(1), to=HOST)])
    issues = check_experiment(_write(tmp_path, a1, a2))
    assert found(issues) == {(1, "hazard-a"), (2, "hazard-a")}
    # a pipeline's order (receive first, then send back) is safe
    b2 = _prog(2, [_add(actor(1), to=actor(1))])
    b1 = _prog(1, [_add(HOST, to=actor(2)), _add(actor(2), to=HOST)])
    assert found(check_experiment(_write(tmp_path / "ok", b1, b2))) == set()


def test_a_deadlock_and_a_memory_overflow(tmp_path: Path) -> None:
    # each actor receives from the other before it sends to it
    a1 = _prog(1, [_add(actor(2), to=HOST), _add(HOST, to=actor(2))])
    a2 = _prog(2, [_add(actor(1), to=HOST), _add(HOST, to=actor(1))])
    assert found(check_experiment(_write(tmp_path / "d", a1, a2))) == {
        (1, "deadlock"), (2, "deadlock"),
    }  # fmt: skip
    big = Entry(out(keep(0)), inp(HOST), Op.store(100, 1, 256, 256))  # 100 blocks
    more = Entry(out(keep(1)), inp(HOST), Op.store(40, 1, 256, 256))  # 40 blocks
    loads = [Entry(out(HOST), inp(release(s)), e.op.__class__.load(*e.op.params[:4]))
             for s, e in ((0, big), (1, more))]  # fmt: skip
    prog = ActorProgram(
        1, (big, more, *loads), (HostTransfer("a", 100 << 16), HostTransfer("b", 40 << 16)),
        ("x.txt", "y.txt"),
    )  # fmt: skip
    root = write_experiment(Experiment("mem", (prog,)), tmp_path / "m")
    text = script(root, 1).read_text().replace("input_file: a", "random_data_package")
    script(root, 1).write_text(text.replace("input_file: b", "random_data_package"))
    issues = check_experiment(root)
    assert found(issues) == {(1, "memory")}
    assert "waits for memory" in next(i for i in issues if i.rule == "memory").message


def test_hazard_b_is_decided_by_the_cycle_model(tmp_path: Path) -> None:
    exp = generate_experiment(tiny_cnn(8), "layers=dt,ways=2", mem_ports=1)
    run = simulate_experiment(exp, emulate_lost_completions=True)
    root = emit_experiment(exp, tmp_path / "lossy", predicted=run)
    issues = check_experiment(root)
    lost = [i for i in issues if i.rule == "hazard-b" and i.line]
    assert [(i.actor, i.line) for i in lost] == [(4, entry_line(root, 4, 6, "op"))]
    static = check_experiment(root, simulate=False)
    assert all(i.severity is Severity.WARNING for i in static)
    assert {i.rule for i in static} == {"hazard-b-site"}
    guarded = generate_experiment(tiny_cnn(8), "layers=dt,ways=2", mem_ports=1, hazard_guard=True)
    assert check_experiment(emit_experiment(guarded, tmp_path / "guarded")) == []


def test_a_stale_prediction_and_an_actor_finishing_after_actor_1(pipe: Path) -> None:
    pred = json.loads((pipe / "predicted.json").read_text())
    pred["batch_ns"] += 10
    (pipe / "predicted.json").write_text(json.dumps(pred))
    issues = check_experiment(pipe)
    assert [(i.rule, i.severity) for i in issues] == [("predicted", Severity.WARNING)]
    assert not found(issues)


def test_a_run_report_is_compared_with_the_prediction(pipe: Path) -> None:
    pred = json.loads((pipe / "predicted.json").read_text())
    report = pipe / "report" / "report_1.txt"
    report.write_text(f"Timing Report\n---\nTotal_time: {pred['actor1_last_ns']}\n")
    assert check_experiment(pipe) == []
    report.write_text(f"Timing Report\n---\nTotal_time: {pred['actor1_last_ns'] + 50}\n")
    issues = check_experiment(pipe)
    assert [(i.rule, i.severity) for i in issues] == [("run-total", Severity.WARNING)]
