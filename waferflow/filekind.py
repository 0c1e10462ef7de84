"""What a file given to the wrong command looks like, for its one error message.

``waferflow simulate x.wf`` on IR text used to report "malformed JSON" at 1:1: true,
but it hides the mistake. The readers of plans (``api.load_plan``) and of IR
(``waferflow opt``) ask ``sniff_*`` what a file they could not read looks like (IR
text, an empty file, a folder, a binary file, a trace or a sweep's results...) and,
when it is not a broken file of the kind they expect, ``not_expected`` says what it
is, what was expected and how to make it. A file that does look like the expected
kind keeps the reader's own error (a malformed plan still names its line and column).

Only the failure path calls these: a file that reads fine is never sniffed.
"""

from __future__ import annotations

import contextlib
import json
import re
import tomllib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from waferflow.errors import FormatError, WaferflowError
from waferflow.fileio import check_input, read_text

HEAD = 4096  # bytes of a file looked at to tell binary from text


class Family(Enum):
    """What a reader expects: a compiled plan (simulate, viz) or IR (opt)."""

    PLAN = "plan"
    IR = "ir"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class Kind:
    """What a file looks like: ``what`` completes "this looks like ..."; ``use`` says
    what to do with it instead (may be empty), and when ``instead``, it also says how
    to make what the reader expected (it replaces ``Expected.how``)."""

    what: str
    family: Family = Family.OTHER
    use: str = ""
    instead: bool = False


@dataclass(frozen=True, slots=True)
class Expected:
    """What a reader wanted: ``noun`` completes "not ...", ``how`` makes one."""

    noun: str
    family: Family
    how: str


PLAN = Expected(
    "a compiled plan",
    Family.PLAN,
    "a plan file is what `waferflow compile MODEL --wafer WAFER -o PLAN.json` writes",
)
IR = Expected(
    "waferflow IR",
    Family.IR,
    "IR is what `waferflow trace MODEL -o FILE.wf` writes (text; JSON for a .json file)",
)

_MAGIC = (
    (b"\x89PNG", "a PNG picture"),
    (b"%PDF", "a PDF document"),
    (b"PAR1", "a Parquet table (a sweep's results.parquet?)"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\xff\xd8\xff", "a JPEG picture"),
    (b"\x7fELF", "an executable"),
)
_GRAPH = re.compile(r"graph\s+@(\S+)")
_WAFER_KEYS = frozenset({"preset", "wafer", "core", "link", "dies", "flow", "memory"})
_SWEEP_KEYS = frozenset({"job", "grid", "points"})
_PLAN_KEYS = frozenset({"actors", "messages", "order", "plan", "wafer_toml"})
_JOURNAL = Kind("a sweep's results journal (results.jsonl: a JSON row per job)",
                use="its table is results.csv beside it")  # fmt: skip
_TRACE = Kind("a Chrome / Perfetto trace (what --trace writes)", use="open it in ui.perfetto.dev")


def not_expected(source: str, kind: Kind, expected: Expected) -> FormatError:
    """The one message for ``source``, which looks like ``kind``, not ``expected``."""
    advice = kind.use if kind.instead else expected.how + (f"; {kind.use}" if kind.use else "")
    return FormatError("", f"this looks like {kind.what}, not {expected.noun}: {advice}", source)


def read_expected(path: str | Path, what: str, hint: str, expected: Expected) -> str:
    """``fileio.read_text``, except that a folder or a binary file is named as what
    it looks like; a text file with a stray byte keeps its line and column."""
    check_input(path, what)  # before Path(""), the current folder, is taken for one
    file = Path(path)
    if file.is_dir():
        raise not_expected(str(path), sniff_folder(file), expected)
    try:
        return read_text(path, what, hint)
    except FormatError:  # not UTF-8
        with file.open("rb") as f:
            kind = sniff_bytes(f.read(HEAD))
        if kind is None:
            raise
        raise not_expected(str(path), kind, expected) from None


def refine(err: WaferflowError, text: str, source: str, expected: Expected) -> WaferflowError:
    """The error for ``text`` that its reader could not read (``err``): ``err`` itself
    when the text looks like the expected kind (or like nothing known), else one
    saying what it looks like."""
    kind = sniff_text(text)
    if kind is None and text.lstrip("\ufeff \t\r\n").startswith(("{", "[")):
        try:  # well-formed JSON with the wrong fields: whose fields are they?
            kind = sniff_doc(json.loads(text))
        except (ValueError, RecursionError):
            kind = None
    if kind is None or kind.family is expected.family:
        return err
    return not_expected(source, kind, expected)


def sniff_folder(path: Path) -> Kind:
    if (path / "results.jsonl").is_file() or (path / "results.csv").is_file():
        return Kind("a sweep's results folder", use="its table is results.csv")
    if (path / "settings.json").is_file() and (path / "script").is_dir():
        return Kind("a seed-machine experiment folder", use="`waferflow check-amcoda` reads it")
    return Kind("a folder")


def sniff_bytes(head: bytes) -> Kind | None:
    """A binary file, from its first bytes (``None``: text, maybe with a bad byte)."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return Kind(what)
    text = head.decode("utf-8", errors="replace")
    odd = sum(1 for ch in text if ch == "\ufffd" or (ch < " " and ch not in "\t\n\r\f\v"))
    if "\x00" in text or odd > len(text) // 10:
        return Kind("a binary file")
    return None


def sniff_text(text: str) -> Kind | None:
    """What text that did not parse as the reader's format looks like (``None``: not
    something known; the reader's own error stands)."""
    body = text.lstrip("\ufeff \t\r\n")
    if not body:
        return Kind("an empty file")
    if "\x00" in text[:HEAD]:
        return Kind("a binary file")
    if (graph := _graph_name(body)) is not None:
        return _ir_kind("waferflow IR text (a traced graph)", graph)
    if body.startswith("<"):
        head = body[:200].lower()
        if "<svg" in head or head.startswith("<?xml"):
            return Kind("an SVG picture")
        return Kind("an HTML page (a --html report?)", use="open it in a browser")
    if body.startswith("{"):
        return _json_kind(body)
    if body.startswith("["):  # a JSON array, or a TOML file's first table
        return _json_kind(body) or _toml_kind(body)
    return _toml_kind(body) or _csv_kind(body)


def sniff_doc(doc: Any) -> Kind:
    """What a parsed JSON document looks like: a plan, IR, or something else."""
    if isinstance(doc, list):
        if doc and all(isinstance(e, dict) and "ph" in e for e in doc[:20]):
            return _TRACE
        return Kind("a JSON array")
    if not isinstance(doc, dict):
        return Kind("a single JSON " + ("string" if isinstance(doc, str) else "value"))
    fmt = doc.get("format")
    if fmt in ("waferflow.compiled", "waferflow.plan") or _PLAN_KEYS & doc.keys():
        return Kind(
            "a compiled plan (what `waferflow compile -o` writes)",
            Family.PLAN,
            "the plan goes to `waferflow simulate` or `waferflow viz`",
        )
    if fmt == "waferflow.graph" or "ops" in doc:
        name = doc.get("name")
        return _ir_kind("waferflow IR as JSON (a traced graph)", name if isinstance(name, str) else "")  # fmt: skip
    if "traceEvents" in doc:
        return _TRACE
    if fmt in ("waferflow.amcoda-plan", "waferflow.amcoda-predicted"):
        return Kind(f"a seed-machine plan ({fmt})", use="`waferflow emit` reads it")
    if doc.keys() == {"key", "row"}:
        return _JOURNAL
    fields = ", ".join(sorted(str(k)[:40] for k in doc)[:8]) or "none"
    return Kind(f"a JSON object without a plan's or graph's fields (it has: {fields})")


def _graph_name(body: str) -> str | None:
    """The graph's name when ``body`` starts (after comments) like IR text."""
    for line in body[:HEAD].splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        match = _GRAPH.match(line)
        return match[1] if match else None
    return None


def _ir_kind(what: str, graph: str) -> Kind:
    """IR, with the command that compiles its model into a plan when the graph is
    named after a zoo model (``waferflow trace hf:gpt2`` names it ``hf:gpt2``)."""
    from waferflow.frontend.catalog import canonical_model, is_file_spec

    model = "MODEL"
    if graph and not is_file_spec(graph):
        with contextlib.suppress(WaferflowError):  # not a zoo model's name
            model = canonical_model(graph)
    return Kind(
        what,
        Family.IR,
        f"make one from its model with `waferflow compile {model} --wafer WAFER -o "
        "PLAN.json` (with the --mode, --batch and --seq it was traced with)",
        instead=True,
    )


def _json_kind(body: str) -> Kind | None:
    """Text starting like JSON that did not parse whole: JSON lines (a sweep's
    journal) are recognised by their first line; anything else is broken JSON."""
    first, _, rest = body.partition("\n")
    if not rest.strip():
        return None
    try:
        doc = json.loads(first)
    except (ValueError, RecursionError):
        return None
    if isinstance(doc, dict) and doc.keys() == {"key", "row"}:
        return _JOURNAL
    return Kind("JSON lines (one JSON document per line)") if isinstance(doc, dict) else None


def _toml_kind(body: str) -> Kind | None:
    try:
        doc = tomllib.loads(body)
    except (ValueError, RecursionError):
        return None
    if _SWEEP_KEYS & doc.keys():
        return Kind("a sweep file (TOML)", use="run it with `waferflow sweep`")
    if _WAFER_KEYS & doc.keys():
        return Kind("a wafer description (TOML)", use="give it with --wafer")
    return Kind("a TOML file") if doc else None


def _csv_kind(body: str) -> Kind | None:
    lines = body[:HEAD].splitlines()[:3]
    commas = {line.count(",") for line in lines}
    if len(lines) < 2 or len(commas) != 1 or commas == {0}:  # rows of equal width
        return None
    if lines[0].startswith("key,index,"):
        return Kind("a sweep's results table (results.csv)")
    return Kind("a CSV table")


__all__ = ["IR", "PLAN", "Expected", "Family", "Kind", "not_expected", "read_expected",
           "refine", "sniff_bytes", "sniff_doc", "sniff_folder", "sniff_text"]  # fmt: skip
