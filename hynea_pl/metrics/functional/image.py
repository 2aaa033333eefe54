"""Image similarity: SSIM, MS-SSIM with automatic scale selection, L2 distance and the SSIM/L2 screening gate.

All functions take image batches ``(B, C, H, W)`` with values in ``[0, data_range]`` (default ``[0, 1]``),
``preds`` and ``target`` of the same shape. Per-image values are computed per channel and averaged over channels
(the convention of Wang et al. and pytorch-msssim). Filtering is a separable Gaussian in "valid" mode (no padding),
so SSIM equals scikit-image's ``structural_similarity(gaussian_weights=True, sigma=1.5,
use_sample_covariance=False)`` and MS-SSIM equals pytorch-msssim for the same scales. torchmetrics' functional
SSIM / MS-SSIM differ: their Gaussian window has ``int(3.5 sigma + 0.5) * 2 + 1`` taps whatever ``kernel_size`` says
(11 at sigma 1.5, so no 7-tap scales for small images), and they average over the reflection-padded image rather
than the valid region (on 32 px digits their MS-SSIM differs from this one by up to 0.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "STANDARD_BETAS",
    "MSSSIMConfig",
    "l2_distance",
    "ms_ssim",
    "multiscale_ssim",
    "screening_gate",
    "select_ms_ssim_config",
    "ssim",
]

Reduction = Literal["mean", "sum", "none"]

#: The 5-scale exponents of Wang et al. (2003).
STANDARD_BETAS: tuple[float, ...] = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)

# Exponents used when fewer scales fit. 3 scales: the middle three of the standard set (the MNIST / 32 px choice).
_BETAS_BY_SCALES: dict[int, tuple[float, ...]] = {
    5: STANDARD_BETAS,
    4: (0.2856, 0.3001, 0.2363, 0.1333),
    3: (0.2856, 0.3001, 0.2363),
    2: (0.2856, 0.3001),
    1: (1.0,),
}

# (scales, kernel size) candidates, most preferred first; the first one that fits the image is used.
_CANDIDATES: tuple[tuple[int, int], ...] = (
    (5, 11), (4, 11), (3, 11),
    (5, 7), (4, 7), (3, 7), (2, 7),
    (2, 5), (1, 7), (1, 5), (1, 3),
)


@dataclass(frozen=True)
class MSSSIMConfig:
    """The scales MS-SSIM used: one exponent per scale (finest first), Gaussian kernel size and sigma."""

    betas: tuple[float, ...]
    kernel_size: int
    sigma: float = 1.5

    @property
    def scales(self) -> int:
        return len(self.betas)

    def as_dict(self) -> dict:
        return {"scales": self.scales, "betas": list(self.betas), "kernel_size": self.kernel_size, "sigma": self.sigma}


def _coarsest_side(side: int, scales: int) -> int:
    for _ in range(scales - 1):
        side //= 2  # avg_pool2d(2) floors odd sizes
    return side


def _fits(height: int, width: int, scales: int, kernel_size: int) -> bool:
    return min(_coarsest_side(height, scales), _coarsest_side(width, scales)) >= kernel_size


def select_ms_ssim_config(height: int, width: int | None = None, sigma: float = 1.5) -> MSSSIMConfig:
    """Pick MS-SSIM scales valid for an image of ``height x width``.

    The standard 5 scales with an 11-tap kernel need a side of at least 176 px (256/512 px images get them).
    Smaller images fall back, in order, to 4 or 3 scales with kernel 11, then 5..2 scales with kernel 7
    (32 px MNIST -> 3 scales, betas (0.2856, 0.3001, 0.2363), kernel 7), then a single-scale SSIM.
    The coarsest scale must be at least as large as the kernel.
    """
    width = height if width is None else width
    for scales, kernel in _CANDIDATES:
        if _fits(height, width, scales, kernel):
            return MSSSIMConfig(_BETAS_BY_SCALES[scales], kernel, sigma)
    raise ValueError(f"image of {height}x{width} px is too small for SSIM (needs at least 3x3)")


def _check_pair(preds: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    if preds.shape != target.shape:
        raise ValueError(f"preds and target must have the same shape, got {tuple(preds.shape)} and {tuple(target.shape)}")
    if preds.dim() != 4:
        raise ValueError(f"expected image batches (B, C, H, W), got shape {tuple(preds.shape)}")
    dtype = torch.promote_types(preds.dtype, target.dtype)
    if not dtype.is_floating_point or dtype in (torch.float16, torch.bfloat16):
        dtype = torch.float32
    return preds.to(dtype), target.to(dtype)


def _gaussian_window(size: int, sigma: float, dtype: torch.dtype, device: torch.device) -> Tensor:
    coords = torch.arange(size, dtype=dtype, device=device) - (size - 1) / 2
    window = torch.exp(-(coords**2) / (2 * sigma**2))
    return window / window.sum()


def _filter(x: Tensor, window: Tensor) -> Tensor:
    channels = x.shape[1]
    k = window.numel()
    x = F.conv2d(x, window.view(1, 1, k, 1).expand(channels, 1, k, 1), groups=channels)
    return F.conv2d(x, window.view(1, 1, 1, k).expand(channels, 1, 1, k), groups=channels)


def _ssim_and_cs(x: Tensor, y: Tensor, window: Tensor, data_range: float, k1: float, k2: float) -> tuple[Tensor, Tensor]:
    """Per-channel SSIM and contrast-structure term, each (B, C)."""
    c1 = (k1 * data_range) ** 2
    c2 = (k2 * data_range) ** 2
    mu_x, mu_y = _filter(x, window), _filter(y, window)
    var_x = _filter(x * x, window) - mu_x**2
    var_y = _filter(y * y, window) - mu_y**2
    cov = _filter(x * y, window) - mu_x * mu_y
    cs_map = (2 * cov + c2) / (var_x + var_y + c2)
    luminance = (2 * mu_x * mu_y + c1) / (mu_x**2 + mu_y**2 + c1)
    return (luminance * cs_map).mean(dim=(-2, -1)), cs_map.mean(dim=(-2, -1))


def _reduce(values: Tensor, reduction: Reduction) -> Tensor:
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    if reduction == "none":
        return values
    raise ValueError(f"unknown reduction {reduction!r}")


def ssim(
    preds: Tensor,
    target: Tensor,
    *,
    kernel_size: int = 11,
    sigma: float = 1.5,
    data_range: float = 1.0,
    k1: float = 0.01,
    k2: float = 0.03,
    reduction: Reduction = "mean",
) -> Tensor:
    """Structural similarity (Gaussian window, valid region), averaged over channels.

    Args:
        preds, target: ``(B, C, H, W)`` in ``[0, data_range]``; H and W at least ``kernel_size``.
        reduction: ``"mean"`` (scalar), ``"sum"`` or ``"none"`` (``(B,)``).
    """
    preds, target = _check_pair(preds, target)
    if min(preds.shape[-2:]) < kernel_size:
        raise ValueError(f"images of {tuple(preds.shape[-2:])} px are smaller than the SSIM kernel {kernel_size}")
    window = _gaussian_window(kernel_size, sigma, preds.dtype, preds.device)
    per_channel, _ = _ssim_and_cs(preds, target, window, data_range, k1, k2)
    return _reduce(per_channel.mean(dim=1), reduction)


def multiscale_ssim(
    preds: Tensor,
    target: Tensor,
    *,
    sigma: float = 1.5,
    data_range: float = 1.0,
    k1: float = 0.01,
    k2: float = 0.03,
    reduction: Reduction = "mean",
    return_config: bool = False,
) -> Tensor | tuple[Tensor, MSSSIMConfig]:
    """Multi-scale SSIM with scales chosen for the image size (see :func:`select_ms_ssim_config`).

    ``MS-SSIM = prod_{s<S} relu(cs_s)^beta_s * relu(ssim_S)^beta_S`` per channel (scale 1 = full resolution,
    2x2 average pooling between scales), then averaged over channels.

    Args:
        preds, target: ``(B, C, H, W)`` in ``[0, data_range]``; batch size 1 works.
        reduction: ``"mean"`` (scalar), ``"sum"`` or ``"none"`` (``(B,)``).
        return_config: also return the :class:`MSSSIMConfig` used.
    """
    preds, target = _check_pair(preds, target)
    config = select_ms_ssim_config(*preds.shape[-2:], sigma)
    window = _gaussian_window(config.kernel_size, sigma, preds.dtype, preds.device)
    x, y = preds, target
    result = torch.ones(preds.shape[:2], dtype=preds.dtype, device=preds.device)
    for scale, beta in enumerate(config.betas):
        ssim_val, cs = _ssim_and_cs(x, y, window, data_range, k1, k2)
        if scale < config.scales - 1:
            result = result * torch.relu(cs) ** beta
            x, y = F.avg_pool2d(x, 2), F.avg_pool2d(y, 2)
        else:
            result = result * torch.relu(ssim_val) ** beta
    values = _reduce(result.mean(dim=1), reduction)
    return (values, config) if return_config else values


def ms_ssim(preds: Tensor, target: Tensor, data_range: float = 1.0) -> Tensor:
    """Convenience MS-SSIM with automatic scales, mean over the batch: ``(B, C, H, W)`` x2 -> scalar tensor."""
    return multiscale_ssim(preds, target, data_range=data_range)  # type: ignore[return-value]


def l2_distance(
    preds: Tensor,
    target: Tensor,
    *,
    mode: Literal["rms", "relative", "sum"] = "rms",
    reduction: Reduction = "none",
) -> Tensor:
    """L2 distance between image pairs ``(B, ...)`` -> ``(B,)`` (or reduced).

    Modes:
        ``"rms"``: ``||x - y||_2 / ||1||_2`` = root-mean-square difference (for [0, 1] images: in [0, 1]).
        ``"relative"``: ``||x - y||_2 / ||target||_2`` (distance relative to the origin image).
        ``"sum"``: the plain Euclidean norm ``||x - y||_2``.
    """
    if preds.shape != target.shape:
        raise ValueError(f"preds and target must have the same shape, got {tuple(preds.shape)} and {tuple(target.shape)}")
    diff = (preds.double() - target.double()).flatten(1)
    dist = diff.norm(dim=1)
    if mode == "rms":
        dist = dist / math.sqrt(diff.shape[1])
    elif mode == "relative":
        dist = dist / target.double().flatten(1).norm(dim=1)
    elif mode != "sum":
        raise ValueError(f"unknown L2 mode {mode!r}")
    out_dtype = preds.dtype if preds.dtype in (torch.float32, torch.float64) else torch.float32
    return _reduce(dist.to(out_dtype), reduction)


def screening_gate(
    preds: Tensor,
    target: Tensor,
    *,
    ssim_min: float = 0.95,
    l2_max: float = 0.2,
    l2_mode: Literal["rms", "relative", "sum", "mimicry"] = "rms",
    data_range: float = 1.0,
    kernel_size: int | None = None,
) -> Tensor:
    """Automatic screening (latent-truncation paper, 4.2.2): pass iff ``SSIM >= ssim_min`` and ``L2 <= l2_max``.

    Args:
        preds: candidate images ``(B, C, H, W)``; target: the images they are compared to (origins).
        l2_mode: how L2 is measured (:func:`l2_distance`). ``"mimicry"`` reproduces the public Mimicry /
            truncation code: ``0 < ||x - y|| < ||target|| * (1 + l2_max)`` (a much looser gate).
        kernel_size: SSIM kernel; default 11, or 7 for images smaller than 11 px.
    Returns:
        bool tensor ``(B,)``.
    """
    if kernel_size is None:
        kernel_size = 11 if min(preds.shape[-2:]) >= 11 else 7
    ssim_vals = ssim(preds, target, kernel_size=kernel_size, data_range=data_range, reduction="none")
    if l2_mode == "mimicry":
        dist = l2_distance(preds, target, mode="sum")
        ref = target.double().flatten(1).norm(dim=1).to(dist.dtype)
        l2_ok = (dist > 0) & (dist < ref * (1 + l2_max))
    else:
        l2_ok = l2_distance(preds, target, mode=l2_mode) <= l2_max
    return (ssim_vals >= ssim_min) & l2_ok
