"""The one reader and the atomic writers (waferflow/fileio.py), and Ctrl-C's owner
(waferflow/interrupt.py)."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from waferflow.errors import FormatError, ParseError, WaferflowError
from waferflow.fileio import (
    MAX_DEPTH,
    Staged,
    append_line,
    atomic_dir,
    atomic_path,
    decode_text,
    loads_json,
    read_lines,
    read_text,
    short,
    write_parts,
    write_text,
)
from waferflow.interrupt import deferred, run_interruptible

# --- reading ------------------------------------------------------------------------------


def test_bytes_that_are_not_utf8_name_the_line_and_column() -> None:
    with pytest.raises(FormatError, match=r"g\.wf:2:5: not UTF-8 text: byte 0xff"):
        decode_text(b"graph\nabc \xff\n", "g.wf")
    assert decode_text("\ufeffgraph é".encode(), "g.wf") == "graph é"  # the BOM is dropped


def test_read_text_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(WaferflowError, match=r"no such IR file \(write one"):
        read_text(tmp_path / "nope.wf", "IR file", "write one with `waferflow trace`")
    with pytest.raises(WaferflowError, match="is a folder, not a plan file"):
        read_text(tmp_path, "plan file")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"a": ' + "9" * 5000 + "}", "an integer of 5000 digits"),
        ('{"a": 1e400}', "overflows a float"),
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": 1, "a": 2}', "has the key 'a' twice"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested {MAX_DEPTH + 1} deep"),
    ],
)
def test_json_numbers_and_nesting_are_bounded(text: str, needle: str) -> None:
    with pytest.raises(FormatError, match=needle):
        loads_json(text, "x.json")


def test_malformed_json_is_a_parse_error_with_position() -> None:
    with pytest.raises(ParseError) as info:
        loads_json('{\n  "a": 1,,\n}', "x.json")
    assert (info.value.line, info.value.col, info.value.source) == (2, 10, "x.json")
    assert loads_json('{"a": [1, 2.5, "x"]}', "x.json") == {"a": [1, 2.5, "x"]}


def test_short_keeps_messages_short() -> None:
    assert short("x" * 10**6).endswith("...") and len(short("x" * 10**6)) <= 60
    assert short(10**400) == "an integer of about 400 digits"
    assert short(list(range(1000))) == "an array of 1000 items"


# --- writing ------------------------------------------------------------------------------


def test_an_atomic_write_that_fails_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    write_text(out, "old\n")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half of the new", encoding="utf-8")
        raise RuntimeError("killed mid-write")
    assert out.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]  # no temporary left
    write_text(out, "new\n")
    assert out.read_text(encoding="utf-8") == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_text_written_in_parts_is_whole_or_not_at_all(tmp_path: Path) -> None:
    """``write_parts`` writes the pieces in turn; a maker that fails part way (a plan row
    that cannot be written, Ctrl-C) leaves the old file and no temporary."""
    out = tmp_path / "plan.json"
    assert write_parts(out, iter(["{\n", ' "a": "✓"\n', "}\n"])) == out
    assert out.read_text(encoding="utf-8") == '{\n "a": "✓"\n}\n'

    def failing() -> Iterator[str]:
        yield "half of the new"
        raise RuntimeError("killed mid-write")

    with pytest.raises(RuntimeError):
        write_parts(out, failing())
    assert out.read_text(encoding="utf-8") == '{\n "a": "✓"\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_temporary_keeps_the_suffix_that_picks_the_format(tmp_path: Path) -> None:
    with atomic_path(tmp_path / "sub" / "pic.svg") as tmp:
        assert tmp.suffix == ".svg" and tmp.parent == tmp_path / "sub"
        tmp.write_text("<svg/>", encoding="utf-8")
    assert (tmp_path / "sub" / "pic.svg").read_text(encoding="utf-8") == "<svg/>"


def test_atomic_dir_replaces_a_folder_whole(tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    with atomic_dir(exp) as d:
        (d / "a.txt").write_text("1")
        (d / "b.txt").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(exp) as d:
        (d / "a.txt").write_text("2")
        raise RuntimeError
    assert sorted(p.name for p in exp.iterdir()) == ["a.txt", "b.txt"]
    with atomic_dir(exp) as d:
        (d / "a.txt").write_text("3")
    assert [p.name for p in exp.iterdir()] == ["a.txt"]  # nothing of the old one stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp"]


def test_staged_outputs_appear_together_or_not_at_all(tmp_path: Path) -> None:
    with Staged() as staged:
        write_text(staged.path(tmp_path / "a.json"), "{}")
        staged.path(tmp_path / "b.png").write_bytes(b"png")
        assert not (tmp_path / "a.json").exists()
        assert sorted(p.name for p in staged.commit()) == ["a.json", "b.png"]
    assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8")) == {}
    with pytest.raises(KeyboardInterrupt), Staged() as staged:
        write_text(staged.path(tmp_path / "c.json"), "{}")
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.png"]


# --- Ctrl-C -------------------------------------------------------------------------------


@contextmanager
def _ctrl_c_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def test_deferred_holds_ctrl_c_back_until_the_block_ends() -> None:
    done: list[str] = []
    with _ctrl_c_raises(), pytest.raises(KeyboardInterrupt):
        with deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("rest of the block")
        done.append("after the block")
    assert done == ["rest of the block"]


def test_ctrl_c_interrupts_work_running_in_native_code() -> None:
    """``run_interruptible`` reacts to Ctrl-C while the work blocks (as CP-SAT's solve
    does), stops it and waits for it: the work's own 'stopped' flag proves it."""
    started, stop = threading.Event(), threading.Event()
    log: list[str] = []

    def work() -> str:
        started.set()
        stop.wait(300)  # blocks like a solve until stop() (the timeout: a hang guard only)
        log.append("work returned")
        return "finished"

    def ctrl_c_once_started() -> None:
        started.wait()
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    with _ctrl_c_raises():
        threading.Thread(target=ctrl_c_once_started, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_interruptible(work, stop.set)
    assert log == ["work returned"]  # stopped and waited for, not abandoned
    assert run_interruptible(lambda: 7, lambda: None) == 7


def test_appended_lines_read_back_whole_and_a_torn_tail_is_cut_off(tmp_path: Path) -> None:
    log = tmp_path / "sub" / "journal.jsonl"
    assert read_lines(log) == ([], False)  # no file yet: no lines
    append_line(log, '{"a": 1}')
    append_line(log, "é")
    assert read_lines(log) == ([b'{"a": 1}', "é".encode()], False)
    whole = log.read_bytes()
    log.write_bytes(whole + b'{"a": 2')  # a crash in the middle of a write
    assert read_lines(log) == ([b'{"a": 1}', "é".encode()], True)
    assert log.read_bytes() == whole  # cut off: the next line starts on its own
    append_line(log, "next")
    assert read_lines(log)[0][-1] == b"next"
    with pytest.raises(ValueError, match="newline"):
        append_line(log, "two\nlines")


def test_writing_over_a_folder_is_one_clear_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CompiledPlan.save("runs")``, ``Report.to_chrome_trace(".")``: a folder where the
    file goes is a ``WaferflowError`` naming it (it was an OSError naming the temporary,
    ``.runs.x1y2.tmp -> runs``, raised after the work) and no temporary is left."""
    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    for where in (tmp_path / "runs", "runs/", ".", ".."):
        with pytest.raises(WaferflowError, match="is a directory, not a file: give a file name"):
            write_text(where, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert list((tmp_path / "runs").iterdir()) == []


def test_os_errors_in_words(tmp_path: Path) -> None:
    import errno

    from waferflow.fileio import os_error_text

    assert os_error_text(FileExistsError(errno.EEXIST, "File exists", "afile")) == (
        "afile exists and is not a directory"
    )
    assert os_error_text(IsADirectoryError(errno.EISDIR, "Is a directory", "out")) == (
        "out is a directory, not a file"
    )
    assert os_error_text(PermissionError(errno.EACCES, "Permission denied", "x")) == (
        "x cannot be accessed: permission denied"
    )


def test_check_output_refuses_before_any_work(tmp_path: Path) -> None:
    from waferflow.fileio import check_output

    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    with pytest.raises(WaferflowError, match="afile exists and is not a directory"):
        check_output(tmp_path / "afile" / "deeper" / "plan.json", "-o")
    with pytest.raises(WaferflowError, match="a directory is there, where the file goes"):
        check_output(tmp_path / "adir", "-o")
    with pytest.raises(WaferflowError, match=r"must end in \.png or \.svg"):
        check_output(tmp_path / "p.jpg", "--png", suffixes=(".png", ".svg"))
    check_output(tmp_path / "new" / "p.PNG", "--png", suffixes=(".png", ".svg"))
