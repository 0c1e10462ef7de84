"""The zoo's table without torch: names (case-insensitive, with a did-you-mean) and
parameter counts equal to the built models' (the closed forms are checked here)."""

from __future__ import annotations

import pytest

from waferflow.errors import TraceError
from waferflow.frontend.catalog import SPECS, canonical_model, list_models, param_count


@pytest.mark.parametrize("key", list(SPECS))
def test_param_count_equals_the_built_model(key: str) -> None:
    from waferflow.frontend import load_model

    module = load_model(f"hf:{key}").module
    assert param_count(f"hf:{key}") == sum(p.numel() for p in module.parameters())


def test_gpt2_small_has_124m_parameters() -> None:
    assert param_count("hf:gpt2") == 124_439_808  # the published GPT-2 small, tied head
    assert param_count("cnn:amcoda") is None  # not counted by formula: built, then counted


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [("HF:GPT2", "hf:gpt2"), ("hf:Llama-Tiny", "hf:llama-tiny"), ("CNN:amcoda", "cnn:amcoda"),
     ("m.py:make", "m.py:make")],
)  # fmt: skip
def test_names_are_case_insensitive(spec: str, canonical: str) -> None:
    assert canonical_model(spec) == canonical


@pytest.mark.parametrize(
    ("spec", "hint"),
    [("hf:gtp2", "did you mean hf:gpt2?"), ("gpt2", "did you mean hf:gpt2?"),
     ("cnn:resnet", "did you mean cnn:resnet-tiny?"), ("zzz", "path/to/file.py:factory")],
)  # fmt: skip
def test_unknown_names_get_a_did_you_mean(spec: str, hint: str) -> None:
    with pytest.raises(TraceError, match="unknown model") as exc:
        canonical_model(spec)
    assert hint in str(exc.value)


def test_list_models_is_the_zoo() -> None:
    names = [n for n, _ in list_models()]
    assert names[0] == "hf:gpt2" and "cnn:amcoda" in names and len(names) == len(set(names))
