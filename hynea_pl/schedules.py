"""Learning-rate schedule helpers."""

from __future__ import annotations


def safe_pct_start(pct_start: float, total_steps: int) -> float:
    """``pct_start`` for ``OneCycleLR`` nudged so that neither phase is empty (an empty phase divides by zero
    in torch's schedule, e.g. ``pct_start * total_steps == 1``): the warm-up covers at least 1.5 steps and at
    most 90 % of the cycle."""
    return min(max(pct_start, 1.5 / max(total_steps, 1)), 0.9)
