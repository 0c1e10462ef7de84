"""Read an experiment folder back: host scripts into actor programs (§2, §3).

The tokenizer and the records it reads (``host_records.py``) follow the simulator's
host thread (§2.1): whitespace-separated tokens; the first three skipped; ``//`` as a
record's first token discards the rest of its line (comments are allowed nowhere
else); ``0x`` numbers are hexadecimal and numbers without it decimal; a value wider
than its field wraps. Instruction lists are read up to the next token that is not
``0x``-prefixed, so a wrong ins_init count is reported rather than misparsed. This
module turns the records into programs (§3) and gathers folders.

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
from pathlib import Path
from typing import Any

from waferflow.backend_amcoda.host_records import (
    Cursor,
    Fatal,
    Instruction,
    Problem,
    Record,
    RecordKind,
    Severity,
    read_records,
)
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
                raise Fatal(
                    line, "operand", f"address 0x{addr:08x} is neither the host nor an actor"
                )
        else:
            if addr >= MAX_SLOTS:
                raise Fatal(
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
                    raise Fatal(x.line, "syntax", "a continue line with nothing to continue")
                cfg[1].extend(ops)
                continue
            if x.head == 0xF1:
                out_cfg, out_line, fresh_out = (mode, ops), x.line, True
            else:
                in_cfg, in_line, fresh_in = (mode, ops), x.line, True
            continue
        if x.head != 0xF3:
            raise Fatal(x.line, "instruction", f"instruction head 0x{x.head:02x} is unknown")
        k = len(entries)
        if out_cfg is None or in_cfg is None:
            raise Fatal(x.line, "entry-incomplete", f"e{k} has no Out_Config or In_Config")
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
            raise Fatal(
                x.line, "mode", f"e{k}: Out mode 0x{out_cfg[0]:02x} / In mode 0x{in_cfg[0]:02x}"
            ) from None
        try:
            alu = AluOp(x.fields[0])
        except ValueError:
            raise Fatal(x.line, "aluop", f"e{k}: aluop 0x{x.fields[0]:02x} is unknown") from None
        mode = _MODE_OF.get((alu, x.fields[9]))
        if mode is None:
            raise Fatal(x.line, "mode", f"e{k}: {alu.name} has no mode 0x{x.fields[9]:02x}")
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
    cur = Cursor(text, problems)
    try:
        recs = read_records(cur)
    except Fatal as f:
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
    except Fatal as f:
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
