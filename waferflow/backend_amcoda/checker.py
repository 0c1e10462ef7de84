"""Check an experiment folder without running the authors' simulator.

``check_experiment(dir)`` reads the folder back (``reader.py``) and returns every
``CheckIssue(actor, line, rule, message, severity)`` it finds, in four passes:

1. **scripts**: the lexical and record rules of §2 (comments, ``0x`` fields, field
   widths, the ins_init count, start, req + trans_data pairs, the final ``-1``),
   ``settings.json`` and the input files (present, >= 32 x P numbers, decimal).
2. **programs**: per actor, in program order as the SU builds them (§3): the format's
   limits (341 entries, 1024 lines, 4 operands), slots written before they are read,
   never written while valid and released exactly once, slot sizes, op arity,
   modes, split/gather alignment, a weight-gradient op over the replica's own batch;
   per link, every transfer pairs with a consumer entry in program order with the
   same size, host transfers pair with host operands and ``-2`` records in order;
   hazard (a) of §6.3 from the two programs' orders.
3. **dry run** (``dry_run.py``): an untimed execution of all actors with the 5-entry
   reservation table and first-fit 65,536-float blocks, which finds deadlocks and says
   whether a deeper table or more memory would have avoided them.
4. **timing** (``simulate=True``, only when 1-3 found no error): waferflow's cycle
   model of the machine decides hazard (b) exactly (a lost ALU completion behind a
   mid-program STORE/LOAD), checks ``test_time`` and whether actor 1 finishes last.
   Without it, the hazard (b) sites are listed as warnings.

Rules are short names (``slot-read``, ``no-consumer``, ``divw-batch``, ...); see
docs/amcoda.md for the list.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from waferflow.backend_amcoda.datafiles import count_problem
from waferflow.backend_amcoda.dry_run import dry_run
from waferflow.backend_amcoda.program import (
    FLOATS_PER_PACKAGE,
    MAX_ACTORS,
    MAX_ENTRIES,
    MAX_OPERANDS,
    MEMORY_BLOCKS,
    RESERVATION_ENTRIES,
    ActorProgram,
    AluOp,
    Entry,
    Experiment,
    InMode,
    Mode,
    OperandKind,
    OutMode,
    blocks,
    packages,
)
from waferflow.backend_amcoda.reader import (
    EntryLines,
    ExperimentFolder,
    HostScript,
    RecordKind,
    Severity,
    folder_mem_ports,
    load_folder,
)
from waferflow.backend_amcoda.report import check_settings, run_total_time
from waferflow.backend_amcoda.simulate import simulate_experiment
from waferflow.backend_amcoda.validate import hazard_b_sites
from waferflow.errors import PlanError

ICACHE_LINES = 1024
_MIN_INPUTS = {AluOp.CONV: 2, AluOp.FC: 2, AluOp.LOSS: 2, AluOp.MUL: 2}


@dataclass(frozen=True, slots=True)
class CheckIssue:
    """One finding: the actor (0 = the experiment), the script line (0 = none), the rule."""

    actor: int
    line: int
    rule: str
    message: str
    severity: Severity = Severity.ERROR

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        where = "experiment" if self.actor == 0 else f"host_{self.actor}.txt"
        if self.line:
            where += f":{self.line}"
        return f"{where}: {self.severity.value} [{self.rule}] {self.message}"


def format_issues(issues: list[CheckIssue]) -> str:
    """One line per issue, then a count."""
    n_err = sum(i.is_error for i in issues)
    lines = [str(i) for i in issues]
    lines.append(f"{n_err} error(s), {len(issues) - n_err} warning(s)")
    return "\n".join(lines)


@dataclass
class _Ctx:
    folder: ExperimentFolder
    issues: list[CheckIssue] = field(default_factory=list)

    def add(self, actor: int, line: int, rule: str, msg: str, error: bool = True) -> None:
        sev = Severity.ERROR if error else Severity.WARNING
        self.issues.append(CheckIssue(actor, line, rule, msg, sev))

    def lines(self, a: int, k: int) -> EntryLines:
        s = self.folder.scripts[a]
        return s.entry_lines[k] if k < len(s.entry_lines) else EntryLines(0, 0, 0)

    def programs(self) -> dict[int, ActorProgram]:
        return {i: s.program for i, s in self.folder.scripts.items() if s.program is not None}

    @property
    def has_errors(self) -> bool:
        return any(i.is_error for i in self.issues)


def check_experiment(
    root: str | Path, *, simulate: bool = True, data_files: bool = True
) -> list[CheckIssue]:
    """Every issue of the experiment folder at ``root`` (errors and warnings). With
    ``data_files`` the input files are read and every number parsed."""
    ctx = _Ctx(load_folder(root))
    _check_folder(ctx)
    for s in ctx.folder.scripts.values():
        _check_script(ctx, s, data_files)
    progs = ctx.programs()
    for a, p in progs.items():
        _check_program(ctx, a, p)
        _check_host_transfers(ctx, ctx.folder.scripts[a])
    _check_links(ctx, progs)
    complete = len(progs) == ctx.folder.n_actors and ctx.folder.n_actors > 0
    if complete and not ctx.has_errors:
        exp = _experiment(ctx, progs)
        finishes = _dry_run_diagnose(ctx, exp)
        if finishes and simulate:
            _check_timing(ctx, exp)
        elif finishes:
            for a, k in hazard_b_sites(exp):
                ctx.add(
                    a,
                    ctx.lines(a, k).op,
                    "hazard-b-site",
                    f"e{k} ({exp.program(a).entries[k].op.alu.name}) sits between ALU ops: an "
                    "ALU completion is lost if it is still in the table when the next op ends "
                    "(§6.3 b); timing decides (check with simulate=True)",
                    error=False,
                )
    return ctx.issues


def _experiment(ctx: _Ctx, progs: dict[int, ActorProgram]) -> Experiment:
    ports = folder_mem_ports(ctx.folder)
    return Experiment(ctx.folder.root.name, tuple(progs[i] for i in sorted(progs)), ports)


# -- pass 1: folder, scripts, files ----------------------------------------------------------


def _check_folder(ctx: _Ctx) -> None:
    f = ctx.folder
    for p in f.problems:
        ctx.add(0, 0, p.rule, p.message, p.severity is Severity.ERROR)
    for sub in ("result", "report"):
        if not (f.root / sub).is_dir():
            ctx.add(0, 0, "folders", f"{sub}/ is missing; the simulator writes there (§1.1)")
    if f.n_actors > MAX_ACTORS:
        ctx.add(0, 0, "actors", f"{f.n_actors} actors; the machine has at most {MAX_ACTORS}")
    for i in range(1, f.n_actors + 1):
        if i not in f.scripts:
            ctx.add(i, 0, "missing-script", f"host_{i}.txt is missing; actor {i} stays idle")
    for i in f.extra_scripts:
        ctx.add(i, 0, "extra-script", f"host_{i}.txt is past test_actor_num and never runs", False)
    batch = (f.predicted or {}).get("batch_ns")
    batch = batch if isinstance(batch, int) and not isinstance(batch, bool) else None
    for rule, msg, err in check_settings(f.settings, f.n_actors, batch):
        ctx.add(0, 0, rule, msg, err)
    total = run_total_time(f.root)
    expected = (f.predicted or {}).get("actor1_last_ns")
    if total is not None and isinstance(expected, int) and total != expected:
        ctx.add(0, 0, "run-total", f"report/report_1.txt gives Total_time {total} ns; "
                f"waferflow predicted {expected} ns (actor 1's last stamp)", error=False)  # fmt: skip


def _check_script(ctx: _Ctx, s: HostScript, data_files: bool) -> None:
    a = s.actor
    for p in s.problems:
        ctx.add(a, p.line, p.rule, p.message, p.severity is Severity.ERROR)
    recs = s.records
    inits = [k for k, r in enumerate(recs) if r.kind is RecordKind.INS_INIT]
    starts = [k for k, r in enumerate(recs) if r.kind is RecordKind.START]
    if inits and not starts:
        ctx.add(a, recs[inits[0]].line, "start", "no start record: the program never runs")
    for k in starts:
        r = recs[k]
        if not inits or k < inits[0]:
            ctx.add(a, r.line, "start", "start before the program is loaded")
        elif r.op != 1:
            ctx.add(
                a,
                r.line,
                "start",
                f"start runs the program {r.op} times; the checker and waferflow's model "
                "cover one iteration",
                error=r.op == 0,
            )
    for k, r in enumerate(recs):
        if r.header and r.header[3] != 0x80000000 + a:
            ctx.add(a, r.line, "dst", f"DST 0x{r.header[3]:08x} is not actor {a}", error=False)
        if r.kind is RecordKind.REQ and (
            k + 1 >= len(recs) or recs[k + 1].kind is not RecordKind.DATA
        ):
            ctx.add(a, r.line, "req-pair", "a req must be followed directly by its trans_data")
        if r.kind is RecordKind.DATA:
            if k == 0 or recs[k - 1].kind is not RecordKind.REQ:
                ctx.add(a, r.line, "req-pair", "a trans_data must directly follow its req")
            elif r.wait != 0:
                ctx.add(a, r.line, "req-pair", f"trans_data waits {r.wait} cycles; use 0", False)
            if not r.source.startswith("<"):
                path = ctx.folder.root / "script" / r.source
                why = count_problem(path, FLOATS_PER_PACKAGE * r.op, parse=data_files)
                if why is not None:
                    ctx.add(a, r.line, "input-file", why)


# -- pass 2: programs ---------------------------------------------------------------------


def _check_program(ctx: _Ctx, a: int, p: ActorProgram) -> None:
    n_actors = ctx.folder.n_actors
    if len(p.entries) > MAX_ENTRIES:
        ctx.add(
            a, ctx.lines(a, 0).out, "icache", f"{len(p.entries)} entries; at most {MAX_ENTRIES}"
        )
    if p.instruction_lines > ICACHE_LINES:
        ctx.add(a, ctx.lines(a, 0).out, "icache", f"{p.instruction_lines} instruction lines; "
                f"the instruction cache holds {ICACHE_LINES}")  # fmt: skip
    valid: dict[int, int] = {}  # slot -> values stored
    fwd_batch: dict[AluOp, set[int]] = defaultdict(set)
    for e in p.entries:
        if e.op.mode is Mode.FP and e.op.alu in (AluOp.CONV, AluOp.FC):
            fwd_batch[e.op.alu].add(e.op.params[0])
    for k, e in enumerate(p.entries):
        ln = ctx.lines(a, k)
        tag = f"e{k}" + (f" ({e.label})" if e.label else "")
        _check_entry(ctx, a, k, e, ln, tag, n_actors)
        divw_flagged = False
        if (
            e.op.mode is Mode.DIVW
            and fwd_batch[e.op.alu]
            and e.op.params[0] not in fwd_batch[e.op.alu]
        ):
            divw_flagged = True
            ctx.add(a, ln.op, "divw-batch",
                    f"{tag}: the weight-gradient {e.op.alu.name} runs over batch {e.op.params[0]} "
                    f"but this actor's forward pass uses {sorted(fwd_batch[e.op.alu])}: each "
                    "replica must use its own batch (the authors' 4-way slip, §6.2)")  # fmt: skip
        for pos, o in enumerate(e.inp.operands):
            if not o.is_slot:
                continue
            if o.index not in valid:
                ctx.add(a, ln.inp, "slot-read", f"{tag} reads slot s{o.index}, which no earlier "
                        "entry wrote or which was already released (§3.2)")  # fmt: skip
                continue
            need = e.op.bchw if e.op.alu is AluOp.LOAD else e.op.input_size(pos)
            reads = e.op.uses_alu or e.op.alu is AluOp.LOAD
            if reads and need != valid[o.index] and not divw_flagged:
                ctx.add(a, ln.inp, "slot-size", f"{tag} reads {need} values as operand {pos} "
                            f"from s{o.index}, which holds {valid[o.index]}")  # fmt: skip
        for o in e.inp.operands:
            if o.kind is OperandKind.RELEASE:
                valid.pop(o.index, None)
        slot = e.out.keep_slot
        if slot is not None and e.op.alu is not AluOp.LOAD:
            if slot in valid:
                ctx.add(a, ln.out, "slot-write", f"{tag} writes slot s{slot}, which still holds "
                        "a value; release it first (type 3)")  # fmt: skip
            valid[slot] = e.op.output_size
    if valid:
        left = ", ".join(f"s{x}" for x in sorted(valid))
        ctx.add(a, ctx.lines(a, len(p.entries) - 1).op, "slot-leak",
                f"{left} never released: the memory never returns to 0%")  # fmt: skip


def _check_entry(
    ctx: _Ctx, a: int, k: int, e: Entry, ln: EntryLines, tag: str, n_actors: int
) -> None:
    ops = e.inp.operands
    alu = e.op.alu
    if not ops:
        ctx.add(a, ln.inp, "op-arity", f"{tag} has no input operand")
    if len(ops) > MAX_OPERANDS:
        ctx.add(a, ln.inp, "operands", f"{tag} reads {len(ops)} operands; an entry holds at "
                f"most {MAX_OPERANDS} (Max_op_num)")  # fmt: skip
    peers = [o.peer for o in ops if o.is_peer]
    if len(set(peers)) != len(peers):
        ctx.add(a, ln.inp, "producer-twice", f"{tag} lists a producer twice")
    cons = e.out.consumers
    if len(set(cons)) != len(cons):
        ctx.add(a, ln.out, "consumer-twice", f"{tag} lists a consumer twice")
    for peer, line in [(x, ln.inp) for x in peers] + [(x, ln.out) for x in cons]:
        if peer == a or peer > n_actors:
            ctx.add(a, line, "link", f"{tag} names actor {peer}, which has no link to actor {a}")
    for pos, o in enumerate(e.out.operands):
        if o.is_slot and (pos > 0 or o.kind is OperandKind.RELEASE):
            ctx.add(a, ln.out, "out-slot", f"{tag}: only a kept slot (type 2) in Out operand 1 "
                    f"keeps the result; {o} at position {pos + 1} is ignored (§3.3)")  # fmt: skip
    if e.inp.mode is not InMode.SINGLE and alu is not AluOp.STORE:
        ctx.add(a, ln.inp, "gather-mode", f"{tag}: gather places data correctly only on a STORE")
    if e.out.mode is not OutMode.BROADCAST and alu not in (
        AluOp.LOAD, AluOp.ACT, AluOp.ADD, AluOp.LOSS,
    ):  # fmt: skip
        ctx.add(a, ln.out, "split-mode", f"{tag}: split reads (B,C,H,W); use it on LOAD, ACT, "
                "ADD or LOSS (§3.7)")  # fmt: skip
    if alu is AluOp.STORE:
        if e.out.keep_slot is None:
            ctx.add(a, ln.out, "store", f"{tag}: a STORE must keep its result (Out: type-2 slot)")
        if not peers or len(peers) != len(ops):
            ctx.add(a, ln.inp, "store", f"{tag}: a STORE's operands are its producers (actors "
                    "or the host)")  # fmt: skip
    elif alu is AluOp.LOAD:
        if len(ops) != 1 or not ops[0].is_slot:
            ctx.add(a, ln.inp, "load", f"{tag}: a LOAD reads exactly one slot")
    else:
        lo = _MIN_INPUTS.get(alu, 2 if e.op.n_inputs == 2 else 1)
        if ops and not lo <= len(ops) <= e.op.n_inputs:
            ctx.add(a, ln.inp, "op-arity", f"{tag}: {alu.name}.{e.op.mode.value} takes "
                    f"{lo}..{e.op.n_inputs} operands, got {len(ops)}")  # fmt: skip
    sizes = [] if alu is AluOp.LOAD else [e.op.output_size]
    if alu is not AluOp.STORE:
        sizes += [e.op.input_size(pos) for pos, o in enumerate(ops) if o.is_peer]
    if any(s <= 0 for s in sizes):
        ctx.add(a, ln.op, "zero-buffer", f"{tag} allocates a zero-size buffer, which takes a "
                "block that is never freed (§3.6)")  # fmt: skip
    if sum(max(blocks(s), 1) for s in sizes) > MEMORY_BLOCKS:
        ctx.add(a, ln.op, "memory", f"{tag} needs {sum(blocks(s) for s in sizes)} blocks of "
                f"65,536 floats at once; an actor has {MEMORY_BLOCKS}")  # fmt: skip
    _check_alignment(ctx, a, e, ln, tag)


def _check_alignment(ctx: _Ctx, a: int, e: Entry, ln: EntryLines, tag: str) -> None:
    for mode, n, line, what in (
        (e.out.mode.value, len(e.out.consumers), ln.out, "consumers"),
        (e.inp.mode.value, len(e.inp.operands), ln.inp, "producers"),
    ):
        if mode == 0xF0 or n == 0:
            continue
        total = e.op.output_size if line == ln.out else e.op.bchw
        per_sample = total // max(e.op.params[0], 1)
        chunk = total // n if mode == 0xF1 else per_sample // n
        by_channel = mode == 0xF2 and per_sample % n
        if total % n or by_channel or chunk % FLOATS_PER_PACKAGE:
            ctx.add(a, line, "alignment", f"{tag}: split/gather over {n} {what} makes chunks of "
                    f"{chunk} values, not whole 32-value packages (§3.7)")  # fmt: skip


def _check_host_transfers(ctx: _Ctx, s: HostScript) -> None:
    a = s.actor
    p = s.program
    assert p is not None
    expected: list[tuple[str, int, int]] = []  # (kind, entry, values)
    for k, e in enumerate(p.entries):
        for pos, o in enumerate(e.inp.operands):
            if o.kind is OperandKind.HOST:
                expected.append(("in", k, e.input_operand_size(pos)))
        if 0 in e.out.consumers:
            expected.append(("out", k, e.out_floats_per_consumer))
    actual = [r for r in s.host_records() if r.kind is not RecordKind.REQ]
    for i in range(max(len(expected), len(actual))):
        if i >= len(actual):
            kind, k, _ = expected[i]
            rule = "host-input" if kind == "in" else "host-output"
            what = "req + trans_data" if kind == "in" else "-2 record"
            ctx.add(a, ctx.lines(a, k).inp if kind == "in" else ctx.lines(a, k).out, rule,
                    f"e{k} expects a {what} from the host script, which has none left"
                    + ("; the entry never retires (§6.2 f1)" if kind == "out" else ""))  # fmt: skip
            continue
        r = actual[i]
        got = "in" if r.kind is RecordKind.DATA else "out"
        if i >= len(expected):
            ctx.add(a, r.line, "host-input" if got == "in" else "host-output",
                    "no entry of the program expects this host record")  # fmt: skip
            continue
        kind, k, values = expected[i]
        if got != kind:
            ctx.add(a, r.line, "host-order", f"this record is host {'input' if got == 'in' else 'output'}"
                    f" but e{k} expects the host's {'input' if kind == 'in' else 'output'} next; "
                    "order host records by program order (§2.5)")  # fmt: skip
            return
        if kind == "in" and r.op != packages(values):
            ctx.add(a, r.line, "host-size", f"trans_data sends {r.op} packages ({r.source}) to "
                    f"e{k}, which expects {values} values = {packages(values)} packages "
                    "(§6.2 f7: swapped or wrong host inputs)")  # fmt: skip


def _check_links(ctx: _Ctx, progs: dict[int, ActorProgram]) -> None:
    sends: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)  # (src,dst)->[(k,S)]
    recvs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for a, p in progs.items():
        for k, e in enumerate(p.entries):
            for c in e.out.consumers:
                if c:
                    sends[(a, c)].append((k, e.out_floats_per_consumer))
            for pos, o in enumerate(e.inp.operands):
                if o.is_peer and o.peer:
                    recvs[(o.peer, a)].append((k, e.input_operand_size(pos)))
    for src, dst in sorted(set(sends) | set(recvs)):
        if src not in progs or dst not in progs:
            continue
        out, inn = sends.get((src, dst), []), recvs.get((src, dst), [])
        for (sk, ss), (rk, rs) in zip(out, inn, strict=False):
            if ss != rs:
                ctx.add(dst, ctx.lines(dst, rk).inp, "edge-size",
                        f"e{rk} expects {rs} values from actor {src}, whose matching send e{sk} "
                        f"(host_{src}.txt:{ctx.lines(src, sk).out}) carries {ss}")  # fmt: skip
        for sk, ss in out[len(inn) :]:
            ctx.add(src, ctx.lines(src, sk).out, "no-consumer",
                    f"e{sk} sends {ss} values to actor {dst}, but no entry of actor {dst} is "
                    f"left to receive it (actor {src} sends {len(out)} tensors, actor {dst} "
                    f"receives {len(inn)}); the sender never retires")  # fmt: skip
        for rk, _ in inn[len(out) :]:
            ctx.add(dst, ctx.lines(dst, rk).inp, "no-producer",
                    f"e{rk} waits for actor {src}, which has no send left for it "
                    f"({len(out)} sends, {len(inn)} receives)")  # fmt: skip
    flagged: set[tuple[int, int]] = set()
    for (a, x), out in sends.items():
        back = recvs.get((x, a), [])
        peer_recv = recvs.get((a, x), [])
        peer_send = sends.get((x, a), [])
        for kk, (s_k, _) in enumerate(out[: len(peer_recv)]):
            a_k = peer_recv[kk][0]
            for jj, (b_j, _) in enumerate(back[: len(peer_send)]):
                t_j = peer_send[jj][0]
                if s_k < b_j < s_k + RESERVATION_ENTRIES and t_j < a_k and (a, b_j) not in flagged:
                    flagged.add((a, b_j))
                    ctx.add(a, ctx.lines(a, b_j).inp, "hazard-a",
                            f"e{b_j} may ack actor {x} while e{s_k} still sends to it: actor "
                            f"{x} sends (its e{t_j}) before receiving e{s_k}'s data (its e{a_k}); "
                            "the ack is overwritten on the shared link (§6.3 a)")  # fmt: skip
                    break


# -- pass 3: the dry run ------------------------------------------------------------------


def _dry_run_diagnose(ctx: _Ctx, exp: Experiment) -> bool:
    """Report a stuck dry run with its cause; True if the experiment completes."""
    acts = dry_run(exp)
    stuck = {a: d for a, d in acts.items() if not d.finished()}
    if not stuck:
        return True
    big = 10**6
    if all(d.finished() for d in dry_run(exp, depth=big).values()):
        rule, why = "reservation-table", "it would finish with a deeper reservation table"
        culprits = [
            a for a, d in stuck.items() if len(d.table) == d.depth and d.nb < len(d.p.entries)
        ]
    elif all(d.finished() for d in dry_run(exp, n_blocks=big).values()):
        rule, why = "memory", "it would finish with more local memory"
        culprits = [a for a, d in stuck.items() if d.mem_blocked]
    else:
        rule, why, culprits = "deadlock", "no actor can make progress", list(stuck)
    summary = "; ".join(f"actor {a}: {d.state()}" for a, d in sorted(stuck.items()))
    for a in culprits or list(stuck):
        d = stuck[a]
        k = min(d.nb, len(d.p.entries) - 1) if rule != "deadlock" else (
            d.receiving() if d.receiving() is not None else (d.table[0] if d.table else d.nb)
        )  # fmt: skip
        k = min(k, len(d.p.entries) - 1)
        line = ctx.lines(a, k).op if rule != "deadlock" else ctx.lines(a, k).inp
        ctx.add(a, line, rule, f"the run stops: {why} (5 entries, 128 blocks). {summary}")
    return False


# -- pass 4: timing -----------------------------------------------------------------------

_ACTOR = re.compile(r"actor (\d+)")
_LOST = re.compile(r"actor (\d+)'s e(\d+) lands on e(\d+)")
_ENTRY = re.compile(r"\be(\d+)\b")


def _check_timing(ctx: _Ctx, exp: Experiment) -> None:
    try:
        res = simulate_experiment(exp, emulate_lost_completions=True)
    except PlanError as err:
        rule = "hazard-a" if "hazard (a)" in str(err) else "deadlock"
        for text in str(err).splitlines():
            m = _ACTOR.search(text)
            if m is None or (rule == "deadlock" and text.startswith("experiment")):
                continue
            a = int(m.group(1))
            e = _ENTRY.search(text)
            line = ctx.lines(a, int(e.group(1))).out if e and a in ctx.folder.scripts else 0
            ctx.add(a, line, rule, f"waferflow's cycle model: {text.strip()}")
        return
    for text in res.hazards:
        m = _LOST.search(text)
        if m is not None:
            a, k = int(m.group(1)), int(m.group(3))
            ctx.add(a, ctx.lines(a, k).op, "hazard-b",
                    f"{text}; replace the STORE/LOAD by a 1-operand ADD (hazard_guard)")  # fmt: skip
    for text in res.stuck:
        m = _ACTOR.search(text)
        if m is not None:
            ctx.add(int(m.group(1)), 0, "hazard-b", f"never finishes: {text}")
    if res.hazards:
        return
    flagged = any(i.rule == "test-time" for i in ctx.issues)
    for rule, msg, err in check_settings(ctx.folder.settings, exp.n_actors, res.batch_ns):
        if rule == "test-time" and not flagged:
            ctx.add(0, 0, rule, msg, err)
    if res.actor1_last_ns < res.batch_ns:
        last = max(res.actors, key=lambda s: s.last_ns)
        ctx.add(1, 0, "actor1-last", f"Total_time (actor 1's last stamp) will read "
                f"{res.actor1_last_ns} ns but actor {last.actor} ends at {res.batch_ns} ns; "
                "compare with the latest stamp over all actors (§6.1)", error=False)  # fmt: skip
    pred = (ctx.folder.predicted or {}).get("batch_ns")
    if isinstance(pred, int) and pred != res.batch_ns:
        ctx.add(0, 0, "predicted", f"predicted.json says {pred} ns but the scripts simulate to "
                f"{res.batch_ns} ns; it is stale", error=False)  # fmt: skip
