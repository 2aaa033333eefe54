"""Search / efficiency metrics: budget and runtime summaries, seeds per valid input and fault rate."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["fault_rate", "seeds_per_valid", "summarize"]


def summarize(values: Tensor | Sequence[float]) -> dict[str, float]:
    """Summary of per-case values (e.g. SUT evaluations, runtime in s): n, total, mean, std (unbiased), median
    (mean of the two middle values for even n), min, max. NaN entries are dropped; empty -> NaN statistics."""
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    v = v[~torch.isnan(v)]
    n = int(v.numel())
    if n == 0:
        nan = float("nan")
        return {"n": 0, "total": 0.0, "mean": nan, "std": nan, "median": nan, "min": nan, "max": nan}
    return {
        "n": n,
        "total": float(v.sum()),
        "mean": float(v.mean()),
        "std": float(v.std()) if n > 1 else float("nan"),
        "median": float(v.quantile(0.5)),
        "min": float(v.min()),
        "max": float(v.max()),
    }


def seeds_per_valid(n_seeds: int | float, n_valid: int | float) -> float:
    """Effort per validated input: ``n_seeds / n_valid`` (inf when nothing was valid)."""
    if n_valid < 0 or n_seeds < 0:
        raise ValueError("counts must be non-negative")
    return float(n_seeds) / float(n_valid) if n_valid > 0 else math.inf


def fault_rate(preds: Tensor, source: int | Tensor, valid: Tensor | None = None) -> Tensor:
    """Proportion of (validated) samples that cause a misclassification, ``argmax h(x) != c``.

    Args:
        preds: ``(B, C)`` SUT scores or ``(B,)`` predicted labels.
        source: the class ``c`` the inputs should show (int or ``(B,)``).
        valid: optional ``(B,)`` bool mask of validated samples (default: all).
    Returns:
        scalar float tensor; NaN when no sample is valid.
    """
    preds = torch.as_tensor(preds)
    labels = preds.argmax(-1) if preds.dim() == 2 else preds.long()
    source = torch.as_tensor(source, device=labels.device).long().expand_as(labels)
    mask = torch.ones_like(labels, dtype=torch.bool) if valid is None else torch.as_tensor(valid, device=labels.device).bool()
    n = mask.sum()
    if n == 0:
        return torch.tensor(float("nan"))
    return ((labels != source) & mask).sum().float() / n.float()
