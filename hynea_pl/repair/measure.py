"""What a repair changed on real images: accuracy on held-out images, and how many of the original model's natural
errors (held-out images it misreads) a model reads right."""

from __future__ import annotations

import torch

from hynea_pl.suts import SUT


@torch.no_grad()
def predictions(sut: SUT, images: torch.Tensor, batch_size: int = 1000) -> torch.Tensor:
    """The SUT's classes ``(N,)`` for ``images (N, C, H, W)`` in [0, 1]."""
    return torch.cat([sut(images[i:i + batch_size].float()).argmax(-1) for i in range(0, len(images), batch_size)])


def accuracy(predicted: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of ``predicted (N,)`` equal to ``labels (N,)``."""
    return (predicted == labels).float().mean().item()


def natural_errors_read_right(original: torch.Tensor, predicted: torch.Tensor, labels: torch.Tensor) -> tuple[int, int]:
    """``(read right, errors)``: of the images the original model misreads (``original (N,) != labels``), how many
    ``predicted (N,)`` reads right."""
    errors = original != labels
    return int((predicted[errors] == labels[errors]).sum()), int(errors.sum())


__all__ = ["accuracy", "natural_errors_read_right", "predictions"]
