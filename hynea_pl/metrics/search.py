"""Stateful search / efficiency metrics. See :mod:`hynea_pl.metrics.functional.search` for definitions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from hynea_pl.metrics._base import NAN, PerSampleValues, RunningMean
from hynea_pl.metrics.functional import search as F

__all__ = [
    "ClassEscapeMatrix",
    "FaultRate",
    "FirstFlipPsi",
    "PredictionVariability",
    "Runtime",
    "SUTEvaluations",
    "SeedsPerValidInput",
    "SummaryStatistics",
]


class SummaryStatistics(PerSampleValues):
    """Per-case values summarised as a dict of tensors: n, total, mean, std, median, min, max.

    ``update(values)`` with a scalar or ``(B,)`` tensor / sequence.
    """

    higher_is_better = False

    def __init__(self, **kwargs: Any):
        super().__init__(reduction="none", **kwargs)

    def update(self, values: Tensor | Sequence[float] | float) -> None:
        self._append(torch.as_tensor(values, dtype=torch.float64))

    def compute(self) -> dict[str, Tensor]:  # type: ignore[override]
        return {k: torch.tensor(v, dtype=torch.float64) for k, v in F.summarize(self._all_values()).items()}


class SUTEvaluations(SummaryStatistics):
    """Computational budget (HyNeA 4.2.2): SUT evaluations per test case. Lower is better."""


class Runtime(SummaryStatistics):
    """Runtime per generated test case in seconds (HyNeA 4.2.2). Lower is better."""


class SeedsPerValidInput(Metric):
    """Seeds sampled per validated input (latent-truncation paper). ``update(valid)`` with one bool per seed,
    or ``update(valid, n_seeds=...)`` with counts. ``compute()`` -> ``n_seeds / n_valid`` (inf if none valid)."""

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.add_state("n_seeds", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("n_valid", torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, valid: Tensor | Sequence[bool] | int, n_seeds: int | None = None) -> None:
        valid = torch.as_tensor(valid)
        if n_seeds is None:
            self.n_seeds += valid.numel()
            self.n_valid += valid.bool().sum()
        else:
            self.n_seeds += n_seeds
            self.n_valid += valid.double().sum()

    def compute(self) -> Tensor:
        return torch.tensor(F.seeds_per_valid(float(self.n_seeds), float(self.n_valid)), dtype=torch.float64)


class FaultRate(RunningMean):
    """Proportion of validated samples that are misclassified (``argmax h(x) != c``).

    ``update(preds (B, C) | labels (B,), source (int | (B,)), valid=None)``; NaN while nothing is valid.
    """

    higher_is_better = True

    def update(self, preds: Tensor, source: int | Tensor, valid: Tensor | None = None) -> None:
        preds = torch.as_tensor(preds)
        labels = preds.argmax(-1) if preds.dim() == 2 else preds.long()
        source = torch.as_tensor(source, device=labels.device).long().expand_as(labels)
        wrong = labels != source
        if valid is not None:
            wrong = wrong[torch.as_tensor(valid, device=labels.device).bool()]
        self._accumulate(wrong.float())


class FirstFlipPsi(PerSampleValues):
    """First-flip truncation statistics over seeds. ``update(psi)`` with a ``(B,)`` tensor / list (NaN or None =
    no flip). ``compute()`` -> dict (n_seeds, n_flipped, flip_rate, mean/median/min/max psi, and ``counts`` per
    schedule value when ``schedule`` is given: the probe's schedule, e.g. ``baselines.truncation.SCHEDULES``)."""

    def __init__(self, schedule: Sequence[float] | None = None, **kwargs: Any):
        super().__init__(reduction="none", **kwargs)
        self.schedule = None if schedule is None else tuple(float(s) for s in schedule)

    def update(self, psi: Tensor | Sequence[float | None] | float | None) -> None:
        if psi is None or isinstance(psi, (int, float)):
            psi = [psi]
        if isinstance(psi, (list, tuple)):
            psi = [NAN if p is None else float(p) for p in psi]
        self._append(torch.as_tensor(psi, dtype=torch.float64))

    def compute(self) -> dict[str, Any]:  # type: ignore[override]
        values = self._all_values().tolist()
        return F.first_flip_statistics(values, self.schedule)


class PredictionVariability(PerSampleValues):
    """SINVAD eq. 2 averaged over images. ``update(probs (B, n, C))`` (e.g. from :func:`mc_dropout_probs`)."""

    higher_is_better = None

    def update(self, probs: Tensor) -> None:
        probs = torch.as_tensor(probs)
        if probs.dim() == 2:
            probs = probs.unsqueeze(0)
        self._append(F.prediction_variability(probs))


class ClassEscapeMatrix(Metric):
    """SINVAD's targeted GA class escape rate, rows = source class, columns = target class.

    ``update(source (B,), target (B,), success (B,) bool)``; ``compute()`` -> ``(K, K)`` rates (NaN where no
    search was attempted). ``attempts`` / ``successes`` count states are summed across processes.
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(self, num_classes: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        k = num_classes
        self.add_state("attempts", torch.zeros(k, k, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("successes", torch.zeros(k, k, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, source: Tensor, target: Tensor, success: Tensor) -> None:
        _, attempts, successes = F.class_escape_matrix(source, target, success, self.num_classes)
        self.attempts += attempts.to(self.attempts.device)
        self.successes += successes.to(self.successes.device)

    def compute(self) -> Tensor:
        nan = torch.full_like(self.attempts, NAN)
        return torch.where(self.attempts > 0, self.successes / self.attempts.clamp_min(1), nan)
