"""Images that show no digit, made from real ones: the judges' "not a digit" answer learns from them (outlier
exposure, Hendrycks et al., ICLR 2019), so that a judge can say what people say of a broken stroke, a blank or a
scribble instead of forcing its argmax onto a digit.

:func:`not_digits` turns a batch of real images ``(B, C, S, S)`` in [0, 1] into as many images of six kinds, drawn
per image:

- a stroke broken into fragments (cells of 1-3 px kept with probability up to 0.15), sometimes dimmed;
- a nearly blank image (the image times at most 0.06);
- a tangle of twelve random straight strokes (a few straight strokes would read as a 4 or a 7);
- the image cut into 4 x 4 tiles and shuffled;
- smooth random blobs;
- a flat grey level with noise and no digit.

The digits they start from are the judges' own (:mod:`hynea_pl.zoo.splits`); no method's data is used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hynea_pl.zoo.augment import _uniform, erase_cells

__all__ = ["NOT_DIGIT_KINDS", "not_digits", "scribbles"]

#: the kinds :func:`not_digits` draws from, in order
NOT_DIGIT_KINDS = ("fragments", "blank", "scribble", "tiles", "blobs", "grey")


def scribbles(n: int, size: int, strokes: int = 12, generator: torch.Generator | None = None) -> torch.Tensor:
    """``(n, 1, size, size)``: ``strokes`` random straight strokes (about 2 px wide on 32 px) per image."""
    out = torch.zeros(n, 1, size, size)
    ys, xs = torch.arange(size).view(1, 1, size, 1).float(), torch.arange(size).view(1, 1, 1, size).float()
    t = torch.linspace(0, 1, 24).view(1, -1, 1)
    margin, width = size / 8, size / 27
    for _ in range(strokes):
        start = _uniform(2 * n, margin, size - margin, generator).view(n, 1, 2)
        end = _uniform(2 * n, margin, size - margin, generator).view(n, 1, 2)
        points = start + (end - start) * t  # (n, 24, 2)
        dist = ((xs - points[..., 0, None, None]) ** 2 + (ys - points[..., 1, None, None]) ** 2).amin(1).sqrt()
        out = torch.maximum(out, (1.2 - dist / width).clamp(0, 1).unsqueeze(1))
    return out


def _tiles_shuffled(images: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    n, c, h, w = images.shape
    th, tw = h // 4, w // 4
    tiles = images[..., : 4 * th, : 4 * tw].unfold(2, th, th).unfold(3, tw, tw).reshape(n, c, 16, th, tw)
    order = torch.argsort(torch.rand((n, 16), generator=generator), 1).to(images.device)
    tiles = torch.gather(tiles, 2, order.view(n, 1, 16, 1, 1).expand(n, c, 16, th, tw))
    out = torch.zeros_like(images)
    out[..., : 4 * th, : 4 * tw] = tiles.reshape(n, c, 4, 4, th, tw).permute(0, 1, 2, 4, 3, 5).reshape(
        n, c, 4 * th, 4 * tw)
    return out


def not_digits(images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Images ``(B, C, S, S)`` in [0, 1] -> as many images that show no digit (the kinds of the module doc, drawn
    per image)."""
    n, c, h, w = images.shape
    kind = torch.randint(0, len(NOT_DIGIT_KINDS), (n,), generator=generator)
    out = torch.zeros_like(images)
    for index, name in enumerate(NOT_DIGIT_KINDS):
        where = kind == index
        m = int(where.sum())
        if not m:
            continue
        chosen = images[where.to(images.device)]
        if name == "fragments":
            made = erase_cells(chosen, _uniform(m, 0.0, 0.15, generator), generator)
            made = made * _uniform(m, 0.3, 1.0, generator).view(m, 1, 1, 1).to(images)
        elif name == "blank":
            made = chosen * _uniform(m, 0.0, 0.06, generator).view(m, 1, 1, 1).to(images)
        elif name == "scribble":
            made = scribbles(m, h, generator=generator).expand(m, c, h, w).to(images)
        elif name == "tiles":
            made = _tiles_shuffled(chosen, generator)
        elif name == "blobs":
            field = F.interpolate(torch.randn((m, 1, 5, 5), generator=generator), size=(h, w), mode="bicubic",
                                  align_corners=False)
            made = ((field - _uniform(m, 0.5, 1.5, generator).view(m, 1, 1, 1)) * 2).expand(m, c, h, w).to(images)
        else:  # grey
            level = _uniform(m, 0.0, 0.6, generator).view(m, 1, 1, 1)
            noise = torch.rand((m, c, h, w), generator=generator) * _uniform(m, 0.0, 0.5, generator).view(m, 1, 1, 1)
            made = (level + noise).to(images)
        out[where.to(images.device)] = made.clamp(0, 1)
    return out
