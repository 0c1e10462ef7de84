"""Memory, critical path, per-core breakdown, summary and the Chrome trace."""

from __future__ import annotations

from waferflow.backend_sim import simulate
from waferflow.ir.plan import Message, Plan

from ._helpers import actor, wafer

L = 7000


def _plan() -> Plan:
    return Plan.build(
        "mem", "test",
        [
            actor(0, 0, flops=1000, mem_bytes=1000, out_bytes=200),
            actor(1, 0, flops=2000, out_bytes=50),
            actor(2, 1, mem_bytes=5, out_bytes=10),
        ],
        [Message(0, 0, 1, 64), Message(1, 0, 2, 300)],
    )  # fmt: skip


def test_times_memory_path_and_breakdown_by_hand() -> None:
    res = simulate(_plan(), wafer(1, 4))
    arrive = 1000 + 300 * 1000 + L
    assert res.actor_start_ps == (0, 1000, arrive)
    assert res.actor_end_ps == (1000, 3000, arrive)
    assert res.step_time_ps == arrive
    # core 0: 1000 resident + a0's 200 (held until its remote message lands) + a1's 50
    # core 1: 5 resident + the 300 B it receives (its own 10 B output never overlaps)
    assert [(c.core, c.peak_mem_bytes) for c in res.cores] == [(0, 1250), (1, 305)]
    assert res.peak_memory == 1250
    path = [(s.kind, s.id, s.start_ps, s.end_ps) for s in res.critical_path]
    assert path == [
        ("actor", 0, 0, 1000),
        ("message", 1, 1000, arrive),
        ("actor", 2, arrive, arrive),
    ]
    c0, c1 = res.cores
    assert (c0.compute_ps, c0.comm_ps, c0.idle_ps) == (3000, 0, arrive - 3000)
    assert (c1.compute_ps, c1.comm_ps, c1.idle_ps) == (0, arrive, 0)
    assert res.flop_utilisation == 3000 / (arrive * 2)
    (lk,) = res.links
    assert (lk.src, lk.dst, lk.bytes, lk.busy_ps) == ((0, 0), (0, 1), 300, 300_000)
    assert lk.utilisation == 300_000 / arrive
    assert res.busiest_links(1) == [lk]
    assert res.events == 5  # 3 actor ends, 1 data start, 1 arrival
    assert res.packet_hops == 1


def test_summary_mentions_the_headline_figures() -> None:
    text = simulate(_plan(), wafer(1, 4)).summary()
    for needle in ("step time", "308.000 ns", "FLOP utilisation", "busiest links",
                   "(0, 0)->(0, 1)", "peak memory", "1.22 KiB", "critical path"):  # fmt: skip
        assert needle in text, needle


def test_empty_plan() -> None:
    res = simulate(Plan.build("empty", "test", [], []), wafer(1, 2))
    assert res.step_time_ps == 0 and res.critical_path == () and res.cores == ()
    assert "step time" in res.summary()
