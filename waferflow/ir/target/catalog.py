"""Where the preset wafers live: one commented TOML file per preset in ``presets/``."""

from __future__ import annotations

import difflib
from pathlib import Path

from waferflow.errors import ConfigError

PRESET_DIR = Path(__file__).resolve().parent / "presets"
_NOT_PRESETS = ("example",)  # documentation files in the same folder


def list_presets() -> list[str]:
    """Names of the preset wafers, sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml") if p.stem not in _NOT_PRESETS)


def split_view(name: str) -> tuple[str, int | None]:
    """``NAME@Kx`` (the K x K coarse view of NAME) as ``(NAME, K)``; any other name as
    ``(name, None)``."""
    base, at, factor = name.rpartition("@")
    if at and factor.endswith("x") and factor[:-1].isdigit():
        return base, int(factor[:-1])
    return name, None


def normalize_name(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def preset_path(name: str) -> Path:
    """The TOML file of preset ``name`` (case and ``_`` / ``-`` do not matter)."""
    key = normalize_name(name)
    names = list_presets()
    if key not in names:
        close = difflib.get_close_matches(key[:100], names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"unknown wafer preset {name!r}{hint}. Known presets: {', '.join(names)}; "
            "or give the path of a .toml file"
        )
    return PRESET_DIR / f"{key}.toml"
