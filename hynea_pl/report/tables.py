"""The report's RQ1 (effectiveness, paper Table 1) and RQ2 (efficiency, paper Table 2) tables and the confusion
counts of a run: one row per run, every number read from the run's ``metrics.json`` (``evaluate_run``, written by
``compare_runs``) or from the ``compare_runs`` table itself. Nothing here computes a metric."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hynea_pl.report.compare import format_value, metric_value
from hynea_pl.schema import CaseRecord
from hynea_pl.suts import task_class
from hynea_pl.verdicts import (AMBIGUOUS, DEGRADED, RATE_KEYS, SEMANTIC_CHANGE, STABLE_FAILURE_RATE, STABLE_FLIP_RATE,
                               UNACCEPTED, VALID_FAILURE)

__all__ = ["confusion_counts", "mean_sd", "metric", "rq1_table", "rq2_table", "run_labels", "unavailable_notes"]

#: RQ1 columns: (header, metrics.json key of the mean, key of its standard deviation or None).
RQ1_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("cases", "n_cases", None),
    ("misclassification ↑", "misclassification_rate", None),
    ("flip rate", "flip_rate", None),
    ("escape ratio ↓", "escape_ratio", None),
    ("conf. reduction ↑", "confidence_reduction", "confidence_reduction_std"),
    ("judged", "n_judged", None),
    ("valid failure ↑", RATE_KEYS[VALID_FAILURE], None),
    ("degraded", RATE_KEYS[DEGRADED], None),
    ("semantic change", RATE_KEYS[SEMANTIC_CHANGE], None),
    ("ambiguous", RATE_KEYS[AMBIGUOUS], None),
    ("unaccepted", RATE_KEYS[UNACCEPTED], None),
    ("stable flip", STABLE_FLIP_RATE, None),
    ("stable failure ↑", STABLE_FAILURE_RATE, None),
    ("MS-SSIM ↑ (mean ± sd)", "mean_ms_ssim", "std_ms_ssim"),
    ("LPIPS ↓ (mean ± sd)", "lpips", "lpips_std"),
    ("diversity ↑", "diversity", None),
    ("trace diff ↓", "trace_difference", None),
    ("FID ↓", "fid", None),
    ("KID ↓ (mean ± sd)", "kid_mean", "kid_std"),
    ("FID valid failures ↓", "fid_valid_failures", None),
)
#: Columns left out of RQ1 when no run has a value (confidence reduction exists for detection only).
OPTIONAL_RQ1 = frozenset({"conf. reduction ↑"})
#: RQ2 columns, as RQ1_COLUMNS.
RQ2_COLUMNS: tuple[tuple[str, str, str | None], ...] = (
    ("cases", "n_cases", None),
    ("runtime s ↓ (mean ± sd)", "mean_runtime_s", "std_runtime_s"),
    ("SUT evals ↓ (mean ± sd, all cases)", "mean_sut_evals_all", "std_sut_evals_all"),
    ("SUT evals to a flip (median, flipped cases)", "median_sut_evals_flipped", None),
    ("SUT evals per valid failure (all cases' evals)", "sut_evals_per_valid_failure", None),
    ("SUT evals per stable valid failure (all cases' evals)", "sut_evals_per_stable_failure", None),
    ("ended before budget", "ended_before_budget_rate", None),
    ("runtime s per valid failure", "runtime_s_per_valid_failure", None),
)


def metric(metrics: dict[str, Any], key: str) -> Any:
    """A metric of a ``metrics.json`` row; ``None`` when missing, unavailable or NaN."""
    value = metric_value(metrics.get(key))
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def mean_sd(mean: Any, sd: Any) -> str:
    """``"0.76 ± 0.126"``; the mean alone when there is no sd (one case), ``-`` without a mean."""
    if mean is None:
        return "-"
    if sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return format_value(mean)
    return f"{format_value(mean)} ± {format_value(sd)}"


def run_labels(run_dirs: Sequence[Path | str]) -> list[str]:
    """A short unique label per run: its folder name, with the parent folder when two names collide."""
    paths = [Path(run) for run in run_dirs]
    names = [p.name for p in paths]
    labels = [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]
    return [label if labels.count(label) == 1 else f"{label} ({i})" for i, label in enumerate(labels)]


def _rows(metrics: Sequence[dict[str, Any]], labels: Sequence[str],
          columns: tuple[tuple[str, str, str | None], ...]) -> list[dict[str, Any]]:
    rows = []
    for row_metrics, label in zip(metrics, labels):
        row: dict[str, Any] = {"method": metric(row_metrics, "method"), "run folder": label}
        for header, key, sd_key in columns:
            value = metric(row_metrics, key)
            row[header] = mean_sd(value, metric(row_metrics, sd_key)) if sd_key else value
        rows.append(row)
    return rows


def rq1_table(metrics: Sequence[dict[str, Any]], labels: Sequence[str],
              origins: Sequence[str] | None = None) -> pd.DataFrame:
    """Effectiveness (paper Table 1), a row per run: flips (misclassification, flip rate, escape ratio), the
    oracle's verdict rates over all cases, MS-SSIM and LPIPS (mean ± sd), diversity, trace difference, FID / KID.
    ``origins``: the generator each run sampled its origins with (``compare_runs``' ``origins`` column)."""
    table = pd.DataFrame(_rows(metrics, labels, RQ1_COLUMNS))
    for header in OPTIONAL_RQ1:
        if header in table and (table[header] == "-").all():
            table = table.drop(columns=[header])
    if origins is not None:
        table.insert(2, "origins", list(origins))
    return table


def rq2_table(metrics: Sequence[dict[str, Any]], labels: Sequence[str],
              eval_ratio: Sequence[Any] | None = None) -> pd.DataFrame:
    """Efficiency (paper Table 2), a row per run: runtime and SUT evaluations (mean ± sd over every case), the
    median evaluations over flipped cases, the cost per valid failure, the rate of cases that ended before the
    budget and ``hynea_eval_ratio`` (``compare_runs``)."""
    table = pd.DataFrame(_rows(metrics, labels, RQ2_COLUMNS))
    if eval_ratio is not None:
        table["hynea_eval_ratio"] = list(eval_ratio)
    return table


def unavailable_notes(metrics: Sequence[dict[str, Any]], labels: Sequence[str],
                      keys: Sequence[str]) -> list[str]:
    """The metrics ``evaluate_run`` marked unavailable, one line per reason: ``"lpips, fid unavailable for run_a,
    run_b: <reason>"`` (shown below a table)."""
    by_reason: dict[str, tuple[list[str], list[str]]] = {}
    for row_metrics, label in zip(metrics, labels):
        for key in keys:
            entry = row_metrics.get(key)
            if isinstance(entry, dict) and entry.get("unavailable"):
                names, runs = by_reason.setdefault(str(entry["unavailable"]), ([], []))
                if key not in names:
                    names.append(key)
                if label not in runs:
                    runs.append(label)
    return [f"{', '.join(names)} unavailable for {', '.join(runs)}: {reason}"
            for reason, (names, runs) in by_reason.items()]


#: Above this many labels the confusion columns are only the SUT labels seen (ImageNet), not every class seen.
MAX_SQUARE_LABELS = 30


def confusion_counts(records: Sequence[CaseRecord]) -> pd.DataFrame:
    """Cases per (origin class, SUT label on the result) of a multiclass run (its SUT decides a class,
    ``decision_is_class``), over the cases that ran and have both labels: rows the origin classes, columns every
    class seen (origin classes and SUT labels, so an unchanged label sits on the diagonal; only the SUT labels seen
    when they are more than :data:`MAX_SQUARE_LABELS`). Empty when there is no such case."""
    pairs = [(r.origin_class, r.result_label) for r in records
             if r.is_case and r.ok and task_class(r.task).decision_is_class and r.origin_class is not None
             and r.result_label is not None]
    if not pairs:
        return pd.DataFrame()
    frame = pd.DataFrame(pairs, columns=["origin class", "SUT label"])
    rows = sorted({origin for origin, _ in pairs})
    columns = sorted({c for pair in pairs for c in pair})
    if len(columns) > MAX_SQUARE_LABELS:
        columns = sorted({label for _, label in pairs})
    counts = pd.crosstab(frame["origin class"], frame["SUT label"])
    return counts.reindex(index=rows, columns=columns, fill_value=0)
