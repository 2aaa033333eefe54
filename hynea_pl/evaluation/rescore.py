"""Re-score a finished run folder into the method's table row (HyNeA Table 1 / 2 columns).

``run_dir/records.jsonl`` holds :class:`hynea_pl.schema.CaseRecord` lines (read and validated by
:func:`hynea_pl.schema.read_records`); image paths are PNGs relative to ``run_dir``.

Conventions (the same for every method, since every method writes the same schema):
- A *case* is a record with a valid origin (``seed`` not null; the others only count as skipped seeds, paper 4.5).
  A case is *ok* when ``error`` is null. Cases with an error count as not flipped (they stay in the denominators)
  and are excluded from every image metric.
- ``flip_rate`` = cases whose SUT decision left the origin's (``flipped``) / cases; ``target_reached_rate`` the
  same for ``target_reached``. These count flips, not valid failures: whether the result still shows its class is
  the validity oracle's verdict, not the SUT's.
- ``misclassification_rate`` = (sum over ok cases of the eq. 9/10/11 indicator computed from ``origin_pred`` /
  ``result_pred``) / cases. For multiclass and binary it equals ``flip_rate`` (``flipped_mismatch`` counts ok
  records where they disagree); for detection eq. 11 is the fraction of top-k detections whose class changed.
- Escape ratio (eqs. 12-14) and confidence reduction (eq. 15, detection, from the logits) over ok cases.
- Validity (:func:`validity_columns`): the oracle's verdicts (:mod:`hynea_pl.verdicts`); ``valid_failure_rate``
  is the honest failure rate.
- Stability (:func:`stability_columns`, :mod:`hynea_pl.evaluation.stability`): ``stable_flip_rate`` (flips that
  hold on every variant of the saved result) and ``stable_failure_rate`` (valid failures that do), over all cases.
- Cost columns say what they average: ``*_sut_evals_flipped`` over flipped cases (what a method needs to find a
  flip), ``*_sut_evals_all``, ``total_sut_evals`` and runtime over every case (errors included: budget was spent);
  ``sut_evals_per_valid_failure`` = the evaluations of all cases / valid failures, ``sut_evals_per_stable_failure``
  the same per stable valid failure.
- ``ended_before_budget_rate`` = cases that stopped by the method's own rule or the step limit (``diagnostics
  ["stop_reason"]`` ``converged`` / ``max_steps``), neither finding what they search for nor spending the budget,
  / cases; ``None`` when no case recorded why it stopped (older runs, methods that do not record it).
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric

from hynea_pl.callbacks.stop import EARLY_STOP_REASONS
from hynea_pl.images import load_run_image, run_image_shape
from hynea_pl.metrics import (
    LPIPS,
    ConfidenceReduction,
    EmbeddingDiversity,
    EscapeRatio,
    MisclassificationRate,
    MultiScaleSSIM,
    Runtime,
    SUTEvaluations,
    TraceDifference,
    embed,
    resnet50_embedder,
)
from hynea_pl.metrics.functional.search import summarize
from hynea_pl.metrics.weights import MetricUnavailable, to_record_value, unavailable_entry
from hynea_pl.schema import CaseRecord, read_records
from hynea_pl.verdicts import (FLIP_VERDICTS, RATE_KEYS, STABLE_FAILURE_RATE, STABLE_FLIP_RATE, UNACCEPTED,
                               VALID_FAILURE)

__all__ = ["METRICS_FILE", "ended_before_budget_rate", "evaluate_run", "read_metrics", "records_row",
           "validity_columns"]

#: The file ``evaluate_run`` writes into the run folder.
METRICS_FILE = "metrics.json"

NAN = float("nan")

#: Every record of a run is in the process that scores it: its metrics gather nothing from other processes (a sharded
#: campaign's rank 0 computes the summary alone, inside the campaign's process group).
LOCAL = {"sync_on_compute": False}


def _computed(metric: Metric) -> Any:
    """``metric.compute()``, without torchmetrics' warning for a metric no case updated (a run without cases)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The ``compute`` method of metric")
        return metric.compute()


def _unique(values: list[Any]) -> Any:
    distinct = sorted({str(v) for v in values if v is not None})
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else distinct


def _finite(values: Sequence[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _ms_ssim_columns(metric: MultiScaleSSIM, source: str) -> dict[str, Any]:
    stats = _computed(metric)
    return {"median_ms_ssim": stats["median"], "mean_ms_ssim": stats["mean"], "std_ms_ssim": stats["std"],
            "ms_ssim_source": source if stats["n"] else None}


def ended_before_budget_rate(cases: Sequence[CaseRecord]) -> float | None:
    """Cases whose ``diagnostics["stop_reason"]`` is ``converged`` or ``max_steps`` (they ended before finding what
    they search for and before spending the budget) / cases; ``None`` when no case recorded a stop reason."""
    reasons = [r.diagnostics.get("stop_reason") for r in cases]
    if not any(reasons):
        return None
    return sum(reason in EARLY_STOP_REASONS for reason in reasons) / len(cases)


def _load_pairs(run_dir: Path, cases: list[CaseRecord]) -> tuple[list[tuple[CaseRecord, Tensor, Tensor]], int]:
    pairs, skipped = [], 0
    expected = run_image_shape(run_dir, cases)
    for rec in cases:
        if not rec.origin_image or not rec.result_image:
            skipped += 1
            continue
        try:
            o = load_run_image(run_dir / rec.origin_image, expected)
            r = load_run_image(run_dir / rec.result_image, expected)
        except OSError:
            skipped += 1
            continue
        if o.shape[0] != r.shape[0]:  # grayscale vs RGB: compare in RGB
            o, r = o.expand(3, -1, -1), r.expand(3, -1, -1)
        if o.shape != r.shape:
            skipped += 1
            continue
        pairs.append((rec, o, r))
    return pairs, skipped


def _groups(pairs: list[tuple[CaseRecord, Tensor, Tensor]]) -> list[tuple[Tensor, Tensor]]:
    """Stack pairs by image shape -> [(origins (N, C, H, W), results (N, C, H, W))]."""
    by_shape: dict[tuple, list[tuple[Tensor, Tensor]]] = {}
    for _, o, r in pairs:
        by_shape.setdefault(tuple(o.shape), []).append((o, r))
    return [(torch.stack([o for o, _ in g]), torch.stack([r for _, r in g])) for g in by_shape.values()]


def records_row(records: Sequence[CaseRecord]) -> dict[str, Any]:
    """The part of a method's row that needs only the records: task metrics, SUT evaluations (over flipped cases
    and over all cases, see the module docstring), ``ended_before_budget_rate``, runtime and the recorded MS-SSIM,
    each through its :mod:`hynea_pl.metrics` Metric, updated with every case and computed once for the run.
    The campaign prints this at the end of a run; :func:`evaluate_run` extends it."""
    cases = [r for r in records if r.is_case]
    ok = [r for r in cases if r.ok]
    n_cases = len(cases)
    task = (MisclassificationRate(**LOCAL), EscapeRatio(**LOCAL), ConfidenceReduction(**LOCAL))
    sut_evals = {"flipped": SUTEvaluations(**LOCAL), "all": SUTEvaluations(**LOCAL)}
    runtime, ms_ssim, ms_ssim_to_real = Runtime(**LOCAL), MultiScaleSSIM(**LOCAL), MultiScaleSSIM(**LOCAL)
    for rec in cases:
        for metric in task:
            metric.update(rec)
        sut_evals["all"].update(rec.sut_evals)
        runtime.update(rec.runtime_s)
        if rec.ok:
            sut_evals["flipped"].update(rec.sut_evals if rec.flipped else None)
            ms_ssim.update(rec.ms_ssim)
            ms_ssim_to_real.update(rec.real_ms_ssim)
    mr, esc, cr, time, to_real = (_computed(metric) for metric in (*task, runtime, ms_ssim_to_real))
    evals = {suffix: _computed(metric) for suffix, metric in sut_evals.items()}
    row: dict[str, Any] = {
        "method": _unique([r.method for r in cases]),
        "task": _unique([r.task for r in cases]),
        "n_cases": n_cases,
        "n_ok": len(ok),
        "n_errors": n_cases - len(ok),
        "n_flipped": sum(r.flipped for r in ok),
        "flip_rate": sum(r.flipped for r in ok) / n_cases if n_cases else NAN,
        "target_reached_rate": sum(r.target_reached for r in ok) / n_cases if n_cases else NAN,
        **mr,
        "escape_ratio": esc["mean"] if esc["n"] else None,  # undefined for detection (Table 1: "-")
        "confidence_reduction": cr["mean"] if cr["n"] else None,
        "confidence_reduction_std": cr["std"] if cr["n"] > 1 else None,
        **{f"{stat}_sut_evals_{suffix}": values[stat] for suffix, values in evals.items()
           for stat in ("median", "mean", "std")},
        "total_sut_evals": evals["all"]["total"],
        "ended_before_budget_rate": ended_before_budget_rate(cases),
        "mean_runtime_s": time["mean"], "median_runtime_s": time["median"], "std_runtime_s": time["std"],
        "total_runtime_s": time["total"],
        **_ms_ssim_columns(ms_ssim, "records"),
        "median_ms_ssim_to_real": to_real["median"] if to_real["n"] else None,
    }
    row.update(validity_columns(cases))
    row.update(stability_columns(cases))
    return row


def stability_columns(cases: Sequence[CaseRecord]) -> dict[str, Any]:
    """The stability verdict over all cases (:mod:`hynea_pl.evaluation.stability`): ``stable_flip_rate`` = cases
    whose flip holds on every stability variant / all cases; ``stable_failure_rate`` = valid failures (judges and
    realism test) that also hold on every variant / all cases (``None`` without a judge);
    ``sut_evals_per_stable_failure`` = the evaluations of all cases / those stable valid failures. All ``None`` when
    no case was checked."""
    if not any(r.stable is not None for r in cases):
        return {STABLE_FLIP_RATE: None, STABLE_FAILURE_RATE: None, "sut_evals_per_stable_failure": None}
    n = len(cases)
    judged = any(r.verdict is not None for r in cases)
    stable_failures = sum(bool(r.is_valid_failure and r.stable) for r in cases)
    return {
        STABLE_FLIP_RATE: sum(bool(r.ok and r.flipped and r.stable) for r in cases) / n,
        STABLE_FAILURE_RATE: stable_failures / n if judged else None,
        "sut_evals_per_stable_failure": (sum(r.sut_evals for r in cases) / stable_failures
                                         if judged and stable_failures else None),
    }


def validity_columns(cases: Sequence[CaseRecord]) -> dict[str, Any]:
    """The oracle's verdicts over all cases (flips are not failures: only ``valid_failure`` reveals a fault).

    ``valid_failure_rate`` = cases the SUT flipped while the judges unanimously keep the origin's class and the
    result passes the realism test / all cases (errors included); ``degraded_rate`` (the judges keep the class, the
    result fails the realism test), ``semantic_change_rate`` and ``ambiguous_rate`` likewise; ``unaccepted_rate``
    (and ``n_unaccepted``): flips on the best try of a case whose method accepted no result, never failures;
    ``sut_evals_per_valid_failure`` and ``runtime_s_per_valid_failure`` = what the whole run spent (all cases) /
    valid failures found. ``realism_pass_origins`` / ``realism_pass_results``: the fraction of origins / results
    that pass the realism test, over the cases it read. All ``None`` when no case was judged (no ``oracle``)."""
    judged = [r for r in cases if r.verdict is not None]
    keys = ("n_judged", *RATE_KEYS.values(), "n_valid_failures", "n_unaccepted", "sut_evals_per_valid_failure",
            "runtime_s_per_valid_failure", "median_ms_ssim_valid_failures", "realism_pass_origins",
            "realism_pass_results")
    if not judged:
        return dict.fromkeys(keys)
    n = len(cases)
    valid = [r for r in judged if r.is_valid_failure]
    count = {v: sum(r.verdict == v for r in judged) for v in FLIP_VERDICTS}
    count[VALID_FAILURE] = len(valid)

    def pass_rate(values: list[bool | None]) -> float | None:
        read = [v for v in values if v is not None]
        return sum(read) / len(read) if read else None

    return {
        "n_judged": len(judged),
        **{RATE_KEYS[v]: count[v] / n for v in FLIP_VERDICTS},
        "n_valid_failures": len(valid),
        "n_unaccepted": count[UNACCEPTED],
        "sut_evals_per_valid_failure": sum(r.sut_evals for r in cases) / len(valid) if valid else None,
        "runtime_s_per_valid_failure": sum(r.runtime_s for r in cases) / len(valid) if valid else None,
        "realism_pass_origins": pass_rate([r.origin_realistic for r in cases]),
        "realism_pass_results": pass_rate([r.realistic for r in cases]),
        "median_ms_ssim_valid_failures": summarize(_finite([r.ms_ssim for r in valid]))["median"],
    }


def evaluate_run(
    run_dir: Path | str,
    embedder: Callable[[Tensor], Tensor] | str | None = None,
    *,
    lpips_model: Callable[[Tensor, Tensor], Tensor] | None = None,
    lpips_net: str = "vgg",
    lpips_weights: str | Path | None = None,
    batch_size: int = 32,
    realism_features: Any = None,
    realism_reference: Tensor | None = None,
    write: bool = True,
) -> dict[str, Any]:
    """Compute the table row of the run in ``run_dir`` and write ``run_dir/metrics.json``.

    Args:
        run_dir: folder with ``records.jsonl`` and the PNGs it references.
        embedder: callable ``images (B, C, H, W) in [0, 1] -> (B, D)`` for diversity / trace difference, or
            ``"resnet50"`` for the ImageNet ResNet-50 from the torch hub cache. None: those columns are marked
            unavailable.
        lpips_model: ready LPIPS-like distance ``(preds, target) -> (B,)``; default: LPIPS(``lpips_net``) with
            backbone weights from ``lpips_weights`` or the torch hub cache (unavailable when missing).
        realism_features, realism_reference: FID / KID / precision-recall of the results (and of the origins, the
            generator's own baseline) against real reference images, with these features
            (:func:`hynea_pl.evaluation.realism.run_realism`); ``None``: not computed.
    Returns:
        the JSON-safe row (NaN -> None; unavailable metrics as ``{"value": None, "unavailable": reason}``).
    """
    run_dir = Path(run_dir)
    cases = [r for r in read_records(run_dir / "records.jsonl") if r.is_case]
    ok = [r for r in cases if r.ok]
    row = records_row(cases)

    # --- image metrics (ok cases only); MS-SSIM recomputed from the PNGs where a record has none -----------------
    pairs, skipped = _load_pairs(run_dir, ok)
    row["n_image_pairs"] = len(pairs)
    row["n_images_missing"] = skipped
    missing = [(o, r) for rec, o, r in pairs if rec.ms_ssim is None]
    if missing:
        recorded = _finite([r.ms_ssim for r in ok])
        ms_ssim = MultiScaleSSIM(**LOCAL)
        ms_ssim.update(recorded)
        for o, r in missing:
            ms_ssim.update(r.unsqueeze(0), o.unsqueeze(0))
        row.update(_ms_ssim_columns(ms_ssim, "records+recomputed" if recorded else "recomputed"))

    groups = _groups(pairs)
    if not groups:
        entry = unavailable_entry("no valid test case with readable images")
        row.update({"lpips": entry, "lpips_std": entry})
    else:
        try:
            lpips = LPIPS(lpips_net, lpips_weights, distance=lpips_model, **LOCAL)  # unavailable without weights
            for origins, results in groups:
                for i in range(0, origins.shape[0], batch_size):
                    lpips.update(results[i : i + batch_size], origins[i : i + batch_size])
            lp = lpips.compute()
            row.update({"lpips": lp["mean"], "lpips_std": lp["std"], "median_lpips": lp["median"]})
        except MetricUnavailable as exc:
            row.update({"lpips": unavailable_entry(exc), "lpips_std": unavailable_entry(exc)})

    emb_keys = ("diversity", "diversity_origins", "trace_difference")
    if embedder is None:
        row.update({k: unavailable_entry("no embedder configured (evaluate_run(..., embedder=...))") for k in emb_keys})
    elif not groups:
        row.update({k: unavailable_entry("no valid test case with readable images") for k in emb_keys})
    else:
        try:
            if isinstance(embedder, str):
                if embedder != "resnet50":
                    raise ValueError(f"unknown embedder name {embedder!r} (use 'resnet50' or a callable)")
                embedder = resnet50_embedder()
            diversity, diversity_origins = EmbeddingDiversity(**LOCAL), EmbeddingDiversity(**LOCAL)
            trace = TraceDifference(**LOCAL)
            for origins, results in groups:
                e0, et = embed(embedder, origins, batch_size), embed(embedder, results, batch_size)
                diversity.update(et)
                diversity_origins.update(e0)
                trace.update(e0, et)
            row.update({"diversity": float(diversity.compute()), "diversity_origins": float(diversity_origins.compute()),
                        "trace_difference": float(trace.compute())})
        except MetricUnavailable as exc:
            row.update({k: unavailable_entry(exc) for k in emb_keys})

    if realism_features is not None:
        from hynea_pl.evaluation.realism import run_realism

        realism = run_realism(run_dir, ok, realism_features, realism_reference, batch_size=batch_size)
        row["realism"] = realism
        for group, suffix in (("results", ""), ("valid_failures", "_valid_failures")):
            scores = realism[group]
            for key in ("fid", "kid_mean", "kid_std"):
                row[key + suffix] = (scores.get(key) if "unavailable" not in scores
                                     else unavailable_entry(scores["unavailable"]))
            if "unavailable" not in scores:
                row["n_realism" + suffix] = scores.get("n_images")
    row = to_record_value(row)
    if write:
        with open(run_dir / METRICS_FILE, "w", encoding="utf-8") as fh:
            json.dump(row, fh, indent=2, allow_nan=False)
            fh.write("\n")
    return row


def read_metrics(run_dir: Path | str) -> dict[str, Any] | None:
    """The row :func:`evaluate_run` last wrote into ``run_dir/metrics.json``; ``None`` when there is none or when
    ``records.jsonl`` changed after it was written (a resumed run: the row no longer describes its records)."""
    run_dir = Path(run_dir)
    path, records = run_dir / METRICS_FILE, run_dir / "records.jsonl"
    if not path.is_file() or (records.is_file() and records.stat().st_mtime_ns > path.stat().st_mtime_ns):
        return None
    return json.loads(path.read_text(encoding="utf-8"))
