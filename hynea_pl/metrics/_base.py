"""The shared base of the run metrics: per-case values kept in a ``cat`` state and summarised per run."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from hynea_pl.metrics.functional.search import summarize


class SummaryStatistics(Metric):
    """Per-case values summarised over a run (:func:`~hynea_pl.metrics.functional.search.summarize`).

    ``update(values)``: a number, a sequence or a tensor of them; ``None`` and values that are not finite are left
    out. ``compute()`` -> ``{"n", "total", "mean", "std", "median", "min", "max"}`` (floats; NaN statistics while
    empty). The values are gathered across processes.
    """

    is_differentiable = False
    higher_is_better: bool | None = None
    full_state_update = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.add_state("values", default=[], dist_reduce_fx="cat")

    def update(self, values: Tensor | list[float] | float | None) -> None:
        if values is None:
            return
        values = torch.as_tensor(values, dtype=torch.float64).detach().reshape(-1)
        self.values.append(values[torch.isfinite(values)])

    def compute(self) -> dict[str, float]:
        values = self.values if isinstance(self.values, Tensor) else dim_zero_cat(self.values) if self.values else []
        return summarize(values)
