"""Reading the PNGs a run writes (the one image loader of the project), and what an 8-bit PNG keeps of an image."""

from __future__ import annotations

from pathlib import Path

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


def shifted_views(images: Tensor, contrast: float = 0.75) -> Tensor:
    """Semantics-preserving variants of ``images (B, C, H, W)``: the images, their one-pixel shifts up, down, left
    and right (zero fill) and a ``contrast``-scaled copy, stacked view-major ``(6 B, C, H, W)`` (differentiable)."""
    pad = torch.nn.functional.pad(images, (1, 1, 1, 1))
    h, w = images.shape[-2:]
    shifts = [pad[..., 1 + dy: 1 + dy + h, 1 + dx: 1 + dx + w] for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1))]
    return torch.cat([images, *shifts, images * contrast])


def as_saved(images: Tensor) -> Tensor:
    """``images`` in [0, 1] as an 8-bit PNG holds them (the rounding of torchvision's ``save_image``, which writes a
    run's PNGs): the same shape, every value a multiple of 1/255. A failure is judged on this image."""
    return images.mul(255).add(0.5).clamp(0, 255).floor().div(255)
