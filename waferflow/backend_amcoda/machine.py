"""Cycle-level model of the seed machine, advanced from event to event.

Each actor's scheduling unit (SU) is modelled as the seed's seven cooperating
steps, run once per cycle in a fixed order (data send, out control, ALU
completion, ALU issue, data receive, in control, entry build), with its memory
manager and ALU beside it. Everything that crosses a module boundary (links,
the ALU's start/busy/finish lines, memory allocate/release) is a signal: a value
written in cycle t is read in cycle t+1. An actor is stepped only in cycles where
something can change; long ALU operations and data streams are timers, and a
producer's periodic request is a pulse train evaluated in closed form, so a
2.4-million-cycle run costs a few thousand steps.

The timing rules (all from amcoda-program-format.md and checked against the
authors' published event logs, see docs/amcoda.md):

- host: the ins_init header lands in cycle 21; the actor sees ``start`` in cycle
  23 + n (n instruction lines); host records then run back to back.
- build: an entry takes 5 cycles (Out, In, Op, allocate, built), one more per
  continue line; allocation is retried every 3 cycles while memory is short.
- request: a producer pulses ``req`` every 5 cycles from the cycle after its entry
  is at the head ready to send (the host holds it); the consumer accepts a pulse
  when the entry it is filling lists that producer and a write port is free.
- ack one cycle after the accepted request; the producer sees it one cycle later,
  assigns a read port, and writes the header the next cycle; then P packages, one
  per cycle, and the port frees a cycle after the last (P + 1 busy cycles).
- ALU: R + C + W + 2 cycles from issue to completion; the next op can issue in
  the completion cycle.

One actor's SU is ``su.Actor``, its host thread ``host.HostThread``; this module is
the machine that owns them, the links between them and the event loop.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from waferflow.backend_amcoda.host import HostThread, host_records
from waferflow.backend_amcoda.program import MEMORY_BLOCKS, Experiment
from waferflow.backend_amcoda.sim_state import CS, HOST_HEADER_CYCLE, OS, PS, Ev, Links
from waferflow.backend_amcoda.su import Actor
from waferflow.errors import PlanError

__all__ = ["Ev", "Machine", "MachineRun"]


@dataclass
class MachineRun:
    """Raw outcome of a run: per-actor event logs, memory traces, the end cycle."""

    logs: dict[int, list[tuple[int, Ev, int, int]]]
    mem_logs: dict[int, list[tuple[int, int]]]
    peaks: dict[int, int]
    end_cycle: int
    host_done: dict[int, int] = field(default_factory=dict)
    streams: dict[int, list[tuple[int, int, int, tuple[int, ...], int]]] = field(
        default_factory=dict
    )
    hazards: tuple[str, ...] = ()  # lost ALU completions (only when emulated)
    stuck: tuple[str, ...] = ()  # actors that never finished (only when emulated)


class Machine:
    """The whole seed machine running one experiment."""

    def __init__(
        self,
        exp: Experiment,
        max_cycles: int = 10**9,
        emulate_lost_completions: bool = False,
        dense_until: int = 0,
        match_completions: bool = False,
    ) -> None:
        self.exp = exp
        # hazard (b) repaired: an ALU completion goes to the op that ended, past any
        # STORE/LOAD still in the table (not the seed's SU; a reference for the plan)
        self.match_completions = match_completions
        # step every actor and host in every cycle up to dense_until (a check that
        # skipping idle cycles never misses a change; slow, for small experiments)
        self.dense_until = dense_until
        self.emulate_lost_completions = emulate_lost_completions
        self.hazards: list[str] = []
        self.ports = exp.mem_ports
        self.max_cycles = max_cycles
        self.links = Links()
        self._heap: list[tuple[int, int]] = []
        self._queued: set[tuple[int, int]] = set()
        self.actors: dict[int, Actor] = {}
        self.hosts: dict[int, HostThread] = {}
        for prog in exp.programs:
            n = prog.instruction_lines
            start = HOST_HEADER_CYCLE + n + 3
            self.actors[prog.actor] = Actor(self, prog, start)
            self.hosts[prog.actor] = HostThread(self, prog, host_records(prog))
            self.hosts[prog.actor].pos = 0
            self.wake(-prog.actor, start)
            self.wake(prog.actor, start + 1)

    def wake(self, who: int, cycle: int) -> None:
        """Step ``who`` (actor id, or -id for its host thread) in ``cycle``."""
        key = (cycle, who)
        if key not in self._queued:
            self._queued.add(key)
            heapq.heappush(self._heap, key)

    def run(self) -> MachineRun:
        started: set[int] = set()
        dense_done = 0
        while self._heap:
            t, who = heapq.heappop(self._heap)
            self._queued.discard((t, who))
            if t < self.dense_until and t >= dense_done:
                dense_done = t + 1
                for i in self.actors:
                    self.wake(i, t + 1)
                    if i in started:
                        self.wake(-i, t + 1)
            if t > self.max_cycles:
                raise PlanError(f"experiment {self.exp.name} ran past {self.max_cycles} cycles")
            if who < 0:
                h = self.hosts[-who]
                if -who not in started:
                    started.add(-who)
                    h.begin_record(t)
                    continue
                for c in h.step(t):
                    self.wake(who, c)
            else:
                a = self.actors[who]
                if a.step(t):
                    self.wake(who, t + 1)
                for c in a.timers(t):
                    self.wake(who, c)
        stuck = self._stuck()
        if stuck and not self.hazards:
            raise PlanError(
                f"experiment {self.exp.name} deadlocks (no actor can make progress):\n  "
                + "\n  ".join(stuck)
            )
        logs = {i: sorted(a.log, key=lambda x: x[0]) for i, a in self.actors.items()}
        end = max(ev[0] for lg in logs.values() for ev in lg)
        return MachineRun(
            logs,
            {i: a.mem_log for i, a in self.actors.items()},
            {i: a.peak for i, a in self.actors.items()},
            end,
            {i: h.done_at for i, h in self.hosts.items()},
            {i: a.streams for i, a in self.actors.items()},
            tuple(self.hazards),
            tuple(stuck),
        )

    def _stuck(self) -> list[str]:
        stuck = []
        for i, a in self.actors.items():
            h = self.hosts[i]
            if not (a.done() and h.phase == "done" and a.used == 0):
                stuck.append(_describe_stuck(a, h))
        return stuck


def _describe_stuck(a: Actor, h: HostThread) -> str:
    parts = [f"actor {a.aid}: built {a.next_build}/{len(a.prog.entries)}"]
    if a.build is not None and a.build.ready_at < 0:
        parts.append(f"waiting for memory ({a.used}/{MEMORY_BLOCKS} blocks in use)")
    if a.rt:
        head = a.rt[0]
        parts.append(f"head e{head.index} {head.entry.op.alu.name} {head.out_state.name}")
        waiting = [c.dst for c in head.consumers if c.state in (CS.WAIT_REQ, CS.WAIT_ACK)]
        if head.out_state == OS.SENDING and waiting:
            parts.append(f"waiting for acks from {waiting}")
        if a.producer_pt < len(a.rt):
            e = a.rt[a.producer_pt]
            srcs = [p.src for p in e.producers if p.state < PS.READY]
            parts.append(f"filling e{e.index} from {srcs}")
    elif a.used and a.next_build == len(a.prog.entries):
        parts.append(f"{a.used} memory blocks never freed")
    if h.phase != "done":
        parts.append(f"host at record {h.pos} ({h.phase})")
    return "; ".join(parts)
