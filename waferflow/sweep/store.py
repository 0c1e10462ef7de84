"""Where a sweep keeps its rows: an append-only journal, and the tables made from it.

``results.jsonl`` holds one line per finished job (``{"key": ..., "row": {...}}``),
appended with ``fileio.append_line`` (one ``write``, fsynced) before the job counts
as done. A sweep killed half-way can leave at most a torn last line;
``fileio.read_lines`` drops it (and cuts it off before anything is appended), so a
row is either wholly in the journal or not at all. Jobs are keyed by a hash of their inputs
and the waferflow version (``Job.key``): a rerun skips the keys it finds.

``results.csv`` (and ``results.parquet`` when pyarrow is installed) are written from
the journal, in the sweep's job order, each with ``fileio.write_text`` /
``write_bytes`` (a temporary file in the same folder, fsynced, then renamed): a
reader never sees half a table.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from waferflow.errors import WaferflowError
from waferflow.fileio import append_line, decode_text, loads_json, read_lines

JOURNAL = "results.jsonl"
CSV = "results.csv"
PARQUET = "results.parquet"


class Journal:
    """The finished rows of a sweep folder, by job key."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / JOURNAL
        self.rows: dict[str, dict[str, Any]] = {}
        self.dropped = 0  # torn or unreadable lines left out
        lines, torn = read_lines(self.path)  # a torn last line is cut off the file
        self.dropped += torn
        for number, line in enumerate(lines, 1):
            try:
                doc = loads_json(decode_text(line, f"{self.path}:{number}"), str(self.path))
                self.rows[str(doc["key"])] = dict(doc["row"])
            except (WaferflowError, KeyError, TypeError, ValueError):
                self.dropped += 1

    def append(self, key: str, row: dict[str, Any]) -> None:
        """Record a finished row: one whole line, on disk before this returns."""
        row = _jsonable(row)  # as a later run will read it back
        append_line(self.path, json.dumps({"key": key, "row": row}, separators=(",", ":")))
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
