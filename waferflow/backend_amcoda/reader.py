"""Read an experiment folder back: host scripts into actor programs (§2, §3).

The tokenizer follows the simulator's host thread (§2.1): whitespace-separated
tokens; the first three skipped; ``//`` as a record's first token discards the rest
of its line (comments are allowed nowhere else); ``0x`` numbers are hexadecimal and
numbers without it decimal; a value wider than its field wraps. Instruction lists
are read up to the next token that is not ``0x``-prefixed, so a wrong ins_init
count is reported rather than misparsed.

``parse_host_script`` is lenient: it returns a ``HostScript`` with every problem it
met (``Problem``: line, rule, message, severity) and the program when one could be
built. ``read_experiment`` is strict: it raises ``ParseError`` on the first error
that leaves a script unreadable. ``load_folder`` gathers scripts and the JSON files
for the checker. Labels, roles and the experiment name come back from the comments
and JSON files that ``emit_experiment`` writes, so emit -> read gives equal programs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from waferflow.backend_amcoda.program import (
    MAX_ACTORS,
    MAX_SLOTS,
    ActorProgram,
    AluOp,
    Entry,
    Experiment,
    HostTransfer,
    InConfig,
    InMode,
    Mode,
    Op,
    Operand,
    OperandKind,
    OutConfig,
    OutMode,
    actor,
    packages,
)
from waferflow.backend_amcoda.scripts import META_PREFIX
from waferflow.errors import ParseError, WaferflowError
from waferflow.fileio import loads_json, read_text

_BASE = 0x80000000
_HEADER_WIDTHS = (8, 8, 32, 32, 32, 8, 8)  # HEAD TYPE SRC DST OP SEQ TAIL (§2.3)
_HEADER_NAMES = ("HEAD", "TYPE", "SRC", "DST", "OP", "SEQ", "TAIL")
_CONFIG_WIDTHS = (8,) + (2, 32) * 4  # mode, then (type, addr) x 4 (§3.1)
_OP_WIDTHS = (8,) + (16,) * 8 + (8,)  # aluop, para1..8, para9
_CONTINUE = 0xFF
_MODE_OF = {
    (alu, m.code): m
    for alu, modes in {
        AluOp.CONV: (Mode.FP, Mode.BP, Mode.DIVW),
        AluOp.FC: (Mode.FP, Mode.BP, Mode.DIVW),
        AluOp.POOL: (Mode.MAX_FP, Mode.MAX_BP, Mode.AVE_FP, Mode.AVE_BP),
        AluOp.ACT: (Mode.RELU_FP, Mode.RELU_BP),
        **{a: (Mode.NONE,) for a in (AluOp.ADD, AluOp.LOSS, AluOp.MUL, AluOp.STORE, AluOp.LOAD)},
    }.items()
    for m in modes
}
_ENTRY_COMMENT = re.compile(r"^//\s+e(\d+)\s+(\S+)\s")


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


@dataclass(frozen=True, slots=True)
class EntryLines:
    """Script lines of one entry's Out_Config, In_Config and Op_Config."""

    out: int
    inp: int
    op: int


@dataclass(frozen=True)
class HostScript:
    """One parsed ``host_<i>.txt``."""

    actor: int
    source: str
    records: tuple[Record, ...]
    problems: tuple[Problem, ...]
    program: ActorProgram | None  # None if the script could not be read into a program
    entry_lines: tuple[EntryLines, ...] = ()
    experiment: str = ""  # from the annotation comment, if any

    @property
    def fatal(self) -> Problem | None:
        return next((p for p in self.problems if p.severity is Severity.ERROR), None)

    def host_records(self) -> list[Record]:
        """The records that move data: req, trans_data and -2, in order."""
        keep = (RecordKind.REQ, RecordKind.DATA, RecordKind.OUTPUT)
        return [r for r in self.records if r.kind in keep]


# -- tokens and numbers -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Tok:
    text: str
    line: int


class _Cursor:
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
            raise _Fatal(last_line, "syntax", f"the file ends inside a record, expecting {what}")
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
            raise _Fatal(t.line, "syntax", f"{what}: {t.text!r} is not a number")
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


class _Fatal(Exception):
    def __init__(self, line: int, rule: str, message: str) -> None:
        super().__init__(message)
        self.problem = Problem(line, rule, message)


# -- records ------------------------------------------------------------------------------


def _wait(cur: _Cursor, tok: _Tok) -> int:
    m = re.match(r"^[+-]?\d+", tok.text)
    if m is None:
        raise _Fatal(
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


def _instructions(cur: _Cursor, line: int) -> list[Instruction]:
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


def _records(cur: _Cursor) -> list[Record]:
    for _ in range(3):  # the title tokens (§2.1)
        if cur.take() is None:
            raise _Fatal(1, "syntax", "the file has fewer than the 3 title tokens")
    recs: list[Record] = []
    while True:
        tok = cur.take()
        if tok is None:
            last = cur.toks[-1].line if cur.toks else 1
            raise _Fatal(
                last, "idle-record", "the file does not end with the idle record -1 (§2.4)"
            )
        if tok.text == "//":
            cur.skip_line(tok.line)
            continue
        if tok.text.startswith("//"):
            raise _Fatal(tok.line, "comment", f"comment {tok.text!r} needs a space after // (§2.1)")
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
                raise _Fatal(tok.line, "syntax", "-2 needs a keyword and a file name")
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


def _body(cur: _Cursor, line: int, wait: int, header: tuple[int, ...]) -> Record:
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
            raise _Fatal(line, "syntax", "ins_init needs a keyword (ins_package:) before its list")
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
            raise _Fatal(line, "syntax", "trans_data needs a data source")
        if key.text == "input_file:":
            name = cur.take()
            if name is None:
                raise _Fatal(line, "syntax", "input_file: needs a file name")
            return Record(kind, line, wait, header, source=name.text)
        if key.text == "random_data_package":
            return Record(kind, line, wait, header, source="<random_data_package>")
        if key.text == "data_package:":
            for _ in range(32 * header[4]):
                v = cur.take()
                if v is None or not _is_float(v.text):
                    raise _Fatal(
                        v.line if v else line,
                        "syntax",
                        f"data_package: needs {32 * header[4]} decimal numbers",
                    )
            return Record(kind, line, wait, header, source="<data_package>")
        raise _Fatal(
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


# -- the program ----------------------------------------------------------------------------


def _operands(fields: tuple[int, ...], line: int) -> list[Operand]:
    ops: list[Operand] = []
    for k in range(4):
        typ, addr = fields[1 + 2 * k], fields[2 + 2 * k]
        if typ == 0:
            continue
        if typ == 1:
            if addr == _BASE:
                ops.append(Operand(OperandKind.HOST))
            elif 1 <= addr - _BASE <= MAX_ACTORS:
                ops.append(actor(addr - _BASE))
            else:
                raise _Fatal(
                    line, "operand", f"address 0x{addr:08x} is neither the host nor an actor"
                )
        else:
            if addr >= MAX_SLOTS:
                raise _Fatal(
                    line, "slot-index", f"slot {addr} is past the {MAX_SLOTS}-entry table (§3.2)"
                )
            ops.append(Operand(OperandKind.KEEP if typ == 2 else OperandKind.RELEASE, addr))
    return ops


def _program(
    actor_id: int, ins: tuple[Instruction, ...], problems: list[Problem]
) -> tuple[list[tuple[OutConfig, InConfig, Op]], list[EntryLines]]:
    entries: list[tuple[OutConfig, InConfig, Op]] = []
    lines: list[EntryLines] = []
    out_cfg: tuple[int, list[Operand]] | None = None
    in_cfg: tuple[int, list[Operand]] | None = None
    out_line = in_line = 0
    fresh_out = fresh_in = False
    for x in ins:
        if x.head in (0xF1, 0xF2):
            mode, ops = x.fields[0], _operands(x.fields, x.line)
            cfg = out_cfg if x.head == 0xF1 else in_cfg
            if mode == _CONTINUE:
                if cfg is None:
                    raise _Fatal(x.line, "syntax", "a continue line with nothing to continue")
                cfg[1].extend(ops)
                continue
            if x.head == 0xF1:
                out_cfg, out_line, fresh_out = (mode, ops), x.line, True
            else:
                in_cfg, in_line, fresh_in = (mode, ops), x.line, True
            continue
        if x.head != 0xF3:
            raise _Fatal(x.line, "instruction", f"instruction head 0x{x.head:02x} is unknown")
        k = len(entries)
        if out_cfg is None or in_cfg is None:
            raise _Fatal(x.line, "entry-incomplete", f"e{k} has no Out_Config or In_Config")
        if not (fresh_out and fresh_in):
            missing = "Out_Config" if not fresh_out else "In_Config"
            problems.append(
                Problem(
                    x.line,
                    "entry-incomplete",
                    f"e{k} gives no {missing}; the SU silently reuses the previous entry's "
                    "(§3.3): give all three instructions",
                )
            )
        try:
            out_mode, in_mode = OutMode(out_cfg[0]), InMode(in_cfg[0])
        except ValueError:
            raise _Fatal(
                x.line, "mode", f"e{k}: Out mode 0x{out_cfg[0]:02x} / In mode 0x{in_cfg[0]:02x}"
            ) from None
        try:
            alu = AluOp(x.fields[0])
        except ValueError:
            raise _Fatal(x.line, "aluop", f"e{k}: aluop 0x{x.fields[0]:02x} is unknown") from None
        mode = _MODE_OF.get((alu, x.fields[9]))
        if mode is None:
            raise _Fatal(x.line, "mode", f"e{k}: {alu.name} has no mode 0x{x.fields[9]:02x}")
        op = Op(alu, mode, tuple(x.fields[1:9]))
        entries.append(
            (OutConfig(out_mode, tuple(out_cfg[1])), InConfig(in_mode, tuple(in_cfg[1])), op)
        )
        lines.append(EntryLines(out_line, in_line, x.line))
        fresh_out = fresh_in = False
    if fresh_out or fresh_in:
        problems.append(
            Problem(
                out_line if fresh_out else in_line,
                "entry-incomplete",
                "the instruction list ends with an Out_Config/In_Config and no Op_Config",
            )
        )
    return entries, lines


def _meta(text: str) -> tuple[dict[str, str], dict[int, str]]:
    """The annotation comments: actor fields and entry labels."""
    fields: dict[str, str] = {}
    labels: dict[int, str] = {}
    for ln in text.splitlines():
        s = ln.strip()
        if s.startswith(META_PREFIX + " ") and not fields:
            for part in s[len(META_PREFIX) :].split("|"):
                key, _, value = part.strip().partition(" ")
                fields[key] = "" if value == "-" else value
        elif (m := _ENTRY_COMMENT.match(s + " ")) and int(m.group(1)) not in labels:
            labels[int(m.group(1))] = "" if m.group(2) == "-" else m.group(2)
    return fields, labels


def parse_host_script(text: str, actor_id: int, source: str = "<script>") -> HostScript:
    """Parse one host script (leniently: problems are collected, not raised)."""
    problems: list[Problem] = []
    cur = _Cursor(text, problems)
    try:
        recs = _records(cur)
    except _Fatal as f:
        return HostScript(actor_id, source, (), (*problems, f.problem), None)
    inits = [r for r in recs if r.kind is RecordKind.INS_INIT]
    if not inits:
        problems.append(Problem(1, "ins-init", "the script loads no program (no ins_init record)"))
        return HostScript(actor_id, source, tuple(recs), tuple(problems), None)
    init = inits[0]
    for extra in inits[1:]:
        problems.append(
            Problem(
                extra.line,
                "multi-program",
                "a second ins_init: only the first program is read and checked",
                Severity.WARNING,
            )
        )
    if init.op != len(init.instructions):
        problems.append(
            Problem(
                init.line,
                "ins-count",
                f"ins_init announces {init.op} instruction lines (OP 0x{init.op:08x}) but "
                f"{len(init.instructions)} follow; the host reads exactly OP of them",
            )
        )
    try:
        triples, lines = _program(actor_id, init.instructions, problems)
    except _Fatal as f:
        return HostScript(actor_id, source, tuple(recs), (*problems, f.problem), None)
    fields, labels = _meta(text)
    entries = tuple(Entry(o, i, op, labels.get(k, "")) for k, (o, i, op) in enumerate(triples))
    prog = ActorProgram(
        actor_id,
        entries,
        _host_inputs(entries, recs),
        tuple(r.name for r in recs if r.kind is RecordKind.OUTPUT),
        fields.get("role", ""),
        fields.get("layer", ""),
    )
    return HostScript(
        actor_id,
        source,
        tuple(recs),
        tuple(problems),
        prog,
        tuple(lines),
        fields.get("experiment", ""),
    )


def _host_inputs(entries: tuple[Entry, ...], recs: list[Record]) -> tuple[HostTransfer, ...]:
    """One transfer per trans_data record; its size is the receiving operand's when the
    package counts agree (the file may hold a few padding values), else 32 x P."""
    sizes = [
        e.input_operand_size(k)
        for e in entries
        for k, o in enumerate(e.inp.operands)
        if o.kind is OperandKind.HOST
    ]
    out = []
    for k, r in enumerate(x for x in recs if x.kind is RecordKind.DATA):
        floats = 32 * r.op
        if k < len(sizes) and packages(sizes[k]) == r.op:
            floats = sizes[k]
        out.append(HostTransfer(r.source, floats))
    return tuple(out)


# -- folders --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExperimentFolder:
    """An experiment folder as found on disk, for the checker."""

    root: Path
    scripts: dict[int, HostScript]  # actor -> parsed script (missing scripts are absent)
    n_actors: int
    settings: dict[str, Any] | None
    predicted: dict[str, Any] | None
    problems: tuple[Problem, ...] = field(default=())  # folder-level (actor 0)
    extra_scripts: tuple[int, ...] = ()  # host_<i>.txt with i > N: never run


def _json(path: Path, problems: list[Problem]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        doc = loads_json(read_text(path, "settings file"), path.name)
    except ParseError as err:
        problems.append(Problem(err.line, "settings", f"{path.name} is not JSON: {err}"))
        return None
    except WaferflowError as err:
        problems.append(Problem(1, "settings", str(err)))
        return None
    if not isinstance(doc, dict):
        problems.append(Problem(1, "settings", f"{path.name} must hold a JSON object"))
        return None
    return doc


def load_folder(root: str | Path) -> ExperimentFolder:
    """Parse every ``script/host_<i>.txt`` and the JSON files of an experiment folder."""
    base = Path(root)
    script = base / "script"
    if not script.is_dir():
        raise ParseError(f"{script} is not a folder; is {base} an experiment?", 1, 1, str(base))
    problems: list[Problem] = []
    settings = _json(base / "settings.json", problems)
    predicted = _json(base / "predicted.json", problems)
    found = {
        int(m.group(1)): f
        for f in script.iterdir()
        if (m := re.fullmatch(r"host_(\d+)\.txt", f.name))
    }
    n = settings.get("test_actor_num") if settings else None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        n = max(found, default=0)
    scripts = {
        i: parse_host_script(f.read_text(encoding="utf-8", errors="replace"), i, str(f))
        for i, f in sorted(found.items())
        if i <= n
    }
    extra = tuple(i for i in sorted(found) if i > n)
    return ExperimentFolder(base, scripts, n, settings, predicted, tuple(problems), extra)


def folder_mem_ports(folder: ExperimentFolder) -> int:
    """MemWidth of a folder: settings.json, else predicted.json, else a ``MemWidth_<n>``
    folder name (the authors' layout), else 4."""
    for doc, key in ((folder.settings, "SU_write_num"), (folder.predicted, "mem_ports")):
        v = (doc or {}).get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    m = re.fullmatch(r"MemWidth_(\d+)", folder.root.name)
    return int(m.group(1)) if m and int(m.group(1)) > 0 else 4


def read_experiment(root: str | Path) -> Experiment:
    """The experiment in a folder, as its host scripts define it. Raises ``ParseError``
    if a script cannot be read into a program or a script of actors 1..N is missing."""
    folder = load_folder(root)
    programs = []
    for i in range(1, folder.n_actors + 1):
        s = folder.scripts.get(i)
        if s is None:
            raise ParseError(f"host_{i}.txt is missing", 1, 1, str(folder.root / "script"))
        if s.program is None:
            p = s.fatal or Problem(1, "syntax", "no program")
            raise ParseError(f"{p.message} [{p.rule}]", p.line, 1, s.source)
        programs.append(s.program)
    if not programs:
        raise ParseError("no host_<i>.txt scripts", 1, 1, str(folder.root / "script"))
    predicted = folder.predicted or {}
    name = predicted.get("experiment") or next(
        (s.experiment for s in folder.scripts.values() if s.experiment), folder.root.name
    )
    notes = predicted.get("notes", [])
    return Experiment(
        str(name),
        tuple(programs),
        folder_mem_ports(folder),
        tuple(str(n) for n in notes) if isinstance(notes, list) else (),
    )
