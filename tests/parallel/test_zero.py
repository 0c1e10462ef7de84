"""ZeRO stages (``zero=1|2|3``): per-rank memory and bytes moved against closed forms.

The model: ``fc2(relu(fc1(x)))`` with fc1 16 -> 32 and fc2 32 -> 16 in f32, AdamW,
loss ``mean(out**2)`` (so every gradient depends on the data and is a partial sum
over the replicas), batch 8. Per parameter (bytes):

    W1 2048, b1 128 (bucket B1 = 2176), W2 2048, b2 64 (bucket B2 = 2112); Psi = 4288

With N = dp replicas, m micro-batches, f = (N - 1) / N and ring collectives (a ring
reduce-scatter or all-gather of S bytes sends f S per rank; an all-reduce twice
that), ZeRO's closed forms per rank are:

======  =========  ==============  ===================  ===============================
stage   weights    AdamW state     gradients at update  bytes moved per step
======  =========  ==============  ===================  ===============================
0       Psi        2 Psi           Psi                  all-reduce 2 f Psi
1       Psi        2 Psi / N       Psi / N              reduce-scatter f Psi,
                                                        all-gather f Psi
2       Psi        2 Psi / N       Psi / N              reduce-scatter m f Psi,
                                                        all-gather f Psi
3       Psi / N    2 Psi / N       Psi / N              reduce-scatter m f Psi,
                                                        all-gather m f (Psi + W2)
======  =========  ==============  ===================  ===============================

Stage 3 gathers every parameter before its forward use and, again, the ones the
backward reads (only W2: the input gradient of fc1 is not needed), per micro-batch.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.frontend import trace
from waferflow.ir import print_graph
from waferflow.ir.graph import Graph, Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.sharding import MeshAxis, Split
from waferflow.ir.verifier import verify_graph
from waferflow.parallel import ParallelResult, build_parallel_plan, parse_plan
from waferflow.parallel.zero import choose_split, zero_rough

from .graphs import fast_wafer

K = OpKind
W1, B1, W2, B2 = 2048, 128, 2048, 64
PSI = W1 + B1 + W2 + B2


class _MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _squared(out: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    return (out * out).mean()


@pytest.fixture(scope="module")
def step() -> Graph:
    with torch.device("meta"):
        model = _MLP()
    x = torch.empty(8, 16, device="meta")
    return trace(model, (x,), mode="train", loss_fn=_squared, name="mlp", optimizer="adamw")


def _build(step: Graph, plan: str) -> ParallelResult:
    return build_parallel_plan(step, fast_wafer(8), f"{plan},span=1,algo=ring")


def _moved(r: ParallelResult) -> dict[tuple[OpKind, Phase], int]:
    """Bytes received by collective steps, per (kind, phase), over all ranks."""
    out: dict[tuple[OpKind, Phase], int] = {}
    for m in r.plan.messages:
        a = r.plan.actors[m.dst_actor]
        if a.op_kind in (K.ALL_REDUCE, K.REDUCE_SCATTER, K.ALL_GATHER) and m.bytes:
            out[(a.op_kind, a.phase)] = out.get((a.op_kind, a.phase), 0) + m.bytes
    return out


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_bytes_per_rank_match_the_closed_forms(step: Graph, zero: int, n: int) -> None:
    r = _build(step, f"dp={n},zero={zero}")
    weights = PSI // n if zero == 3 else PSI
    state = 2 * PSI // n if zero >= 1 else 2 * PSI
    grads = PSI // n if zero >= 1 else PSI
    for core in r.memory.cores:
        assert core.resident_part("weights") == weights
        assert core.resident_part("optimizer") == state
        assert core.update_part("gradients") == grads


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_bytes_moved_match_the_closed_forms(step: Graph, zero: int, n: int) -> None:
    m = 2
    moved = _moved(_build(step, f"dp={n},zero={zero},microbatches={m}"))
    per_rank = {key: total // n for key, total in moved.items()}
    f = (n - 1) / n
    loss = (K.ALL_REDUCE, Phase.FWD)  # the returned loss, the same in every stage
    per_rank.pop(loss)
    expected = {
        0: {(K.ALL_REDUCE, Phase.BWD): 2 * f * PSI},
        1: {(K.REDUCE_SCATTER, Phase.BWD): f * PSI, (K.ALL_GATHER, Phase.OPT): f * PSI},
        2: {(K.REDUCE_SCATTER, Phase.BWD): m * f * PSI, (K.ALL_GATHER, Phase.OPT): f * PSI},
        3: {
            (K.REDUCE_SCATTER, Phase.BWD): m * f * PSI,
            (K.ALL_GATHER, Phase.FWD): m * f * PSI,
            (K.ALL_GATHER, Phase.BWD): m * f * W2,
        },
    }[zero]
    assert per_rank == {k: int(v) for k, v in expected.items()}


def test_stage_two_frees_the_whole_gradients_during_the_backward(step: Graph) -> None:
    """Stage 1 holds every whole gradient until the step's end: at fc2's reduce-scatter
    (in block L) both whole buckets and fc2's new shard are live, Psi + B2 / 2. Stage 2
    reduce-scatters each bucket as the backward makes it: at most the last bucket
    whole (fc1's, B1) beside every shard, Psi / 2 + B1."""
    one = _build(step, "dp=2,zero=1").memory.cores[0]
    two = _build(step, "dp=2,zero=2").memory.cores[0]
    assert one.most_part("gradients") == PSI + (B2 + W2) // 2
    assert two.most_part("gradients") == PSI // 2 + W1 + B1


def test_stage_three_gathers_a_layer_just_in_time(step: Graph) -> None:
    """At most one layer's parameters are whole at once beside the shards: fc1's
    (W1 + b1) while fc1 runs."""
    core = _build(step, "dp=2,zero=3").memory.cores[0]
    assert core.most_part("weights") == PSI // 2 + W1 + B1


def test_the_ir_says_where_the_collectives_run(step: Graph) -> None:
    r = _build(step, "dp=2,zero=3,microbatches=2")
    g = r.graph
    assert g.parallel is not None and g.parallel.zero == 3
    assert "zero=3" in print_graph(g).splitlines()[0]
    gathers = [op for op in g.ops if op.kind is K.ALL_GATHER]
    users = g.users()
    for op in gathers:
        (user,) = [u for u in users[op.results[0]] if u.kind not in (K.VIEW, K.TRANSPOSE)]
        between = g.ops[g.ops.index(op) + 1 : g.ops.index(user)]
        assert all(x.kind is K.ALL_GATHER for x in between)  # right before its user
        assert op.phase is user.phase
        assert op.par is not None and op.par.mode is user.par.mode  # type: ignore[union-attr]
    params = {op.results[0].name: op for op in g.ops if op.kind is K.PARAM}
    assert all(isinstance(p.results[0].sharding.get(MeshAxis.DP), Split) for p in params.values())
    # the updated parameters stay shards: nothing is gathered after the optimizer
    assert not [op for op in gathers if op.phase is Phase.OPT]
    one = _build(step, "dp=2,zero=1").graph
    updated = [op for op in one.ops if op.kind is K.ALL_GATHER]
    assert len(updated) == 4 and all(op.phase is Phase.OPT for op in updated)
    assert all(v.sharding.is_replicated for v in one.outputs[1:5])  # the new parameters


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_round_trip_verify_and_simulate(step: Graph, zero: int) -> None:
    r = _build(step, f"dp=2,zero={zero},microbatches=2")
    verify_graph(r.graph)
    text = print_graph(r.graph)
    assert print_graph(parse_graph(text)) == text
    assert r.memory.fits
    assert simulate(r.plan, r.wafer).step_time > 0


def test_zero_on_gpt2_with_tensor_and_pipeline_parallelism(gpt2_tiny: Graph) -> None:
    """Tied embeddings, Megatron splits and stages: each parameter's dp shard is cut
    beside its tp split, and the graph verifies."""
    r = build_parallel_plan(
        gpt2_tiny, fast_wafer(8, rows=2), "dp=2,tp=2,pp=2,microbatches=2,zero=3,span=1"
    )
    verify_graph(r.graph)
    base = build_parallel_plan(gpt2_tiny, fast_wafer(8, rows=2), "dp=2,tp=2,pp=2,mb=2,span=1")
    for z, b in zip(r.memory.cores, base.memory.cores, strict=True):
        assert z.resident_part("weights") * 2 <= b.resident_part("weights") + 64


@pytest.mark.parametrize(
    ("shape", "tp", "n", "split"),
    [
        ((32, 16), None, 2, Split(0, 16)),
        ((32, 16), Split(0, 16), 2, Split(1, 8)),  # dim 0 is tp's: cut dim 1
        ((6, 8), Split(1, 4), 4, Split(1, 1)),  # only tp's dim divides: inside its blocks
        ((6,), None, 4, Split(0, 2)),  # padded: the last replica holds nothing
    ],
)
def test_choose_split(shape: tuple[int, ...], tp: Split | None, n: int, split: Split) -> None:
    assert choose_split(shape, tp, 2 if tp else 1, n) == split


def test_rough_state_follows_the_stages() -> None:
    w, g, o = 100.0, 100.0, 200.0
    got = [zero_rough(parse_plan(f"dp=4,zero={z}"), w, g, o, 10, 1.0, 0.0) for z in (1, 2, 3)]
    assert [r.state_bytes for r in got[:2]] == [w + g + o / 4, w + (g + o) / 4]
    assert got[2].state_bytes == (w + g + o) / 4 + 2 * w / 10


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("zero=1", "with dp=1 there is nothing to shard"),
        ("dp=2,zero=4", "zero must be 0, 1, 2 or 3"),
        ("layers=dd,ways=2,zero=1", "per-layer pattern"),
        ("dp=2,zero=2,grad-reduce=root", "grad-reduce=root"),
    ],
)
def test_bad_zero_plans(text: str, needle: str) -> None:
    with pytest.raises(PlanError) as info:
        parse_plan(text)
    assert needle in str(info.value)
