"""The report's figures, drawn with matplotlib's object API onto an Agg canvas (no pyplot, no global backend
switch: safe inside notebooks and worker processes) and saved as PNG files."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter

from hynea_pl.verdicts import VALID_FAILURE_RATE

__all__ = ["LOG_DECADES", "confusion_plot", "distribution_plot", "needs_log_scale", "sweep_plot"]

#: A distribution is drawn on a log axis when its positive values span more than this many decades.
LOG_DECADES = 1.5


def _figure(width: float, height: float) -> Figure:
    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def needs_log_scale(values: Sequence[float]) -> bool:
    """True when every finite value is positive and max / min exceeds ``10 ** LOG_DECADES``."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite or min(finite) <= 0:
        return False
    return math.log10(max(finite) / min(finite)) > LOG_DECADES


def distribution_plot(groups: dict[str, Sequence[float]], ylabel: str, title: str, path: Path) -> Path:
    """Box plot per group (a run) with every case as a dot; log y axis when the positive values span more than
    :data:`LOG_DECADES` decades (cases at 0 are then left out, and the axis label says how many)."""
    labels = list(groups)
    data = [[float(v) for v in groups[k] if v is not None and math.isfinite(float(v))] for k in labels]
    log = needs_log_scale([v for d in data for v in d if v > 0])  # a case at 0 cannot sit on a log axis
    hidden = sum(v <= 0 for d in data for v in d) if log else 0
    if log:
        data = [[v for v in d if v > 0] for d in data]
        ylabel += " (log scale" + (f"; cases at 0 not shown: {hidden})" if hidden else ")")
    figure = _figure(max(4.0, 1.4 * len(labels) + 1.5), 3.6)
    ax = figure.add_subplot()
    positions = np.arange(1, len(labels) + 1)
    shown = [(p, d) for p, d in zip(positions, data) if d]
    if shown:
        ax.boxplot([d for _, d in shown], positions=[p for p, _ in shown], widths=0.5, showfliers=False)
    rng = np.random.default_rng(0)
    for position, values in shown:
        ax.scatter(position + rng.uniform(-0.12, 0.12, len(values)), values, s=12, alpha=0.6, color="tab:blue")
    ax.set_xticks(positions, labels, rotation=20, ha="right")
    ax.set_xlim(0.4, len(labels) + 0.6)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _save(figure, path)


def confusion_plot(counts: pd.DataFrame, title: str, path: Path) -> Path:
    """Heat map of a confusion count table (rows origin classes, columns SUT labels), numbers in the cells and
    the unchanged-label cells outlined."""
    n_rows, n_cols = counts.shape
    figure = _figure(min(16.0, 1.8 + 0.45 * n_cols), min(16.0, 1.6 + 0.45 * n_rows))
    ax = figure.add_subplot()
    values = counts.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="Blues", vmin=0, vmax=max(1.0, float(values.max()) if values.size else 1.0))
    columns = list(counts.columns)
    for i, origin in enumerate(counts.index):
        for j in range(n_cols):
            count = int(values[i, j])
            if count:
                ax.text(j, i, str(count), ha="center", va="center", fontsize=8,
                        color="white" if count > values.max() / 2 else "black")
        if origin in columns:
            j = columns.index(origin)
            ax.add_patch(_rectangle(j, i))
    ax.set_xticks(range(n_cols), [str(c) for c in columns])
    ax.set_yticks(range(n_rows), [str(r) for r in counts.index])
    ax.set_xlabel("SUT label on the result")
    ax.set_ylabel("origin class")
    ax.set_title(title, fontsize=10)
    bar = figure.colorbar(image, ax=ax, shrink=0.8, label="cases")
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()
    return _save(figure, path)


def _rectangle(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="tab:gray", linewidth=1.2)


#: Panels of the learning-rate sweep: (column of the sweep table, its sd column or None, axis label).
SWEEP_PANELS: tuple[tuple[str, str | None, str], ...] = (
    ("misclassification_rate", None, "misclassification (flips)"),
    (VALID_FAILURE_RATE, None, "valid-failure rate"),
    ("mean_ms_ssim", "std_ms_ssim", "MS-SSIM (mean ± sd)"),
    ("fid", None, "FID"),
    ("mean_runtime_s", "std_runtime_s", "runtime s (mean ± sd)"),
)


def sweep_plot(sweep: pd.DataFrame, path: Path) -> Path:
    """One panel per :data:`SWEEP_PANELS` metric against ``lr_min`` (log x axis); a run is a point, error bars
    are the per-case sd where the metric has one; a panel without values says so."""
    figure = _figure(3.2 * len(SWEEP_PANELS), 3.2)
    for k, (column, sd_column, label) in enumerate(SWEEP_PANELS):
        ax = figure.add_subplot(1, len(SWEEP_PANELS), k + 1)
        frame = sweep[["lr_min", column] + ([sd_column] if sd_column else [])].dropna(subset=["lr_min", column])
        ax.set_title(label, fontsize=10)
        if frame.empty:
            ax.text(0.5, 0.5, "unavailable", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        x = frame["lr_min"].to_numpy(dtype=float)
        y = frame[column].to_numpy(dtype=float)
        err = frame[sd_column].to_numpy(dtype=float) if sd_column else None
        order = np.argsort(x)
        ax.errorbar(x[order], y[order], yerr=None if err is None else np.nan_to_num(err[order]), marker="o",
                    capsize=3)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # decade labels only: minor ones overlap
        if isinstance(ax.yaxis.get_major_formatter(), ScalarFormatter):
            ax.yaxis.get_major_formatter().set_useOffset(False)
        ax.set_xlabel("lr_min")
    return _save(figure, path)
