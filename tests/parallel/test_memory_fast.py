"""plan-memory's array liveness against the straightforward actor-by-actor walk it
replaced (kept here as the oracle): every figure of every core, on real plans and on
random programs with the rare cases (a read before the making, a received value made
again larger, unknown categories, optimizer actors among the others)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from waferflow.ir.graph import Graph, Phase
from waferflow.ir.plan import Plan
from waferflow.ir.target import Wafer, get_wafer
from waferflow.parallel.assemble import ActorMeta
from waferflow.parallel.driver import build_state, clone_graph
from waferflow.parallel.memory import CATEGORIES, CoreMemory, MemoryReport, plan_memory
from waferflow.parallel.plan_spec import PipelineSchedule

from .graphs import chain, fast_wafer


def _reference_core(
    core: int, ids: Sequence[int], plan: Plan, meta: Sequence[ActorMeta], wafer: Wafer,
    recompute: bool,
) -> CoreMemory:  # fmt: skip
    """The walk over the core's actors and a sorted list of +/- events."""
    resident: dict[str, tuple[int, str]] = {}
    bufs: dict[tuple, list] = {}
    for pos, aid in enumerate(ids):
        m = meta[aid]
        backward = m.block.startswith("B")
        forward = m.block.startswith("F")
        for name, nbytes, c in m.resident:
            old = resident.get(name)
            if old is None or old[0] < nbytes:
                resident[name] = (nbytes, c)
        touched = []
        for key, nbytes, c in m.produces:
            b = bufs.get(key)
            if b is None:
                b = bufs[key] = [pos, nbytes, c, pos, -1, -1, -1, forward]
            elif b[1] < nbytes:
                b[1] = nbytes
            touched.append(b)
        for key in m.uses:
            b = bufs.get(key)
            if b is None:
                nbytes = m.received.get(key)
                if nbytes is None:
                    continue
                b = bufs[key] = [pos, nbytes, "activations", pos, -1, -1, -1, False]
            touched.append(b)
        for b in touched:
            b[3] = pos
            if backward:
                b[6] = pos
                if b[5] < 0:
                    b[5] = pos
            else:
                b[4] = pos
    events: list[tuple[int, int, str]] = []
    for start, nbytes, c, last, fwd_last, bwd_first, bwd_last, made_in_f in bufs.values():
        if recompute and made_in_f and bwd_first >= 0:
            events.append((start, nbytes, c))
            events.append(((fwd_last if fwd_last >= 0 else start) + 1, -nbytes, c))
            events.append((bwd_first, nbytes, c))
            events.append((bwd_last + 1, -nbytes, c))
        else:
            events.append((start, nbytes, c))
            events.append((last + 1, -nbytes, c))
    update = next((pos for pos, aid in enumerate(ids) if plan.actors[aid].phase is Phase.OPT), None)
    events.sort()
    live = 0
    by_cat = dict.fromkeys(CATEGORIES, 0)
    best, best_cat, best_pos, most = 0, dict(by_cat), 0, dict(by_cat)
    i, n = 0, len(events)
    while i < n:
        pos = events[i][0]
        while i < n and events[i][0] == pos:
            _, d, c = events[i]
            live += d
            v = by_cat[c] = by_cat.get(c, 0) + d
            if v > most.get(c, 0):
                most[c] = v
            i += 1
        if live > best:
            best, best_cat, best_pos = live, dict(by_cat), pos
    res_total = sum(b for b, _ in resident.values())
    res_cat = dict.fromkeys(CATEGORIES, 0)
    for nbytes, c in resident.values():
        res_cat[c] = res_cat.get(c, 0) + nbytes
    at_update: dict[str, int] = {}
    if update is not None:
        at_update = dict(res_cat)
        for p, d, c in events:
            if p < update or (d < 0 and p == update):
                at_update[c] = at_update.get(c, 0) + d
    coord = divmod(core, wafer.cols)
    return CoreMemory(
        core=core,
        coord=coord,
        peak_bytes=res_total + best,
        capacity_bytes=wafer.core_sram_bytes(coord),
        breakdown=tuple((c, best_cat.get(c, 0) + res_cat[c]) for c in CATEGORIES),
        peak_actor=plan.actors[ids[min(best_pos, len(ids) - 1)]].name,
        stage=plan.actors[ids[0]].stage,
        resident=tuple((c, res_cat[c]) for c in CATEGORIES),
        at_update=tuple((c, at_update[c]) for c in CATEGORIES) if at_update else (),
        most=tuple((c, most.get(c, 0) + res_cat[c]) for c in CATEGORIES),
    )


def _assert_same(plan: Plan, meta: Sequence[ActorMeta], wafer: Wafer, recompute: bool) -> int:
    """The report's cores equal the oracle's, field by field; how many were compared."""
    got = plan_memory(plan, meta, wafer, recompute=recompute)
    want = [
        _reference_core(core, ids, plan, meta, wafer, recompute)
        for core, ids in plan.order
        if ids and not wafer.is_switch_node(core)
    ]
    assert len(got.cores) == len(want)
    for g, w in zip(got.cores, want, strict=True):
        assert g == w, f"core {w.core}: {g} != {w}"
        # plain ints, not numpy scalars (reprs, JSON and pickles stay as they were)
        assert all(type(v) is int for _, v in (*g.breakdown, *g.most, *g.at_update))
        assert type(g.peak_bytes) is int
    return len(want)


def _state_check(graph: Graph, wafer: Wafer, spec: str) -> None:
    state = build_state(clone_graph(graph), wafer, spec, check_memory=False, verify=False)
    assert state.actor_plan is not None and state.meta is not None
    assert isinstance(state.memory, MemoryReport)
    assert _assert_same(state.actor_plan, state.meta, state.wafer, state.plan.recompute) > 0


MESH = "mesh16x16"


@pytest.mark.parametrize(
    "spec",
    [
        "tp=2",
        "dp=2,tp=2,pp=2,microbatches=2,schedule=gpipe",
        "dp=2,tp=2,pp=2,microbatches=4,schedule=1f1b",
        "dp=2,tp=2,pp=2,microbatches=4,schedule=gpipe,recompute=true",
        "tp=2,pp=2,microbatches=2,schedule=1f1b,recompute=true",
    ],
)
def test_gpt2_tiny_plans_match_the_walk(gpt2_tiny: Graph, spec: str) -> None:
    _state_check(gpt2_tiny, get_wafer(MESH), spec)


def test_llama_and_cnn_plans_match_the_walk(llama_tiny: Graph, amcoda_cnn: Graph) -> None:
    _state_check(llama_tiny, get_wafer(MESH), "dp=2,tp=2,pp=2,microbatches=2,recompute=true")
    _state_check(amcoda_cnn, get_wafer(MESH), "dp=2,pp=2,microbatches=2")


@pytest.mark.parametrize("spec", ["dp=2,zero=1", "dp=2,zero=3,pp=2,microbatches=2"])
def test_adamw_step_plans_match_the_walk(spec: str) -> None:
    from waferflow.frontend import load_model, trace

    b = load_model("hf:gpt2-tiny", batch=4, seq=32)
    adam = trace(b.module, b.example_inputs, mode="train", optimizer="adamw", loss_fn=b.loss_fn)
    _state_check(adam, get_wafer(MESH), spec)


@pytest.mark.parametrize("schedule", list(PipelineSchedule))
def test_chain_pipelines_match_the_walk(schedule: PipelineSchedule) -> None:
    g = chain(4, batch=8, width=4, fwd_flops=100, bwd_flops=100)
    for rc in ("false", "true"):
        spec = f"pp=2,microbatches=4,schedule={schedule.value},recompute={rc}"
        _state_check(g, fast_wafer(2), spec)


def _random_program(rng: random.Random, cores: int) -> tuple[SimpleNamespace, list[ActorMeta]]:
    """Random actors over ``cores`` cores: keys shared within a core, reads before
    their making, received values, repeated keys in one actor, zero-byte buffers,
    categories outside CATEGORIES, optimizer actors anywhere."""
    cats = ["activations", "gradients", "scratch", "weights"]
    actors, meta, order = [], [], []
    for core in range(cores):
        ids = []
        keys = [(f"v{rng.randrange(30)}", core, rng.randrange(3)) for _ in range(25)]
        for _ in range(rng.randrange(1, 40)):
            aid = len(actors)
            phase = rng.choice([Phase.FWD, Phase.BWD, Phase.OPT, Phase.FWD])
            actors.append(SimpleNamespace(name=f"a{aid}", phase=phase, stage=core % 3))
            m = ActorMeta(rng.choice(["F0", "F1.2", "B0", "B3", "L", "S", ""]))
            for _ in range(rng.randrange(4)):
                m.produces.append((rng.choice(keys), rng.choice([0, 4, 64, 100]), rng.choice(cats)))
            for _ in range(rng.randrange(5)):
                key = rng.choice(keys)
                m.uses.append(key)
                if rng.random() < 0.2:
                    m.received[key] = rng.choice([0, 8, 96])
            if rng.random() < 0.2:
                m.resident.append((f"w{rng.randrange(5)}", rng.choice([16, 32]), rng.choice(cats)))
            meta.append(m)
            ids.append(aid)
        order.append((core, ids))
    order.append((cores, []))  # a core with nothing to run is left out
    plan = SimpleNamespace(name="random", actors=actors, order=order)
    return plan, meta


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_match_the_walk(seed: int) -> None:
    rng = random.Random(seed)
    plan, meta = _random_program(rng, cores=6)
    wafer = fast_wafer(4, rows=2)
    for recompute in (False, True):
        assert _assert_same(plan, meta, wafer, recompute) == 6  # type: ignore[arg-type]
