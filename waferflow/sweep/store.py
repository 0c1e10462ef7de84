"""Where a sweep keeps its rows: an append-only journal, and the tables made from it.

``results.jsonl`` holds one line per finished job (``{"key": ..., "row": {...}}``),
written with a single ``write`` on a file opened for appending and flushed to disk
before the job counts as done. A sweep killed half-way can leave at most a torn last
line; reading drops it (and cuts it off before anything is appended), so a row is
either wholly in the journal or not at all. Jobs are keyed by a hash of their inputs
and the waferflow version (``Job.key``): a rerun skips the keys it finds.

``results.csv`` (and ``results.parquet`` when pyarrow is installed) are written from
the journal, in the sweep's job order, each through ``waferflow.outputs.write_output``
(a temporary file in the same folder, then ``os.replace``): a reader never sees half
a table.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

JOURNAL = "results.jsonl"
CSV = "results.csv"
PARQUET = "results.parquet"


class Journal:
    """The finished rows of a sweep folder, by job key."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / JOURNAL
        self.rows: dict[str, dict[str, Any]] = {}
        self.dropped = 0  # torn or unreadable lines left out
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        data = self.path.read_bytes()
        whole = data.rfind(b"\n") + 1
        if whole < len(data):  # a torn last line: cut it off before anything is appended
            self.dropped += 1
            with open(self.path, "r+b") as f:
                f.truncate(whole)
        for line in data[:whole].splitlines():
            try:
                doc = json.loads(line)
                self.rows[str(doc["key"])] = dict(doc["row"])
            except (ValueError, KeyError, TypeError):
                self.dropped += 1

    def append(self, key: str, row: dict[str, Any]) -> None:
        """Record a finished row: one write of one whole line, flushed to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        row = _jsonable(row)  # as a later run will read it back
        line = json.dumps({"key": key, "row": row}, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rows[key] = row


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """NaN and infinities are not JSON: written as null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in row.items()}  # fmt: skip


def cell(value: Any) -> str:
    """A CSV cell: empty for missing, true / false, floats in their shortest exact form."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([cell(row.get(c)) for c in columns])
    return buf.getvalue()


def parquet_bytes(columns: list[str], rows: list[dict[str, Any]]) -> bytes | None:
    """The table as Parquet, or None without pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    table = pa.table({c: _arrow_column(pa, [r.get(c) for r in rows]) for c in columns})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def _arrow_column(pa: Any, values: list[Any]) -> Any:
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int, float}:  # an override given as 4 on one row and 4.5 on another
        values = [None if v is None else float(v) for v in values]
    elif len(kinds) > 1:
        values = [None if v is None else cell(v) for v in values]
    return pa.array(values)


__all__ = ["CSV", "JOURNAL", "PARQUET", "Journal", "cell", "csv_text", "parquet_bytes"]
