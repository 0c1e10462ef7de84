"""Faults are carried faithfully: coarse views never join what the wafer does not, and a
wafer cut into islands is refused (or its stranded cores left out) before any solver
runs (waferflow/ir/target/islands.py, coarsen.py)."""

from __future__ import annotations

import dataclasses

import networkx as nx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import waferflow.frontend
from waferflow.api import compile as wf_compile
from waferflow.errors import PlanError
from waferflow.ir.target import Topology, Wafer, get_wafer
from waferflow.ir.target.coarsen import split_nodes
from waferflow.ir.target.islands import STRANDED_MAX, connected_view, islands
from waferflow.parallel.plan_spec import parse_plan
from waferflow.parallel.span import choose_span


def _cut_mesh16() -> Wafer:
    """The issue's wafer: mesh16x16 with all 16 links between columns 7 and 8 dead."""
    cut = frozenset(((r, 7), (r, 8)) for r in range(16))
    return dataclasses.replace(get_wafer("mesh16x16"), dead_links=cut)


def _faulty(topo: Topology, rows: int, cols: int, dead: set, links: list) -> Wafer:
    base = dataclasses.replace(
        get_wafer("mesh4x4"), rows=rows, cols=cols, topology=topo, name="fuzz"
    )
    cells = sorted(c for c in dead if base.in_grid(c))[: base.num_cores - 1]
    dead_links = set()
    for r, c, i in links:
        if base.in_grid((r, c)) and base.neighbors((r, c)):
            nb = base.neighbors((r, c))[i % len(base.neighbors((r, c)))]
            dead_links.add((min((r, c), nb), max((r, c), nb)))
    return dataclasses.replace(base, dead_cores=frozenset(cells), dead_links=frozenset(dead_links))


def _components(w: Wafer) -> list[set[tuple[int, int]]]:
    g = nx.Graph()
    g.add_nodes_from(w.coord(i) for i in w.alive_cores())
    g.add_edges_from((x.src, x.dst) for x in w.links())
    return [set(c) for c in nx.connected_components(g)]


faulty_wafers = st.builds(
    _faulty,
    st.sampled_from([t for t in Topology if t is not Topology.TREE]),  # a tree: test_fabric
    st.integers(1, 9),
    st.integers(1, 9),
    st.sets(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=40),
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8)), max_size=30),
)


@settings(max_examples=150, deadline=None)
@given(faulty_wafers)
def test_islands_are_the_connected_components(w: Wafer) -> None:
    found = islands(w)
    ref = sorted((len(c) for c in _components(w)), reverse=True)
    assert [i.nodes for i in found] == ref
    for island in found[1:]:  # the smaller ones list their cores
        assert any(set(island.cells) == c for c in _components(w))


@settings(max_examples=100, deadline=None)
@given(
    faulty_wafers.filter(lambda w: w.topology is not Topology.CROSSBAR),
    st.integers(2, 5),
)
def test_a_coarse_view_never_joins_what_the_wafer_does_not(w: Wafer, k: int) -> None:
    """Each alive node stands for a connected part of its block (all its alive cores,
    or the largest part when a cut runs through it), and two nodes the view connects
    stand for cores the wafer connects: a route on the view exists on the wafer."""
    view = w.coarsen(k)
    kept = split_nodes(w, k)
    fine_island = {c: i for i, comp in enumerate(_components(w)) for c in comp}

    def part(node: tuple[int, int]) -> set[tuple[int, int]]:
        if node in kept:
            return set(kept[node])
        r0, c0 = node[0] * k, node[1] * k
        return {
            (r, c)
            for r in range(r0, min(r0 + k, w.rows))
            for c in range(c0, min(c0 + k, w.cols))
            if not w.is_dead((r, c))
        }

    for comp in _components(view):
        cells = set().union(*(part(n) for n in comp))
        assert len({fine_island[c] for c in cells}) == 1
        for n in comp:
            assert len(part(n)) == round(view.capacity(n) * k * k)


@pytest.mark.parametrize("k", range(1, 9))
def test_the_cut_is_seen_on_every_view(k: int) -> None:
    view = _cut_mesh16().coarsen(k)
    assert len(islands(view)) == 2
    with pytest.raises(PlanError, match=r"cut into 2 islands .* island 1: .* island 2: "):
        connected_view(view)


@pytest.mark.parametrize("span", ["1", "2", "3", "5", "auto"])
def test_the_cut_is_refused_for_every_span(span: str) -> None:
    plan = parse_plan(f"dp=2,tp=2,span={span}")
    with pytest.raises(PlanError, match="islands"):
        choose_span(_cut_mesh16(), plan)


def test_a_cut_wafer_is_refused_before_anything_is_traced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_trace(*args: object, **kwargs: object) -> None:
        raise AssertionError("traced before the wafer was checked")

    monkeypatch.setattr(waferflow.frontend, "trace", no_trace)
    with pytest.raises(PlanError) as info:
        wf_compile(nn.Linear(4, 4), (torch.randn(2, 4),), wafer=_cut_mesh16(), plan="dp=2")
    text = str(info.value)
    assert "island 1: 128 cores (rows 0-15, cols 0-7)" in text
    assert "island 2: 128 cores (rows 0-15, cols 8-15)" in text
    assert "faults.dead_links" in text  # what to change


def test_stranded_cores_are_left_out_with_a_note() -> None:
    """One alive core walled in by dead neighbours does not refuse the wafer."""
    w = dataclasses.replace(get_wafer("mesh16x16"), dead_cores=frozenset({(0, 1), (1, 0)}))
    view, notes = connected_view(w)
    assert view.dead_cores == w.dead_cores | {(0, 0)}
    assert 1 / w.num_alive <= STRANDED_MAX
    assert notes == (
        "wafer 'mesh16x16': left out 1 alive core cut off from the rest by dead cores and "
        "links (0.39% of its capacity): [0, 0]",
    )
    compiled = wf_compile(nn.Linear(4, 4), (torch.randn(2, 4),), wafer=w, mode="infer")
    assert any("left out 1 alive core" in n for n in compiled.notes)
    assert (0, 0) in compiled.wafer.dead_cores
    assert 0 not in {a.core for a in compiled.plan.actors}


def test_too_much_stranded_capacity_is_refused() -> None:
    # a crossbar core all of whose links are dead: 1 of 16 cores is over STRANDED_MAX
    w = get_wafer("amcoda")
    links = frozenset(((0, 0), w.coord(i)) for i in range(1, w.num_cores))
    with pytest.raises(
        PlanError, match=r"cut into 2 islands .* island 2: 1 core \(core \[0, 0\]\)"
    ):
        connected_view(dataclasses.replace(w, dead_links=links))
