"""A run's image metrics per image pair, summarised over the pairs: MS-SSIM (scales chosen for the image size) and
LPIPS. Images are ``(B, C, H, W)`` in ``[0, 1]``, ``preds`` = generated test cases, ``target`` = origins.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from hynea_pl.metrics._base import SummaryStatistics
from hynea_pl.metrics.backbones import LPIPSDistance
from hynea_pl.metrics.functional import image as F

__all__ = ["LPIPS", "MultiScaleSSIM"]


class MultiScaleSSIM(SummaryStatistics):
    """MS-SSIM per image pair (:func:`~hynea_pl.metrics.functional.image.multiscale_ssim`, its scales chosen for
    each batch's image size), summarised over the pairs. ``update(preds, target)`` with image batches, or
    ``update(values)`` with per-pair values computed before (a case record's ``ms_ssim``)."""

    higher_is_better = True

    def __init__(self, data_range: float = 1.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.data_range = data_range

    def update(self, preds: Tensor | list[float] | float | None, target: Tensor | None = None) -> None:
        if target is not None:
            preds = F.multiscale_ssim(preds, target, data_range=self.data_range, reduction="none")
        super().update(preds)


class LPIPS(SummaryStatistics):
    """LPIPS per image pair (grayscale repeated to RGB), summarised over the pairs. Lower is more similar.

    Args:
        net: ``"vgg"`` (default, as the authors), ``"alex"``, ``"squeeze"``.
        weights_path: local torchvision backbone checkpoint; default: torch hub cache. Missing weights raise
            :class:`MetricUnavailable` at construction - never a number from random weights.
        pnet_rand: random backbone, tests only.
        distance: a ready distance ``(preds, target) -> (B,)`` instead of building one.
    """

    higher_is_better = False

    def __init__(self, net: str = "vgg", weights_path: str | Path | None = None, pnet_rand: bool = False,
                 distance: Callable[[Tensor, Tensor], Tensor] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.distance = distance if distance is not None else LPIPSDistance(net, weights_path, pnet_rand)

    def update(self, preds: Tensor, target: Tensor) -> None:  # type: ignore[override]
        with torch.no_grad():
            super().update(torch.as_tensor(self.distance(preds, target)).reshape(preds.shape[0]))
