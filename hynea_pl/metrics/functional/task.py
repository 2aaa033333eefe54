"""Task metrics of HyNeA (section 4.2.1, equations 9-15), comparing SUT outputs on origins and on results.

Shapes: ``B`` test cases, ``C`` classes / attributes, ``D`` detections per image.
``origin`` holds the SUT outputs (logits or probabilities) on the original images, ``result`` those on the
generated test cases. Ties in an argmax resolve to the lowest class index (``torch.argmax`` semantics), and the
top-2 of eq. 13 is a stable descending sort, so ties keep the lower index first.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "binary_escape_ratio",
    "binary_misclassification_rate",
    "confidence_reduction",
    "detection_misclassification_rate",
    "escape_ratio",
    "misclassification_rate",
    "top2",
]

Reduction = Literal["mean", "sum", "none"]


def _reduce(values: Tensor, reduction: Reduction) -> Tensor:
    if reduction == "mean":
        return values.mean() if values.numel() else values.new_tensor(float("nan"))
    if reduction == "sum":
        return values.sum()
    if reduction == "none":
        return values
    raise ValueError(f"unknown reduction {reduction!r}")


def _as_float(x: Tensor) -> Tensor:
    x = torch.as_tensor(x)
    return x if x.is_floating_point() else x.float()


def _pair(origin: Tensor, result: Tensor, dims: int, what: str) -> tuple[Tensor, Tensor]:
    origin, result = _as_float(origin), _as_float(result)
    if origin.shape != result.shape:
        raise ValueError(f"origin and result must have the same shape, got {tuple(origin.shape)} and {tuple(result.shape)}")
    if origin.dim() != dims:
        raise ValueError(f"expected {what}, got shape {tuple(origin.shape)}")
    return origin, result


def _index(index: int | Tensor, batch: int, device: torch.device) -> Tensor:
    index = torch.as_tensor(index, device=device, dtype=torch.long)
    if index.dim() == 0:
        index = index.expand(batch)
    if index.shape != (batch,):
        raise ValueError(f"class / attribute index must be an int or a ({batch},) tensor, got shape {tuple(index.shape)}")
    return index


def top2(pred: Tensor) -> Tensor:
    """Indices of the two highest scores (eq. 13), ``(..., C) -> (..., 2)``; ties keep the lower index first."""
    if pred.shape[-1] < 2:
        raise ValueError("top-2 needs at least two classes")
    return torch.sort(pred, dim=-1, descending=True, stable=True).indices[..., :2]


def misclassification_rate(origin: Tensor, result: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Multiclass misclassification rate (eq. 9): fraction of cases whose argmax changed.

    Args:
        origin, result: ``(B, C)``.
    Returns:
        scalar (``"mean"``/``"sum"``) or ``(B,)`` 0/1 indicators (``"none"``).
    """
    origin, result = _pair(origin, result, 2, "(B, C) class scores")
    return _reduce((origin.argmax(-1) != result.argmax(-1)).float(), reduction)


def binary_misclassification_rate(
    origin: Tensor,
    result: Tensor,
    attribute: int | Tensor | None = None,
    threshold: float = 0.0,
    reduction: Reduction = "mean",
) -> Tensor:
    """Binary (multi-label) misclassification rate (eq. 10): did the tested attribute's decision flip?

    Args:
        origin, result: ``(B, C)`` attribute logits (``threshold=0``) or probabilities (``threshold=0.5``),
            or ``(B,)`` scores of the tested attribute only (then ``attribute`` is ignored).
        attribute: tested attribute ``c``: an int or a ``(B,)`` tensor (required for ``(B, C)`` inputs).
    """
    origin, result = _as_float(origin), _as_float(result)
    if origin.shape != result.shape:
        raise ValueError(f"origin and result must have the same shape, got {tuple(origin.shape)} and {tuple(result.shape)}")
    if origin.dim() == 2:
        if attribute is None:
            raise ValueError("attribute index required for (B, C) inputs")
        idx = _index(attribute, origin.shape[0], origin.device).unsqueeze(1)
        origin, result = origin.gather(1, idx).squeeze(1), result.gather(1, idx).squeeze(1)
    elif origin.dim() != 1:
        raise ValueError(f"expected (B, C) or (B,) scores, got shape {tuple(origin.shape)}")
    return _reduce(((origin > threshold) != (result > threshold)).float(), reduction)


def detection_misclassification_rate(origin: Tensor, result: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Detection misclassification rate (eq. 11): fraction of the ``B*D`` detections whose argmax class changed.

    Args:
        origin, result: ``(B, D, C)`` per-detection class scores (detections matched by index).
    Returns:
        scalar, or ``(B,)`` per-image fractions for ``"none"``.
    """
    origin, result = _pair(origin, result, 3, "(B, D, C) detection class scores")
    changed = (origin.argmax(-1) != result.argmax(-1)).float()  # (B, D)
    if reduction == "none":
        return changed.mean(dim=1)
    return _reduce(changed.flatten(), reduction)


def escape_ratio(origin: Tensor, result: Tensor, reduction: Reduction = "mean") -> Tensor:
    """Multiclass escape ratio (eqs. 12-13): the result's argmax is neither of the origin's two best classes.

    A case that did not flip (result argmax = origin argmax) has not escaped.

    Args:
        origin, result: ``(B, C)``, ``C >= 2``.
    """
    origin, result = _pair(origin, result, 2, "(B, C) class scores")
    allowed = top2(origin)  # (B, 2)
    escaped = (result.argmax(-1, keepdim=True) != allowed).all(dim=-1)
    return _reduce(escaped.float(), reduction)


def binary_escape_ratio(
    origin: Tensor,
    result: Tensor,
    attribute: int | Tensor,
    threshold: float = 0.0,
    reduction: Reduction = "mean",
) -> Tensor:
    """Binary escape ratio (eq. 14): mean over the ``C-1`` non-tested attributes of their sign-flip rate.

    Args:
        origin, result: ``(B, C)`` attribute logits (or probabilities with ``threshold=0.5``), ``C >= 2``.
        attribute: tested attribute ``c`` (int or ``(B,)``); it is excluded.
    Returns:
        scalar, or ``(B,)`` per-case fractions of non-tested attributes that flipped for ``"none"``.
    """
    origin, result = _pair(origin, result, 2, "(B, C) attribute scores")
    batch, classes = origin.shape
    if classes < 2:
        raise ValueError("binary escape ratio needs at least two attributes")
    idx = _index(attribute, batch, origin.device)
    flipped = ((origin > threshold) != (result > threshold)).float()
    others = torch.ones_like(flipped).scatter_(1, idx.unsqueeze(1), 0.0)
    per_case = (flipped * others).sum(dim=1) / (classes - 1)
    return _reduce(per_case, reduction)


def confidence_drops(origin: Tensor, result: Tensor, target_class: int | Tensor, from_logits: bool = False) -> Tensor:
    """Per-detection drop of class ``c``'s confidence ``Y[i, j, c] - Y_hat[i, j, c]`` ``(B, D)`` (eq. 15's terms).

    Args:
        origin, result: ``(B, D, C)`` (or ``(B, C)``, treated as ``D = 1``) confidences, or raw logits with
            ``from_logits=True`` (then compared as ``sigmoid(logit)``, the class confidence YOLO reports).
        target_class: class ``c`` whose confidence should drop: an int or a ``(B,)`` tensor.
    """
    origin, result = _as_float(origin), _as_float(result)
    if from_logits:
        origin, result = origin.sigmoid(), result.sigmoid()
    if origin.dim() == 2:
        origin, result = origin.unsqueeze(1), result.unsqueeze(1)
    origin, result = _pair(origin, result, 3, "(B, D, C) or (B, C) scores")
    batch, dets, _ = origin.shape
    idx = _index(target_class, batch, origin.device).view(batch, 1, 1).expand(batch, dets, 1)
    return (origin.gather(2, idx) - result.gather(2, idx)).squeeze(2)


def confidence_reduction(
    origin: Tensor,
    result: Tensor,
    target_class: int | Tensor,
    reduction: Reduction = "mean",
    from_logits: bool = False,
) -> Tensor:
    """Confidence reduction (eq. 15): mean over images and detections of :func:`confidence_drops`.

    The one implementation: the detector SUT, the campaign's records and ``evaluate`` all call it (records hold
    raw logits, so they pass ``from_logits=True``).

    Returns:
        scalar, or ``(B,)`` per-image means for ``"none"``.
    """
    drop = confidence_drops(origin, result, target_class, from_logits)
    if reduction == "none":
        return drop.mean(dim=1)
    return _reduce(drop.flatten(), reduction)
