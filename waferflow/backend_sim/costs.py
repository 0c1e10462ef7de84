"""Cost functions shared by the event simulator and the analytical estimator.

Time is an integer number of picoseconds everywhere inside the simulator, so that
sums are exact and the closed forms below are integer equalities. Durations derived
from a rate are rounded up (``ceil(amount / rate)``) with exact rational arithmetic
on the float rate; latencies given in seconds are rounded to the nearest picosecond.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from waferflow.backend_sim.core_model import CoreContext, PassTime, pass_time, port_cycles
from waferflow.errors import ConfigError
from waferflow.ir.dtypes import DType
from waferflow.ir.opkind import MATMUL_LIKE
from waferflow.ir.plan import Actor, OpWork
from waferflow.ir.target.wafer import Wafer

PS_PER_S = 10**12
DEFAULT_PACKET_BYTES = 4096  # packet size when the wafer has no flow control
MAX_VIEW_PACKET_BYTES = 65536  # the largest packet view_packet_bytes chooses

# A compute model maps an actor on a wafer to its duration in picoseconds.
ComputeModel = Callable[[Actor, Wafer], int]


def seconds_to_ps(seconds: float) -> int:
    """A latency or period in seconds, to the nearest picosecond."""
    return round(seconds * PS_PER_S)


def ps_to_seconds(ps: int) -> float:
    return ps / PS_PER_S


def duration_ps(amount: int, rate: float) -> int:
    """``ceil(amount / rate)`` seconds in picoseconds, exactly (rate > 0 per second)."""
    if amount <= 0:
        return 0
    if not rate > 0 or math.isinf(rate):
        raise ConfigError(f"rate must be a positive finite number, got {rate!r}")
    if float(rate).is_integer():
        return -(-amount * PS_PER_S // int(rate))
    fr = Fraction(rate)
    return -(-amount * PS_PER_S * fr.denominator // fr.numerator)


def peak_flops(wafer: Wafer, dtype: DType, core: int | None = None) -> float:
    """Peak FLOP/s for ``dtype`` of one healthy core (``Wafer.peak``: a dtype the
    wafer does not list falls back to a related rate), or of ``core`` when given
    (scaled by its capacity: a partly dead node of a coarse view is slower)."""
    if not wafer.peak_flops:
        raise ConfigError(f"wafer {wafer.name!r}: peak_flops is empty; give at least f32")
    if core is None:
        return wafer.peak(dtype)
    return wafer.core_peak(divmod(core, wafer.cols), dtype)


def roofline_ps(actor: Actor, wafer: Wafer) -> int:
    """Roofline on the actor's core: ``max(flops / peak(dtype),
    (bytes_read + bytes_written) / sram_bandwidth, node_network_ps)``, rounded up to a
    picosecond (the last term only on a coarse view, see ``node_network_ps``)."""
    coord = divmod(actor.core, wafer.cols)
    t_flops = 0
    if actor.flops:
        t_flops = duration_ps(actor.flops, wafer.core_peak(coord, actor.dtype))
    nbytes = actor.bytes_read + actor.bytes_written
    t_mem = duration_ps(nbytes, wafer.core_sram_bandwidth(coord)) if nbytes else 0
    return max(t_flops, t_mem, node_network_ps(actor, wafer))


def compute_ps(actor: Actor, wafer: Wafer) -> int:
    """The default compute model: the wafer's core model (``core_ps``) when it has
    one (``[core]``), else the roofline (``roofline_ps``)."""
    if wafer.core is None:
        return roofline_ps(actor, wafer)
    return core_ps(actor, wafer)


def core_context(wafer: Wafer) -> CoreContext:
    """What the core model needs of ``wafer`` besides the pass (it has a ``[core]``)."""
    assert wafer.core is not None
    return CoreContext(
        wafer.core, wafer.clock_hz, wafer.peak_flops, wafer.coarsen_factor, wafer.link.bandwidth
    )


def actor_passes(actor: Actor, wafer: Wafer) -> list[PassTime]:
    """The passes of ``actor`` on the wafer's core model (``core_model.pass_time``):
    ``actor.work``, or one pass over its totals when it has none; none when it has no
    work at all (e.g. the start of a collective). A partly dead node of a coarse view
    has that fraction of the ports and units."""
    if not actor.work and not (actor.flops or actor.bytes_read or actor.bytes_written):
        return []
    ctx = core_context(wafer)
    capacity = wafer.capacity(divmod(actor.core, wafer.cols))
    work = actor.work or (
        OpWork(actor.op_kind, actor.flops, (actor.bytes_read,), (actor.bytes_written,)),
    )
    return [pass_time(ctx, w, actor.dtype, capacity) for w in work]


def core_ps(actor: Actor, wafer: Wafer) -> int:
    """An actor on the wafer's core model: the sum of its passes' cycles
    (``actor_passes``), in picoseconds."""
    return _sum_ps(actor_passes(actor, wafer), wafer.clock_hz)


class ActorTimes:
    """``compute_ps`` and ``actor_passes`` over the actors of one plan, each distinct
    piece of work timed once: equal work (the same passes, dtype and node capacity)
    takes equal time, and a plan of a hundred thousand actors holds few distinct ones
    (every rank of a shard, every micro-batch, every all-reduce step of one shape: the
    demo's 147,408 actors hold 82).
    Lookups go by the identity of an actor's ``work`` tuple first (the actors of one
    op share it), so only lookups that miss hash the passes. Holds only while the
    actors it saw are alive: make one per plan."""

    def __init__(self, wafer: Wafer) -> None:
        self.wafer = wafer
        self.core = wafer.core is not None
        self._cap: dict[int, float] = {}
        self._by_id: dict[tuple[int, DType, float], tuple[PassTime, ...]] = {}
        self._by_value: dict[tuple, tuple[PassTime, ...]] = {}
        self._ps: dict[int, int] = {}

    def capacity(self, core: int) -> float:
        cap = self._cap.get(core)
        if cap is None:
            cap = self._cap[core] = self.wafer.capacity(divmod(core, self.wafer.cols))
        return cap

    def passes(self, actor: Actor) -> tuple[PassTime, ...]:
        """``actor_passes(actor, wafer)`` (a wafer with a ``[core]``)."""
        work = actor.work
        cap = self.capacity(actor.core)
        if work:
            key = (id(work), actor.dtype, cap)
            got = self._by_id.get(key)
            if got is None:
                value = (work, actor.dtype, cap)
                got = self._by_value.get(value)
                if got is None:
                    got = self._by_value[value] = tuple(actor_passes(actor, self.wafer))
                self._by_id[key] = got
            return got
        value = (actor.op_kind, actor.flops, actor.bytes_read, actor.bytes_written,
                 actor.dtype, cap)  # fmt: skip
        got = self._by_value.get(value)
        if got is None:
            got = self._by_value[value] = tuple(actor_passes(actor, self.wafer))
        return got

    def compute_ps(self, actor: Actor) -> int:
        """``compute_ps(actor, wafer)``, memoised."""
        if not self.core:
            return roofline_ps(actor, self.wafer)
        passes = self.passes(actor)
        got = self._ps.get(id(passes))  # the memoised tuples live as long as this
        if got is None:
            got = self._ps[id(passes)] = _sum_ps(passes, self.wafer.clock_hz)
        return got

    def durations(self, actors: Sequence[Actor]) -> list[int]:
        """``compute_ps`` of every actor (a wafer with a ``[core]``), 0 on a switch.

        A ``compute_ps`` call per actor costs more than the timing it looks up, so the
        loop keys actors by identities: the last actor's time holds for the next one of
        the same ``work``, dtype and node capacity (an op's actors tend to come in a
        row); else the key is the ``work`` tuple, or its one pass (plans rebuild
        one-pass tuples per rank around shared ``OpWork`` objects), with the dtype (an
        enum member is a singleton, and hashing one calls Python) and the capacity
        (1.0 everywhere on a wafer without dead or partly dead nodes: not looked up).
        A key seen the first time goes by value, its passes numbered once per object:
        equal ``OpWork`` objects that are not the same compare field by field."""
        wafer = self.wafer
        switches = wafer.num_cores if wafer.tree is not None else math.inf  # from this id
        uniform = not wafer.dead_cores and not wafer.partial_cores
        by_work: dict[tuple[int, int, float], int] = {}
        by_value: dict[tuple[tuple[int, ...], int, float], int] = {}
        number: dict[int, int] = {}  # id(OpWork) -> its value's number
        numbers: dict[OpWork, int] = {}
        number_of = number.get
        out: list[int] = []
        append = out.append
        cap = last_cap = 1.0
        last_work: tuple[OpWork, ...] | None = None
        last_dtype: DType | None = None
        ps = 0
        for a in actors:
            core = a.core
            if core >= switches:
                append(0)
                continue
            work = a.work
            if not work:
                append(self.compute_ps(a))
                continue
            dtype = a.dtype
            if not uniform:
                cap = self.capacity(core)
            if work is not last_work or dtype is not last_dtype or cap != last_cap:
                last_work, last_dtype, last_cap = work, dtype, cap
                key = (id(work[0] if len(work) == 1 else work), id(dtype), cap)
                got = by_work.get(key)
                if got is None:
                    nums = tuple(map(number_of, map(id, work)))
                    if None in nums:
                        for w in work:
                            number.setdefault(id(w), numbers.setdefault(w, len(numbers)))
                        nums = tuple(map(number_of, map(id, work)))
                    value = (nums, key[1], cap)
                    got = by_value.get(value)
                    if got is None:
                        got = by_value[value] = self.compute_ps(a)
                    by_work[key] = got
                ps = got
            append(ps)
        return out


def _sum_ps(passes: Sequence[PassTime], clock_hz: float) -> int:
    return duration_ps(sum(p.cycles for p in passes), clock_hz)


def actor_durations(actors: Sequence[Actor], wafer: Wafer, compute: ComputeModel) -> list[int]:
    """``compute(actor, wafer)`` for every actor; the default model through
    ``ActorTimes``. An in-network step on a switch adds and copies at line rate: no
    time of its own."""
    if compute is compute_ps and wafer.core is not None:
        return ActorTimes(wafer).durations(actors)
    switch = wafer.is_switch_node
    if compute is compute_ps:
        times = ActorTimes(wafer)
        return [0 if switch(a.core) else times.compute_ps(a) for a in actors]
    return [0 if switch(a.core) else int(compute(a, wafer)) for a in actors]


def node_network_ps(actor: Actor, wafer: Wafer) -> int:
    """The traffic a matmul makes inside a node of a coarse view (0 on a fine wafer).

    A node pools ``K x K`` cores (``K = wafer.coarsen_factor``). An elementwise op runs
    on data each core already holds, but a matmul spread over the node needs, at each
    core, a block row of one operand and a block column of the other (SUMMA-style):
    ``(K - 1) / K**2`` of the operand bytes arrive at every core from its row and
    column, over its two inbound fine links (one per operand) of bandwidth ``B / K``
    (the coarse link ``B`` is K fine links). Per core, then, ``bytes_read * (K - 1) /
    (2 K B)``: about the operands over twice the node's link. It is a floor (perfect
    overlap with compute, hence the ``max`` in ``roofline_ps``); without it a coarse
    node would move data for free and large nodes would look ever faster.
    """
    k = wafer.coarsen_factor
    if k <= 1 or actor.op_kind not in MATMUL_LIKE or not actor.bytes_read:
        return 0
    return duration_ps(actor.bytes_read * (k - 1), 2 * k * wafer.link.bandwidth)


def ideal_compute_ps(actor: Actor, wafer: Wafer) -> int:
    """FLOPs at the core's peak only: the numerator of the FLOP utilisation."""
    if not actor.flops:
        return 0
    return duration_ps(actor.flops, peak_flops(wafer, actor.dtype, actor.core))


def view_packet_bytes(wafer: Wafer) -> int:
    """The packet size of a wafer without flow control: the largest power of two from
    ``DEFAULT_PACKET_BYTES`` up to ``MAX_VIEW_PACKET_BYTES`` whose serialisation on the
    wafer's link takes no longer than the link's latency (``P / B <= L``).

    The bound: store-and-forward per packet adds ``(h - 1) P / B`` to an uncontended
    message of ``h`` hops (``transit_ps``: ``h L + S / B + (h - 1) P / B``), so a packet
    larger than ``P0 = DEFAULT_PACKET_BYTES`` moves a message's transit by at most
    ``(h - 1) (P - P0) / B <= (h - 1) L``: at most one more hop latency per intermediate
    hop. Only coarse views choose more than ``P0`` (a ``k x k`` view has ``k`` times
    the bandwidth and ``k`` times the latency of a fine link, so ``L B`` grows as
    ``k^2``: 16 KiB on ``wse2@64x`` and ``@84x``, 4 KiB below ``@46x``); there the
    packet count, and with it the simulator's events, falls by the same factor
    (docs/simulator.md, "Packet size", gives the measured effect on step times)."""
    budget = wafer.link.latency * wafer.link.bandwidth * (1 + 1e-9)  # float rounding
    if wafer.d2d_link is not None:
        budget = min(budget, wafer.d2d_link.latency * wafer.d2d_link.bandwidth * (1 + 1e-9))
    p = DEFAULT_PACKET_BYTES
    while 2 * p <= min(budget, MAX_VIEW_PACKET_BYTES):
        p *= 2
    return p


def packetize(nbytes: int, packet_bytes: int, header_packets: int = 0) -> tuple[int, int, int]:
    """``(n, full, last)``: a message travels as ``n`` packets, all of ``full`` bytes
    except the last, of ``last`` bytes. Header packets (full size) go first. An empty
    message without header still travels as one empty packet (it carries the
    dependency)."""
    payload = -(-nbytes // packet_bytes) if nbytes > 0 else 0
    n = header_packets + payload
    if n == 0:
        return 1, 0, 0
    last = nbytes - (payload - 1) * packet_bytes if payload else packet_bytes
    return n, packet_bytes, last


def transit_ps(lat: Sequence[int], ser_full: Sequence[int], ser_last: Sequence[int], n: int) -> int:
    """Closed form of an uncontended message's transit time (first bit injected to
    last packet delivered), store-and-forward per packet, pipelined over the hops.

    Hop ``j`` has latency ``L_j``, and serialises a full packet in ``f_j`` and the
    last packet in ``g_j``. With ``n`` packets over ``h`` hops:

    * ``n == 1``: ``sum_j (g_j + L_j)``;
    * ``n >= 2``: ``sum_j L_j + max_c [ sum_{j<=c} f_j + (n-2) max_{j<=c} f_j
      + sum_{j>=c} g_j ]``.

    (The longest path through the packet x hop grid; see docs/simulator.md.)
    """
    h = len(lat)
    if h == 0:
        return 0
    total = sum(lat)
    if n == 1:
        return total + sum(ser_last)
    suffix = [0] * (h + 1)
    for j in range(h - 1, -1, -1):
        suffix[j] = suffix[j + 1] + ser_last[j]
    best = 0
    prefix = 0
    fmax = 0
    for c in range(h):
        f = ser_full[c]
        prefix += f
        if f > fmax:
            fmax = f
        v = prefix + (n - 2) * fmax + suffix[c]
        if v > best:
            best = v
    return total + best


__all__ = [
    "DEFAULT_PACKET_BYTES",
    "MAX_VIEW_PACKET_BYTES",
    "PS_PER_S",
    "ActorTimes",
    "ComputeModel",
    "actor_durations",
    "actor_passes",
    "compute_ps",
    "core_context",
    "core_ps",
    "duration_ps",
    "ideal_compute_ps",
    "node_network_ps",
    "packetize",
    "peak_flops",
    "port_cycles",
    "ps_to_seconds",
    "roofline_ps",
    "seconds_to_ps",
    "transit_ps",
    "view_packet_bytes",
]
