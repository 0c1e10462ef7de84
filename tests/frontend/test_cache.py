"""Zoo models are traced once per process; every call gets its own graph. (Across
processes, on disk: test_disk_cache.py.)"""

from __future__ import annotations

import pytest

from waferflow.frontend import clear_trace_cache, trace_model
from waferflow.ir import print_graph
from waferflow.ir.opkind import OpKind


def test_a_zoo_model_is_traced_once_and_handed_out_as_copies(
    monkeypatch: pytest.MonkeyPatch, loads: list[str]
) -> None:
    monkeypatch.setenv("WAFERFLOW_CACHE_DIR", "off")  # this process's cache alone
    clear_trace_cache()
    a = trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
    b = trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
    assert loads == ["hf:gpt2-tiny"]
    assert a is not b and print_graph(a) == print_graph(b)
    a.erase_ops([a.ops[-1]])  # a pass rewriting its copy leaves the cache alone
    assert print_graph(trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)) == print_graph(b)
    trace_model("hf:gpt2-tiny", mode="infer", batch=2, seq=16)  # another key: traced
    assert loads == ["hf:gpt2-tiny", "hf:gpt2-tiny"]
    clear_trace_cache()
    trace_model("hf:gpt2-tiny", mode="train", batch=2, seq=16)
    assert len(loads) == 3


def test_the_expert_load_skew_is_part_of_the_key() -> None:
    clear_trace_cache()

    def capacities(skew: float) -> set[object]:
        g = trace_model("hf:mixtral-tiny", mode="infer", moe_skew=skew)
        return {op.attrs.get("capacity") for op in g.ops if op.kind is OpKind.MOE_DISPATCH}

    uniform, skewed = capacities(1.0), capacities(1.5)
    assert len(uniform) == 1 and len(skewed) == 1 and skewed != uniform
    assert capacities(1.0) == uniform  # each from its own cache entry
    clear_trace_cache()
