"""SRAM handed out as the wafer's ``[memory]`` says (``MemoryModel``): blocks, buffers
allocated ahead for a window of actors, first-fit placement and waiting.

What a core allocates, per actor, when the actor is *admitted* (enters the core's
window of ``lookahead`` actors, in the core's order; with ``lookahead = 0`` when it
is about to start): its output buffer (``out_bytes``), and a receive buffer for
every remote message (and host transfer) addressed to it. Sizes are rounded up to
whole blocks (``block_bytes``). What frees them:

* an output buffer, once its actor has ended, every remote message it sends has been
  delivered and every consumer on the same core that reads it in place has ended;
* a receive buffer, once the last actor on the core that reads it has ended
  (``Message.last_use``, else its destination actor);
* a buffer a recomputing consumer rebuilds (a local message with ``holds=False``) is
  allocated with that consumer and freed when it ends.

An actor leaves the window once it has ended (its output buffer may stay allocated
until its messages are delivered); actors end in their core's order, so the window
always holds the next actor to run, and a plan that the messages and core orders do
not deadlock does not deadlock for the window either. An actor can start only once
admitted, and a message can be accepted only once its destination is admitted (its
receive buffer exists); a broadcast goes to the destinations admitted and waits for
the others as a broadcast of its own (waiting for all of them could wait on itself:
``engine.run_python``). With ``first_fit`` every buffer
is a contiguous run of blocks placed at the lowest free run, and an actor whose
buffers do not fit waits (and the actors after it) until enough is freed; without,
the peak is counted but nothing waits. Sources are resident from the start unless
the plan streams them from the host (``Plan.host``), which then allocates them as
receive buffers.

``MemoryRun`` holds the state; the engine calls it when actors end and messages
arrive, and it says which actors became admitted.
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.backend_sim.network import Prepared
from waferflow.errors import PlanError
from waferflow.ir.plan import Plan
from waferflow.ir.target.parts import MemoryModel


@dataclass(slots=True)
class MemPlan:
    """The flat data of the memory model, prepared before the event loop."""

    block: int  # bytes per block (1: exact bytes)
    lookahead: int
    first_fit: bool
    cap: list[int]  # blocks per local core (0 for the host)
    bufs: list[list[tuple[int, int]]]  # per actor: (buffer, blocks) allocated on admission
    frees_at_end: list[list[int]]  # per actor: buffers freed when it ends
    hold: list[int]  # per actor: events before its output buffer is freed (0: none)
    holders_of: list[list[int]]  # per actor: producers whose output it reads in place
    resident: list[int]  # per local core: blocks held for the whole step


def plan_memory(p: Prepared, plan: Plan, model: MemoryModel, sram_bytes: int) -> MemPlan:
    """Buffers, their sizes in blocks and what frees them (module docstring)."""
    block = model.block_bytes or 1
    n_act = len(p.dur)
    n_msg = len(p.msg_src)
    n_real = len(p.cores)

    def blocks(nbytes: int) -> int:
        return -(-nbytes // block)

    # buffer ids: actor a's output is a, message m's receive buffer n_act + m, a value
    # rebuilt by a recomputing consumer (local message m) n_act + n_msg + m
    bufs: list[list[tuple[int, int]]] = [[] for _ in range(n_act)]
    frees: list[list[int]] = [[] for _ in range(n_act)]
    hold = [0] * n_act
    holders: list[list[int]] = [[] for _ in range(n_act)]
    actors = plan.actors
    n_pa = len(actors)
    for a in actors:
        if a.out_bytes:
            bufs[a.id].append((a.id, blocks(a.out_bytes)))
            hold[a.id] = 1
    for m in range(n_msg):
        src, dst = p.msg_src[m], p.msg_dst[m]
        if p.msg_local[m]:
            if src < n_pa and actors[src].out_bytes:
                if plan.messages[m].holds:
                    hold[src] += 1
                    holders[dst].append(src)
                else:  # rebuilt by the consumer while it runs
                    b = n_act + n_msg + m
                    bufs[dst].append((b, blocks(actors[src].out_bytes)))
                    frees[dst].append(b)
            continue
        if src < n_pa and actors[src].out_bytes:
            hold[src] += 1  # freed once delivered
        if dst < n_pa and p.msg_bytes[m]:
            b = n_act + m
            bufs[dst].append((b, blocks(p.msg_bytes[m])))
            last = p.msg_last_use[m]
            frees[last if last >= 0 else dst].append(b)
    resident = [0] * len(p.order)
    if not plan.host:  # sources resident for the whole step
        for a in actors:
            resident[p.actor_ci[a.id]] += a.mem_bytes
    cap = [sram_bytes // block] * n_real + [0] * (len(p.order) - n_real)
    return MemPlan(
        block, model.lookahead, model.first_fit, cap, bufs, frees, hold, holders,
        [blocks(r) for r in resident],
    )  # fmt: skip


class MemoryRun:
    """Per-core allocator state for one run of the engine."""

    def __init__(self, p: Prepared, mp: MemPlan) -> None:
        self.p = p
        self.lookahead = mp.lookahead
        self.first_fit = mp.first_fit
        self.block = mp.block
        self.cap = mp.cap
        self.bufs = mp.bufs
        self.frees_at_end = mp.frees_at_end
        self.hold = list(mp.hold)
        self.holders_of = mp.holders_of
        n_core = len(p.order)
        n_act = len(p.dur)
        self.blocks: list[list[int]] = [[0] * c for c in self.cap]  # 0 free, else owner
        self.used = [0] * n_core
        self.peak = [0] * n_core
        self.where: dict[int, tuple[int, int, int]] = {}  # buffer -> (core, first, count)
        self.now = 0  # the engine's time, set before each call (for the log)
        self.log: list[list[tuple[int, int]]] = [[] for _ in range(n_core)]  # (ps, +-blocks)
        for ci, n in enumerate(mp.resident):
            if n and not self._place(ci, -1 - ci, n):
                raise PlanError(
                    f"core {p.cores[ci]}: the sources resident there need {n} block(s) of "
                    f"{self.block} bytes; it has {self.cap[ci]}"
                )
        self.admitted = [False] * n_act
        for a in range(p.n_plan_actors, n_act):  # the host's actors need no memory
            self.admitted[a] = True
        self.adm_ptr = [0] * n_core
        self.ret_ptr = [0] * n_core
        self.ended = [False] * n_act

    # -- allocation ---------------------------------------------------------------------
    def _place(self, ci: int, buf: int, n: int, log: bool = True) -> bool:
        cap = self.cap[ci]
        if not self.first_fit:
            self._taken(ci, buf, -1, n, log)
            return True
        if self.used[ci] + n > cap:
            return False
        row = self.blocks[ci]
        run = 0
        for i in range(cap):
            run = run + 1 if row[i] == 0 else 0
            if run == n:
                first = i - n + 1
                for j in range(first, i + 1):
                    row[j] = buf + 1 if buf >= 0 else buf
                self._taken(ci, buf, first, n, log)
                return True
        return False

    def _taken(self, ci: int, buf: int, first: int, n: int, log: bool) -> None:
        self.used[ci] += n
        self.where[buf] = (ci, first, n)
        self.peak[ci] = max(self.peak[ci], self.used[ci])
        if log:
            self.log[ci].append((self.now, n))

    def _free(self, buf: int, log: bool = True) -> None:
        got = self.where.pop(buf, None)
        if got is None:
            return
        ci, first, n = got
        self.used[ci] -= n
        if log:
            self.log[ci].append((self.now, -n))
        if first >= 0:
            row = self.blocks[ci]
            for j in range(first, first + n):
                row[j] = 0

    def admit(self, ci: int, running_ptr: int) -> list[int]:
        """Admit the core's next actors while the window and memory allow; return them.
        ``running_ptr``: the position of the next actor to start, -1 while one runs
        (with lookahead 0 only that actor, once the core is free, is admitted)."""
        out = []
        order = self.p.order[ci]
        while self.adm_ptr[ci] < len(order):
            k = self.adm_ptr[ci]
            if self.lookahead:
                if k - self.ret_ptr[ci] >= self.lookahead:
                    break
            elif k > running_ptr:
                break
            a = order[k]
            placed = []
            ok = True
            for buf, n in self.bufs[a]:
                if n and not self._place(ci, buf, n, log=False):
                    ok = False
                    break
                placed.append(buf)
            if not ok:  # undone: nothing was allocated
                for buf in placed:
                    self._free(buf, log=False)
                break
            self.log[ci] += [(self.now, self.where[b][2]) for b in placed if b in self.where]
            self.admitted[a] = True
            self.adm_ptr[ci] = k + 1
            out.append(a)
        return out

    # -- events -------------------------------------------------------------------------
    def _release_out(self, a: int) -> None:
        self.hold[a] -= 1
        if self.hold[a] == 0:
            self._free(a)

    def on_end(self, a: int) -> None:
        """Actor ``a`` ended: free what it was the last to need; it leaves the window
        (actors end in their core's order, so the window's oldest goes)."""
        self.ended[a] = True
        if self.hold[a]:
            self._release_out(a)
        for src in self.holders_of[a]:
            self._release_out(src)
        for buf in self.frees_at_end[a]:
            self._free(buf)
        self.ret_ptr[self.p.actor_ci[a]] += 1

    def on_delivered(self, src: int) -> None:
        """A remote message of ``src`` was delivered."""
        if self.hold[src]:
            self._release_out(src)

    def peak_bytes(self) -> list[int]:
        return [b * self.block for b in self.peak[: len(self.p.cores)]]

    def events(self) -> list[tuple[int, list[tuple[int, int]]]]:
        """Per plan core (core id): its allocations and frees as ``(ps, +-bytes)``."""
        b = self.block
        return [(c, [(t, n * b) for t, n in self.log[ci]]) for ci, c in enumerate(self.p.cores)]

    def stuck(self, ci: int) -> str:
        """Why core ``ci`` admits no more actors ("" if it has admitted them all)."""
        order = self.p.order[ci]
        k = self.adm_ptr[ci]
        if k >= len(order):
            return ""
        core = self.p.cores[ci]
        if self.lookahead and k - self.ret_ptr[ci] >= self.lookahead:
            return (
                f"core {core}: its window of {self.lookahead} actors (memory.lookahead) is "
                f"full, its oldest (actor {order[self.ret_ptr[ci]]}) has not ended"
            )
        need = sum(n for _, n in self.bufs[order[k]])
        return (
            f"core {core}: actor {order[k]} waits for {need} block(s) of {self.block} bytes "
            f"with {self.cap[ci] - self.used[ci]} of {self.cap[ci]} free"
        )


__all__ = ["MemPlan", "MemoryRun", "plan_memory"]
