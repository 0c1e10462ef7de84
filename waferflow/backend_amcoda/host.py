"""The host threads: one per actor, running its script's records in order (§2.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from waferflow.backend_amcoda.program import ActorProgram, OperandKind
from waferflow.backend_amcoda.sim_state import next_pulse_seen

if TYPE_CHECKING:
    from waferflow.backend_amcoda.machine import Machine


class HostThread:
    """The host thread of one actor: its records in order (§2.4)."""

    def __init__(self, m: Machine, prog: ActorProgram, records: list[tuple[str, int]]) -> None:
        self.m = m
        self.aid = prog.actor
        self.records = records  # ("in", packages) | ("out", 0)
        self.pos = 0
        self.req_from = -1  # held req: written at req_from, visible until header_at
        self.header_at = -1
        self.packages = 0
        self.ack_at = -1  # ack to the actor's req, visible until ack_until
        self.ack_until = -1
        self.phase = "idle"
        self.done_at = -1
        self.next_at = -1  # the cycle a timed phase ends

    # views for the actor
    def req_seen(self, t: int) -> bool:
        return self.phase == "req" and self.req_from <= t - 1

    def next_req_seen(self, t: int) -> int | None:
        return max(t, self.req_from + 1) if self.phase == "req" else None

    def header_seen(self, t: int) -> int | None:
        return self.packages if self.header_at == t - 1 else None

    def ack_seen(self, t: int) -> bool:
        """The ack stays on the link until the next record's loop-top write of 0."""
        return 0 <= self.ack_at <= t - 1 and (self.ack_until < 0 or t <= self.ack_until)

    def begin_record(self, t: int) -> None:
        """Start the record at ``pos`` in cycle ``t`` (its loop-top write of 0 is at t)."""
        if self.ack_at >= 0 and self.ack_until < 0:
            self.ack_until = t  # the 0 written at t replaces the ack from t+1
        if self.pos >= len(self.records):
            self.phase, self.done_at = "done", t
            return
        kind, pk = self.records[self.pos]
        if kind == "in":
            self.phase, self.req_from, self.packages = "req", t, pk
            self.m.wake(self.aid, t + 1)
        else:
            self.phase = "collect"
            self.m.wake(-self.aid, t)

    def step(self, t: int) -> list[int]:
        """Advance in cycle t; return future cycles to be stepped in."""
        links = self.m.links
        if self.phase == "req":
            if links.ack_seen(self.aid, 0, t):
                self.header_at = t  # trans_data header written in the cycle the ack is seen
                self.phase = "data"
                self.next_at = t + self.packages + 1
                self.m.wake(self.aid, t + 1)
                self.pos += 1
                return [self.next_at]
            return []
        if self.phase in ("data", "collect_data"):
            if t == self.next_at:
                self.begin_record(t)
                return [t + 1] if self.phase != "done" else []
            return [self.next_at] if t < self.next_at else []
        if self.phase == "collect":
            if links.req_seen(self.aid, 0, t):
                self.ack_at, self.ack_until = t, -1
                self.phase = "collect_hdr"
                self.m.wake(self.aid, t + 1)
                return []
            tr = links.trains.get((self.aid, 0))
            nxt = next_pulse_seen(tr, t + 1) if tr is not None else None
            return [nxt] if nxt is not None else []
        if self.phase == "collect_hdr":
            p = links.header_seen(self.aid, 0, t)
            if p is not None:
                self.phase = "collect_data"
                self.next_at = t + p + 1
                self.pos += 1
                return [self.next_at]
            return []
        return []


def host_records(prog: ActorProgram) -> list[tuple[str, int]]:
    """The host script's transfers in program order (§2.5): inputs and outputs interleaved."""
    recs: list[tuple[str, int]] = []
    ins = iter(prog.host_inputs)
    for e in prog.entries:
        for o in e.inp.operands:
            if o.kind is OperandKind.HOST:
                recs.append(("in", next(ins).packages))
        if 0 in e.out.consumers:
            recs.append(("out", 0))
    return recs
