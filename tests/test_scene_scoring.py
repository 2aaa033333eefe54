"""How the scene SUTs read generated scenes (:mod:`hynea_pl.zoo.scenes.scoring`): :func:`cross_scores` on crafted
detections and logits, :func:`scene_detections` on a stub detector."""

from __future__ import annotations

import pytest
import torch

from hynea_pl.zoo.scenes.scoring import cross_scores, scene_detections

PRESENT = 3  # the digit the stub detector sees in every scene


class StubDetector:
    """``YOLODetectorSUT``'s interface as :func:`scene_detections` uses it: one confident ``PRESENT`` per scene."""

    top_k = 5

    def candidate_logits(self, images: torch.Tensor) -> torch.Tensor:
        return torch.zeros(images.shape[0], 10, 7)

    def boxes(self, images: torch.Tensor) -> list[list[list[float]]]:
        rows = [[1.0, 2.0, 20.0, 30.0, float(PRESENT), 0.9], *[[0.0, 0.0, 4.0, 4.0, 7.0, 0.1]] * (self.top_k - 1)]
        return [rows for _ in range(images.shape[0])]


def scenes(n: int = 2) -> torch.Tensor:
    return torch.rand(n, 1, 64, 64, generator=torch.Generator().manual_seed(0))


def test_cross_scores_compare_detected_classes_with_present_attributes():
    def row(cls: int, conf: float) -> list[float]:
        return [0.0, 0.0, 10.0, 10.0, float(cls), conf]

    detections = [
        [row(3, 0.9), row(3, 0.7), row(5, 0.4)],  # {3}: the 5 is not confident
        [row(1, 0.6), row(7, 0.55)],  # {1, 7}
        [row(2, 0.5)],  # {}: confidence must exceed 0.5
        [],  # {}
    ]
    logits = torch.full((4, 10), -1.0)
    logits[0, 3] = 2.0  # {3}: agrees
    logits[1, 1] = 2.0  # {1}: misses the 7
    logits[3, 4] = 0.5  # {4}: nothing detected
    scores = cross_scores(detections, logits)
    # agreement: the mean Jaccard index over the scenes with a detection (0: 1, 1: 1/2); scene 3's two empty sets
    # never "agree"
    assert scores == {"detected_scene_rate": 0.5, "attribute_agreement": 0.75, "attribute_scene_rate": 0.75}
    assert cross_scores(detections, logits, min_confidence=0.45)["attribute_agreement"] == pytest.approx(1.5 / 3)
    blank = cross_scores([[], []], torch.full((2, 10), -1.0))  # blank samples: nothing to agree on
    assert blank == {"detected_scene_rate": 0.0, "attribute_agreement": 0.0, "attribute_scene_rate": 0.0}
    with pytest.raises(ValueError, match="4 scenes"):
        cross_scores(detections, logits[:3])


def test_scene_detections_see_every_candidate_and_restore_top_k():
    detector = StubDetector()
    rows = scene_detections(detector, scenes(3), batch_size=2)
    assert len(rows) == 3 and all(len(r) == 7 for r in rows)  # all 7 candidates, not the top 5
    assert detector.top_k == 5
