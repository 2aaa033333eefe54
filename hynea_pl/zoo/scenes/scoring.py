"""How the scene SUTs read generated scenes: detected classes, present attributes, their agreement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from hynea_pl.zoo.registry import BuildContext


def detected_classes(rows: Sequence[Sequence[float]], min_confidence: float = 0.5) -> set[int]:
    """The classes of a scene's detection ``rows`` ``(x0, y0, x1, y1, class, confidence)`` with confidence >
    ``min_confidence``."""
    return {int(row[4]) for row in rows if row[5] > min_confidence}


def present_attributes(logits: torch.Tensor) -> set[int]:
    """The attributes (digits) with logit > 0 of one scene's logits ``(10,)``."""
    return set(torch.nonzero(logits > 0).flatten().tolist())


def cross_scores(detections: Sequence[Sequence[Sequence[float]]], logits: torch.Tensor,
                 min_confidence: float = 0.5) -> dict[str, float]:
    """Detector / attribute SUT consistency over scenes, from the detector's rows per scene (all its candidates, as
    ``YOLODetectorSUT.boxes`` gives them) and the attribute SUT's ``logits (N, 10)``:

    - ``detected_scene_rate``: scenes with at least one detection of confidence > ``min_confidence``;
    - ``attribute_agreement``: over the scenes with at least one such detection, the mean Jaccard index of the
      set of attributes with logit > 0 and the set of detected classes (1 when they are equal; 0 when no scene has
      a detection: two empty sets never count as agreement, so blank scenes cannot score well). Jaccard, not
      set equality: on 200 held-out *real* scenes each SUT reads exactly the true digits in only about 80 % of
      scenes (a digit partly covered by another, a small 1), so the two sets are equal in 0.78 of them while their
      mean Jaccard index is 0.90;
    - ``attribute_scene_rate``: scenes with at least one attribute with logit > 0.
    """
    if len(detections) != len(logits):
        raise ValueError(f"{len(detections)} scenes of detections but {len(logits)} of logits")
    detected = [detected_classes(rows, min_confidence) for rows in detections]
    present = [present_attributes(row) for row in logits]
    n = max(len(detected), 1)
    n_detected = sum(bool(d) for d in detected)
    return {
        "detected_scene_rate": n_detected / n,
        "attribute_agreement": sum(len(d & p) / len(d | p) for d, p in zip(detected, present, strict=True) if d)
        / max(n_detected, 1),
        "attribute_scene_rate": sum(bool(p) for p in present) / n,
    }


@torch.no_grad()
def scene_detections(detector, images: torch.Tensor, batch_size: int = 50) -> list[list[list[float]]]:
    """Every candidate of a :class:`~hynea_pl.suts.YOLODetectorSUT` per scene (its ``top_k`` raised to all of them
    for the call: a scene's digits are not all among its top 5 candidates, which may all sit on one digit)."""
    previous = detector.top_k
    detector.top_k = int(detector.candidate_logits(images[:1]).shape[-1])
    try:
        return [rows for i in range(0, len(images), batch_size) for rows in detector.boxes(images[i:i + batch_size])]
    finally:
        detector.top_k = previous


def load_cross_suts(context: BuildContext) -> tuple[Any, Any]:
    """The ``detector_sut`` and ``attribute_sut`` of ``context.deps`` (built by ``gated_by``), frozen."""
    from hynea_pl.zoo.scenes.attributes import load_attribute_sut
    from hynea_pl.zoo.scenes.detector import load_detector

    return load_detector(context.deps["detector_sut"]), load_attribute_sut(context.deps["attribute_sut"])


__all__ = ["cross_scores", "detected_classes", "load_cross_suts", "present_attributes", "scene_detections"]
