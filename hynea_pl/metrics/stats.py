"""Human-study statistics (RQ3) as stateful metrics; functions in :mod:`hynea_pl.metrics.functional.stats`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from hynea_pl.metrics.functional.stats import cohens_d, fleiss_kappa, ratings_to_table, wilcoxon_signed_rank

__all__ = ["CohensD", "FleissKappa", "WilcoxonSignedRank", "cohens_d", "fleiss_kappa", "ratings_to_table",
           "wilcoxon_signed_rank"]


def _cat(state: list[Tensor] | Tensor) -> Tensor:
    if isinstance(state, Tensor):
        return state
    return dim_zero_cat(state) if state else torch.zeros(0, dtype=torch.float64)


class FleissKappa(Metric):
    """Fleiss' kappa. ``update(ratings)``: integer ratings ``(N subjects, R raters)`` in ``[0, num_categories)``,
    or with ``counts=True`` a count table ``(N, num_categories)``. Rows of the count table are kept (cat state)."""

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, num_categories: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.num_categories = num_categories
        self.add_state("table", default=[], dist_reduce_fx="cat")

    def update(self, ratings: Tensor, counts: bool = False) -> None:
        table = torch.as_tensor(ratings, dtype=torch.float64) if counts else torch.from_numpy(
            ratings_to_table(ratings, self.num_categories))
        if table.dim() != 2 or table.shape[1] != self.num_categories:
            raise ValueError(f"count table must be (N, {self.num_categories}), got shape {tuple(table.shape)}")
        self.table.append(table)

    def compute(self) -> Tensor:
        table = _cat(self.table).reshape(-1, self.num_categories)
        return torch.tensor(fleiss_kappa(table), dtype=torch.float64)


class _Paired(Metric):
    is_differentiable = False
    higher_is_better = None
    full_state_update = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.add_state("x", default=[], dist_reduce_fx="cat")
        self.add_state("y", default=[], dist_reduce_fx="cat")

    def update(self, x: Tensor, y: Tensor) -> None:
        self.x.append(torch.as_tensor(x, dtype=torch.float64).reshape(-1))
        self.y.append(torch.as_tensor(y, dtype=torch.float64).reshape(-1))


class WilcoxonSignedRank(_Paired):
    """Two-sided Wilcoxon signed-rank p-value of paired samples. ``update(x (B,), y (B,))``."""

    def __init__(self, alternative: str = "two-sided", **kwargs: Any):
        super().__init__(**kwargs)
        self.alternative = alternative

    def compute(self) -> Tensor:
        _, p = wilcoxon_signed_rank(_cat(self.x), _cat(self.y), alternative=self.alternative)
        return torch.tensor(p, dtype=torch.float64)


class CohensD(_Paired):
    """Cohen's d of ``x`` vs ``y`` (pooled SD; ``paired=True`` for d_z). ``update(x, y)`` - for independent
    samples x and y may have different lengths."""

    def __init__(self, paired: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.paired = paired

    def compute(self) -> Tensor:
        return torch.tensor(cohens_d(_cat(self.x), _cat(self.y), paired=self.paired), dtype=torch.float64)
