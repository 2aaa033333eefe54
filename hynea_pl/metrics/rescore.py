"""Re-score a finished run folder into the method's table row (HyNeA Table 1 / 2 columns).

``run_dir/records.jsonl`` holds one JSON object per test case with at least: ``method, task, case_id, seed,
origin_class, target, flipped, sut_evals, steps, runtime_s, origin_pred, result_pred, ms_ssim, origin_image,
result_image, error``. Image paths are PNGs relative to ``run_dir`` (grayscale or RGB).

Conventions:
- A record is *valid* when ``error`` is null/empty. Records with an error count as not flipped (they stay in the
  denominator of the misclassification rate) and are excluded from every image metric.
- ``misclassification_rate`` = (sum over valid cases of the eq. 9/10/11 indicator computed from
  ``origin_pred``/``result_pred``) / ``n_cases``. For multiclass it equals the fraction of records flipped;
  ``flipped_mismatch`` counts valid records whose recorded ``flipped`` disagrees with the argmax.
  ``misclassification_rate_valid`` is the same over valid cases only. ``n_flipped`` is the numerator (for
  detection a sum of per-image fractions of changed detections).
- Escape ratio (eqs. 12-14) and confidence reduction (eq. 15, detection) are averaged over valid cases.
- SUT evaluations and runtime are summarised over every record that has them (errors included: budget was spent).
- MS-SSIM uses the recorded ``ms_ssim`` of valid records (recomputed from the PNGs when absent).
- Task kinds: ``binary`` (names containing binary/multilabel/attribute/celeba; tested attribute from
  ``attribute``, else an integer ``target``), ``detection`` (detect/driving/yolo; preds ``(D, C)``, class
  ``origin_class``), otherwise ``multiclass``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch import Tensor

from hynea_pl.metrics.functional import embedding as FE
from hynea_pl.metrics.functional import image as FI
from hynea_pl.metrics.functional import task as FT
from hynea_pl.metrics.functional.search import summarize
from hynea_pl.metrics.weights import MetricUnavailable, to_record_value, unavailable_entry

__all__ = ["evaluate_run", "load_image", "read_records", "records_row", "task_kind"]

NAN = float("nan")


def task_kind(task: str | None) -> str:
    """Map a task name to ``"multiclass"``, ``"binary"`` or ``"detection"``."""
    name = (task or "").lower()
    if any(k in name for k in ("binary", "multilabel", "multi-label", "attribute", "celeba")):
        return "binary"
    if any(k in name for k in ("detect", "driving", "yolo")):
        return "detection"
    return "multiclass"


def read_records(path: Path) -> list[dict[str, Any]]:
    """Read a JSON-lines file (blank lines skipped)."""
    records = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: invalid JSON: {exc}") from exc
    return records


def load_image(path: Path) -> Tensor:
    """PNG -> ``(C, H, W)`` float32 in ``[0, 1]``; C = 1 for grayscale, 3 otherwise (alpha dropped)."""
    with Image.open(path) as im:
        if im.mode.startswith("I;16") or im.mode == "I":
            arr = np.asarray(im, dtype=np.float64) / (65535.0 if im.mode.startswith("I;16") else max(1.0, float(np.asarray(im).max())))
            return torch.from_numpy(arr).float().unsqueeze(0)
        if im.mode in ("1", "L", "LA"):
            arr = np.asarray(im.convert("L"), dtype=np.float32) / 255.0
            return torch.from_numpy(arr).unsqueeze(0)
        arr = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
        return torch.from_numpy(arr).permute(2, 0, 1).contiguous()


def _is_valid(rec: dict[str, Any]) -> bool:
    return not rec.get("error")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _case_task_values(rec: dict[str, Any], kind: str) -> dict[str, float | None] | None:
    """Per-case misclassification indicator / escape / confidence reduction; None when preds are unusable."""
    try:
        o = torch.as_tensor(rec["origin_pred"], dtype=torch.float64)
        r = torch.as_tensor(rec["result_pred"], dtype=torch.float64)
    except (KeyError, TypeError, ValueError, RuntimeError):
        return None
    if o.shape != r.shape or o.numel() == 0:
        return None
    if kind == "detection":
        if o.dim() == 1:
            o, r = o.unsqueeze(0), r.unsqueeze(0)
        if o.dim() != 2:
            return None
        o, r = o.unsqueeze(0), r.unsqueeze(0)
        out = {"mr": float(FT.detection_misclassification_rate(o, r)), "esc": None, "cr": None}
        cls = rec.get("origin_class")
        if not isinstance(cls, int):  # unconditional origins: the suppressed class is the case's target
            cls = rec.get("target")
        if isinstance(cls, int) and not isinstance(cls, bool) and 0 <= cls < o.shape[-1]:
            out["cr"] = float(FT.confidence_reduction(o, r, cls))
        return out
    o, r = o.reshape(1, -1), r.reshape(1, -1)
    if kind == "binary":
        attr = rec.get("attribute", rec.get("target"))
        if not isinstance(attr, int) or isinstance(attr, bool) or not 0 <= attr < o.shape[1]:
            return None
        esc = float(FT.binary_escape_ratio(o, r, attr)) if o.shape[1] > 1 else None
        return {"mr": float(FT.binary_misclassification_rate(o, r, attr)), "esc": esc, "cr": None}
    esc = float(FT.escape_ratio(o, r)) if o.shape[1] > 1 else None
    return {"mr": float(FT.misclassification_rate(o, r)), "esc": esc, "cr": None}


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else NAN


def _unique(values: list[Any]) -> Any:
    distinct = sorted({str(v) for v in values if v is not None})
    if not distinct:
        return None
    return distinct[0] if len(distinct) == 1 else distinct


def _load_pairs(run_dir: Path, valid: list[dict[str, Any]]) -> tuple[list[tuple[dict, Tensor, Tensor]], int]:
    pairs, skipped = [], 0
    for rec in valid:
        try:
            o_path, r_path = Path(rec["origin_image"]), Path(rec["result_image"])
            o = load_image(o_path if o_path.is_absolute() else run_dir / o_path)
            r = load_image(r_path if r_path.is_absolute() else run_dir / r_path)
        except (KeyError, TypeError, OSError):
            skipped += 1
            continue
        if o.shape[0] != r.shape[0]:  # grayscale vs RGB: compare in RGB
            o, r = o.expand(3, -1, -1), r.expand(3, -1, -1)
        if o.shape != r.shape:
            skipped += 1
            continue
        pairs.append((rec, o, r))
    return pairs, skipped


def _groups(pairs: list[tuple[dict, Tensor, Tensor]]) -> list[tuple[Tensor, Tensor]]:
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


def _is_case(rec: dict[str, Any]) -> bool:
    """Records of origins that were never valid (``seed`` null: no valid origin found, paper 4.5) are not test
    cases; they only count as skipped seeds."""
    return not ("seed" in rec and rec["seed"] is None)


def records_row(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The part of a method's row that needs only the records: task metrics, SUT evaluations, runtime and the
    recorded MS-SSIM. The campaign prints this at the end of a run; :func:`evaluate_run` extends it.

    ``median_sut_evals`` / ``mean_sut_evals`` are over flipped cases (the budget a method needs to find a
    failure); ``*_sut_evals_all`` over every case.
    """
    records = [r for r in records if _is_case(r)]
    valid = [r for r in records if _is_valid(r)]
    n_cases, n_valid = len(records), len(valid)
    # --- task metrics -------------------------------------------------------------------------------------
    mr_valid: list[float] = []
    esc: list[float] = []
    cr: list[float] = []
    kinds: set[str] = set()
    mismatch = n_pred_missing = 0
    for rec in valid:
        kind = task_kind(rec.get("task"))
        kinds.add(kind)
        vals = _case_task_values(rec, kind)
        if vals is None:  # no usable predictions: fall back on the recorded flag
            n_pred_missing += 1
            mr_valid.append(float(bool(rec.get("flipped"))))
            continue
        mr_valid.append(vals["mr"])
        if kind == "multiclass" and "flipped" in rec and bool(rec["flipped"]) != bool(vals["mr"]):
            mismatch += 1
        if vals["esc"] is not None:
            esc.append(vals["esc"])
        if vals["cr"] is not None:
            cr.append(vals["cr"])

    row: dict[str, Any] = {
        "method": _unique([r.get("method") for r in records]),
        "task": _unique([r.get("task") for r in records]),
        "task_kind": _unique([task_kind(r.get("task")) for r in records]),
        "n_cases": n_cases,
        "n_valid": n_valid,
        "n_errors": n_cases - n_valid,
        "n_flipped": float(sum(mr_valid)) if "detection" in kinds else int(round(sum(mr_valid))),
        "misclassification_rate": sum(mr_valid) / n_cases if n_cases else NAN,
        "misclassification_rate_valid": _mean(mr_valid),
        "flip_rate_recorded": sum(bool(r.get("flipped")) and _is_valid(r) for r in records) / n_cases if n_cases else NAN,
        "flipped_mismatch": mismatch,
        "n_pred_missing": n_pred_missing,
        "escape_ratio": _mean(esc) if esc else None,  # undefined for detection (Table 1: "-")
        "confidence_reduction": _mean(cr) if cr else None,
        "confidence_reduction_std": float(np.std(cr, ddof=1)) if len(cr) > 1 else None,
    }

    # --- efficiency ---------------------------------------------------------------------------------------
    budget = summarize([v for v in (_number(r.get("sut_evals")) for r in valid if r.get("flipped")) if v is not None])
    budget_all = summarize([v for v in (_number(r.get("sut_evals")) for r in records) if v is not None])
    runtime = summarize([v for v in (_number(r.get("runtime_s")) for r in records) if v is not None])
    row.update({
        "median_sut_evals": budget["median"], "mean_sut_evals": budget["mean"], "std_sut_evals": budget["std"],
        "median_sut_evals_all": budget_all["median"], "mean_sut_evals_all": budget_all["mean"],
        "total_sut_evals": budget_all["total"],
        "mean_runtime_s": runtime["mean"], "median_runtime_s": runtime["median"], "std_runtime_s": runtime["std"],
        "total_runtime_s": runtime["total"],
    })

    ms = [v for v in (_number(r.get("ms_ssim")) for r in valid) if v is not None]
    ms_stats = summarize(ms)
    row.update({"median_ms_ssim": ms_stats["median"], "mean_ms_ssim": ms_stats["mean"], "std_ms_ssim": ms_stats["std"],
                "ms_ssim_source": "records" if ms else None})
    return row


def evaluate_run(
    run_dir: Path | str,
    embedder: Callable[[Tensor], Tensor] | str | None = None,
    *,
    lpips_model: Callable[[Tensor, Tensor], Tensor] | None = None,
    lpips_net: str = "vgg",
    lpips_weights: str | Path | None = None,
    batch_size: int = 32,
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
    Returns:
        the JSON-safe row (NaN -> None; unavailable metrics as ``{"value": None, "unavailable": reason}``).
    """
    run_dir = Path(run_dir)
    records = [r for r in read_records(run_dir / "records.jsonl") if _is_case(r)]
    valid = [r for r in records if _is_valid(r)]
    row = records_row(records)

    # --- image metrics (valid cases only) -------------------------------------------------------------------
    pairs, skipped = _load_pairs(run_dir, valid)
    row["n_image_pairs"] = len(pairs)
    row["n_images_missing"] = skipped
    ms = [v for v in (_number(r.get("ms_ssim")) for r in valid) if v is not None]
    source = "records"
    recorded_ids = {id(r) for r in valid if _number(r.get("ms_ssim")) is not None}
    for rec, o, r in pairs:
        if id(rec) not in recorded_ids:
            ms.append(float(FI.ms_ssim(r.unsqueeze(0), o.unsqueeze(0))))
            source = "records+recomputed" if recorded_ids else "recomputed"
    ms_stats = summarize(ms)
    row.update({"median_ms_ssim": ms_stats["median"], "mean_ms_ssim": ms_stats["mean"], "std_ms_ssim": ms_stats["std"],
                "ms_ssim_source": source if ms else None})

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

    row = to_record_value(row)
    if write:
        with open(run_dir / "metrics.json", "w", encoding="utf-8") as fh:
            json.dump(row, fh, indent=2, allow_nan=False)
            fh.write("\n")
    return row
