"""Fixtures of the front end's tests."""

from __future__ import annotations

import pytest

from waferflow.frontend import zoo


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The specs ``load_model`` is called with: one per real trace."""
    seen: list[str] = []
    real = zoo.load_model

    def counting(spec: str, **kw: object) -> object:
        seen.append(spec)
        return real(spec, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(zoo, "load_model", counting)
    return seen
