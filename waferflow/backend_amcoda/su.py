"""The scheduling unit (SU) of one actor, with its memory manager and ALU.

``Actor`` holds an actor's reservation table, ports, memory blocks and ALU state, and
``step(t)`` runs the SU's seven steps for cycle ``t`` in the seed's order (data send,
out control, ALU completion, ALU issue, data receive, in control, entry build; then
memory); ``timers(t)`` says in which later cycles it must be stepped again. The timing
rules are listed in ``machine.py``.

It is separate from ``machine.py`` for the reason ``host.py`` is: one actor's SU is a
model of its own; the machine owns the links, the host threads and the event loop
that steps them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from waferflow.backend_amcoda.program import (
    MEMORY_BLOCKS,
    RESERVATION_ENTRIES,
    ActorProgram,
    AluOp,
    OperandKind,
    OutMode,
    blocks,
)
from waferflow.backend_amcoda.sim_state import (
    ALLOC_RETRY,
    BUILD_CYCLES,
    CS,
    HOST_HEADER_CYCLE,
    OS,
    PS,
    Build,
    Cte,
    Ev,
    Pte,
    Rte,
    Stream,
    Train,
    next_pulse_seen,
)
from waferflow.errors import PlanError

if TYPE_CHECKING:
    from waferflow.backend_amcoda.machine import Machine


class Actor:
    """One actor: SU, memory manager and ALU."""

    def __init__(self, m: Machine, prog: ActorProgram, start: int) -> None:
        self.m = m
        self.aid = prog.actor
        self.prog = prog
        self.start = start  # cycle the actor sees ``start``
        self.ports_in: list[Pte | None] = [None] * m.ports
        self.ports_out: list[Stream | None] = [None] * m.ports
        self.rt: list[Rte] = []
        self.producer_pt = 0
        self.alu_in_pt = 0
        self.alu_out_pt = 0
        self.alu_finish = -1  # cycle the current op's completion is seen
        self.alu_ready = 0  # first cycle the issue step may run again
        self.alu_entry = -1
        self.next_build = 0
        self.build: Build | None = None
        self._pending_bufs: list[int] = []  # buffers allocated for the entry being built
        self.slots: dict[int, int] = {}  # valid slot -> first block
        self.blocks = [0] * MEMORY_BLOCKS  # 0 free; else owner's run length at its start, -1 inside
        self.used = 0
        self.peak = 0
        self.mem_version = 0
        self.releases: list[tuple[int, list[int]]] = []  # (cycle applied, first blocks)
        self.log: list[tuple[int, Ev, int, int]] = []  # (cycle, event, entry index, peer)
        self.mem_log: list[tuple[int, int]] = []  # (cycle, blocks in use)
        # (header cycle, port-free cycle, entry, consumers, packages) of every stream sent
        self.streams: list[tuple[int, int, int, tuple[int, ...], int]] = []
        self.log.append((HOST_HEADER_CYCLE + 1, Ev.INIT, -1, 0))
        self.log.append((start, Ev.START, -1, 0))

    # -- helpers ---------------------------------------------------------------------
    def _ev(self, t: int, ev: Ev, idx: int = -1, peer: int = 0) -> None:
        self.log.append((t, ev, idx, peer))

    def done(self) -> bool:
        return self.next_build >= len(self.prog.entries) and not self.rt and self.build is None

    def _alloc(self, sizes: list[int]) -> list[int] | None:
        """First-fit contiguous runs of blocks for each size, all or nothing."""
        got: list[int] = []
        for floats in sizes:
            n = max(blocks(floats), 1)
            start, run = -1, 0
            for i in range(MEMORY_BLOCKS):
                if self.blocks[i] == 0:
                    if run == 0:
                        start = i
                    run += 1
                    if run >= n:
                        break
                else:
                    run = 0
            if run < n:
                for s in got:
                    self._free(s)
                return None
            self.blocks[start] = n
            for i in range(start + 1, start + n):
                self.blocks[i] = -1
            self.used += n
            got.append(start)
        return got

    def _free(self, start: int) -> None:
        n = self.blocks[start]
        if n <= 0:
            raise PlanError(f"actor {self.aid}: freeing memory block {start} that is not a buffer")
        for i in range(start, start + n):
            self.blocks[i] = 0
        self.used -= n

    def _check_ack_hazard(self, peer: int, t: int) -> None:
        """Hazard (a): an ack written while the head sends to the same peer is lost."""
        if not self.rt or self.rt[0].out_state != OS.SENDING:
            return
        for c in self.rt[0].consumers:
            if c.dst == peer and c.state in (CS.WAIT_ACK, CS.SENDING):
                raise PlanError(
                    f"hazard (a), §6.3: in cycle {t} actor {self.aid} acks "
                    f"{'the host' if peer == 0 else f'actor {peer}'} while its head entry "
                    f"e{self.rt[0].index} is sending to it; the ack would be overwritten"
                )

    # -- one cycle ---------------------------------------------------------------------
    def step(self, t: int) -> bool:
        """Run every SU step for cycle t; return True if any state changed."""
        ch = self._data_send(t)
        ch |= self._out_control(t)
        ch |= self._alu_complete(t)
        ch |= self._alu_issue(t)
        ch |= self._data_receive(t)
        ch |= self._in_control(t)
        ch |= self._config(t)
        ch |= self._memory(t)
        return ch

    def _data_send(self, t: int) -> bool:
        ch = False
        m = self.m
        if self.rt and self.producer_pt < len(self.rt):
            for p in self.rt[self.producer_pt].producers:
                if p.state == PS.RECEIVED_REQ:
                    self._check_ack_hazard(p.src, t)
                    m.links.acks[(self.aid, p.src)] = t
                    m.wake(p.src if p.src else -self.aid, t + 1)
                    p.state = PS.SENT_ACK
                    self._ev(t, Ev.ACK, self.rt[self.producer_pt].index, p.src)
                    ch = True
        if self.rt and self.rt[0].out_state == OS.SENDING:
            head = self.rt[0]
            for i, s in enumerate(self.ports_out):
                if s is not None and s.end == t:
                    for c in s.consumers:
                        c.state = CS.FINISH
                    self.ports_out[i] = None
                    self._ev(t, Ev.SEND_END, head.index, s.consumers[0].dst)
                    ch = True
        return ch

    def _out_control(self, t: int) -> bool:
        if not self.rt:
            return False
        ch = False
        m = self.m
        head = self.rt[0]
        if head.out_state == OS.SENDING:
            for c in head.consumers:
                if c.state == CS.WAIT_REQ:
                    c.state = CS.WAIT_ACK
                    tr = Train(t + 1)
                    m.links.trains[(self.aid, c.dst)] = tr
                    m.wake(c.dst if c.dst else -self.aid, t + 2)
                    ch = True
                elif c.state == CS.WAIT_ACK:
                    seen = (
                        m.hosts[self.aid].ack_seen(t)
                        if c.dst == 0
                        else m.links.ack_seen(c.dst, self.aid, t)
                    )
                    if seen:
                        c.state = CS.WAIT_SEND
                        m.links.trains[(self.aid, c.dst)].stop = t
                        self._ev(t, Ev.CONSUMER_ACK, head.index, c.dst)
                        ch = True
            bcast = head.entry.out.mode is OutMode.BROADCAST
            for i in range(len(self.ports_out)):
                if self.ports_out[i] is not None:
                    continue
                take = [c for c in head.consumers if c.state == CS.WAIT_SEND]
                if not take:
                    break
                if not bcast:
                    take = take[:1]
                s = Stream(take, t + 1, t + 2 + head.packages)
                self.ports_out[i] = s
                self.streams.append(
                    (t + 1, s.end, head.index, tuple(c.dst for c in take), head.packages)
                )
                for c in take:
                    c.state = CS.SENDING
                    m.links.headers[(self.aid, c.dst)] = (t + 1, head.packages)
                    m.wake(c.dst if c.dst else -self.aid, t + 2)
                self._ev(t + 1, Ev.SEND_START, head.index, take[0].dst)
                ch = True
            if all(c.state == CS.FINISH for c in head.consumers):
                if head.out_temp:
                    self.releases.append((t + 1, [head.out_buf]))
                head.out_state = OS.FINISH
                ch = True
        if head.out_state == OS.FINISH:
            self.rt.pop(0)
            self._ev(t, Ev.ERASED, head.index)
            if self.producer_pt > 0:
                self.producer_pt -= 1
            if self.alu_in_pt > 0:
                self.alu_in_pt -= 1
            if self.alu_out_pt > 0:
                self.alu_out_pt -= 1
            ch = True
        return ch

    def _alu_complete(self, t: int) -> bool:
        if t != self.alu_finish:
            return False
        if self.alu_out_pt >= self.alu_in_pt:
            raise PlanError(f"actor {self.aid}: an ALU completion in cycle {t} found no entry")
        e = self.rt[self.alu_out_pt]
        if e.out_state != OS.PRODUCING and self.m.match_completions:
            # a completion pointer that skips STORE/LOAD entries: the op that ended
            while e.out_state != OS.PRODUCING:
                self.alu_out_pt += 1
                e = self.rt[self.alu_out_pt]
        if e.out_state != OS.PRODUCING:
            msg = (
                f"hazard (b), §6.3: in cycle {t} the ALU completion of actor {self.aid}'s "
                f"e{self.alu_entry} lands on e{e.index} ({e.entry.op.alu.name}), which is still "
                f"in the table; the completion is lost"
            )
            if not self.m.emulate_lost_completions:
                raise PlanError(msg)
            self.m.hazards.append(msg)  # as the SU does: the pulse is spent on e
            self.alu_out_pt += 1
            return True
        e.out_state = OS.SENDING
        self._ev(t, Ev.ALU_END, e.index)
        freed = [p.buf for p in e.producers if p.freed_by_alu]
        self.releases.append((t + 1, freed))  # in_release is asserted even with nothing to free
        self.alu_out_pt += 1
        return True

    def _alu_issue(self, t: int) -> bool:
        if t < self.alu_ready or self.alu_in_pt >= self.producer_pt or t < self.alu_finish:
            return False
        e = self.rt[self.alu_in_pt]
        if e.out_state == OS.WAIT_PRODUCE:
            self.alu_finish = t + e.entry.alu_cycles
            self.alu_entry = e.index
            e.out_state = OS.PRODUCING
            self._ev(t, Ev.ALU_START, e.index)
            self.alu_in_pt += 1
            self.alu_ready = t + 2
            return True
        if e.out_state > OS.WAIT_PRODUCE:  # a STORE or LOAD: skip it, one per cycle
            self.alu_in_pt += 1
            self.alu_ready = t + 1
            return True
        return False

    def _data_receive(self, t: int) -> bool:
        ch = False
        for i, p in enumerate(self.ports_in):
            if p is not None and p.state == PS.RECEIVING and p.recv_end == t:
                p.state = PS.READY
                self.ports_in[i] = None
                self._ev(t, Ev.RECV_END, self.rt[self.producer_pt].index, p.src)
                ch = True
        return ch

    def _in_control(self, t: int) -> bool:
        if not self.rt or self.producer_pt >= len(self.rt):
            return False
        ch = False
        m = self.m
        e = self.rt[self.producer_pt]
        for p in e.producers:
            if p.state == PS.IDLE:
                seen = (
                    m.hosts[self.aid].req_seen(t)
                    if p.src == 0
                    else m.links.req_seen(p.src, self.aid, t)
                )
                if seen and None in self.ports_in:
                    self.ports_in[self.ports_in.index(None)] = p
                    p.state = PS.RECEIVED_REQ
                    self._ev(t, Ev.RECV_REQ, e.index, p.src)
                    ch = True
            elif p.state == PS.SENT_ACK:
                pk = (
                    m.hosts[self.aid].header_seen(t)
                    if p.src == 0
                    else m.links.header_seen(p.src, self.aid, t)
                )
                if pk is not None:
                    p.state = PS.RECEIVING
                    p.recv_end = t + pk
                    self._ev(t, Ev.RECV_START, e.index, p.src)
                    ch = True
        if all(p.state >= PS.READY for p in e.producers):
            alu = e.entry.op.alu
            if alu is AluOp.LOAD:
                e.producers[0].state = PS.FINISH
                e.out_state = OS.SENDING
            elif alu is AluOp.STORE:
                for p in e.producers:
                    p.state = PS.FINISH
                e.out_state = OS.FINISH
            else:
                e.out_state = OS.WAIT_PRODUCE
            self.producer_pt += 1
            ch = True
        return ch

    def _config(self, t: int) -> bool:
        if t <= self.start or self.next_build >= len(self.prog.entries):
            return False
        ch = False
        b = self.build
        if b is not None and b.ready_at == t:
            self._push(t)
            self.build = None
            ch = True
        if (
            self.build is None
            and self.next_build < len(self.prog.entries)
            and len(self.rt) < RESERVATION_ENTRIES
        ):
            e = self.prog.entries[self.next_build]
            extra = e.instruction_lines - 3
            self.build = Build(t, t + BUILD_CYCLES - 1 + extra)
            ch = True
        return ch

    def _push(self, t: int) -> None:
        idx = self.next_build
        e = self.prog.entries[idx]
        bufs = self._pending_bufs
        producers: list[Pte] = []
        k = 0
        for pos, o in enumerate(e.inp.operands):
            if o.is_peer:
                buf = -1
                if e.op.alu is not AluOp.STORE:
                    buf = bufs[k]
                    k += 1
                producers.append(Pte(o.peer, -1, False, e.input_operand_size(pos), PS.IDLE, buf))
            else:
                if o.index not in self.slots:
                    raise PlanError(
                        f"actor {self.aid} e{idx} reads slot s{o.index}, which is invalid"
                    )
                rel = o.kind is OperandKind.RELEASE
                producers.append(Pte(-1, o.index, rel, 0, PS.READY, self.slots[o.index]))
        rte = Rte(idx, e, producers, [Cte(c) for c in e.out.consumers], packages=e.out_packages)
        if e.op.alu is AluOp.LOAD:
            src = producers[0]
            rte.out_buf = src.buf
            rte.out_temp = src.release  # a released slot is freed after the last send
            src.buf = -1
        else:
            rte.out_buf = bufs[k]
        for p in producers:  # a released slot becomes invalid when its reader is built
            if p.release:
                del self.slots[p.slot]
        keep_slot = e.out.keep_slot
        if e.op.alu is not AluOp.LOAD:
            if keep_slot is not None:
                if keep_slot in self.slots:
                    raise PlanError(
                        f"actor {self.aid} e{idx} writes slot s{keep_slot}, still valid"
                    )
                self.slots[keep_slot] = rte.out_buf
            else:
                rte.out_temp = True
        self.rt.append(rte)
        self.next_build += 1
        self._ev(t, Ev.BUILT, idx)
        if self.next_build == len(self.prog.entries):
            self._ev(t, Ev.LOADED, idx)

    def _memory(self, t: int) -> bool:
        ch = False
        due = [r for r in self.releases if r[0] == t]
        if due:
            self.releases = [r for r in self.releases if r[0] != t]
            for _, starts in due:
                for s in starts:
                    self._free(s)
            self.mem_version += 1
            self.mem_log.append((t, self.used))
            self._ev(t, Ev.MEM)
            ch = True
        b = self.build
        if b is None or b.ready_at >= 0:
            return ch
        if b.try_at < t:  # attempts skipped while memory was unchanged would have failed
            b.try_at += -(-(t - b.try_at) // ALLOC_RETRY) * ALLOC_RETRY
        if b.try_at != t:
            return ch
        e = self.prog.entries[self.next_build]
        sizes = []
        if e.op.alu is not AluOp.STORE:
            sizes += [
                e.input_operand_size(pos) for pos, o in enumerate(e.inp.operands) if o.is_peer
            ]
        if e.op.alu is not AluOp.LOAD:
            sizes.append(e.op.output_size)
        got = self._alloc(sizes) if sizes else []
        if got is None:
            b.failed_version = self.mem_version
            b.try_at = t + ALLOC_RETRY
            return ch
        self._pending_bufs = got
        b.ready_at = t + 1
        self.peak = max(self.peak, self.used)
        self.mem_log.append((t, self.used))
        self._ev(t, Ev.MEM)
        return True

    def timers(self, t: int) -> list[int]:
        """Future cycles in which this actor must be stepped even if nothing reaches it."""
        out: list[int] = []
        if self.alu_finish > t:
            out.append(self.alu_finish)
        if self.alu_ready > t:
            out.append(self.alu_ready)
        out += [s.end for s in self.ports_out if s is not None and s.end > t]
        out += [p.recv_end for p in self.ports_in if p is not None and p.state == PS.RECEIVING]
        out += [r[0] for r in self.releases if r[0] > t]
        b = self.build
        if b is not None:
            if b.ready_at > t:
                out.append(b.ready_at)
            elif b.ready_at < 0 and b.failed_version != self.mem_version:
                k = max(0, -(-(t + 1 - b.try_at) // ALLOC_RETRY))
                out.append(b.try_at + k * ALLOC_RETRY)
        if t < self.start + 1:
            out.append(self.start + 1)
        # the entry being filled waits for a producer's next visible request
        if self.rt and self.producer_pt < len(self.rt) and None in self.ports_in:
            for p in self.rt[self.producer_pt].producers:
                if p.state != PS.IDLE:
                    continue
                if p.src == 0:
                    nxt = self.m.hosts[self.aid].next_req_seen(t + 1)
                else:
                    tr = self.m.links.trains.get((p.src, self.aid))
                    nxt = next_pulse_seen(tr, t + 1) if tr is not None else None
                if nxt is not None:
                    out.append(nxt)
        return out


__all__ = ["Actor"]
