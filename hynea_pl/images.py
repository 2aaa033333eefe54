"""Reading the PNGs a run writes (the one image loader of the project), and what an 8-bit PNG keeps of an image."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import Tensor


def load_image(path: Path) -> Tensor:
    """PNG -> ``(C, H, W)`` float32 in ``[0, 1]``; C = 1 for grayscale, 3 otherwise (alpha dropped)."""
    with Image.open(path) as im:
        if im.mode.startswith("I;16") or im.mode == "I":
            arr = np.asarray(im, dtype=np.float64) / (65535.0 if im.mode.startswith("I;16") else max(1.0, float(np.asarray(im).max())))
            return torch.from_numpy(arr).float().unsqueeze(0)
        if im.mode in ("1", "L", "LA"):
            arr = np.asarray(im.convert("L"), dtype=np.float32) / 255.0
            return torch.from_numpy(arr).unsqueeze(0)
        arr = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
        return torch.from_numpy(arr).permute(2, 0, 1).contiguous()


GRAY_MODES = ("1", "L", "LA", "I", "F")


def png_shape(path: Path) -> tuple[int, int, int]:
    """The ``(C, H, W)`` :func:`load_image` gives for ``path``, from its header alone."""
    with Image.open(path) as im:
        channels = 1 if im.mode in GRAY_MODES or im.mode.startswith("I;16") else 3
        return channels, im.height, im.width


def describe_shape(shape: tuple[int, ...]) -> str:
    """``32x32, 3 channels`` for ``(3, 32, 32)``."""
    c, h, w = shape
    return f"{h}x{w}, {c} channel{'s' if c != 1 else ''}"


def run_image_shape(run_dir: Path, records: Sequence[Any]) -> tuple[int, int, int] | None:
    """A run's image shape ``(C, H, W)``: the shape most of its case PNGs (origins and results) have, from their
    headers; ``None`` when none can be read."""
    shapes: Counter[tuple[int, int, int]] = Counter()
    for record in records:
        for key in ("origin_image", "result_image"):
            relative = getattr(record, key, None)
            if relative and (Path(run_dir) / relative).is_file():
                try:
                    shapes[png_shape(Path(run_dir) / relative)] += 1
                except OSError:
                    continue
    return shapes.most_common(1)[0][0] if shapes else None


def check_run_image(path: Path, image: Tensor, expected: tuple[int, ...] | None) -> Tensor:
    """``image`` (read from ``path``), refused with one line naming the file and both sizes when it is not of the
    run's shape ``expected`` (``None``: not checked)."""
    if expected is not None and tuple(image.shape) != tuple(expected):
        raise ValueError(f"{path} is {describe_shape(tuple(image.shape))}, the run's images are "
                         f"{describe_shape(tuple(expected))}: replace it with the run's own PNG or drop its case")
    return image


def load_run_image(path: Path, expected: tuple[int, ...] | None) -> Tensor:
    """:func:`load_image` and :func:`check_run_image`."""
    return check_run_image(path, load_image(path), expected)


def shift_image(images: Tensor, dy: int, dx: int, mode: str = "constant") -> Tensor:
    """``images (B, C, H, W)`` with their content moved ``dy`` rows down and ``dx`` columns right (negative: up,
    left); the uncovered border is zeros (``mode="constant"``) or repeats the edge (``"replicate"``). The same
    shape (differentiable)."""
    h, w = images.shape[-2:]
    pad = max(abs(dy), abs(dx))
    if pad == 0:
        return images
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad), mode=mode)
    top, left = pad - dy, pad - dx
    return padded[..., top: top + h, left: left + w]


def shifted_views(images: Tensor, contrast: float = 0.75) -> Tensor:
    """Semantics-preserving variants of ``images (B, C, H, W)``: the images, their one-pixel shifts down, up, right
    and left (zero fill) and a ``contrast``-scaled copy, stacked view-major ``(6 B, C, H, W)`` (differentiable)."""
    shifts = [shift_image(images, dy, dx) for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1))]
    return torch.cat([images, *shifts, images * contrast])


def as_saved(images: Tensor) -> Tensor:
    """``images`` in [0, 1] as an 8-bit PNG holds them (the rounding of torchvision's ``save_image``, which writes a
    run's PNGs): the same shape, every value a multiple of 1/255. A failure is judged on this image."""
    return images.mul(255).add(0.5).clamp(0, 255).floor().div(255)


def from_levels(levels: Tensor) -> Tensor:
    """8-bit levels (uint8, any shape) as float32 in [0, 1]: ``level / 255``, the scale of every image here."""
    return levels.to(torch.float32).div_(255.0)
