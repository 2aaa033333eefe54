"""Evaluation: the layer between the pure metrics (:mod:`hynea_pl.metrics`) and the campaign and report that use
them. It reads run folders and runs the judging models; the metrics never do.

- Judging a case (:mod:`hynea_pl.evaluation.judge`): :func:`judge_case` runs the validity oracle and the realism
  test on a case's origin and result and applies the pure verdict
  (:func:`hynea_pl.metrics.functional.validity.verdict`); :func:`judges_task`, :func:`sut_decisions`. The campaign
  calls it when it fills a case's outcome.
- Scoring records (:mod:`hynea_pl.evaluation.rescore`): :func:`records_row` (the record-only part of a method's
  row, the campaign's ``summary.json``), :func:`validity_columns`, :func:`ended_before_budget_rate`.
- Scoring a run folder: :func:`evaluate_run` (records plus the PNGs they name, written to ``metrics.json``),
  :func:`read_metrics` (the ``metrics.json`` a run already has), :func:`run_realism` (FID / KID of its images,
  :mod:`hynea_pl.evaluation.realism`). ``evaluate``, ``compare`` and ``report`` call them.
"""

from hynea_pl.evaluation.judge import judge_case, judges_task, sut_decisions
from hynea_pl.evaluation.realism import run_realism
from hynea_pl.evaluation.rescore import (
    METRICS_FILE,
    ended_before_budget_rate,
    evaluate_run,
    read_metrics,
    records_row,
    validity_columns,
)

__all__ = [
    "METRICS_FILE",
    "ended_before_budget_rate",
    "evaluate_run",
    "judge_case",
    "judges_task",
    "read_metrics",
    "records_row",
    "run_realism",
    "sut_decisions",
    "validity_columns",
]
