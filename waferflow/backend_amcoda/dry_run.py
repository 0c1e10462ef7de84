"""The untimed dry run of an experiment (the checker's pass 3): every actor's SU
builds entries into its reservation table (allocating first-fit memory blocks),
receives, computes in order, sends from the head and retires, with no clock, until
nothing can move. It finds deadlocks, and, run again with a deeper table or more
memory, whether either would have avoided them.

It is separate from ``checker.py`` because it is an executor of its own (it knows
the SU's rules, not the checker's issues); the checker turns its stuck states into
``CheckIssue``s.
"""

from __future__ import annotations

from waferflow.backend_amcoda.program import (
    MEMORY_BLOCKS,
    RESERVATION_ENTRIES,
    ActorProgram,
    AluOp,
    Experiment,
    OperandKind,
    blocks,
)


class DryActor:
    """One actor in an untimed run: builds up to ``depth`` entries (allocating
    first-fit blocks), receives for its oldest entry lacking inputs, computes in
    order, sends from the head only, retires in order."""

    def __init__(self, p: ActorProgram, depth: int, n_blocks: int) -> None:
        self.p = p
        self.depth = depth
        self.mem = [0] * n_blocks  # run length at a buffer's first block, -1 inside
        self.nb = 0
        self.table: list[int] = []
        self.missing: dict[int, list[int]] = {}
        self.pending: dict[int, list[int]] = {}
        self.done: set[int] = set()
        self.bufs: dict[int, list[int]] = {}  # entry -> input buffers freed by its ALU op
        self.out_buf: dict[int, int] = {}
        self.slots: dict[int, int] = {}
        self.alu_next = 0
        self.host: list[tuple[str, int]] = []
        for k, e in enumerate(p.entries):
            self.host += [("in", k) for o in e.inp.operands if o.kind is OperandKind.HOST]
            if 0 in e.out.consumers:
                self.host.append(("out", k))
        self.host_pos = 0
        self.mem_blocked = False

    def finished(self) -> bool:
        return self.nb == len(self.p.entries) and not self.table and self.host_pos == len(self.host)

    def _alloc(self, floats: int) -> int | None:
        n, run = max(blocks(floats), 1), 0
        for i, v in enumerate(self.mem):
            run = run + 1 if v == 0 else 0
            if run == n:
                start = i - n + 1
                self.mem[start] = n
                for j in range(start + 1, i + 1):
                    self.mem[j] = -1
                return start
        return None

    def _free(self, start: int) -> None:
        n = self.mem[start]
        self.mem[start : start + n] = [0] * n

    def build(self) -> bool:
        changed = False
        while len(self.table) < self.depth and self.nb < len(self.p.entries):
            k, e = self.nb, self.p.entries[self.nb]
            sizes = [] if e.op.alu is AluOp.STORE else [
                e.input_operand_size(pos) for pos, o in enumerate(e.inp.operands) if o.is_peer
            ]  # fmt: skip
            if e.op.alu is not AluOp.LOAD:
                sizes.append(e.op.output_size)
            got: list[int] = []
            for s in sizes:
                b = self._alloc(s)
                if b is None:
                    for g in got:
                        self._free(g)
                    self.mem_blocked = True
                    return changed
                got.append(b)
            self.mem_blocked = False
            if e.op.alu is not AluOp.LOAD:
                self.out_buf[k] = got.pop()
            self.bufs[k] = got
            for o in e.inp.operands:
                if o.kind is OperandKind.RELEASE:
                    buf = self.slots.pop(o.index)
                    if e.op.alu is AluOp.LOAD:
                        self.out_buf[k] = buf  # freed after its last send
                    else:
                        self.bufs[k].append(buf)
            if e.out.keep_slot is not None and e.op.alu is not AluOp.LOAD:
                self.slots[e.out.keep_slot] = self.out_buf.pop(k)
            self.missing[k] = [o.peer for o in e.inp.operands if o.is_peer]
            self.pending[k] = list(e.out.consumers)
            self.table.append(k)
            self.nb += 1
            changed = True
        return changed

    def receiving(self) -> int | None:
        return next((k for k in self.table if self.missing[k]), None)

    def head_offers(self, consumer: int) -> bool:
        if not self.table:
            return False
        h = self.table[0]
        return h in self.done and consumer in self.pending[h]

    def compute(self) -> bool:
        changed = False
        for k in self.table:
            e = self.p.entries[k]
            if k in self.done or self.missing[k]:
                continue
            if e.op.uses_alu:
                if k != self._next_alu():
                    continue
                for b in self.bufs.pop(k, []):
                    self._free(b)
                self.alu_next = k + 1
            self.done.add(k)
            changed = True
        return changed

    def _next_alu(self) -> int:
        es = self.p.entries
        k = self.alu_next
        while k < len(es) and not es[k].op.uses_alu:
            k += 1
        return k

    def retire(self) -> bool:
        changed = False
        while self.table and self.table[0] in self.done and not self.pending[self.table[0]]:
            k = self.table.pop(0)
            if k in self.out_buf:
                self._free(self.out_buf.pop(k))
            changed = True
        return changed

    def state(self) -> str:
        parts = [f"built {self.nb}/{len(self.p.entries)}"]
        if self.table:
            h = self.table[0]
            if h in self.done and self.pending[h]:
                who = ", ".join("the host" if c == 0 else f"actor {c}" for c in self.pending[h])
                parts.append(f"head e{h} waits to send to {who}")
            r = self.receiving()
            if r is not None:
                who = ", ".join("the host" if c == 0 else f"actor {c}" for c in self.missing[r])
                parts.append(f"e{r} waits for data from {who}")
        if self.mem_blocked:
            used = sum(1 for v in self.mem if v != 0)
            parts.append(f"e{self.nb} waits for memory ({used}/{len(self.mem)} blocks in use)")
        elif len(self.table) == self.depth and self.nb < len(self.p.entries):
            parts.append(f"table full ({self.depth} entries): e{self.nb} cannot be built")
        if self.host_pos < len(self.host):
            kind, k = self.host[self.host_pos]
            parts.append(f"host waits to {'send e' if kind == 'in' else 'collect e'}{k}")
        return "; ".join(parts)


def dry_run(exp: Experiment, depth: int = RESERVATION_ENTRIES, n_blocks: int = MEMORY_BLOCKS
            ) -> dict[int, DryActor]:  # fmt: skip
    """Run every actor without timing until nothing can move; return the actor states
    (all ``finished()`` when the program completes)."""
    acts = {p.actor: DryActor(p, depth, n_blocks) for p in exp.programs}
    changed = True
    while changed:
        changed = False
        for a, d in acts.items():
            changed |= d.build()
            r = d.receiving()
            while r is not None:
                moved = False
                for src in list(d.missing[r]):
                    if src == 0:
                        ok = d.host_pos < len(d.host) and d.host[d.host_pos][0] == "in"
                        if ok:
                            d.host_pos += 1
                    else:
                        ok = src in acts and acts[src].head_offers(a)
                        if ok:
                            acts[src].pending[acts[src].table[0]].remove(a)
                    if ok:
                        d.missing[r].remove(src)
                        moved = True
                if not moved:
                    break
                changed = True
                r = d.receiving()
            at_host = d.host[d.host_pos][0] if d.host_pos < len(d.host) else ""
            if d.table and d.head_offers(0) and at_host == "out":
                d.pending[d.table[0]].remove(0)
                d.host_pos += 1
                changed = True
            changed |= d.compute()
            changed |= d.retire()
    return acts


__all__ = ["DryActor", "dry_run"]
