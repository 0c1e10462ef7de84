"""Emit an experiment as the authors' simulator reads it: ``script/host_<i>.txt`` (§2, §3).

``host_script(program)`` gives the text of one host script; ``write_experiment``
writes the folder tree of §1.1 (``script/``, ``result/``, ``report/``), optionally
with zero-filled input files of the right size, so the programs can be run on the
reference SystemC simulator (set ``test_actor_num`` and ``file_name`` there).
"""

from __future__ import annotations

from pathlib import Path

from waferflow.backend_amcoda.program import (
    FLOATS_PER_PACKAGE,
    MAX_OPERANDS,
    ActorProgram,
    Experiment,
    Operand,
    OperandKind,
    packages,
)
from waferflow.fileio import atomic_dir

_BASE = 0x80000000
_TYPE = {
    OperandKind.NONE: 0,
    OperandKind.ACTOR: 1,
    OperandKind.HOST: 1,
    OperandKind.KEEP: 2,
    OperandKind.RELEASE: 3,
}
_CONTINUE = 0xFF


def _operands(ops: tuple[Operand, ...]) -> str:
    padded = list(ops) + [Operand(OperandKind.NONE)] * (MAX_OPERANDS - len(ops))
    cells = []
    for o in padded:
        addr = _BASE + o.index if o.kind is OperandKind.ACTOR else _BASE if o.is_peer else o.index
        cells.append(f"0x{_TYPE[o.kind]:x} 0x{addr:08x}")
    return " ".join(cells)


def _config(head: int, mode: int, ops: tuple[Operand, ...]) -> list[str]:
    lines = []
    chunks = [ops[i : i + MAX_OPERANDS] for i in range(0, max(len(ops), 1), MAX_OPERANDS)]
    for k, chunk in enumerate(chunks):
        lines.append(f"0x{head:02x} 0x{(mode if k == 0 else _CONTINUE):02x} {_operands(chunk)}")
    return lines


def _header(kind: int, actor: int, op: int, seq: int) -> str:
    return f"0xff 0x{kind:02x} 0x{_BASE:08x} 0x{_BASE + actor:08x} 0x{op:08x} 0x{seq:02x} 0xff"


META_PREFIX = "// waferflow"  # the annotation line the reader recognises


def _token(text: str) -> str:
    """One whitespace-free token for a comment field (empty becomes '-')."""
    return "_".join(text.split()) or "-"


def _meta_line(prog: ActorProgram, experiment: str) -> str:
    fields = [
        f"experiment {_token(experiment)}",
        f"actor {prog.actor}",
        f"role {' '.join(prog.role.split()) or '-'}",
        f"layer {_token(prog.layer)}",
        f"entries {len(prog.entries)}",
    ]
    return f"{META_PREFIX} " + " | ".join(f.replace("|", "/") for f in fields)


def host_script(prog: ActorProgram, *, annotate: bool = False, experiment: str = "") -> str:
    """The text of ``host_<actor>.txt``: ins_init with every instruction, start, then
    the host transfers in program order, ``-1`` last. Waits are the authors' (10, 1, 0).

    With ``annotate``, comments (``// `` at record starts, §2.1) describe the actor and
    every entry before the program, and name the entry of every host transfer; the
    reader takes the labels back from them."""
    ins: list[str] = []
    for e in prog.entries:
        ins += _config(0xF1, e.out.mode.value, e.out.operands)
        ins += _config(0xF2, e.inp.mode.value, e.inp.operands)
        p = " ".join(f"0x{v:04x}" for v in e.op.params)
        ins.append(f"0xf3 0x{e.op.alu.value:02x} {p} 0x{e.op.mode.code:02x}")
    out = ["wait_cycle\tmessage", "-" * 46]
    if annotate:
        out.append(_meta_line(prog, experiment))
        out += [f"// e{i} {_token(e.label)} {e}" for i, e in enumerate(prog.entries)]
    out.append(f"10\t{_header(0xF1, prog.actor, len(ins), 0)}")
    out.append("\tins_package:")
    out += [f"\t{line}" for line in ins]
    out.append(f"1\t{_header(0xF2, prog.actor, 1, 0)}")
    inputs = iter(prog.host_inputs)
    outputs = iter(prog.host_outputs)
    for i, e in enumerate(prog.entries):
        for o in e.inp.operands:
            if o.kind is OperandKind.HOST:
                t = next(inputs)
                if annotate:
                    out.append(f"// e{i} {_token(e.label)} <- {t.name} ({t.packages} packages)")
                out.append(f"0\t{_header(0xF5, prog.actor, 0, 1)}")
                out.append(f"0\t{_header(0xF7, prog.actor, t.packages, 1)}")
                out.append(f"\tinput_file: {t.name}")
        if 0 in e.out.consumers:
            name = next(outputs)
            if annotate:
                out.append(f"// e{i} {_token(e.label)} -> result/{name}")
            out.append(f"-2\toutput_file: {name}")
    out.append("-1")
    return "\n".join(out) + "\n"


def write_experiment(exp: Experiment, folder: str | Path, *, data_files: bool = False) -> Path:
    """Write ``<folder>/script/host_<i>.txt`` and empty ``result/`` and ``report/``.
    With ``data_files`` also every named input, zero-filled to whole packages
    (the timing does not depend on the values)."""
    final = Path(folder)
    with atomic_dir(final) as root:  # the old folder or the new one, never half of each
        for sub in ("script", "result", "report"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        names: dict[str, int] = {}
        for p in exp.programs:
            (root / "script" / f"host_{p.actor}.txt").write_text(host_script(p))
            for t in p.host_inputs:
                names[t.name] = max(names.get(t.name, 0), t.floats)
        if data_files:
            for name, floats in sorted(names.items()):
                n = packages(floats) * FLOATS_PER_PACKAGE
                row = " ".join(["0"] * FLOATS_PER_PACKAGE)
                (root / "script" / name).write_text(
                    "\n".join([row] * (n // FLOATS_PER_PACKAGE)) + "\n"
                )
    return final
