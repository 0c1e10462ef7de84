"""Simulate an AMCoDA experiment and report it as the authors' simulator does.

``simulate_experiment(exp)`` runs the cycle-level machine model (``machine.py``)
and returns an ``AmcodaResult``: the batch time (the latest event over all
actors, and actor 1's last stamp, which is what the authors' ``Total_time``
reports), per-actor compute / communication / overlap as in their report
(§6.1: compute = sum of ALU intervals; communication = union of send and
receive intervals; overlap = compute + communication - union of both), per-entry
times, transfers, memory peaks, and a Chrome trace.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from waferflow.backend_amcoda.machine import Ev, Machine, MachineRun
from waferflow.backend_amcoda.program import CLOCK_NS, MEMORY_BLOCKS, Experiment
from waferflow.fileio import write_text


@dataclass(frozen=True, slots=True)
class Interval:
    start_ns: int
    end_ns: int

    @property
    def ns(self) -> int:
        return self.end_ns - self.start_ns


def _union(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a < out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(intervals: Iterable[tuple[int, int]]) -> int:
    return sum(b - a for a, b in _union(intervals))


@dataclass(frozen=True, slots=True)
class ActorStats:
    """One actor's report: the authors' timing report fields, in ns."""

    actor: int
    role: str
    layer: str
    compute_ns: int  # sum of ALU intervals
    comm_ns: int  # union of send and receive intervals
    overlap_ns: int  # compute + comm - union(compute, comm)
    busy_ns: int  # union(compute, comm): the report's Sum_time
    last_ns: int  # the actor's last log stamp
    peak_blocks: int  # most 64 Ki-float memory blocks in use at once
    compute_periods: tuple[Interval, ...]
    comm_periods: tuple[Interval, ...]

    def utilisation(self, batch_ns: int) -> float:
        return self.compute_ns / batch_ns if batch_ns else 0.0


@dataclass(frozen=True, slots=True)
class EntryTiming:
    """When one entry was built, computed, sent and retired (ns; -1 if never)."""

    actor: int
    index: int
    label: str
    op: str
    built_ns: int
    alu_start_ns: int
    alu_end_ns: int
    send_start_ns: int
    send_end_ns: int
    erased_ns: int


@dataclass(frozen=True, slots=True)
class Transfer:
    """One data stream: header to port release on the sender's side."""

    src: int
    dsts: tuple[int, ...]  # 0 = host
    entry: int
    start_ns: int
    end_ns: int
    packages: int


@dataclass(frozen=True, slots=True)
class LayerStats:
    """A layer's figures: those of its first actor (replica or part 0), and all actors."""

    name: str
    compute_ns: int
    comm_ns: int
    overlap_ns: int
    actors: tuple[ActorStats, ...]


@dataclass(frozen=True)
class AmcodaResult:
    experiment: str
    mem_ports: int
    batch_ns: int  # the latest event over all actors
    actor1_last_ns: int  # actor 1's last stamp: the authors' Total_time
    actors: tuple[ActorStats, ...]
    entries: tuple[EntryTiming, ...]
    transfers: tuple[Transfer, ...]
    memory: dict[int, tuple[tuple[int, int], ...]]  # actor -> (ns, blocks in use) after each change
    hazards: tuple[str, ...] = ()  # ALU completions lost (only when emulated)
    stuck: tuple[str, ...] = ()  # actors that never finished (only when emulated)

    @property
    def complete(self) -> bool:
        """Every entry retired, every host record ran, all memory returned."""
        return not self.stuck

    def actor(self, i: int) -> ActorStats:
        return self.actors[i - 1]

    def layer_names(self) -> list[str]:
        names: list[str] = []
        for a in self.actors:
            if a.layer not in names:
                names.append(a.layer)
        return names

    def layer(self, name: str) -> LayerStats:
        members = tuple(a for a in self.actors if a.layer == name)
        if not members:
            raise KeyError(f"no layer {name!r}; layers are {self.layer_names()}")
        first = members[0]
        return LayerStats(name, first.compute_ns, first.comm_ns, first.overlap_ns, members)

    def summary(self) -> str:
        lines = [
            f"{self.experiment}: batch {self.batch_ns / 1e6:.6f} ms "
            f"(actor 1 last stamp {self.actor1_last_ns} ns), MemWidth {self.mem_ports}"
        ]
        for a in self.actors:
            lines.append(
                f"  A{a.actor:<2} {a.role:<18} compute {a.compute_ns:>9} comm {a.comm_ns:>8} "
                f"overlap {a.overlap_ns:>7} util {a.utilisation(self.batch_ns):6.1%} "
                f"peak {a.peak_blocks}/{MEMORY_BLOCKS}"
            )
        lines += [f"  ! {h}" for h in self.hazards]
        lines += [f"  ! never finished: {s}" for s in self.stuck]
        return "\n".join(lines)

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Write a Chrome / Perfetto trace: per actor, rows for the ALU, receives and sends,
        and a memory counter."""
        events: list[dict[str, object]] = []
        for a in self.actors:
            events.append({"ph": "M", "name": "process_name", "pid": a.actor, "tid": 0,
                           "args": {"name": f"A{a.actor} {a.role}"}})  # fmt: skip
            for tid, name in ((0, "ALU"), (1, "receive"), (2, "send")):
                events.append({"ph": "M", "name": "thread_name", "pid": a.actor, "tid": tid,
                               "args": {"name": name}})  # fmt: skip
        for e in self.entries:
            if e.alu_start_ns >= 0 and e.alu_end_ns >= 0:
                events.append(
                    _span(e.label or e.op, e.actor, 0, e.alu_start_ns, e.alu_end_ns, "alu")
                )
        for t in self.transfers:
            label = self.entries_of(t.src)[t.entry].label or f"e{t.entry}"
            dst = ",".join("host" if d == 0 else f"A{d}" for d in t.dsts)
            events.append(
                _span(
                    f"{label} -> {dst}", t.src, 2, t.start_ns, t.end_ns, "send", packages=t.packages
                )
            )
            for d in t.dsts:
                if d:
                    events.append(
                        _span(
                            f"{label} from A{t.src}",
                            d,
                            1,
                            t.start_ns + CLOCK_NS,
                            t.end_ns,
                            "recv",
                            packages=t.packages,
                        )
                    )
        for i, trace in self.memory.items():
            for ns, used in trace:
                events.append({"ph": "C", "name": "memory blocks", "pid": i, "tid": 0,
                               "ts": ns / 1000, "args": {"blocks": used}})  # fmt: skip
        return write_text(
            path, json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}, indent=0)
        )

    def entries_of(self, actor_id: int) -> list[EntryTiming]:
        return [e for e in self.entries if e.actor == actor_id]


def _span(
    name: str, pid: int, tid: int, a: int, b: int, cat: str, **args: object
) -> dict[str, object]:
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid,
            "ts": a / 1000, "dur": (b - a) / 1000, "args": args}  # fmt: skip


def _actor_stats(exp: Experiment, run: MachineRun, aid: int) -> ActorStats:
    log = run.logs[aid]
    prog = exp.program(aid)
    compute: list[tuple[int, int]] = []
    comm: list[tuple[int, int]] = []
    alu_start = -1
    recv_open: dict[tuple[int, int], int] = {}
    for t, ev, idx, peer in log:
        if ev is Ev.ALU_START:
            alu_start = t
        elif ev is Ev.ALU_END:
            compute.append((alu_start, t))
        elif ev is Ev.RECV_START:
            recv_open[(idx, peer)] = t
        elif ev is Ev.RECV_END:
            comm.append((recv_open.pop((idx, peer)), t))
    comm += [(s, e) for s, e, _, _, _ in run.streams[aid]]
    compute_c = sum(b - a for a, b in compute)
    comm_c = _length(comm)
    busy_c = _length(compute + comm)
    ns = CLOCK_NS
    return ActorStats(
        aid,
        prog.role,
        prog.layer,
        compute_c * ns,
        comm_c * ns,
        (compute_c + comm_c - busy_c) * ns,
        busy_c * ns,
        max(t for t, *_ in log) * ns,
        run.peaks[aid],
        tuple(Interval(a * ns, b * ns) for a, b in compute),
        tuple(Interval(a * ns, b * ns) for a, b in _union(comm)),
    )


def _entry_timings(exp: Experiment, run: MachineRun, aid: int) -> list[EntryTiming]:
    prog = exp.program(aid)
    n = len(prog.entries)
    rows = {k: [-1] * 6 for k in range(n)}  # built, alu start, alu end, send start, end, erased
    col = {Ev.BUILT: 0, Ev.ALU_START: 1, Ev.ALU_END: 2, Ev.ERASED: 5}
    for t, ev, idx, _ in run.logs[aid]:
        if ev in col and idx >= 0:
            rows[idx][col[ev]] = t
    for s, e, idx, _, _ in run.streams[aid]:
        r = rows[idx]
        r[3] = s if r[3] < 0 else min(r[3], s)
        r[4] = max(r[4], e)
    out = []
    for k, e in enumerate(prog.entries):
        r = [x * CLOCK_NS if x >= 0 else -1 for x in rows[k]]
        out.append(EntryTiming(aid, k, e.label, str(e.op), *r))
    return out


def simulate_experiment(
    exp: Experiment,
    *,
    emulate_lost_completions: bool = False,
    max_cycles: int = 10**9,
    match_completions: bool = False,
) -> AmcodaResult:
    """Run ``exp`` to completion on the seed machine model.

    Raises ``PlanError`` on a deadlock, on hazard (a), or on hazard (b) (an ALU
    completion landing on a STORE/LOAD still in the table). With
    ``emulate_lost_completions`` hazard (b) is reproduced as the authors' machine
    behaves (the completion is lost, the op never finishes) and the result lists
    the lost completions and the actors that never finished. With
    ``match_completions`` the completion goes to the op that ended instead (a
    scheduling unit without hazard (b)): the timing of the program as written, for
    the plans whose template the seed's SU would break (dtt4 at MemWidth 1)."""
    run = Machine(
        exp, max_cycles, emulate_lost_completions, match_completions=match_completions
    ).run()
    ids = [p.actor for p in exp.programs]
    actors = tuple(_actor_stats(exp, run, i) for i in ids)
    entries = tuple(e for i in ids for e in _entry_timings(exp, run, i))
    transfers = tuple(
        Transfer(i, dsts, idx, s * CLOCK_NS, e * CLOCK_NS, pk)
        for i in ids
        for s, e, idx, dsts, pk in run.streams[i]
    )
    memory = {i: tuple((t * CLOCK_NS, u) for t, u in run.mem_logs[i]) for i in ids}
    return AmcodaResult(
        exp.name,
        exp.mem_ports,
        run.end_cycle * CLOCK_NS,
        max(t for t, *_ in run.logs[1]) * CLOCK_NS,
        actors,
        entries,
        transfers,
        memory,
        run.hazards,
        run.stuck,
    )
