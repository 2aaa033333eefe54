"""Image distances for HyNeA's loss."""

from __future__ import annotations

import torch


def frobenius_distance(origin: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
    """Normalised Frobenius distance (paper eq. 3), a scalar.

    For images ``(B, C, H, W)``: ``||origin_c - result_c||_F / ||1_{HxW}||_F`` per image and channel, averaged
    over channels and the batch. Identical images give 0; images at opposite ends of [0, 1] give 1.
    """
    if origin.shape != result.shape:
        raise ValueError(f"image shapes differ: {tuple(origin.shape)} vs {tuple(result.shape)}")
    per_channel = torch.linalg.matrix_norm(origin - result, ord="fro")  # (B, C)
    ones_norm = (origin.shape[-2] * origin.shape[-1]) ** 0.5
    return (per_channel / ones_norm).mean()
