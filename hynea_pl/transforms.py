"""Changes of an image that keep what it shows: shifts, rotations, scalings, brightness, contrast and blur.

One owner for both sides of a failure's robustness: the views HyNeA's search draws each step
(:class:`hynea_pl.methods.views.SearchViews`) and the fixed variants the stability verdict asks the SUT about
(:class:`hynea_pl.evaluation.stability.StabilityVariants`). Every change is torchvision's functional op on a tensor
(differentiable), on images ``(B, C, H, W)`` in [0, 1]; the result has the same shape and stays in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as TF

from hynea_pl.images import shift_image

__all__ = ["Change", "blur", "change", "changes_of"]


@dataclass(frozen=True)
class Change:
    """One semantics-keeping change: a shift of ``(dy, dx)`` whole pixels (the border repeats the edge), then a
    rotation by ``angle`` degrees (clockwise, as :func:`torchvision.transforms.v2.functional.affine`) and a scaling
    by ``scale`` about the centre (bilinear, black fill), then the brightness factor (the image times it, clipped),
    the contrast factor (blended with the image's mean grey level, ``adjust_contrast``) and a Gaussian blur of
    ``blur`` pixels' standard deviation. The defaults are the identity."""

    dy: int = 0
    dx: int = 0
    angle: float = 0.0
    scale: float = 1.0
    brightness: float = 1.0
    contrast: float = 1.0
    blur: float = 0.0

    def __call__(self, images: Tensor) -> Tensor:
        return change(images, self)


def blur(images: Tensor, sigma: float) -> Tensor:
    """A Gaussian blur of standard deviation ``sigma`` pixels (a kernel of about three sigmas each side, odd)."""
    if sigma <= 0:
        return images
    size = 2 * max(1, int(3 * sigma + 0.5)) + 1
    return TF.gaussian_blur(images, kernel_size=[size, size], sigma=[sigma, sigma])


def change(images: Tensor, how: Change) -> Tensor:
    """``images (B, C, H, W)`` in [0, 1] changed as ``how`` says (:class:`Change`), the same shape."""
    out = shift_image(images, how.dy, how.dx, mode="replicate") if how.dy or how.dx else images
    if how.angle or how.scale != 1.0:
        out = TF.affine(out, angle=how.angle, translate=[0.0, 0.0], scale=how.scale, shear=[0.0, 0.0],
                        interpolation=InterpolationMode.BILINEAR)
    if how.brightness != 1.0:
        out = TF.adjust_brightness(out, how.brightness)
    if how.contrast != 1.0:
        out = TF.adjust_contrast(out, how.contrast)
    if how.blur > 0:
        out = blur(out, how.blur)
    return out.clamp(0.0, 1.0)


def changes_of(images: Tensor, changes: list[Change]) -> Tensor:
    """Every change of ``changes`` applied to ``images (B, C, H, W)``, stacked change-major ``(len(changes) B, C, H,
    W)``; an empty list gives ``(0, C, H, W)``."""
    if not changes:
        return images[:0]
    return torch.cat([change(images, how) for how in changes])

