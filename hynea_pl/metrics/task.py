"""A run's task metrics (HyNeA eqs. 9-15), updated with one case record at a time and computed per run.

The definitions are the functional forms of :mod:`hynea_pl.metrics.functional.task`; the record's SUT class applies
its task's equations to the record's raw outputs ``origin_pred`` / ``result_pred`` (:meth:`hynea_pl.suts.SUT.
case_metrics`). Only cases whose search ran (``record.ok``) have values: a case with an error counts as not
misclassified and is left out of the escape ratio and the confidence reduction.
"""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics import Metric

from hynea_pl.metrics._base import SummaryStatistics
from hynea_pl.metrics.functional import task as F
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import task_class

__all__ = ["ConfidenceReduction", "EscapeRatio", "MisclassificationRate", "case_values"]


def case_values(record: CaseRecord) -> dict[str, float | None] | None:
    """One case's misclassification indicator ``mr`` (eqs. 9-11), escape ratio ``esc`` (eqs. 12-14) and confidence
    reduction ``cr`` (eq. 15), ``None`` where its task does not define one; ``None`` when the case has an error or
    its recorded predictions are unusable."""
    if not record.ok:
        return None
    try:
        o = torch.as_tensor(record.origin_pred, dtype=torch.float64)
        r = torch.as_tensor(record.result_pred, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return None
    if o.shape != r.shape or o.numel() == 0 or record.target is None:
        return None
    return task_class(record.task).case_metrics(o, r, record.target, F)


class MisclassificationRate(Metric):
    """Eqs. 9-11 over a run's cases. ``update(record)`` once per case: an ok case adds its indicator, or its
    recorded flip when its predictions are unusable. ``compute()`` -> ``misclassification_rate`` (over all cases),
    ``misclassification_rate_ok`` (over ok cases; both NaN without any), ``flipped_mismatch`` (ok cases whose
    recorded flip disagrees with eq. 9 / 10, where the task's misclassification is its flip) and ``n_pred_missing``.
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        for name in ("total", "cases", "ok", "mismatch", "missing"):
            self.add_state(name, default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, record: CaseRecord) -> None:
        self.cases += 1
        if not record.ok:
            return
        self.ok += 1
        values = case_values(record)
        if values is None:
            self.missing += 1
            self.total += float(record.flipped)
            return
        self.total += values["mr"]
        self.mismatch += int(task_class(record.task).misclassification_is_flip and record.flipped != bool(values["mr"]))

    def compute(self) -> dict[str, float | int]:
        total, cases, ok = float(self.total), int(self.cases), int(self.ok)
        return {"misclassification_rate": total / cases if cases else float("nan"),
                "misclassification_rate_ok": total / ok if ok else float("nan"),
                "flipped_mismatch": int(self.mismatch), "n_pred_missing": int(self.missing)}


class EscapeRatio(SummaryStatistics):
    """Eqs. 12-14 over the ok cases whose task defines it (not detection). ``update(record)`` once per case;
    ``compute()`` -> the summary of the per-case values (``mean`` is the run's escape ratio). Lower is better."""

    higher_is_better = False

    def update(self, record: CaseRecord) -> None:  # type: ignore[override]
        super().update((case_values(record) or {}).get("esc"))


class ConfidenceReduction(SummaryStatistics):
    """Eq. 15 over the ok cases of a detection run (from the logits). ``update(record)`` once per case;
    ``compute()`` -> the summary of the per-case values (``mean`` and ``std`` over cases)."""

    higher_is_better = True

    def update(self, record: CaseRecord) -> None:  # type: ignore[override]
        super().update((case_values(record) or {}).get("cr"))
