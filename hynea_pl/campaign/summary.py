"""A campaign's summary: the record-only part of a method's row from the shared metric module."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from hynea_pl.evaluation.rescore import records_row
from hynea_pl.metrics.weights import to_record_value
from hynea_pl.schema import LEGACY_KEYS, SUMMARY_KEYS, CaseRecord

__all__ = ["LEGACY_KEYS", "SUMMARY_KEYS", "read_summary", "summarize_records", "summary_table"]


def summarize_records(records: Sequence[CaseRecord]) -> dict:
    """The run's summary from the shared metric module (:func:`hynea_pl.evaluation.rescore.records_row`):
    ``n_cases`` (cases with a valid origin), ``flip_rate`` / ``target_reached_rate`` (flips, not valid failures),
    ``misclassification_rate`` (eqs. 9-11; a case with an error counts as not flipped), ``escape_ratio``
    (eqs. 12-14; not for detection), ``confidence_reduction`` (detection: mean of eq. 15 over the cases),
    ``median_sut_evals_flipped`` / ``mean_sut_evals_flipped`` (over flipped cases), ``median_sut_evals_all`` /
    ``mean_sut_evals_all`` (over all cases, errors included), ``sut_evals_per_valid_failure`` (the evaluations of
    all cases / valid failures), ``ended_before_budget_rate`` (cases that stopped by their own rule or the step
    limit, before the budget), ``mean_runtime_s`` (all cases), ``median_ms_ssim``, ``median_ms_ssim_to_real`` (cases
    from real images: MS-SSIM of the result to the real image, over the cases that ran), ``skipped_seeds`` (invalid
    origins drawn, paper 4.5; images passed over, for cases from real images) and ``skipped_files`` (files of
    ``cases.images`` that could not be read, filled in by :meth:`RunFolder.finish`)."""
    row = to_record_value(records_row(list(records)))
    summary = {key: row.get(key) for key in SUMMARY_KEYS}  # skipped_files: RunFolder.finish, from test_images.json
    summary["skipped_seeds"] = sum(r.skipped_seeds for r in records)
    return summary


def read_summary(path: Path | str) -> dict:
    """A run's ``summary.json``, the keys of older runs renamed to the current ones (:data:`LEGACY_KEYS`)."""
    summary = json.loads(Path(path).read_text())
    return {LEGACY_KEYS.get(key, key): value for key, value in summary.items()}


def summary_table(title: str, summary: dict) -> Table:
    """The summary as a two-column rich table."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in SUMMARY_KEYS:
        value = summary.get(key)
        text = "-" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
        table.add_row(key, text)
    return table
