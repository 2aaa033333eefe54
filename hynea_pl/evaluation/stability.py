"""The stability verdict: does a failure hold when the saved image changes in ways that keep what it shows?

A result that crosses the SUT's decision boundary by a hair is a point on the boundary, not an input the SUT
misreads: a one-pixel shift or a slightly brighter copy undoes it. For every flipped case the campaign asks the SUT
again on a fixed set of such variants of the saved result (:class:`StabilityVariants`, the config's ``stability``
section) and records on how many the decision still left the origin's (``stability_held`` of
``stability_variants``). A failure that holds on every variant is *stable*; ``stable_failure_rate`` counts the valid
failures that are also stable, over all cases (:mod:`hynea_pl.evaluation.rescore`).

The variants are a verdict: no method's loss or stop rule sees them. Each variant is quantised like the saved PNG
(:func:`hynea_pl.images.as_saved`), so it is an image one could write and read back. These SUT calls are a re-read
of the result, not a search step, and are not counted in ``sut_evals``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor
from torchvision.transforms.v2 import functional as TF

from hynea_pl.images import as_saved, shift_image
from hynea_pl.suts import SUT

__all__ = ["StabilityVariants", "stability_fields"]

#: the directions of the shifts, (dy, dx) in pixels per unit of ``shift``
_SHIFTS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


@dataclass
class StabilityVariants:
    """The semantics-preserving variants of a saved result the stability verdict asks the SUT about.

    Args:
        shift: pixels of the four shifts (up, down, left, right; the border repeats the edge); 0: no shifts.
        brightness: brightness factors (``torchvision.transforms.v2.functional.adjust_brightness``: the image
            times the factor, clipped to [0, 1]); empty: none.
        enabled: ``False``: no stability verdict (the record's stability fields stay null).
    """

    shift: int = 1
    brightness: list[float] = field(default_factory=lambda: [0.9, 1.1])
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.shift < 0:
            raise ValueError(f"stability.shift = {self.shift}: must be >= 0 pixels")
        for factor in self.brightness:
            if not factor > 0:
                raise ValueError(f"stability.brightness = {list(self.brightness)}: factors must be > 0")

    @property
    def names(self) -> list[str]:
        """One name per variant, in the order of :meth:`__call__`: ``shift_up``, ..., ``brightness_0.9``, ..."""
        shifts = [f"shift_{name}" for name in _SHIFTS] if self.shift else []
        return [*shifts, *(f"brightness_{factor:g}" for factor in self.brightness)]

    def __len__(self) -> int:
        return len(self.names) if self.enabled else 0

    def __call__(self, image: Tensor) -> Tensor:
        """The variants ``(N, C, H, W)`` of one saved image ``(1, C, H, W)`` in [0, 1], each as saved (8-bit)."""
        views = []
        if self.shift:
            views += [shift_image(image, dy * self.shift, dx * self.shift, mode="replicate")
                      for dy, dx in _SHIFTS.values()]
        views += [TF.adjust_brightness(image, factor) for factor in self.brightness]
        if not views:
            return image[:0]
        return as_saved(torch.cat(views))


@torch.no_grad()
def stability_fields(sut: SUT, variants: StabilityVariants | None, saved: Tensor, origin_output: Tensor,
                     target: Tensor, flipped: bool) -> dict[str, int]:
    """A flipped result's stability fields: ``stability_variants`` (how many variants were asked) and
    ``stability_held`` (on how many the SUT's decision still left the origin's, :meth:`SUT.is_flipped`); nothing
    when the case did not flip or no variants are configured. ``saved``: the result as saved ``(1, C, H, W)``."""
    if not flipped or variants is None or len(variants) == 0:
        return {}
    images = variants(saved)
    outputs = sut(images)
    held = sut.is_flipped(outputs, origin_output, target.expand(len(images)))
    return {"stability_variants": len(images), "stability_held": int(held.sum())}
