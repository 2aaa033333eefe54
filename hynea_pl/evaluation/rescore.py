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
  ``sut_evals_per_valid_failure`` = the evaluations of all cases / valid failures.
- ``ended_before_budget_rate`` = cases that stopped by the method's own rule or the step limit (``diagnostics
  ["stop_reason"]`` ``converged`` / ``max_steps``), neither finding what they search for nor spending the budget,
  / cases; ``None`` when no case recorded why it stopped (older runs, methods that do not record it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hynea_pl.callbacks.stop import EARLY_STOP_REASONS
from hynea_pl.images import load_run_image, run_image_shape
from hynea_pl.metrics.functional import embedding as FE
from hynea_pl.metrics.functional import image as FI
from hynea_pl.metrics.functional import task as FT
from hynea_pl.metrics.functional.search import summarize
from hynea_pl.metrics.weights import MetricUnavailable, to_record_value, unavailable_entry
from hynea_pl.schema import CaseRecord, read_records
from hynea_pl.suts import task_class
from hynea_pl.verdicts import FLIP_VERDICTS, RATE_KEYS, STABLE_FAILURE_RATE, STABLE_FLIP_RATE, VALID_FAILURE

__all__ = ["METRICS_FILE", "ended_before_budget_rate", "evaluate_run", "read_metrics", "records_row",
           "validity_columns"]

#: The file ``evaluate_run`` writes into the run folder.
METRICS_FILE = "metrics.json"

NAN = float("nan")


def _case_task_values(rec: CaseRecord) -> dict[str, float | None] | None:
    """Per-case misclassification indicator / escape / confidence reduction, by the record's task
    (:meth:`hynea_pl.suts.SUT.case_metrics`); None when preds are unusable."""
    try:
        o = torch.as_tensor(rec.origin_pred, dtype=torch.float64)
        r = torch.as_tensor(rec.result_pred, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return None
    if o.shape != r.shape or o.numel() == 0 or rec.target is None:
        return None
    return task_class(rec.task).case_metrics(o, r, rec.target, FT)


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else NAN


def _unique(values: list[Any]) -> Any:
    distinct = sorted({str(v) for v in values if v is not None})
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else distinct


def _finite(values: Sequence[float | int | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _ms_ssim_columns(values: list[float], source: str | None) -> dict[str, Any]:
    stats = summarize(values)
    return {"median_ms_ssim": stats["median"], "mean_ms_ssim": stats["mean"], "std_ms_ssim": stats["std"],
            "ms_ssim_source": source if values else None}


def _sut_evals_columns(cases: list[CaseRecord]) -> dict[str, Any]:
    """SUT evaluations over flipped cases (``*_flipped``) and over all cases (``*_all``, ``total_sut_evals``)."""
    groups = {"flipped": [r for r in cases if r.ok and r.flipped], "all": cases}
    stats = {suffix: summarize(_finite([r.sut_evals for r in group])) for suffix, group in groups.items()}
    columns = {f"{stat}_sut_evals_{suffix}": values[stat] for suffix, values in stats.items()
               for stat in ("median", "mean", "std")}
    return {**columns, "total_sut_evals": stats["all"]["total"]}


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


def _lpips_values(groups, lpips_model, lpips_net, lpips_weights, batch_size) -> list[float]:
    if lpips_model is None:
        from hynea_pl.metrics.backbones import LPIPSDistance

        lpips_model = LPIPSDistance(lpips_net, lpips_weights)  # MetricUnavailable when weights are missing
    values: list[float] = []
    with torch.no_grad():
        for origins, results in groups:
            for i in range(0, origins.shape[0], batch_size):
                d = torch.as_tensor(lpips_model(results[i : i + batch_size], origins[i : i + batch_size]))
                values.extend(d.reshape(-1).double().tolist())
    return values


def records_row(records: Sequence[CaseRecord]) -> dict[str, Any]:
    """The part of a method's row that needs only the records: task metrics, SUT evaluations (over flipped cases
    and over all cases, see the module docstring), ``ended_before_budget_rate``, runtime and the recorded MS-SSIM.
    The campaign prints this at the end of a run; :func:`evaluate_run` extends it."""
    cases = [r for r in records if r.is_case]
    ok = [r for r in cases if r.ok]
    n_cases = len(cases)
    mr_ok: list[float] = []
    esc: list[float] = []
    cr: list[float] = []
    mismatch = n_pred_missing = 0
    for rec in ok:
        vals = _case_task_values(rec)
        if vals is None:  # no usable predictions: fall back on the recorded flag
            n_pred_missing += 1
            mr_ok.append(float(rec.flipped))
            continue
        mr_ok.append(vals["mr"])
        if task_class(rec.task).misclassification_is_flip and rec.flipped != bool(vals["mr"]):
            mismatch += 1
        if vals["esc"] is not None:
            esc.append(vals["esc"])
        if vals["cr"] is not None:
            cr.append(vals["cr"])

    def rate(count: float) -> float:
        return count / n_cases if n_cases else NAN

    row: dict[str, Any] = {
        "method": _unique([r.method for r in cases]),
        "task": _unique([r.task for r in cases]),
        "n_cases": n_cases,
        "n_ok": len(ok),
        "n_errors": n_cases - len(ok),
        "n_flipped": sum(r.flipped for r in ok),
        "flip_rate": rate(sum(r.flipped for r in ok)),
        "target_reached_rate": rate(sum(r.target_reached for r in ok)),
        "misclassification_rate": rate(sum(mr_ok)),
        "misclassification_rate_ok": _mean(mr_ok),
        "flipped_mismatch": mismatch,
        "n_pred_missing": n_pred_missing,
        "escape_ratio": _mean(esc) if esc else None,  # undefined for detection (Table 1: "-")
        "confidence_reduction": _mean(cr) if cr else None,
        "confidence_reduction_std": float(np.std(cr, ddof=1)) if len(cr) > 1 else None,
    }
    row.update(_sut_evals_columns(cases))
    row["ended_before_budget_rate"] = ended_before_budget_rate(cases)
    runtime = summarize(_finite([r.runtime_s for r in cases]))
    row.update({
        "mean_runtime_s": runtime["mean"], "median_runtime_s": runtime["median"], "std_runtime_s": runtime["std"],
        "total_runtime_s": runtime["total"],
    })
    row.update(_ms_ssim_columns(_finite([r.ms_ssim for r in ok]), "records"))
    to_real = _finite([r.real_ms_ssim for r in ok if r.real_ms_ssim is not None])
    row["median_ms_ssim_to_real"] = summarize(to_real)["median"] if to_real else None
    row.update(validity_columns(cases))
    row.update(stability_columns(cases))
    return row


def stability_columns(cases: Sequence[CaseRecord]) -> dict[str, Any]:
    """The stability verdict over all cases (:mod:`hynea_pl.evaluation.stability`): ``stable_flip_rate`` = cases
    whose flip holds on every stability variant / all cases; ``stable_failure_rate`` = valid failures (judges and
    realism test) that also hold on every variant / all cases (``None`` without a judge). Both ``None`` when no
    case was checked."""
    if not any(r.stable is not None for r in cases):
        return {STABLE_FLIP_RATE: None, STABLE_FAILURE_RATE: None}
    n = len(cases)
    judged = any(r.verdict is not None for r in cases)
    return {
        STABLE_FLIP_RATE: sum(bool(r.ok and r.flipped and r.stable) for r in cases) / n,
        STABLE_FAILURE_RATE: (sum(bool(r.verdict == VALID_FAILURE and r.stable) for r in cases) / n
                                if judged else None),
    }


def validity_columns(cases: Sequence[CaseRecord]) -> dict[str, Any]:
    """The oracle's verdicts over all cases (flips are not failures: only ``valid_failure`` reveals a fault).

    ``valid_failure_rate`` = cases the SUT flipped while the judges unanimously keep the origin's class and the
    result passes the realism test / all cases (errors included); ``degraded_rate`` (the judges keep the class, the
    result fails the realism test), ``semantic_change_rate`` and ``ambiguous_rate`` likewise;
    ``sut_evals_per_valid_failure`` and ``runtime_s_per_valid_failure`` = what the whole run spent (all cases) /
    valid failures found. ``realism_pass_origins`` / ``realism_pass_results``: the fraction of origins / results
    that pass the realism test, over the cases it read. All ``None`` when no case was judged (no ``oracle``)."""
    judged = [r for r in cases if r.verdict is not None]
    keys = ("n_judged", *RATE_KEYS.values(), "n_valid_failures", "sut_evals_per_valid_failure",
            "runtime_s_per_valid_failure", "median_ms_ssim_valid_failures", "realism_pass_origins",
            "realism_pass_results")
    if not judged:
        return dict.fromkeys(keys)
    n = len(cases)
    valid = [r for r in judged if r.verdict == VALID_FAILURE]
    count = {v: sum(r.verdict == v for r in judged) for v in FLIP_VERDICTS}

    def pass_rate(values: list[bool | None]) -> float | None:
        read = [v for v in values if v is not None]
        return sum(read) / len(read) if read else None

    return {
        "n_judged": len(judged),
        **{RATE_KEYS[v]: count[v] / n for v in FLIP_VERDICTS},
        "n_valid_failures": len(valid),
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
    recomputed = [float(FI.ms_ssim(r.unsqueeze(0), o.unsqueeze(0))) for rec, o, r in pairs if rec.ms_ssim is None]
    if recomputed:
        recorded = _finite([r.ms_ssim for r in ok])
        row.update(_ms_ssim_columns(recorded + recomputed, "records+recomputed" if recorded else "recomputed"))

    groups = _groups(pairs)
    if not groups:
        entry = unavailable_entry("no valid test case with readable images")
        row.update({"lpips": entry, "lpips_std": entry})
    else:
        try:
            lp = summarize(_lpips_values(groups, lpips_model, lpips_net, lpips_weights, batch_size))
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
                from hynea_pl.metrics.embedding import resnet50_embedder

                embedder = resnet50_embedder()
            from hynea_pl.metrics.embedding import embed

            e0 = torch.cat([embed(embedder, o, batch_size) for o, _ in groups]).double()
            et = torch.cat([embed(embedder, r, batch_size) for _, r in groups]).double()
            row.update({
                "diversity": float(FE.embedding_diversity(et)),
                "diversity_origins": float(FE.embedding_diversity(e0)),
                "trace_difference": float(FE.trace_difference(e0, et)),
            })
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
