"""The stability verdict: does a failure hold when the saved image changes in ways that keep what it shows?

A result that crosses the SUT's decision boundary by a hair is a point on the boundary, not an input the SUT
misreads: a one-pixel shift or a slightly brighter copy undoes it. For every flipped case the campaign asks the SUT
again on a fixed set of such variants of the saved result (:class:`StabilityVariants`, the config's ``stability``
section) and records on how many the decision still left the origin's (``stability_held`` of
``stability_variants``). A failure that holds on every variant is *stable*; ``stable_failure_rate`` counts the valid
failures that are also stable, over all cases (:mod:`hynea_pl.evaluation.rescore`).

The variants are a verdict: no method's loss or stop rule sees them. HyNeA's search reads random views of its image
(:mod:`hynea_pl.methods.views`); the verdict's fixed variants lie at or beyond the edges of those views' ranges
(2-pixel shifts, 8-degree rotations, brightness 0.8 and 1.2) and include a change the search does not draw (a blur).
Each variant is quantised like the saved PNG (:func:`hynea_pl.images.as_saved`), so it is an image one could write
and read back. These SUT calls are a re-read of the result, not a search step, and are not counted in ``sut_evals``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from hynea_pl.images import as_saved
from hynea_pl.suts import SUT
from hynea_pl.transforms import Change, changes_of

__all__ = ["StabilityVariants", "stability_fields"]

#: the directions of the shifts, (dy, dx) in pixels per unit of ``shift``
_SHIFTS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


@dataclass
class StabilityVariants:
    """The semantics-preserving variants of a saved result the stability verdict asks the SUT about
    (:mod:`hynea_pl.transforms`). The defaults lie at or beyond the edges of what HyNeA's search draws
    (:class:`~hynea_pl.methods.views.SearchViews`: shifts within 1 px, rotations within 5 degrees, brightness within
    15 %) and add a blur, which the search does not draw.

    Args:
        shift: pixels of the four shifts (up, down, left, right; the border repeats the edge); 0: no shifts.
        rotation: rotation angles in degrees (clockwise, about the centre, bilinear); empty: none.
        scale: scale factors about the centre; empty: none.
        brightness: brightness factors (``torchvision.transforms.v2.functional.adjust_brightness``: the image
            times the factor, clipped to [0, 1]); empty: none.
        contrast: contrast factors (blended with the image's mean grey level); empty: none.
        blur: standard deviations in pixels of Gaussian blurs; empty: none.
        enabled: ``False``: no stability verdict (the record's stability fields stay null).
    """

    shift: int = 2
    rotation: list[float] = field(default_factory=lambda: [-8.0, 8.0])
    scale: list[float] = field(default_factory=list)
    brightness: list[float] = field(default_factory=lambda: [0.8, 1.2])
    contrast: list[float] = field(default_factory=list)
    blur: list[float] = field(default_factory=lambda: [0.8])
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.shift < 0:
            raise ValueError(f"stability.shift = {self.shift}: must be >= 0 pixels")
        for name in ("scale", "brightness", "contrast"):
            if any(not factor > 0 for factor in getattr(self, name)):
                raise ValueError(f"stability.{name} = {list(getattr(self, name))}: factors must be > 0")
        if any(not sigma > 0 for sigma in self.blur):
            raise ValueError(f"stability.blur = {list(self.blur)}: standard deviations must be > 0")

    @property
    def changes(self) -> dict[str, Change]:
        """Each variant's name (``shift_up``, ..., ``rotation_-8``, ``brightness_0.8``, ``blur_0.8``, ...) and
        change, in the order of :meth:`__call__`."""
        out = {f"shift_{name}": Change(dy=dy * self.shift, dx=dx * self.shift)
               for name, (dy, dx) in _SHIFTS.items()} if self.shift else {}
        out.update({f"rotation_{angle:g}": Change(angle=angle) for angle in self.rotation})
        out.update({f"scale_{factor:g}": Change(scale=factor) for factor in self.scale})
        out.update({f"brightness_{factor:g}": Change(brightness=factor) for factor in self.brightness})
        out.update({f"contrast_{factor:g}": Change(contrast=factor) for factor in self.contrast})
        out.update({f"blur_{sigma:g}": Change(blur=sigma) for sigma in self.blur})
        return out

    @property
    def names(self) -> list[str]:
        """One name per variant, in the order of :meth:`__call__`."""
        return list(self.changes)

    def __len__(self) -> int:
        return len(self.changes) if self.enabled else 0

    def __call__(self, image: Tensor) -> Tensor:
        """The variants ``(N, C, H, W)`` of one saved image ``(1, C, H, W)`` in [0, 1], each as saved (8-bit)."""
        return as_saved(changes_of(image, list(self.changes.values())))


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
