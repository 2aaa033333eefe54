"""Stateful image metrics: SSIM, MS-SSIM (automatic scales), L2, the SSIM/L2 screening gate, LPIPS and FID.

Images are ``(B, C, H, W)`` in ``[0, 1]`` (``data_range`` to change), ``preds`` = generated test cases,
``target`` = origins.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn
from torchmetrics import Metric

from hynea_pl.metrics._base import NAN, PerSampleValues
from hynea_pl.metrics.backbones import InceptionFeatures, LPIPSDistance
from hynea_pl.metrics.functional import image as F

__all__ = ["FrechetInceptionDistance", "L2Distance", "LPIPS", "MultiScaleSSIM", "SSIM", "ScreeningGate", "frechet_distance"]


class SSIM(PerSampleValues):
    """SSIM per image pair. ``update(preds, target)``; ``compute()`` -> mean (or ``(N,)`` with reduction="none")."""

    higher_is_better = True

    def __init__(self, kernel_size: int = 11, sigma: float = 1.5, data_range: float = 1.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.kernel_size, self.sigma, self.data_range = kernel_size, sigma, data_range

    def update(self, preds: Tensor, target: Tensor) -> None:
        self._append(F.ssim(preds, target, kernel_size=self.kernel_size, sigma=self.sigma,
                            data_range=self.data_range, reduction="none"))


class MultiScaleSSIM(PerSampleValues):
    """MS-SSIM per image pair with scales valid for the image size.

    Unless ``betas``/``kernel_size`` are given, the scales are chosen at the first ``update`` from the image size
    (:func:`select_ms_ssim_config`) and then kept; ``self.config`` (a :class:`MSSSIMConfig`, ``.as_dict()``) says
    which were used. Later batches of a size that would select a different configuration raise ValueError.
    """

    higher_is_better = True

    def __init__(
        self,
        betas: tuple[float, ...] | None = None,
        kernel_size: int | None = None,
        sigma: float = 1.5,
        data_range: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.betas, self.kernel_size, self.sigma, self.data_range = betas, kernel_size, sigma, data_range
        self.config: F.MSSSIMConfig | None = None

    def update(self, preds: Tensor, target: Tensor) -> None:
        values, config = F.multiscale_ssim(
            preds, target, betas=self.betas, kernel_size=self.kernel_size, sigma=self.sigma,
            data_range=self.data_range, reduction="none", return_config=True,
        )
        if self.config is not None and config != self.config:
            raise ValueError(f"MS-SSIM scales changed between batches: {self.config.as_dict()} vs {config.as_dict()}")
        self.config = config
        self._append(values)

    @property
    def scales(self) -> int | None:
        return None if self.config is None else self.config.scales


class L2Distance(PerSampleValues):
    """L2 distance per image pair (see :func:`l2_distance` for ``mode``). Lower is more similar."""

    higher_is_better = False

    def __init__(self, mode: Literal["rms", "relative", "sum"] = "rms", **kwargs: Any):
        super().__init__(**kwargs)
        self.mode = mode

    def update(self, preds: Tensor, target: Tensor) -> None:
        self._append(F.l2_distance(preds, target, mode=self.mode))


class ScreeningGate(PerSampleValues):
    """Fraction of pairs passing ``SSIM >= ssim_min and L2 <= l2_max`` (defaults 0.95 / 0.2, configurable);
    ``reduction="none"`` returns the per-pair pass flags (as floats 0/1)."""

    higher_is_better = True

    def __init__(
        self,
        ssim_min: float = 0.95,
        l2_max: float = 0.2,
        l2_mode: Literal["rms", "relative", "sum", "mimicry"] = "rms",
        data_range: float = 1.0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.ssim_min, self.l2_max, self.l2_mode, self.data_range = ssim_min, l2_max, l2_mode, data_range

    def update(self, preds: Tensor, target: Tensor) -> None:
        passed = F.screening_gate(preds, target, ssim_min=self.ssim_min, l2_max=self.l2_max,
                                  l2_mode=self.l2_mode, data_range=self.data_range)
        self._append(passed.float())


class LPIPS(PerSampleValues):
    """LPIPS per image pair (``[0, 1]`` images, grayscale repeated to RGB). Lower is more similar.

    Args:
        net: ``"vgg"`` (default, as the authors), ``"alex"``, ``"squeeze"``.
        weights_path: local torchvision backbone checkpoint; default: torch hub cache. Missing weights raise
            :class:`MetricUnavailable` at construction - never a number from random weights.
        pnet_rand: random backbone, tests only.
        distance: a ready distance module ``(preds, target) -> (B,)`` instead of building one.
    """

    higher_is_better = False

    def __init__(
        self,
        net: str = "vgg",
        weights_path: str | Path | None = None,
        pnet_rand: bool = False,
        distance: Callable[[Tensor, Tensor], Tensor] | None = None,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.distance = distance if distance is not None else LPIPSDistance(net, weights_path, pnet_rand)

    def update(self, preds: Tensor, target: Tensor) -> None:
        with torch.no_grad():
            self._append(torch.as_tensor(self.distance(preds, target)).reshape(preds.shape[0]).float())


def frechet_distance(mu1: Tensor, sigma1: Tensor, mu2: Tensor, sigma2: Tensor) -> Tensor:
    """``||mu1 - mu2||^2 + tr(S1) + tr(S2) - 2 tr(sqrt(S1 S2))`` (float64); ``tr sqrt`` from the eigenvalues of S1 S2."""
    mu1, mu2, sigma1, sigma2 = (t.double() for t in (mu1, mu2, sigma1, sigma2))
    sigma1, sigma2 = torch.atleast_2d(sigma1), torch.atleast_2d(sigma2)
    diff = mu1 - mu2
    eig = torch.linalg.eigvals(sigma1 @ sigma2)
    tr_sqrt = eig.sqrt().real.sum()
    return diff.dot(diff) + sigma1.trace() + sigma2.trace() - 2 * tr_sqrt


class FrechetInceptionDistance(Metric):
    """FID between generated images and a reference set, with a configurable feature extractor.

    ``update(images (B, C, H, W) in [0, 1], real: bool)``; ``compute() -> scalar`` (NaN until both sets hold >= 2
    images). Feature statistics (sum, sum of outer products, count; float64) are summed across processes.

    Args:
        feature: a module/callable ``images -> (B, D)``; default: torchvision Inception-v3 (2048-d) from
            ``weights_path`` or the torch hub cache (:class:`MetricUnavailable` when missing).
        weights_path: local Inception-v3 checkpoint (used when ``feature`` is None).
        num_features: D; read from ``feature.num_features`` when present, else required for custom callables.
        reset_real_features: also clear the reference statistics on ``reset()`` (False keeps the reference set).
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    def __init__(
        self,
        feature: nn.Module | Callable[[Tensor], Tensor] | None = None,
        weights_path: str | Path | None = None,
        num_features: int | None = None,
        reset_real_features: bool = True,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        if feature is None:
            feature = InceptionFeatures(weights_path)
            num_features = 2048
        num_features = num_features or getattr(feature, "num_features", None)
        if num_features is None:
            raise ValueError("num_features is required for a custom feature extractor without a num_features attribute")
        self.feature = feature
        self.num_features = int(num_features)
        self.reset_real_features = reset_real_features
        d = self.num_features
        for prefix in ("real", "fake"):
            self.add_state(f"{prefix}_sum", torch.zeros(d, dtype=torch.float64), dist_reduce_fx="sum")
            self.add_state(f"{prefix}_outer", torch.zeros(d, d, dtype=torch.float64), dist_reduce_fx="sum")
            self.add_state(f"{prefix}_n", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, images: Tensor, real: bool) -> None:
        with torch.no_grad():
            feats = torch.as_tensor(self.feature(images)).detach().double().reshape(images.shape[0], -1)
        if feats.shape[1] != self.num_features:
            raise ValueError(f"feature extractor returned {feats.shape[1]} features, expected {self.num_features}")
        prefix = "real" if real else "fake"
        setattr(self, f"{prefix}_sum", getattr(self, f"{prefix}_sum") + feats.sum(0))
        setattr(self, f"{prefix}_outer", getattr(self, f"{prefix}_outer") + feats.T @ feats)
        setattr(self, f"{prefix}_n", getattr(self, f"{prefix}_n") + feats.shape[0])

    @staticmethod
    def _moments(total: Tensor, outer: Tensor, n: Tensor) -> tuple[Tensor, Tensor]:
        mu = total / n
        cov = (outer - n * torch.outer(mu, mu)) / (n - 1)
        return mu, cov

    def compute(self) -> Tensor:
        if self.real_n < 2 or self.fake_n < 2:
            return torch.tensor(NAN, dtype=torch.float64)
        mu_r, cov_r = self._moments(self.real_sum, self.real_outer, self.real_n)
        mu_f, cov_f = self._moments(self.fake_sum, self.fake_outer, self.fake_n)
        return frechet_distance(mu_r, cov_r, mu_f, cov_f)

    def reset(self) -> None:
        if self.reset_real_features:
            super().reset()
            return
        kept = {k: getattr(self, k).clone() for k in ("real_sum", "real_outer", "real_n")}
        super().reset()
        for k, v in kept.items():
            setattr(self, k, v)
