"""A deterministic labelled image dataset of simple shapes, for the tests of the image store and the zoo build.

:func:`write_shapes` draws one shape per image (a class per shape: square, disc, triangle, ...) at a random
position and scale, in a random colour on a random background of contrasting brightness, with a little noise, and
saves it as PNG in the ``ImageFolder`` layout ``root/<class>/<i>.png`` or as flat files named in ``root/labels.csv``.
"""

from __future__ import annotations

import csv as csv_module
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

Mask = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (dx, dy) in shape radii -> bool mask


def _box(dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return np.maximum(np.abs(dx), np.abs(dy))


#: the classes, in order: name -> mask of the shape centred at 0 with radius 1
SHAPES: dict[str, Mask] = {
    "square": lambda dx, dy: _box(dx, dy) < 0.8,
    "disc": lambda dx, dy: np.hypot(dx, dy) < 0.9,
    "triangle": lambda dx, dy: (np.abs(dy) < 0.85) & (np.abs(dx) < (dy + 0.85) * 0.6),
    "cross": lambda dx, dy: ((np.abs(dx) < 0.25) | (np.abs(dy) < 0.25)) & (_box(dx, dy) < 0.95),
    "bar": lambda dx, dy: (np.abs(dx) < 0.95) & (np.abs(dy) < 0.25),
    "ring": lambda dx, dy: (np.hypot(dx, dy) < 0.95) & (np.hypot(dx, dy) > 0.55),
    "diamond": lambda dx, dy: np.abs(dx) + np.abs(dy) < 0.95,
    "frame": lambda dx, dy: (_box(dx, dy) < 0.9) & (_box(dx, dy) > 0.55),
    "saltire": lambda dx, dy: ((np.abs(dx - dy) < 0.35) | (np.abs(dx + dy) < 0.35)) & (_box(dx, dy) < 0.9),
    "pillar": lambda dx, dy: (np.abs(dy) < 0.95) & (np.abs(dx) < 0.25),
}


def _colours(rng: np.random.Generator, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """A background and a shape colour ``(channels,)`` in [0, 1] whose mean brightness differs by at least 0.35."""
    while True:
        background, foreground = rng.uniform(0.0, 1.0, (2, channels))
        if abs(background.mean() - foreground.mean()) >= 0.35:
            return background, foreground


def draw_shape(rng: np.random.Generator, shape: str, height: int, width: int, channels: int) -> np.ndarray:
    """One image of ``shape``: ``(height, width, channels)`` uint8."""
    side = min(height, width)
    radius = rng.uniform(0.25, 0.38) * side
    cy = rng.uniform(radius, height - radius)
    cx = rng.uniform(radius, width - radius)
    rows, cols = np.mgrid[0:height, 0:width] + 0.5
    mask = SHAPES[shape]((cols - cx) / radius, (rows - cy) / radius)[..., None]
    background, foreground = _colours(rng, channels)
    image = np.where(mask, foreground, background) + rng.normal(0.0, 0.03, (height, width, channels))
    return np.round(np.clip(image, 0.0, 1.0) * 255).astype(np.uint8)


def _variant(i: int, size: int, mixed: bool) -> tuple[int, int, bool]:
    """``(height, width, saved in the other channel mode)`` of image ``i`` of a class: with ``mixed``, every
    5th image (from the 2nd) has another size (alternately larger and non-square), every 7th (from the 4th) is saved
    in the other channel mode."""
    height = width = size
    if mixed and i % 5 == 1:
        height, width = (size + 8, size + 8) if i % 10 == 1 else (size, size + 6)
    other = mixed and i % 7 == 3
    return height, width, other


def write_shapes(root: str | Path, *, classes: int = 4, per_class: int = 30, size: int = 24, channels: int = 3,
                 seed: int = 0, csv: bool = False, mixed: bool = False, unreadable: int = 0) -> Path:
    """Write ``classes x per_class`` PNG images of shapes (:data:`SHAPES`, in order) of ``size x size`` under ``root``.

    Folder layout ``root/<shape>/<i>.png``; ``csv=True``: flat files ``root/img_<n>.png`` and ``root/labels.csv``
    (``file,label``, the label a shape name, rows ordered image by image across the classes). ``mixed``: some images
    at other sizes and some in the other channel mode (see :func:`_variant`). ``unreadable``: that many extra
    ``.png`` files that are not images, spread over the classes. The same arguments give the same bytes.
    """
    if not 1 <= classes <= len(SHAPES):
        raise ValueError(f"classes must be 1-{len(SHAPES)}, got {classes}")
    root = Path(root)
    names = list(SHAPES)[:classes]
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str]] = []
    for folder in ([] if csv else names):
        (root / folder).mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(per_class):
        for name in names:
            height, width, other = _variant(i, size, mixed)
            pixels = draw_shape(rng, name, height, width, channels)
            image = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, mode="L" if channels == 1 else "RGB")
            if other:
                image = image.convert("RGB" if channels == 1 else "L")
            relative = f"img_{len(rows):05d}.png" if csv else f"{name}/{i}.png"
            image.save(root / relative)
            rows.append((relative, name))
    for j in range(unreadable):
        name = names[j % classes]
        relative = f"broken_{j}.png" if csv else f"{name}/broken_{j}.png"
        (root / relative).write_bytes(b"not an image " + bytes(rng.integers(0, 256, 40, dtype=np.uint8)))
        rows.append((relative, name))
    if csv:
        with (root / "labels.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv_module.writer(handle)
            writer.writerow(["file", "label"])
            writer.writerows(rows)
    return root
