"""Reading the pictures back in tests: decoded pixels, colour sets and counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.image import imread

DPI = 80  # small figures keep the tests fast


def pixels(path: Path) -> np.ndarray:
    """The PNG as an (h, w, 3) uint8 array."""
    img = imread(path)
    return np.round(img[..., :3] * 255).astype(np.uint8)


def rgb8(colour: object) -> tuple[int, int, int]:
    """A matplotlib colour as the 8-bit RGB the Agg renderer writes for it."""
    r, g, b = to_rgb(colour)  # type: ignore[arg-type]
    return (round(r * 255), round(g * 255), round(b * 255))


def colours(img: np.ndarray) -> set[tuple[int, int, int]]:
    flat = img.reshape(-1, 3)
    return {tuple(int(v) for v in row) for row in np.unique(flat, axis=0)}


def count(img: np.ndarray, colour: object) -> int:
    """Pixels of exactly this colour (within one 8-bit step for rounding)."""
    target = np.array(rgb8(colour), dtype=np.int16)
    diff = np.abs(img.astype(np.int16) - target).max(axis=-1)
    return int((diff <= 1).sum())
