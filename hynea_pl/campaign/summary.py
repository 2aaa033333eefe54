"""A campaign's summary: the record-only part of a method's row from the shared metric module."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from hynea_pl.metrics.rescore import records_row
from hynea_pl.metrics.weights import to_record_value

SUMMARY_KEYS = ("n_cases", "n_errors", "misclassification_rate", "escape_ratio", "median_sut_evals",
                "mean_sut_evals", "mean_runtime_s", "median_ms_ssim", "skipped_seeds")


def summarize_records(records: Sequence[dict]) -> dict:
    """``n_cases`` (cases with a valid origin), ``misclassification_rate`` (eq. 9; a case with an error counts as
    not flipped), ``escape_ratio`` (eqs. 12-13), ``median_sut_evals`` / ``mean_sut_evals`` (flipped cases),
    ``mean_runtime_s``, ``median_ms_ssim`` and ``skipped_seeds`` (invalid origins drawn, paper 4.5)."""
    row = to_record_value(records_row(list(records)))
    summary = {key: row.get(key) for key in SUMMARY_KEYS if key != "skipped_seeds"}
    summary["skipped_seeds"] = sum(int(r.get("skipped_seeds") or 0) for r in records)
    return summary


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
