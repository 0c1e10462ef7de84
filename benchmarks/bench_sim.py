"""Speed of the discrete-event simulator on uniform-random traffic.

Each case is a plan of independent messages between uniformly random core pairs of an
N x N mesh (a zero-cost producer and consumer actor per message, every message
injected at time zero, so links contend). We report packet-hops per second of
``simulate()`` as a whole and of the engine loop alone, against a baseline measured in
the same run: a bare ``heapq`` push/pop loop over as many 6-tuple events, which no
Python event engine can beat. cProfile of one case names what dominates.

Run: ``.venv/bin/python benchmarks/bench_sim.py`` (``--quick`` for a smaller run).
Times are CPU time of this process, so that other load on the machine matters less.
"""

from __future__ import annotations

import cProfile
import heapq
import io
import pstats
import random
import sys
import time
from dataclasses import dataclass

from waferflow.backend_sim import SimConfig, simulate
from waferflow.backend_sim.engine import run as run_engine
from waferflow.backend_sim.network import prepare
from waferflow.ir.dtypes import DType
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target.wafer import LinkSpec, Topology, Wafer

PACKET_BYTES = 1024


def mesh(n: int) -> Wafer:
    return Wafer(
        name=f"mesh{n}x{n}",
        rows=n,
        cols=n,
        topology=Topology.MESH,
        clock_hz=1e9,
        peak_flops=((DType.F32, 1e12),),
        sram_bytes=1 << 20,
        sram_bandwidth=1e12,
        link=LinkSpec(10e9, 10e-9),
    )


def random_traffic(w: Wafer, n_msgs: int, max_packets: int, seed: int) -> Plan:
    """Producers are actors 0..n-1, consumers n..2n-1; each core runs its producers
    first (ids ascend), so the plan cannot deadlock."""
    rng = random.Random(seed)
    cores = w.rows * w.cols
    actors: list[Actor] = []
    ends: list[tuple[int, int]] = []
    for _ in range(n_msgs):
        s = rng.randrange(cores)
        d = rng.randrange(cores - 1)
        ends.append((s, d + (d >= s)))
    for i, (s, _) in enumerate(ends):
        actors.append(Actor(i, f"p{i}", s))
    for i, (_, d) in enumerate(ends):
        actors.append(Actor(n_msgs + i, f"c{i}", d))
    msgs = [
        Message(i, i, n_msgs + i, rng.randint(1, max_packets) * PACKET_BYTES) for i in range(n_msgs)
    ]
    return Plan.build(f"uniform{n_msgs}", w.name, actors, msgs)


def heapq_baseline(n_events: int, width: int) -> float:
    """CPU seconds for n pushes and n pops of (time, seq, x, k, code) tuples, the
    heap held at ``width`` entries (the engine keeps about one per message in flight)."""
    heap: list[tuple[int, int, int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    t0 = time.process_time()
    width = min(width, n_events)
    for i in range(width):
        push(heap, ((i * 7919) % 104729, i, i, 0, 1))
    for i in range(width, n_events):
        t, _, x, k, code = pop(heap)
        push(heap, (t + (i * 7919) % 1000, i, x, k, code))
    while heap:
        pop(heap)
    return time.process_time() - t0


@dataclass(frozen=True)
class Row:
    case: str
    messages: int
    packet_hops: int
    events: int
    sim_s: float
    engine_s: float
    baseline_s: float

    @property
    def sim_rate(self) -> float:
        return self.packet_hops / self.sim_s

    @property
    def engine_rate(self) -> float:
        return self.packet_hops / self.engine_s


CASES: tuple[tuple[int, int], ...] = ((16, 20_000), (64, 5_000), (256, 1_200))


def run(quick: bool = False) -> list[Row]:
    rows: list[Row] = []
    cfg = SimConfig(packet_bytes=PACKET_BYTES)
    for n, n_msgs in CASES:
        if quick:
            n_msgs //= 10
        w = mesh(n)
        plan = random_traffic(w, n_msgs, max_packets=5, seed=n)
        t0 = time.process_time()
        res = simulate(plan, w, cfg)
        sim_s = time.process_time() - t0
        prepared = prepare(plan, w, cfg)
        t0 = time.process_time()
        run_engine(prepared)
        engine_s = time.process_time() - t0
        rows.append(
            Row(
                case=f"{n}x{n} mesh",
                messages=n_msgs,
                packet_hops=res.packet_hops,
                events=res.events,
                sim_s=sim_s,
                engine_s=engine_s,
                baseline_s=heapq_baseline(res.events, width=n_msgs),
            )
        )
    return rows


def profile_top(n: int = 64, n_msgs: int = 5_000, top: int = 3) -> str:
    w = mesh(n)
    plan = random_traffic(w, n_msgs, max_packets=5, seed=n)
    prof = cProfile.Profile()
    prof.enable()
    simulate(plan, w, SimConfig(packet_bytes=PACKET_BYTES))
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    return "\n".join(lines[start : start + top + 1])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    quick = "--quick" in args
    rows = run(quick=quick)
    head = (
        f"{'case':<14}{'messages':>9}{'pkt-hops':>11}{'events':>10}"
        f"{'sim s':>8}{'sim hops/s':>12}{'engine hops/s':>15}{'heapq ev/s':>12}{'engine/heapq':>14}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.case:<14}{r.messages:>9,}{r.packet_hops:>11,}{r.events:>10,}"
            f"{r.sim_s:>8.2f}{r.sim_rate:>12,.0f}{r.engine_rate:>15,.0f}"
            f"{r.events / r.baseline_s:>12,.0f}{r.engine_s / r.baseline_s:>13.1f}x"
        )
    print(
        "\nTimes are CPU seconds (time.process_time), steadier than wall time on a shared\n"
        "machine. sim = simulate() end to end (verify, route, run, results); engine = the\n"
        "event loop alone; heapq = bare push/pop of as many events (the floor for a heap-based\n"
        "engine); engine/heapq = the engine's cost over that floor. Target: >= 300k\n"
        "packet-hops/s end to end."
    )
    print("\ncProfile of simulate() on the 64x64 case, top 3 by own time:")
    print(profile_top(n_msgs=500 if quick else 5_000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
