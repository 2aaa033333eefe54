"""RQ4 (sensitivity to the learning rate): HyNeA runs that differ in ``model.init_args.search.lr_min`` (each run's
``config.yaml``), with their metrics from ``metrics.json``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from hynea_pl.report.compare import REFERENCE_METHOD, run_config_section
from hynea_pl.report.tables import metric
from hynea_pl.verdicts import VALID_FAILURE_RATE

__all__ = ["SWEEP_METRICS", "is_sweep", "run_learning_rates", "sweep_table"]

#: metrics.json keys of the sweep table (and of :func:`hynea_pl.report.plots.sweep_plot`).
SWEEP_METRICS = ("n_cases", "misclassification_rate", VALID_FAILURE_RATE, "mean_ms_ssim", "std_ms_ssim", "fid",
                 "mean_runtime_s", "std_runtime_s")

def run_learning_rates(run_dir: Path | str) -> tuple[float | None, float | None]:
    """``(lr_min, lr_max)`` of a run's method from its ``config.yaml`` (``model.init_args.search``); ``None`` where the
    file or the setting is missing."""
    init_args = ((run_config_section(run_dir, "model") or {}).get("init_args") or {}).get("search") or {}

    def number(key: str) -> float | None:
        try:
            return float(init_args[key])
        except (KeyError, TypeError, ValueError):
            return None

    return number("lr_min"), number("lr_max")

def sweep_table(run_dirs: Sequence[Path | str], metrics: Sequence[dict[str, Any]], labels: Sequence[str],
                method: str = REFERENCE_METHOD) -> pd.DataFrame:
    """A row per ``method`` run with a known ``lr_min``, sorted by it: ``lr_min``, ``lr_max``, the run and
    :data:`SWEEP_METRICS`."""
    rows = []
    for run_dir, row_metrics, label in zip(run_dirs, metrics, labels):
        if metric(row_metrics, "method") != method:
            continue
        lr_min, lr_max = run_learning_rates(run_dir)
        if lr_min is None:
            continue
        rows.append({"lr_min": lr_min, "lr_max": lr_max, "run folder": label,
                     **{key: metric(row_metrics, key) for key in SWEEP_METRICS}})
    frame = pd.DataFrame(rows, columns=["lr_min", "lr_max", "run folder", *SWEEP_METRICS])
    return frame.sort_values("lr_min", kind="stable").reset_index(drop=True)

def is_sweep(sweep: pd.DataFrame) -> bool:
    """Whether the runs differ in ``lr_min`` (at least two distinct values)."""
    return not sweep.empty and sweep["lr_min"].nunique() >= 2
