"""Batched image augmentations for the zoo's models (torch ops, fast on CPU): affine warps (shift, rotation, scale),
stroke-width changes (grey dilation / erosion), elastic deformation, faint pixel noise and plain integer shifts;
and the changes people shrug off when they read a digit (:func:`random_blur`, :func:`random_dimming`,
:func:`random_erasure`, :func:`random_occlusion`, :func:`random_lighting`), which the judges of the verdict learn to
read through.

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


def _chosen(n: int, prob: float, generator: torch.Generator | None) -> torch.Tensor:
    """``(n,)`` bool, each true with probability ``prob`` (drawn on the CPU: the same draws on any device)."""
    return torch.rand(n, generator=generator) < prob


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of standard deviation ``sigma`` px (the edge repeats), the same shape."""
    if sigma <= 0:
        return images
    radius = max(1, math.ceil(2 * sigma))
    offsets = torch.arange(-radius, radius + 1, dtype=images.dtype, device=images.device)
    kernel = torch.exp(-offsets**2 / (2 * sigma**2))
    kernel = kernel / kernel.sum()
    c = images.shape[1]
    out = F.pad(images, (radius,) * 4, mode="replicate")
    out = F.conv2d(out, kernel.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return F.conv2d(out, kernel.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def random_blur(images: torch.Tensor, prob: float, max_sigma: float, generator: torch.Generator | None = None,
                levels: int = 4) -> torch.Tensor:
    """Blur each image with probability ``prob`` by a Gaussian of sigma drawn from ``levels`` steps up to
    ``max_sigma`` px (a generator's soft, out-of-focus strokes)."""
    if prob <= 0 or max_sigma <= 0:
        return images
    chosen = _chosen(images.shape[0], prob, generator)
    level = torch.randint(1, levels + 1, (images.shape[0],), generator=generator)
    out = images.clone()
    for step in range(1, levels + 1):
        where = (chosen & (level == step)).to(images.device)
        if where.any():
            out[where] = gaussian_blur(images[where], max_sigma * step / levels)
    return out


def random_dimming(images: torch.Tensor, prob: float, min_factor: float,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """Multiply each image, with probability ``prob``, by a factor in ``[min_factor, 1]``: a fainter digit."""
    if prob <= 0:
        return images
    b = images.shape[0]
    factor = torch.where(_chosen(b, prob, generator), _uniform(b, min_factor, 1.0, generator), torch.ones(b))
    return images * factor.view(b, 1, 1, 1).to(images)


def erase_cells(images: torch.Tensor, keep: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Black out random square cells of 1, 2 or 3 px (the size drawn per image), keeping each cell with probability
    ``keep (B,)``: a stroke broken into fragments (DeepXplore's "blackout" at its strongest)."""
    b, c, h, w = images.shape
    cells = torch.randint(1, 4, (b,), generator=generator)
    out = images.clone()
    for cell in (1, 2, 3):
        where = cells == cell
        if not where.any():
            continue
        grid = torch.rand((int(where.sum()), 1, -(-h // cell), -(-w // cell)), generator=generator)
        mask = (grid < keep[where].view(-1, 1, 1, 1)).to(images)
        mask = mask.repeat_interleave(cell, 2).repeat_interleave(cell, 3)[..., :h, :w]
        out[where.to(images.device)] = images[where.to(images.device)] * mask
    return out


def random_erasure(images: torch.Tensor, prob: float, min_keep: float, max_keep: float = 0.9,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """With probability ``prob``, break each image's strokes (:func:`erase_cells`, keeping a share of cells drawn in
    ``[min_keep, max_keep]``)."""
    if prob <= 0:
        return images
    chosen = _chosen(images.shape[0], prob, generator)
    if not chosen.any():
        return images
    out = images.clone()
    where = chosen.to(images.device)
    out[where] = erase_cells(images[where], _uniform(int(chosen.sum()), min_keep, max_keep, generator), generator)
    return out


def rectangles(n: int, h: int, w: int, low: int, high: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``(n, 1, h, w)`` masks, 1 inside one random rectangle per image with sides in ``[low, high]`` px."""
    sides = torch.randint(low, high + 1, (2, n), generator=generator)
    sides = torch.stack([sides[0].clamp(max=h), sides[1].clamp(max=w)])
    y0 = (torch.rand(n, generator=generator) * (h - sides[0] + 1)).long()
    x0 = (torch.rand(n, generator=generator) * (w - sides[1] + 1)).long()
    ys, xs = torch.arange(h).view(1, h, 1), torch.arange(w).view(1, 1, w)
    inside = ((ys >= y0.view(n, 1, 1)) & (ys < (y0 + sides[0]).view(n, 1, 1))
              & (xs >= x0.view(n, 1, 1)) & (xs < (x0 + sides[1]).view(n, 1, 1)))
    return inside.unsqueeze(1).float()


def random_occlusion(images: torch.Tensor, prob: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """With probability ``prob``, cover a rectangle of each image (sides 4-11 px on 32 px) with a bright patch (salt
    dots or uniform noise, drawn over the digit: DeepXplore's occlusion); with probability ``prob / 2`` more, black out
    a smaller one (3-7 px) that hides part of a stroke."""
    if prob <= 0:
        return images
    b, c, h, w = images.shape
    out = images.clone()
    bright = _chosen(b, prob, generator)
    n = int(bright.sum())
    if n:
        mask = rectangles(n, h, w, max(1, h // 8), max(2, h // 3), generator)
        density = _uniform(n, 0.3, 0.9, generator).view(n, 1, 1, 1)
        dots = (torch.rand((n, 1, h, w), generator=generator) < density).float()
        noise = torch.rand((n, 1, h, w), generator=generator)
        patch = torch.where(_chosen(n, 0.5, generator).view(n, 1, 1, 1), dots, noise).to(images)
        where = bright.to(images.device)
        out[where] = torch.where(mask.to(images) > 0, torch.maximum(out[where], patch), out[where])
    dark = _chosen(b, prob / 2, generator)
    n = int(dark.sum())
    if n:
        mask = rectangles(n, h, w, max(1, 3 * h // 32), max(2, 7 * h // 32), generator).to(images)
        out[dark.to(images.device)] = out[dark.to(images.device)] * (1 - mask)
    return out


def random_lighting(images: torch.Tensor, prob: float, max_level: float,
                    generator: torch.Generator | None = None) -> torch.Tensor:
    """With probability ``prob``, raise the background of each image to a grey level in ``[0.1, max_level]``
    (``level + (1 - level) * x``): over the whole image (3 in 5) or a rectangle of at least ``3/8`` of its side
    (DeepXplore's lighting change)."""
    if prob <= 0:
        return images
    b, c, h, w = images.shape
    chosen = _chosen(b, prob, generator)
    n = int(chosen.sum())
    if not n:
        return images
    level = _uniform(n, 0.1, max_level, generator).view(n, 1, 1, 1).to(images)
    region = torch.where(_chosen(n, 0.6, generator).view(n, 1, 1, 1), torch.ones(n, 1, h, w),
                         rectangles(n, h, w, 3 * h // 8, h, generator)).to(images)
    out = images.clone()
    where = chosen.to(images.device)
    out[where] = torch.where(region > 0, level + (1 - level) * images[where], images[where])
    return out
