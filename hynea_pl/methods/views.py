"""The views HyNeA's search reads each step: random semantics-keeping changes of the image (expectation over
transformations), so that a result holds on small changes instead of sitting a hair past the SUT's boundary.

Each step, besides the image itself, the SUT reads ``count`` views of it, each a :class:`~hynea_pl.transforms.Change`
drawn from the ranges of :class:`SearchViews`; the behaviour term is averaged over the image and its views, and a
step counts as found only when the SUT fails on at least ``fail_fraction`` of the views too. Every view is one SUT
evaluation (``sut_evals`` and the budget count it). The draws come from the case's seed, run and step, so a case
draws the same views on the single and the batched path and on every machine.

The stability verdict (:mod:`hynea_pl.evaluation.stability`) asks other changes: at or beyond the edges of these
ranges, and a blur, which this family does not draw by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hynea_pl.transforms import Change, changes_of

__all__ = ["SearchViews"]


@dataclass
class SearchViews:
    """The family of changes the search draws its views from.

    Args:
        count: views per step besides the image (each one SUT evaluation); 0: none (the paper: one evaluation).
        fail_fraction: the fraction of the views the SUT must fail on (its decision leaves the origin's) for a step
            to count as found; 1: all of them.
        shift: whole pixels of the shift, drawn per axis in ``-shift .. shift`` (diagonals included).
        rotation: degrees, drawn in ``[-rotation, rotation]``.
        scale: drawn in ``[1 - scale, 1 + scale]``.
        brightness: the brightness factor, drawn in ``[1 - brightness, 1 + brightness]``.
        contrast: the contrast factor, drawn in ``[1 - contrast, 1]`` (lower contrast only).
        blur: the Gaussian blur's standard deviation in pixels, drawn in ``[0, blur]``.
    """

    count: int = 0
    fail_fraction: float = 1.0
    shift: int = 1
    rotation: float = 5.0
    scale: float = 0.05
    brightness: float = 0.15
    contrast: float = 0.0
    blur: float = 0.0

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"views.count = {self.count}: must be >= 0")
        if not 0.0 < self.fail_fraction <= 1.0:
            raise ValueError(f"views.fail_fraction = {self.fail_fraction}: must be in (0, 1]")
        for name in ("shift", "rotation", "scale", "brightness", "contrast", "blur"):
            if getattr(self, name) < 0:
                raise ValueError(f"views.{name} = {getattr(self, name)}: must be >= 0")
        if self.scale >= 1 or self.brightness >= 1 or self.contrast >= 1:
            raise ValueError("views.scale, views.brightness and views.contrast must be < 1 (factors stay > 0)")

    def draw(self, generator: torch.Generator) -> list[Change]:
        """``count`` changes drawn from ``generator`` (on the CPU: the same draws on any device)."""
        def uniform(low: float, high: float) -> float:
            return low + (high - low) * float(torch.rand((), generator=generator))

        changes = []
        for _ in range(self.count):
            dy, dx = (torch.randint(-self.shift, self.shift + 1, (2,), generator=generator).tolist()
                      if self.shift else (0, 0))
            changes.append(Change(
                dy=dy, dx=dx, angle=uniform(-self.rotation, self.rotation),
                scale=uniform(1 - self.scale, 1 + self.scale),
                brightness=uniform(1 - self.brightness, 1 + self.brightness),
                contrast=uniform(1 - self.contrast, 1.0), blur=uniform(0.0, self.blur)))
        return changes

    def __call__(self, images: Tensor, generator: torch.Generator) -> Tensor:
        """``count`` views of ``images (B, C, H, W)``, view-major ``(count B, C, H, W)`` (differentiable)."""
        return changes_of(images, self.draw(generator))

    def enough_failed(self, failed: Tensor) -> bool:
        """Whether the views' flips ``failed (n,)`` (bool) are enough for a step to count as found."""
        if len(failed) == 0:
            return True
        return float(failed.float().mean()) >= self.fail_fraction - 1e-9
