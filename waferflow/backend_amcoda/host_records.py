"""The host scripts' records (§2): tokens, numbers and records as the host thread reads them.

``Cursor`` walks a script's whitespace-separated tokens (``0x`` hex, else decimal,
wrapped to the field's width) and ``read_records`` turns them into ``Record``s
(ins_init with its instruction lines, start, pause, req, trans_data, -2, -1), noting
each ``Problem`` met and raising ``Fatal`` where the host would abort or hang.

It is separate from ``reader.py`` because it is the script format's lexical layer
alone: what the records mean (entries, operands, a program) and how a folder is
gathered are ``reader.py``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

_HEADER_WIDTHS = (8, 8, 32, 32, 32, 8, 8)  # HEAD TYPE SRC DST OP SEQ TAIL (§2.3)
_HEADER_NAMES = ("HEAD", "TYPE", "SRC", "DST", "OP", "SEQ", "TAIL")
_CONFIG_WIDTHS = (8,) + (2, 32) * 4  # mode, then (type, addr) x 4 (§3.1)
_OP_WIDTHS = (8,) + (16,) * 8 + (8,)  # aluop, para1..8, para9


class Severity(Enum):
    ERROR = "error"  # the simulator would abort, hang or compute the wrong thing
    WARNING = "warning"  # legal, but probably not what was meant


@dataclass(frozen=True, slots=True)
class Problem:
    line: int
    rule: str
    message: str
    severity: Severity = Severity.ERROR


class RecordKind(Enum):
    INS_INIT = 0xF1
    START = 0xF2
    PAUSE = 0xF3
    REQ = 0xF5
    DATA = 0xF7  # trans_data
    IGNORED = 0  # a header of another TYPE: parsed, nothing sent
    OUTPUT = -2
    IDLE = -1
    NOOP = -3  # another negative wait: the host does nothing


@dataclass(frozen=True, slots=True)
class Instruction:
    line: int
    head: int
    fields: tuple[int, ...]  # after the head, wrapped to their widths


@dataclass(frozen=True, slots=True)
class Record:
    kind: RecordKind
    line: int
    wait: int
    header: tuple[int, ...] = ()
    instructions: tuple[Instruction, ...] = ()
    source: str = ""  # trans_data: file name, "<data_package>" or "<random_data_package>"
    name: str = ""  # -2: the output file

    @property
    def op(self) -> int:
        return self.header[4] if self.header else 0


# -- tokens and numbers -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Tok:
    text: str
    line: int


class Cursor:
    def __init__(self, text: str, problems: list[Problem]) -> None:
        self.toks = [_Tok(t, i) for i, ln in enumerate(text.splitlines(), 1) for t in ln.split()]
        self.lines = text.splitlines()
        self.pos = 0
        self.problems = problems

    def peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> _Tok | None:
        t = self.peek()
        if t is not None:
            self.pos += 1
        return t

    def skip_line(self, line: int) -> None:
        while self.pos < len(self.toks) and self.toks[self.pos].line == line:
            self.pos += 1

    def number(self, width: int, what: str, last_line: int) -> int:
        """A header or instruction field: ``0x`` hex, else decimal; wraps to ``width``."""
        t = self.take()
        if t is None:
            raise Fatal(last_line, "syntax", f"the file ends inside a record, expecting {what}")
        s = t.text.lower()
        if s.startswith("0x") and re.fullmatch(r"0x[0-9a-f]+", s):
            value = int(s, 16)
        elif s.isdigit():
            value = int(s)
            same = value < 10  # one digit reads the same in both bases
            self.problems.append(
                Problem(
                    t.line,
                    "hex-prefix",
                    f"{what} {t.text!r} has no 0x prefix, so it reads as decimal"
                    + (" (the same value here)" if same else f" {value}, not 0x{t.text}")
                    + "; write 0x-prefixed hex (§2.1)",
                    Severity.WARNING if same else Severity.ERROR,
                )
            )
        else:
            raise Fatal(t.line, "syntax", f"{what}: {t.text!r} is not a number")
        if value >= 1 << width:
            self.problems.append(
                Problem(
                    t.line,
                    "field-width",
                    f"{what} {t.text} does not fit its {width}-bit field; it wraps to "
                    f"0x{value & ((1 << width) - 1):x}",
                )
            )
            value &= (1 << width) - 1
        return value


class Fatal(Exception):
    """A problem that stops the script being read (``problem`` says which)."""

    def __init__(self, line: int, rule: str, message: str) -> None:
        super().__init__(message)
        self.problem = Problem(line, rule, message)


# -- records ------------------------------------------------------------------------------


def _wait(cur: Cursor, tok: _Tok) -> int:
    m = re.match(r"^[+-]?\d+", tok.text)
    if m is None:
        raise Fatal(
            tok.line,
            "syntax",
            f"expected a record (a decimal wait, -2, -1) or a '// ' comment, got {tok.text!r}; "
            "the simulator aborts on it (stoi)",
        )
    if m.group(0) != tok.text:
        cur.problems.append(
            Problem(tok.line, "syntax", f"wait {tok.text!r} reads as {int(m.group(0))} (stoi)")
        )
    return int(m.group(0))


def _instructions(cur: Cursor, line: int) -> list[Instruction]:
    out: list[Instruction] = []
    while (t := cur.peek()) is not None and t.text.lower().startswith("0x"):
        head = cur.number(8, "instruction head", line)
        if head in (0xF1, 0xF2):
            fields = tuple(cur.number(w, "instruction field", t.line) for w in _CONFIG_WIDTHS)
        elif head == 0xF3:
            fields = tuple(cur.number(w, "instruction field", t.line) for w in _OP_WIDTHS)
        else:
            fields = (cur.number(8, "instruction type", t.line),)
            cur.problems.append(
                Problem(t.line, "instruction", f"instruction head 0x{head:02x} is not 0xf1-0xf3")
            )
        out.append(Instruction(t.line, head, fields))
    return out


def read_records(cur: Cursor) -> list[Record]:
    """The records of a script, up to the idle record -1 (raises ``Fatal`` when a
    record cannot be read, as the host thread would abort or hang on it)."""
    for _ in range(3):  # the title tokens (§2.1)
        if cur.take() is None:
            raise Fatal(1, "syntax", "the file has fewer than the 3 title tokens")
    recs: list[Record] = []
    while True:
        tok = cur.take()
        if tok is None:
            last = cur.toks[-1].line if cur.toks else 1
            raise Fatal(last, "idle-record", "the file does not end with the idle record -1 (§2.4)")
        if tok.text == "//":
            cur.skip_line(tok.line)
            continue
        if tok.text.startswith("//"):
            raise Fatal(tok.line, "comment", f"comment {tok.text!r} needs a space after // (§2.1)")
        wait = _wait(cur, tok)
        if wait == -1:
            rest = cur.peek()
            if rest is not None:
                cur.problems.append(
                    Problem(
                        rest.line,
                        "idle-record",
                        "records after the idle record -1 are never read",
                        Severity.WARNING,
                    )
                )
            recs.append(Record(RecordKind.IDLE, tok.line, wait))
            return recs
        if wait == -2:
            key, name = cur.take(), cur.take()
            if key is None or name is None:
                raise Fatal(tok.line, "syntax", "-2 needs a keyword and a file name")
            recs.append(Record(RecordKind.OUTPUT, tok.line, wait, name=name.text))
            continue
        if wait < 0:
            cur.problems.append(
                Problem(tok.line, "wait", f"wait {wait} is ignored by the host", Severity.WARNING)
            )
            recs.append(Record(RecordKind.NOOP, tok.line, wait))
            continue
        header = tuple(
            cur.number(w, f"header {n}", tok.line)
            for w, n in zip(_HEADER_WIDTHS, _HEADER_NAMES, strict=True)
        )
        recs.append(_body(cur, tok.line, wait, header))


def _body(cur: Cursor, line: int, wait: int, header: tuple[int, ...]) -> Record:
    try:
        kind = RecordKind(header[1])
    except ValueError:
        kind = RecordKind.IGNORED
    if kind in (RecordKind.IDLE, RecordKind.OUTPUT, RecordKind.NOOP):
        kind = RecordKind.IGNORED
    if kind is RecordKind.IGNORED:
        cur.problems.append(
            Problem(
                line,
                "record-type",
                f"TYPE 0x{header[1]:02x} is not ins_init/start/pause/req/trans_data; the host "
                "ignores the record",
                Severity.WARNING,
            )
        )
    if header[0] != 0xFF or header[6] != 0xFF:
        cur.problems.append(
            Problem(line, "header", "HEAD and TAIL should be 0xff", Severity.WARNING)
        )
    if kind is RecordKind.INS_INIT:
        key = cur.take()
        if key is None or key.text.lower().startswith("0x"):
            raise Fatal(line, "syntax", "ins_init needs a keyword (ins_package:) before its list")
        ins = _instructions(cur, line)
        nxt = cur.peek()
        if len(ins) < header[4] and nxt is not None and nxt.text.startswith("//"):
            cur.problems.append(
                Problem(
                    nxt.line,
                    "comment",
                    "a comment inside the instruction list: comments are allowed only where "
                    "a record starts (§2.1)",
                )
            )
        return Record(kind, line, wait, header, tuple(ins))
    if kind is RecordKind.DATA:
        key = cur.take()
        if key is None:
            raise Fatal(line, "syntax", "trans_data needs a data source")
        if key.text == "input_file:":
            name = cur.take()
            if name is None:
                raise Fatal(line, "syntax", "input_file: needs a file name")
            return Record(kind, line, wait, header, source=name.text)
        if key.text == "random_data_package":
            return Record(kind, line, wait, header, source="<random_data_package>")
        if key.text == "data_package:":
            for _ in range(32 * header[4]):
                v = cur.take()
                if v is None or not _is_float(v.text):
                    raise Fatal(
                        v.line if v else line,
                        "syntax",
                        f"data_package: needs {32 * header[4]} decimal numbers",
                    )
            return Record(kind, line, wait, header, source="<data_package>")
        raise Fatal(
            key.line,
            "syntax",
            f"trans_data source {key.text!r} is not input_file:, data_package: or "
            "random_data_package; the host would send nothing and the actor waits for ever",
        )
    return Record(kind, line, wait, header)


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
