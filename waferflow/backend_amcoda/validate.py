"""Static checks of an experiment against the seed machine's limits and rules.

``validate_experiment`` raises ``PlanError`` naming the first broken rule:
the format's limits (16 actors, 341 entries, 4 operands per In_Config),
slot discipline (§3.2), sizes on every edge (§3.6), split/gather alignment (§3.7),
pairing of host transfers, and the pairwise ordering that rules out hazard (a)
of §6.3. ``hazard_b_sites`` lists the mid-program STORE/LOADs of hazard (b).
"""

from __future__ import annotations

from collections import defaultdict

from waferflow.backend_amcoda.program import (
    FLOATS_PER_PACKAGE,
    MAX_ACTORS,
    MAX_ENTRIES,
    MAX_OPERANDS,
    ActorProgram,
    AluOp,
    Entry,
    Experiment,
    InMode,
    OperandKind,
    OutMode,
)
from waferflow.errors import PlanError


def _where(p: ActorProgram, i: int | None = None) -> str:
    e = "" if i is None else f" e{i}"
    label = "" if i is None or not p.entries[i].label else f" ({p.entries[i].label})"
    return f"actor {p.actor}{e}{label}"


def _check_program(p: ActorProgram, n_actors: int) -> None:
    if not p.entries:
        raise PlanError(f"{_where(p)} has no entries")
    if len(p.entries) > MAX_ENTRIES:
        raise PlanError(
            f"{_where(p)} has {len(p.entries)} entries; the instruction cache holds at most "
            f"{MAX_ENTRIES} (1024 instructions, 3 per entry)"
        )
    valid: set[int] = set()
    for i, e in enumerate(p.entries):
        w = _where(p, i)
        ops = e.inp.operands
        if not ops:
            raise PlanError(f"{w}: an entry needs at least one input operand")
        if len(ops) > MAX_OPERANDS:
            raise PlanError(
                f"{w} reads {len(ops)} operands; an In_Config holds at most {MAX_OPERANDS} "
                f"(a reduction over more than {MAX_OPERANDS} inputs needs a tree of ADDs)"
            )
        peers = [o.peer for o in ops if o.is_peer]
        if len(set(peers)) != len(peers):
            raise PlanError(f"{w} lists a producer twice")
        cons = e.out.consumers
        if len(set(cons)) != len(cons):
            raise PlanError(f"{w} lists a consumer twice")
        for peer in (*peers, *cons):
            if peer == p.actor or peer > n_actors:
                raise PlanError(f"{w} names actor {peer}, which it has no link to")
        if e.inp.mode is not InMode.SINGLE and e.op.alu is not AluOp.STORE:
            raise PlanError(f"{w}: gather modes place data correctly only on a STORE")
        if e.out.mode is not OutMode.BROADCAST and e.op.alu not in (
            AluOp.LOAD,
            AluOp.ACT,
            AluOp.ADD,
            AluOp.LOSS,
        ):
            raise PlanError(f"{w}: split modes read (B,C,H,W); use them on LOAD, ACT, ADD or LOSS")
        if e.op.alu is AluOp.STORE:
            if e.out.keep_slot is None:
                raise PlanError(f"{w}: a STORE must keep its result in a slot (Out operand 1)")
            if not peers:
                raise PlanError(f"{w}: a STORE needs a producer (an actor or the host)")
        if e.op.alu is AluOp.LOAD and (len(ops) != 1 or not ops[0].is_slot):
            raise PlanError(f"{w}: a LOAD reads exactly one slot")
        if e.op.uses_alu and len(ops) > e.op.n_inputs:
            raise PlanError(f"{w}: {e.op.alu.name} takes {e.op.n_inputs} operands, got {len(ops)}")
        # buffers the SU allocates: actor inputs (not for STORE) and the result (not LOAD)
        sizes = [e.op.output_size] if e.op.alu is not AluOp.LOAD else []
        if e.op.alu is not AluOp.STORE:
            sizes += [e.op.input_size(k) for k, o in enumerate(ops) if o.is_peer]
        if any(s <= 0 for s in sizes):
            raise PlanError(
                f"{w}: a zero-size buffer would take a memory block that is never freed"
            )
        # slot discipline, tracked at build time in program order (§3.2)
        for o in ops:
            if o.is_slot and o.index not in valid:
                raise PlanError(f"{w} reads slot s{o.index}, which no earlier entry wrote")
        for o in ops:
            if o.kind is OperandKind.RELEASE:
                valid.discard(o.index)
        slot = e.out.keep_slot
        if slot is not None and e.op.alu is not AluOp.LOAD:
            if slot in valid:
                raise PlanError(f"{w} writes slot s{slot}, which still holds a value")
            valid.add(slot)
        _check_alignment(e, w)
    if valid:
        left = ", ".join(f"s{s}" for s in sorted(valid))
        raise PlanError(f"{_where(p)} never releases {left}; its memory would never return to 0")


def _check_alignment(e: Entry, w: str) -> None:
    """Split and gather chunks must be whole packages (§3.7)."""
    n_out = len(e.out.consumers)
    if e.out.mode is not OutMode.BROADCAST and n_out:
        total = e.op.output_size
        per_sample = total // e.op.params[0]
        chunk = total // n_out if e.out.mode is OutMode.SPLIT1 else per_sample // n_out
        # a batch split (split1) needs whole packages; a channel split also a per-sample cut
        by_channel = e.out.mode is OutMode.SPLIT2 and per_sample % n_out
        if total % n_out or chunk % FLOATS_PER_PACKAGE or by_channel:
            raise PlanError(
                f"{w}: a {e.out.mode.name.lower()} over {n_out} consumers makes chunks of "
                f"{chunk} values, not whole 32-value packages"
            )
    n_in = len(e.inp.operands)
    if e.inp.mode is not InMode.SINGLE:
        total = e.op.bchw
        per_sample = total // e.op.params[0]
        chunk = total // n_in if e.inp.mode is InMode.GATHER1 else per_sample // n_in
        by_channel = e.inp.mode is InMode.GATHER2 and per_sample % n_in
        if total % n_in or chunk % FLOATS_PER_PACKAGE or by_channel:
            raise PlanError(
                f"{w}: a {e.inp.mode.name.lower()} over {n_in} producers makes chunks of "
                f"{chunk} values, not whole 32-value packages"
            )


def _check_edges(exp: Experiment) -> None:
    """Every producer's size equals its consumer's operand size, pairwise in order."""
    sends: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    recvs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for p in exp.programs:
        for i, e in enumerate(p.entries):
            for c in e.out.consumers:
                sends[(p.actor, c)].append((i, e.out_floats_per_consumer))
            for k, o in enumerate(e.inp.operands):
                if o.is_peer:
                    recvs[(o.peer, p.actor)].append((i, e.input_operand_size(k)))
    for p in exp.programs:
        host_in = [s for _, s in recvs.get((0, p.actor), [])]
        if len(host_in) != len(p.host_inputs):
            raise PlanError(
                f"{_where(p)} receives {len(host_in)} host inputs but its script sends "
                f"{len(p.host_inputs)}"
            )
        for k, (size, t) in enumerate(zip(host_in, p.host_inputs, strict=True)):
            if size != t.floats:
                raise PlanError(
                    f"{_where(p)}: host input {k} ({t.name}) has {t.floats} values, the entry "
                    f"expects {size}"
                )
        n_out = len(sends.get((p.actor, 0), []))
        if n_out != len(p.host_outputs):
            raise PlanError(
                f"{_where(p)} sends {n_out} results to the host but its script collects "
                f"{len(p.host_outputs)}"
            )
    for (src, dst), got in recvs.items():
        if src == 0:
            continue
        sent = sends.get((src, dst), [])
        if len(sent) != len(got):
            raise PlanError(
                f"actor {src} sends {len(sent)} tensors to actor {dst}, which expects {len(got)}"
            )
        for (si, ss), (ri, rs) in zip(sent, got, strict=True):
            if ss != rs:
                raise PlanError(
                    f"actor {src} e{si} sends {ss} values to actor {dst} e{ri}, which expects {rs}"
                )
    for src, dst in sends:
        if dst != 0 and (src, dst) not in recvs:
            raise PlanError(f"actor {src} sends to actor {dst}, which never receives from it")


def _check_link_order(exp: Experiment) -> None:
    """Rule out hazard (a) of §6.3: between two actors, all traffic one way must
    precede all traffic the other way in both programs."""
    for a in exp.programs:
        for b in exp.programs:
            if b.actor <= a.actor:
                continue
            if not (_one_way_first(a, b) or _one_way_first(b, a)):
                raise PlanError(
                    f"actors {a.actor} and {b.actor} send to each other in interleaved order: "
                    f"an ack could be overwritten on their link (hazard (a), §6.3); order all "
                    f"traffic one way before any traffic back"
                )


def _one_way_first(a: ActorProgram, b: ActorProgram) -> bool:
    """True if every a->b transfer precedes every b->a transfer in both programs."""

    def idx(p: ActorProgram, peer: int, sending: bool) -> list[int]:
        if sending:
            return [i for i, e in enumerate(p.entries) if peer in e.out.consumers]
        return [i for i, e in enumerate(p.entries) if peer in e.inp.producers]

    a_send, a_recv = idx(a, b.actor, True), idx(a, b.actor, False)
    b_send, b_recv = idx(b, a.actor, True), idx(b, a.actor, False)
    if not a_recv and not b_send:
        return True
    ok_a = not a_send or not a_recv or max(a_send) < min(a_recv)
    # an entry may receive from its peer and then send back (the loss actor's LOSS)
    ok_b = not b_recv or not b_send or max(b_recv) <= min(b_send)
    return ok_a and ok_b


def validate_experiment(exp: Experiment) -> None:
    """Raise ``PlanError`` if the seed machine cannot run ``exp`` as intended."""
    n = exp.n_actors
    if n > MAX_ACTORS:
        raise PlanError(
            f"experiment {exp.name} has {n} actors; the seed machine has at most {MAX_ACTORS}"
        )
    if exp.mem_ports < 1:
        raise PlanError(f"MemWidth must be at least 1, got {exp.mem_ports}")
    for k, p in enumerate(exp.programs):
        if p.actor != k + 1:
            raise PlanError(f"program {k} is for actor {p.actor}; programs must be actors 1..N")
        _check_program(p, n)
    _check_edges(exp)
    _check_link_order(exp)


def hazard_b_sites(exp: Experiment) -> list[tuple[int, int]]:
    """(actor, entry) of every STORE/LOAD that sits between two ALU entries: where an
    ALU completion could be lost if the STORE/LOAD is still in the table (§6.3 b)."""
    sites = []
    for p in exp.programs:
        alu = [e.op.uses_alu for e in p.entries]
        for i, _e in enumerate(p.entries):
            if not alu[i] and any(alu[:i]) and any(alu[i + 1 :]):
                sites.append((p.actor, i))
    return sites
