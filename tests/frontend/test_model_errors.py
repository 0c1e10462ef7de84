"""Models that cannot become a dataflow graph get one ``TraceError`` naming the cause:
data-dependent shapes, builtin factories, ``sys.exit`` in a model file; and complex
parameters do train."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from waferflow.errors import TraceError
from waferflow.frontend import load_model, trace
from waferflow.frontend.convert import UnknownOpWarning
from waferflow.ir import OpKind


class _Masked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return y[y > 0].sum()  # as many elements as are positive: a data-dependent shape


class _NonZero(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        return torch.nonzero(y).float().sum() + y.sum()


class _Complex(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(8, 8, dtype=torch.complex64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x.to(torch.complex64) @ self.w).abs().sum()


@pytest.mark.parametrize("model", [_Masked, _NonZero], ids=["mask-index", "nonzero"])
@pytest.mark.parametrize("mode", ["infer", "train"])
def test_data_dependent_shapes_are_a_trace_error(model: type[nn.Module], mode: str) -> None:
    with pytest.warns() if model is _NonZero else _nothing(), pytest.raises(TraceError) as info:
        trace(model(), (torch.randn(2, 8),), mode=mode)
    text = str(info.value)
    assert "shape that depends on tensor values" in text and "torch.where" in text
    assert "aten.index" in text or "aten.nonzero" in text


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_complex_parameters_train() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownOpWarning)  # aten._conj has no op kind
        g = trace(_Complex(), (torch.randn(2, 8),), mode="train")
    assert [op.results[0].name for op in g.sources(OpKind.PARAM)] == ["w"]
    assert any(v.name == "w.new" for v in g.outputs)  # it got a gradient and an update


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "models.py"
    path.write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            from torch import nn

            builtin_max = max

            def quits(batch=2):
                sys.exit(3)

            def fine(batch=2):
                return nn.Linear(4, 4), (torch.randn(batch, 4),)
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "script.py").write_text("import sys\nsys.exit(5)\n", encoding="utf-8")
    return path


def test_a_builtin_factory_is_named(model_file: Path) -> None:
    with pytest.raises(TraceError, match=r"'builtin_max' is the Python builtin max, not a model"):
        load_model(f"{model_file}:builtin_max")
    assert load_model(f"{model_file}:fine", batch=3).example_inputs[0].shape == (3, 4)


def test_sys_exit_in_a_model_file_is_a_trace_error(model_file: Path) -> None:
    with pytest.raises(TraceError, match=r"quits called sys\.exit\(3\); it must return"):
        load_model(f"{model_file}:quits")
    with pytest.raises(TraceError, match=r"script\.py' called sys\.exit\(5\).*__main__"):
        load_model(f"{model_file.parent / 'script.py'}:anything")
