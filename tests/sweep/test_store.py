"""The journal keeps whole rows only (a torn last line is dropped and cut off); CSV
cells."""

from __future__ import annotations

import json
from pathlib import Path

from waferflow.sweep.store import JOURNAL, Journal, cell, csv_text


def test_torn_last_line_is_dropped_and_cut_off_before_appending(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.append("a", {"x": 1, "y": 0.5})
    j.append("b", {"x": 2, "y": None})
    whole = (tmp_path / JOURNAL).read_bytes()
    (tmp_path / JOURNAL).write_bytes(whole + b'{"key": "c", "row": {"x"')  # killed mid-write
    again = Journal(tmp_path)
    assert again.rows == {"a": {"x": 1, "y": 0.5}, "b": {"x": 2, "y": None}}
    assert again.dropped == 1
    assert (tmp_path / JOURNAL).read_bytes() == whole
    again.append("c", {"x": 3})
    assert Journal(tmp_path).rows["c"] == {"x": 3}
    assert len((tmp_path / JOURNAL).read_bytes().splitlines()) == 3


def test_a_rerun_row_replaces_the_earlier_one_and_nan_is_null(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    j.append("a", {"status": "failed", "v": float("nan")})
    j.append("a", {"status": "ok", "v": 1.0})
    assert Journal(tmp_path).rows == {"a": {"status": "ok", "v": 1.0}}
    first = json.loads((tmp_path / JOURNAL).read_text().splitlines()[0])
    assert first["row"]["v"] is None


def test_csv_cells() -> None:
    assert [cell(v) for v in (None, True, False, 0.1, 25e9, 3, "a,b")] == [
        "", "true", "false", "0.1", "25000000000.0", "3", "a,b"
    ]  # fmt: skip
    text = csv_text(["a", "b"], [{"a": "x,y", "b": 1.5}, {"a": None}])
    assert text == 'a,b\n"x,y",1.5\n,\n'
