"""Batched image augmentations for the zoo's models (torch ops, fast on CPU): affine warps (shift, rotation, scale),
stroke-width changes (grey dilation / erosion), elastic deformation, faint pixel noise and plain integer shifts.

Images ``(B, C, H, W)`` in [0, 1] in, the same shape in [0, 1] out."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F


def _uniform(n: int, low: float, high: float, generator: torch.Generator | None) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=generator)


def _identity_grid(h: int, w: int, like: torch.Tensor) -> torch.Tensor:
    """Pixel-centre sampling grid ``(1, H, W, 2)`` (x, y in [-1, 1], ``align_corners=False``)."""
    xs = torch.linspace(-1 + 1 / w, 1 - 1 / w, w, dtype=like.dtype, device=like.device)
    ys = torch.linspace(-1 + 1 / h, 1 - 1 / h, h, dtype=like.dtype, device=like.device)
    return torch.stack([xs.view(1, w).expand(h, w), ys.view(h, 1).expand(h, w)], -1).unsqueeze(0)


def affine(images: torch.Tensor, angle_deg: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Rotate each image by ``angle_deg (B,)`` (counter-clockwise), scale it by ``scale (B,)`` (> 1 enlarges the
    digit) and translate it by ``shift (B, 2)`` pixels (x, y) about the image centre; bilinear, zero fill.
    ``angle 0, scale 1, shift 0`` is the identity."""
    b, _, h, w = images.shape
    theta = angle_deg.to(images) * (math.pi / 180.0)
    cos, sin = torch.cos(theta) / scale.to(images), torch.sin(theta) / scale.to(images)
    # the grid maps output coordinates to input ones: the inverse of the warp, in [-1, 1] units
    tx = -2.0 * shift[:, 0].to(images) / w
    ty = -2.0 * shift[:, 1].to(images) / h
    matrix = torch.stack([
        torch.stack([cos, -sin, cos * tx - sin * ty], 1),
        torch.stack([sin, cos, sin * tx + cos * ty], 1),
    ], 1)
    base = _identity_grid(h, w, images)  # (1, H, W, 2)
    grid = torch.einsum("bij,hwj->bhwi", matrix[:, :, :2], base[0]) + matrix[:, :, 2].view(b, 1, 1, 2)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False).clamp(0.0, 1.0)


def random_affine(images: torch.Tensor, max_shift: float, max_rotation: float, max_scale: float,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Uniform shift in ``[-max_shift, max_shift]`` px, rotation in ``[-max_rotation, max_rotation]`` degrees and
    scale in ``[1 - max_scale, 1 + max_scale]``, drawn per image."""
    b = images.shape[0]
    angle = _uniform(b, -max_rotation, max_rotation, generator)
    scale = _uniform(b, 1.0 - max_scale, 1.0 + max_scale, generator)
    shift = _uniform(2 * b, -max_shift, max_shift, generator).view(b, 2)
    return affine(images, angle, scale, shift)


def _neighbourhood(images: torch.Tensor, kernel: int, value: float, before: int,
                   reduce: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``reduce`` (max / min) over each pixel's ``kernel x kernel`` window starting ``before`` pixels above and to
    the left of it, padded with ``value`` (shifted slices: much faster on CPU than a 1-channel pooling)."""
    h, w = images.shape[-2:]
    after = kernel - 1 - before
    padded = F.pad(images, (before, after, before, after), value=value)
    out = padded[..., :h, :w]
    for dy in range(kernel):
        for dx in range(kernel):
            if dy or dx:
                out = reduce(out, padded[..., dy : dy + h, dx : dx + w])
    return out


def dilate(images: torch.Tensor, kernel: int = 2) -> torch.Tensor:
    """Grey dilation with a ``kernel x kernel`` square (max filter): thicker strokes, same shape."""
    return _neighbourhood(images, kernel, 0.0, (kernel - 1) // 2, torch.maximum)


def erode(images: torch.Tensor, kernel: int = 2) -> torch.Tensor:
    """Grey erosion with a ``kernel x kernel`` square (min filter, ``-max(-x)``): thinner strokes, same shape.

    The window is the dilation's reflected (they differ for an even kernel), so ``erode(dilate(x)) >= x`` (a
    closing) and the half-pixel shifts of an even kernel's dilation and erosion are opposite."""
    return _neighbourhood(images, kernel, 1.0, kernel // 2, torch.minimum)


def random_stroke(images: torch.Tensor, prob: float, kernel: int = 2,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    """Dilate each image with probability ``prob / 2``, erode it with probability ``prob / 2``, else keep it."""
    if prob <= 0:
        return images
    draw = torch.rand(images.shape[0], generator=generator).to(images.device)  # drawn on the CPU: the same anywhere
    out = images.clone()
    thick, thin = draw < prob / 2, (draw >= prob / 2) & (draw < prob)
    out[thick] = dilate(images[thick], kernel)
    out[thin] = erode(images[thin], kernel)
    return out


def elastic(images: torch.Tensor, noise: torch.Tensor, alpha: float) -> torch.Tensor:
    """Elastic deformation: a coarse displacement ``noise (B, 2, g, g)`` (x, y; any range) is upsampled bicubically
    to a smooth field over the image, scaled so that its largest displacement is ``alpha`` px, and each pixel is
    sampled from its displaced position (bilinear, zero fill); ``alpha 0`` is the identity."""
    b, c, h, w = images.shape
    field = F.interpolate(noise.to(images), size=(h, w), mode="bicubic", align_corners=False)
    field = field / field.abs().amax(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6) * alpha
    offset = torch.stack([field[:, 0] * (2.0 / w), field[:, 1] * (2.0 / h)], -1)
    return F.grid_sample(images, _identity_grid(h, w, images) + offset, mode="bilinear", padding_mode="zeros",
                         align_corners=False).clamp(0.0, 1.0)


def random_elastic(images: torch.Tensor, prob: float, alpha: float, grid: int = 4,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Elastic deformation of peak ``alpha`` px from ``grid x grid`` random control displacements, applied to each
    image with probability ``prob``."""
    if prob <= 0 or alpha <= 0:
        return images
    chosen = (torch.rand(images.shape[0], generator=generator) < prob).to(images.device)
    noise = torch.rand((int(chosen.sum()), 2, grid, grid), generator=generator) * 2 - 1
    out = images.clone()
    out[chosen] = elastic(images[chosen], noise, alpha)
    return out


def random_noise(images: torch.Tensor, prob: float, max_std: float,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """Gaussian pixel noise of a std drawn in ``[0, max_std]``, clipped to [0, 1] (a faint grey background, as a
    generator leaves it), added to each image with probability ``prob``."""
    if prob <= 0 or max_std <= 0:
        return images
    b = images.shape[0]
    std = _uniform(b, 0.0, max_std, generator) * (torch.rand(b, generator=generator) < prob)
    noise = torch.randn(images.shape, generator=generator) * std.view(b, 1, 1, 1)
    return (images + noise.to(images)).clamp(0.0, 1.0)


def random_shift(images: torch.Tensor, max_shift: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Translate each image ``(B, C, H, W)`` by up to ``max_shift`` pixels (zero fill): light augmentation."""
    if max_shift <= 0:
        return images
    b, _, h, w = images.shape
    padded = F.pad(images, (max_shift,) * 4)
    offsets = torch.randint(0, 2 * max_shift + 1, (b, 2), generator=generator)
    return torch.stack(
        [padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())]
    )
