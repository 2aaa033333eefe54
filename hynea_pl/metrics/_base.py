"""Shared bases for the stateful metrics: a running mean with sum/count states and a per-sample value list."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

NAN = float("nan")


class RunningMean(Metric):
    """Mean of per-item values; states ``total`` (float64) and ``count`` are summed across processes."""

    is_differentiable = False
    full_state_update = False
    higher_is_better: bool | None = None

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.add_state("total", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def _accumulate(self, values: Tensor) -> None:
        values = values.detach()
        self.total += values.double().sum()
        self.count += values.numel()

    def compute(self) -> Tensor:
        if self.count == 0:
            return torch.tensor(NAN, dtype=torch.float64)
        return self.total / self.count


class PerSampleValues(Metric):
    """Keeps one value per sample (``cat`` state); ``compute`` returns their mean, or all values for
    ``reduction="none"``."""

    is_differentiable = False
    full_state_update = False
    higher_is_better: bool | None = None

    def __init__(self, reduction: Literal["mean", "none"] = "mean", **kwargs: Any):
        super().__init__(**kwargs)
        if reduction not in ("mean", "none"):
            raise ValueError(f"reduction must be 'mean' or 'none', got {reduction!r}")
        self.reduction = reduction
        self.add_state("values", default=[], dist_reduce_fx="cat")

    def _append(self, values: Tensor) -> None:
        self.values.append(values.detach().reshape(-1))

    def _all_values(self) -> Tensor:
        if isinstance(self.values, Tensor):  # after a DDP sync
            return self.values.reshape(-1)
        if not self.values:
            return torch.zeros(0)
        return dim_zero_cat(self.values)

    def compute(self) -> Tensor:
        values = self._all_values()
        if self.reduction == "none":
            return values
        if values.numel() == 0:
            return torch.tensor(NAN)
        return values.mean() if values.is_floating_point() else values.double().mean()
