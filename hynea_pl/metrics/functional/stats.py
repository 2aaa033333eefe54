"""Human-study statistics (HyNeA RQ3): Fleiss' kappa, Wilcoxon signed-rank p-value, Cohen's d."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from torch import Tensor

__all__ = ["cohens_d", "fleiss_kappa", "ratings_to_table", "wilcoxon_signed_rank"]


def _np(x: Tensor | Sequence | np.ndarray) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def ratings_to_table(ratings: Tensor | Sequence[Sequence[int]] | np.ndarray, num_categories: int | None = None) -> np.ndarray:
    """Raw ratings ``(N subjects, R raters)`` of integer categories ``0..k-1`` -> count table ``(N, k)``."""
    r = np.asarray(ratings.detach().cpu() if isinstance(ratings, Tensor) else ratings).astype(np.int64)
    if r.ndim != 2:
        raise ValueError(f"ratings must be (subjects, raters), got shape {r.shape}")
    k = int(num_categories if num_categories is not None else (r.max() + 1 if r.size else 0))
    if r.size and (r.min() < 0 or r.max() >= k):
        raise ValueError(f"categories must be in [0, {k})")
    table = np.zeros((r.shape[0], k), dtype=np.float64)
    for j in range(k):
        table[:, j] = (r == j).sum(axis=1)
    return table


def fleiss_kappa(table: Tensor | Sequence[Sequence[float]] | np.ndarray) -> float:
    """Fleiss' kappa from a count table ``(N subjects, k categories)``; every row must sum to the same number of
    raters ``n >= 2``. ``kappa = (P_bar - P_e) / (1 - P_e)``; NaN when ``P_e = 1`` (all ratings in one category)."""
    t = _np(table)
    if t.ndim != 2 or t.shape[0] == 0:
        raise ValueError(f"table must be (subjects, categories) with at least one subject, got shape {t.shape}")
    n = t.sum(axis=1)
    if not np.allclose(n, n[0]):
        raise ValueError("every subject must be rated by the same number of raters")
    n = float(n[0])
    if n < 2:
        raise ValueError("Fleiss' kappa needs at least two raters per subject")
    p_j = t.sum(axis=0) / (t.shape[0] * n)
    p_i = ((t * t).sum(axis=1) - n) / (n * (n - 1))
    p_bar, p_e = p_i.mean(), float((p_j * p_j).sum())
    if math.isclose(p_e, 1.0):
        return float("nan")
    return float((p_bar - p_e) / (1 - p_e))


def wilcoxon_signed_rank(
    x: Tensor | Sequence[float],
    y: Tensor | Sequence[float] | None = None,
    alternative: str = "two-sided",
    zero_method: str = "wilcox",
    method: str = "auto",
) -> tuple[float, float]:
    """Wilcoxon signed-rank test of paired samples (or of ``x`` against 0): ``(statistic, p-value)`` via scipy.

    NaN p-value when every difference is zero (nothing to rank)."""
    from scipy import stats

    d = _np(x) - (0.0 if y is None else _np(y))
    if d.size == 0 or np.all(d == 0):
        return float("nan"), float("nan")
    res = stats.wilcoxon(d, alternative=alternative, zero_method=zero_method, method=method)
    return float(res.statistic), float(res.pvalue)


def cohens_d(x: Tensor | Sequence[float], y: Tensor | Sequence[float], paired: bool = False) -> float:
    """Cohen's d effect size of ``x`` versus ``y``.

    Independent samples: ``(mean(x) - mean(y)) / s_pooled`` with
    ``s_pooled = sqrt(((n_x - 1) s_x^2 + (n_y - 1) s_y^2) / (n_x + n_y - 2))`` (unbiased variances).
    Paired (``d_z``): ``mean(x - y) / std(x - y)``. NaN when the denominator is 0 or undefined.
    """
    a, b = _np(x), _np(y)
    if paired:
        if a.shape != b.shape:
            raise ValueError("paired samples must have the same length")
        d = a - b
        sd = d.std(ddof=1) if d.size > 1 else float("nan")
        return float(d.mean() / sd) if sd and not math.isnan(sd) else float("nan")
    na, nb = a.size, b.size
    if na + nb <= 2:
        return float("nan")
    va = a.var(ddof=1) if na > 1 else 0.0
    vb = b.var(ddof=1) if nb > 1 else 0.0
    pooled = math.sqrt(((na - 1) * va + (nb - 1) * vb) / (na + nb - 2))
    return float((a.mean() - b.mean()) / pooled) if pooled > 0 else float("nan")
