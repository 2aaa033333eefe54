"""Stateful embedding metrics: diversity (eq. 7) and trace difference (eq. 8).

The embedding network is any callable ``images (B, C, H, W) in [0, 1] -> (B, D)``; for real runs
:func:`resnet50_embedder` (ImageNet ResNet-50, fc removed, weights from the torch hub cache or a local path).
Without an embedder the metrics take embeddings ``(B, D)`` directly.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from hynea_pl.metrics.backbones import ResNetEmbedder
from hynea_pl.metrics.functional import embedding as F

__all__ = ["EmbeddingDiversity", "TraceDifference", "embed", "resnet50_embedder"]

Embedder = Callable[[Tensor], Tensor]


def resnet50_embedder(weights_path: str | Path | None = None, resize: int | None = 224) -> ResNetEmbedder:
    """ImageNet ResNet-50 without fc (2048-d). Raises :class:`MetricUnavailable` when the weights are missing."""
    return ResNetEmbedder("resnet50", weights_path, resize)


@torch.no_grad()
def embed(embedder: Embedder, images: Tensor, batch_size: int = 32) -> Tensor:
    """Embed ``(N, C, H, W)`` images in batches -> ``(N, D)``."""
    chunks = [torch.as_tensor(embedder(images[i : i + batch_size])).detach() for i in range(0, images.shape[0], batch_size)]
    if not chunks:
        raise ValueError("no images to embed")
    return torch.cat([c.reshape(c.shape[0], -1) for c in chunks])


def _cat(state: list[Tensor] | Tensor) -> Tensor:
    if isinstance(state, Tensor):
        return state
    return dim_zero_cat(state) if state else torch.zeros(0, 0, dtype=torch.float64)


class EmbeddingDiversity(Metric):
    """Eq. 7: mean over embedding dimensions of the per-dimension variance across all samples seen.

    ``update(x)``: images ``(B, C, H, W)`` when an ``embedder`` is set, else embeddings ``(B, D)``.
    ``compute()`` -> scalar (float64); NaN with fewer than 2 samples (unbiased variance).
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, embedder: Embedder | None = None, unbiased: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.embedder, self.unbiased = embedder, unbiased
        self.add_state("embeddings", default=[], dist_reduce_fx="cat")

    def _embed(self, x: Tensor) -> Tensor:
        e = embed(self.embedder, x) if self.embedder is not None else torch.as_tensor(x).detach()
        if e.dim() != 2:
            raise ValueError(f"embeddings must be (B, D), got shape {tuple(e.shape)}")
        return e.double()

    def update(self, x: Tensor) -> None:
        self.embeddings.append(self._embed(x))

    def compute(self) -> Tensor:
        e = _cat(self.embeddings)
        if e.numel() == 0:
            return torch.tensor(float("nan"), dtype=torch.float64)
        return F.embedding_diversity(e, self.unbiased)


class TraceDifference(EmbeddingDiversity):
    """Eq. 8 (l1 form of A.1): ``sum_d |Var(E0[:, d]) - Var(Et[:, d])|`` between origin and result embeddings.

    ``update(origin, result)``: images (with an ``embedder``) or embeddings ``(B, D)``. Lower is better.
    """

    higher_is_better = False

    def __init__(self, embedder: Embedder | None = None, unbiased: bool = True, **kwargs: Any):
        super().__init__(embedder, unbiased, **kwargs)
        self.add_state("result_embeddings", default=[], dist_reduce_fx="cat")

    def update(self, origin: Tensor, result: Tensor) -> None:  # type: ignore[override]
        self.embeddings.append(self._embed(origin))
        self.result_embeddings.append(self._embed(result))

    def compute(self) -> Tensor:
        e0, et = _cat(self.embeddings), _cat(self.result_embeddings)
        if e0.numel() == 0 or et.numel() == 0:
            return torch.tensor(float("nan"), dtype=torch.float64)
        return F.trace_difference(e0, et, self.unbiased)
