"""Search / efficiency metrics: budget and runtime summaries, seeds per valid input, fault rate, first-flip psi
statistics (latent-truncation paper), SINVAD's prediction variability under MC dropout (eq. 2) and the targeted
class-escape matrix (SINVAD 5.5)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor, nn

__all__ = [
    "class_escape_matrix",
    "fault_rate",
    "first_flip_psi",
    "first_flip_statistics",
    "mc_dropout_probs",
    "prediction_variability",
    "seeds_per_valid",
    "summarize",
]

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


def first_flip_psi(
    preds: Tensor,
    source: int,
    schedule: Sequence[float],
    require_baseline: bool = True,
) -> float | None:
    """First-flip truncation: the first psi (descending ``schedule``) whose prediction differs from ``source``.

    Args:
        preds: ``(S, C)`` scores or ``(S,)`` labels, one row per schedule entry, in schedule order.
        source: the seed's class.
        schedule: the psi values, descending from 1.0 (the truncation probes' schedules:
            ``baselines.truncation.SCHEDULES``).
        require_baseline: the first entry (psi = 1.0) must be predicted as ``source``; otherwise the seed is
            rejected and None returned.
    Returns:
        the psi of the first flip, or None (no flip, or rejected seed).
    """
    preds = torch.as_tensor(preds)
    labels = preds.argmax(-1) if preds.dim() == 2 else preds.long()
    if labels.numel() != len(schedule):
        raise ValueError(f"{labels.numel()} predictions for a schedule of {len(schedule)} psi values")
    if labels.numel() == 0:
        return None
    if require_baseline and int(labels[0]) != int(source):
        return None
    for psi, label in zip(schedule, labels.tolist()):
        if label != int(source):
            return float(psi)
    return None


def first_flip_statistics(psis: Iterable[float | None], schedule: Sequence[float] | None = None) -> dict:
    """Statistics of first-flip psi values over seeds (None / NaN = no flip).

    Returns n_seeds, n_flipped, flip_rate, mean/median/min/max psi over flipped seeds, and when ``schedule`` is
    given ``counts``: {psi: number of seeds whose first flip happened at psi}.
    """
    values = [float("nan") if p is None else float(p) for p in psis]
    flipped = [p for p in values if not math.isnan(p)]
    stats = summarize(flipped)
    out = {
        "n_seeds": len(values),
        "n_flipped": len(flipped),
        "flip_rate": len(flipped) / len(values) if values else float("nan"),
        "mean_psi": stats["mean"],
        "median_psi": stats["median"],
        "min_psi": stats["min"],
        "max_psi": stats["max"],
    }
    if schedule is not None:
        out["counts"] = {float(s): sum(1 for p in flipped if math.isclose(p, s)) for s in schedule}
    return out


def prediction_variability(probs: Tensor) -> Tensor:
    """SINVAD eq. 2: ``V(I) = sum_j std_i(p_i[j])``, Bessel-corrected std over ``n`` dropout samples, summed
    over classes.

    Args:
        probs: ``(n, C)`` predicted confidences of one image under ``n`` dropout masks, or ``(B, n, C)``.
    Returns:
        scalar, or ``(B,)``. NaN for ``n < 2``.
    """
    probs = torch.as_tensor(probs)
    if probs.dim() not in (2, 3):
        raise ValueError(f"expected (n, C) or (B, n, C), got shape {tuple(probs.shape)}")
    probs = probs.double()
    if probs.shape[-2] < 2:
        return torch.full(probs.shape[:-2], float("nan"), dtype=torch.float64)
    return probs.std(dim=-2, correction=1).sum(dim=-1)


@torch.no_grad()
def mc_dropout_probs(model: nn.Module, images: Tensor, n: int = 100, softmax: bool = True) -> Tensor:
    """Run ``model`` ``n`` times with dropout active (everything else, e.g. batch norm, in eval mode).

    Args:
        images: ``(B, ...)`` model inputs.
        softmax: apply softmax to the outputs (set False when the model already returns probabilities).
    Returns:
        ``(B, n, C)`` confidences. The model's train/eval flags are restored afterwards.
    """
    modes = {m: m.training for m in model.modules()}
    dropouts = [m for m in model.modules() if isinstance(m, nn.modules.dropout._DropoutNd)]
    if not dropouts:
        raise ValueError("model has no dropout layers: MC-dropout variability would be 0 by construction")
    try:
        model.eval()
        for m in dropouts:
            m.train()
        outs = []
        for _ in range(n):
            out = model(images)
            outs.append(out.softmax(-1) if softmax else out)
        return torch.stack(outs, dim=1)
    finally:
        for m, mode in modes.items():
            m.train(mode)


def class_escape_matrix(
    source: Tensor,
    target: Tensor,
    success: Tensor,
    num_classes: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """SINVAD's GA class escape rate per (source, target) pair: successes / attempts.

    Args:
        source, target: ``(B,)`` class indices of each targeted search; success: ``(B,)`` bool (reached target).
    Returns:
        (rates, attempts, successes), each ``(K, K)`` with rows = source, columns = target; rates are NaN
        where no search was attempted.
    """
    source, target = torch.as_tensor(source).long().flatten(), torch.as_tensor(target).long().flatten()
    success = torch.as_tensor(success).flatten().to(torch.float64)
    if not (source.numel() == target.numel() == success.numel()):
        raise ValueError("source, target and success must have the same length")
    if source.numel() and (min(source.min(), target.min()) < 0 or max(source.max(), target.max()) >= num_classes):
        raise ValueError(f"class indices must be in [0, {num_classes})")
    flat = source * num_classes + target
    attempts = torch.bincount(flat, minlength=num_classes**2).to(torch.float64).view(num_classes, num_classes)
    successes = torch.bincount(flat, weights=success, minlength=num_classes**2).view(num_classes, num_classes)
    rates = torch.where(attempts > 0, successes / attempts.clamp_min(1), torch.full_like(attempts, float("nan")))
    return rates, attempts, successes
