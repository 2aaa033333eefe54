"""HyNeA against each baseline on paired cases (the same case id in both runs): Wilcoxon signed-rank p-values and
Cohen's d of per-case MS-SSIM, SUT evaluations and runtime, from the shared statistics module
(:mod:`hynea_pl.metrics.functional.stats`).

Which cases pair follows ``evaluate_run``'s conventions: MS-SSIM over cases that ran without error (and have a
recorded MS-SSIM), SUT evaluations and runtime over every case (a failed case spent its budget too).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from hynea_pl.metrics.functional.stats import cohens_d, wilcoxon_signed_rank
from hynea_pl.report.compare import format_value
from hynea_pl.schema import CaseRecord

__all__ = ["MIN_PAIRS", "PAIRED_FIELDS", "paired_test", "paired_values", "statistics_table"]

#: Fewest pairs for which a two-sided exact Wilcoxon p-value can fall below 0.05 (n = 6: p >= 2 / 2^6 = 0.031).
MIN_PAIRS = 6
#: Record field -> (shown name, only cases that ran without error).
PAIRED_FIELDS: dict[str, tuple[str, bool]] = {
    "ms_ssim": ("MS-SSIM", True),
    "sut_evals": ("SUT evaluations", False),
    "runtime_s": ("runtime (s)", False),
}


def _value(record: CaseRecord, name: str) -> float | None:
    value = getattr(record, name)
    return float(value) if value is not None and math.isfinite(float(value)) else None


def paired_values(reference: Sequence[CaseRecord], other: Sequence[CaseRecord], name: str,
                  ok_only: bool | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(case ids, reference values, other values)`` of record field ``name`` over the case ids both runs hold,
    in the reference run's order. ``ok_only`` (default: :data:`PAIRED_FIELDS`) keeps only cases without error in
    both runs; a case with a missing or non-finite value in either run is left out."""
    if ok_only is None:
        ok_only = PAIRED_FIELDS.get(name, ("", True))[1]

    def usable(records: Sequence[CaseRecord]) -> dict[str, float]:
        values = {}
        for record in records:
            if record.is_case and (record.ok or not ok_only):
                value = _value(record, name)
                if value is not None:
                    values[record.case_id] = value
        return values

    ref, oth = usable(reference), usable(other)
    ids = [case for case in ref if case in oth]
    return ids, np.array([ref[c] for c in ids], dtype=np.float64), np.array([oth[c] for c in ids], dtype=np.float64)


def paired_test(x: np.ndarray, y: np.ndarray, min_pairs: int = MIN_PAIRS) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank p-value and Cohen's d (pooled SD, ``x - y`` direction) of paired samples.

    Returns ``{"n", "p", "d", "p_note", "d_note"}``; ``p`` / ``d`` are ``None`` with a note saying why when they
    are not computed: ``n/a (n<min_pairs)``, ``n/a (all differences 0)``, ``n/a (sd 0)``."""
    n = len(x)
    result: dict[str, Any] = {"n": n, "p": None, "d": None, "p_note": None, "d_note": None}
    if n < min_pairs:
        result["p_note"] = result["d_note"] = f"n/a (n<{min_pairs})"
        return result
    _, p = wilcoxon_signed_rank(x, y)
    d = cohens_d(x, y, paired=False)
    if math.isnan(p):
        result["p_note"] = "n/a (all differences 0)"
    else:
        result["p"] = p
    if math.isnan(d):
        result["d_note"] = "n/a (sd 0)"
    else:
        result["d"] = d
    return result


def _p_text(p: float) -> str:
    return f"{p:.2g}" + (" *" if p < 0.05 else "")


SAME_IMAGES, SAME_SEEDS = "same origin images", "same (seed, class) only"


def statistics_table(references: dict[str, Sequence[CaseRecord]], baselines: dict[str, Sequence[CaseRecord]],
                     min_pairs: int = MIN_PAIRS, origin_keys: dict[str, str] | None = None) -> pd.DataFrame:
    """A row per (HyNeA run, baseline run, metric): pairs, both means over the pairs, Wilcoxon p (``*``: p < 0.05)
    and Cohen's d (HyNeA minus baseline, pooled SD). Keys of the dicts are run labels; ``origin_keys`` (label ->
    the generator key of :func:`hynea_pl.report.compare.origin_generators`) fills the ``pairing`` column: whether
    paired cases started from the same origin images or only from the same (seed, class)."""
    rows = []
    for ref_label, ref_records in references.items():
        for base_label, base_records in baselines.items():
            pairing = None
            if origin_keys is not None:
                same = origin_keys.get(ref_label) == origin_keys.get(base_label)
                pairing = SAME_IMAGES if same else SAME_SEEDS
            for name, (shown, _) in PAIRED_FIELDS.items():
                _, x, y = paired_values(ref_records, base_records, name)
                test = paired_test(x, y, min_pairs)
                rows.append({
                    "HyNeA run": ref_label, "baseline run": base_label, "pairing": pairing, "metric": shown,
                    "n pairs": test["n"],
                    "HyNeA mean": float(x.mean()) if len(x) else None,
                    "baseline mean": float(y.mean()) if len(y) else None,
                    "Wilcoxon p": test["p_note"] if test["p"] is None else _p_text(test["p"]),
                    "Cohen's d": test["d_note"] if test["d"] is None else format_value(test["d"]),
                })
    return pd.DataFrame(rows, columns=["HyNeA run", "baseline run", "pairing", "metric", "n pairs", "HyNeA mean",
                                       "baseline mean", "Wilcoxon p", "Cohen's d"])
