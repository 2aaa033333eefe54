"""Embedding metrics: diversity (HyNeA eq. 7), trace difference (eq. 8 / appendix A.1) and pairwise LPIPS diversity.

Embeddings are ``(N, D)`` tensors (N images, D features), e.g. ResNet-50 pooled features (fc removed).
Variances and covariances are unbiased (``N - 1``, like ``torch.cov`` / ``np.cov``) unless ``unbiased=False``;
with ``unbiased=True`` a single sample has undefined variance and the metrics return NaN.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = [
    "embedding_diversity",
    "pairwise_distance_diversity",
    "per_dim_variance",
    "trace_difference",
    "trace_difference_full",
]


def _embeddings(x: Tensor, name: str = "embeddings") -> Tensor:
    x = torch.as_tensor(x)
    if x.dim() != 2:
        raise ValueError(f"{name} must be (N, D), got shape {tuple(x.shape)}")
    return x.double()


def per_dim_variance(embeddings: Tensor, unbiased: bool = True) -> Tensor:
    """Per-dimension variance ``(N, D) -> (D,)`` (float64); NaN when ``N < 2`` and ``unbiased``; NaN for N = 0."""
    e = _embeddings(embeddings)
    n = e.shape[0]
    if n == 0 or (unbiased and n < 2):
        return torch.full((e.shape[1],), float("nan"), dtype=torch.float64, device=e.device)
    return e.var(dim=0, correction=1 if unbiased else 0)


def embedding_diversity(embeddings: Tensor, unbiased: bool = True) -> Tensor:
    """Eq. 7: ``diversity(E) = 1/|E| * sum_i Var(E_i)``, the mean over the D dimensions of the per-dimension
    variance across the N embeddings. ``(N, D) -> scalar`` (float64). All-equal embeddings give 0."""
    return per_dim_variance(embeddings, unbiased).mean()


def trace_difference(origin: Tensor, result: Tensor, unbiased: bool = True) -> Tensor:
    """Eq. 8 in its l1 form (appendix A.1): ``sum_d |Var(E0[:, d]) - Var(Et[:, d])|``.

    Args:
        origin: ``(N0, D)`` embeddings of the original images; result: ``(N1, D)`` of the test cases
            (the two sets need not be paired or of equal size: each covariance is computed on its own).
    Returns:
        scalar (float64).
    """
    e0, et = _embeddings(origin, "origin"), _embeddings(result, "result")
    if e0.shape[1] != et.shape[1]:
        raise ValueError(f"embedding dimensions differ: {e0.shape[1]} vs {et.shape[1]}")
    return (per_dim_variance(e0, unbiased) - per_dim_variance(et, unbiased)).abs().sum()


def trace_difference_full(origin: Tensor, result: Tensor, unbiased: bool = True) -> Tensor:
    """Eq. 8 as written: ``tr(|cov(E0^T) - cov(Et^T)|)`` from the full ``D x D`` covariance matrices.

    Equal to :func:`trace_difference` (appendix A.1) but O(D^2) memory; kept as a cross-check.
    """
    e0, et = _embeddings(origin, "origin"), _embeddings(result, "result")
    corr = 1 if unbiased else 0
    cov0 = torch.atleast_2d(torch.cov(e0.T, correction=corr))
    covt = torch.atleast_2d(torch.cov(et.T, correction=corr))
    return torch.trace((cov0 - covt).abs())


def pairwise_distance_diversity(
    images: Tensor,
    distance: Callable[[Tensor, Tensor], Tensor],
    batch_size: int = 64,
) -> Tensor:
    """Mean pairwise distance over all unordered pairs ``i < j`` (latent-truncation paper 4.2.2, with LPIPS).

    Args:
        images: ``(N, C, H, W)``.
        distance: ``(P, C, H, W), (P, C, H, W) -> (P,)`` (or ``(P, 1, 1, 1)``), e.g. an LPIPS module.
        batch_size: pairs per distance call.
    Returns:
        scalar (float64); NaN when N < 2.
    """
    n = images.shape[0]
    if n < 2:
        return torch.tensor(float("nan"), dtype=torch.float64)
    i, j = torch.triu_indices(n, n, offset=1, device=images.device)
    total = torch.zeros((), dtype=torch.float64)
    for start in range(0, i.numel(), batch_size):
        a, b = i[start : start + batch_size], j[start : start + batch_size]
        with torch.no_grad():
            d = torch.as_tensor(distance(images[a], images[b]))
        total = total + d.reshape(a.numel(), -1).mean(dim=1).double().sum().cpu()
    return total / i.numel()
