"""Task metrics (HyNeA eqs. 9-15) against values worked out by hand."""

import math
import warnings

import pytest
import torch

from hynea_pl.metrics import (
    BinaryEscapeRatio,
    BinaryMisclassificationRate,
    ConfidenceReduction,
    DetectionMisclassificationRate,
    EscapeRatio,
    MisclassificationRate,
    MulticlassEscapeRatio,
    MulticlassMisclassificationRate,
)
from hynea_pl.metrics.functional import (
    binary_escape_ratio,
    binary_misclassification_rate,
    confidence_reduction,
    detection_misclassification_rate,
    escape_ratio,
    misclassification_rate,
    top2,
)

T = torch.tensor


def test_misclassification_rate_hand_values_and_ties():
    origin = T([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 1.0, 0.0]])  # argmax 0, 1, 0 (tie -> lowest index)
    result = T([[0.0, 1.0, 2.0], [0.0, 3.0, 1.0], [0.0, 1.0, 1.0]])  # argmax 2, 1, 1 (tie -> lowest index)
    assert misclassification_rate(origin, result).item() == pytest.approx(2 / 3)
    assert misclassification_rate(origin, result, reduction="none").tolist() == [1.0, 0.0, 1.0]
    # no flips
    assert misclassification_rate(origin, origin.clone()).item() == 0.0
    # a single sample
    assert misclassification_rate(origin[:1], result[:1]).item() == 1.0
    # all-tied rows: both argmax 0 -> no flip
    assert misclassification_rate(T([[1.0, 1.0]]), T([[5.0, 5.0]])).item() == 0.0


def test_escape_ratio_hand_values():
    origin = T([[5.0, 4.0, 1.0, 0.0]] * 3)  # top-2 {0, 1}
    result = T([[0.0, 9.0, 0.0, 0.0],  # -> 1: target reached, no escape
                [0.0, 0.0, 9.0, 0.0],  # -> 2: escaped
                [9.0, 0.0, 0.0, 0.0]])  # -> 0: not flipped, no escape
    assert escape_ratio(origin, result, reduction="none").tolist() == [0.0, 1.0, 0.0]
    assert escape_ratio(origin, result).item() == pytest.approx(1 / 3)
    # ties in the origin: stable sort keeps indices 0 and 1 as top-2
    tied = T([[3.0, 3.0, 3.0, 0.0]])
    assert top2(tied).tolist() == [[0, 1]]
    assert escape_ratio(tied, T([[0.0, 0.0, 1.0, 0.0]])).item() == 1.0
    # tie in the result: argmax -> 1, inside the top-2
    assert escape_ratio(origin[:1], T([[0.0, 5.0, 5.0, 0.0]])).item() == 0.0
    with pytest.raises(ValueError):
        escape_ratio(T([[1.0]]), T([[1.0]]))


def test_binary_misclassification_and_escape():
    origin = T([[1.0, -1.0, 2.0], [-0.5, 0.3, 1.0]])
    result = T([[-1.0, -1.0, 2.0], [-0.5, -0.3, -1.0]])
    # attribute 0: case 0 flips (1 -> -1), case 1 does not (-0.5 -> -0.5)
    assert binary_misclassification_rate(origin, result, 0).item() == 0.5
    # per-case attribute [0, 1]: both flip
    assert binary_misclassification_rate(origin, result, T([0, 1])).item() == 1.0
    # (B,) inputs
    assert binary_misclassification_rate(origin[:, 2], result[:, 2]).item() == 0.5
    # exactly 0 counts as negative (logit > 0 is the positive decision)
    assert binary_misclassification_rate(T([0.0]), T([-1.0])).item() == 0.0
    # probabilities with threshold 0.5
    assert binary_misclassification_rate(T([[0.6]]), T([[0.4]]), 0, threshold=0.5).item() == 1.0
    # eq. 14 with c = 0: (mr_1 + mr_2) / 2 = (0.5 + 0.5) / 2
    assert binary_escape_ratio(origin, result, 0).item() == 0.5
    assert binary_escape_ratio(origin, result, 0, reduction="none").tolist() == [0.0, 1.0]
    # no change at all
    assert binary_escape_ratio(origin, origin, 1).item() == 0.0


def test_detection_and_confidence_reduction():
    # B=2 images, D=2 detections, C=3 classes
    origin = T([[[0.9, 0.1, 0.0], [0.2, 0.7, 0.1]],
                [[0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]])
    result = T([[[0.2, 0.7, 0.1], [0.2, 0.7, 0.1]],   # first detection flips 0 -> 1
                [[0.1, 0.3, 0.6], [0.5, 0.2, 0.3]]])  # both flip
    assert detection_misclassification_rate(origin, result).item() == pytest.approx(3 / 4)
    assert detection_misclassification_rate(origin, result, reduction="none").tolist() == [0.5, 1.0]
    # class 0: drops 0.7, 0.0, 0.5, -0.4 -> mean 0.2
    assert confidence_reduction(origin, result, 0).item() == pytest.approx(0.2)
    assert confidence_reduction(origin, result, 0, reduction="none").tolist() == pytest.approx([0.35, 0.05])
    # per-image class [0, 2]: image 0 drops (0.7, 0.0), image 1 drops (0.1 - 0.6, 0.8 - 0.3)
    assert confidence_reduction(origin, result, T([0, 2])).item() == pytest.approx((0.7 + 0.0 - 0.5 + 0.5) / 4)
    # (B, C) = one detection per image
    assert confidence_reduction(T([[0.9, 0.1]]), T([[0.3, 0.7]]), 0).item() == pytest.approx(0.6)
    assert detection_misclassification_rate(origin, origin).item() == 0.0


def test_stateful_metrics_accumulate_and_reset():
    origin = T([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 1.0, 0.0], [5.0, 4.0, 0.0]])
    result = T([[0.0, 1.0, 2.0], [0.0, 3.0, 1.0], [0.0, 1.0, 1.0], [4.0, 5.0, 0.0]])
    m = MisclassificationRate(task="multiclass")
    assert isinstance(m, MulticlassMisclassificationRate)
    with warnings.catch_warnings():  # torchmetrics warns about compute() before update()
        warnings.simplefilter("ignore")
        assert math.isnan(m.compute().item())  # nothing seen yet
    m.update(origin[:1], result[:1])
    m.update(origin[1:], result[1:])
    assert m.compute().item() == pytest.approx(3 / 4)
    m.reset()
    m.update(origin[1:2], result[1:2])
    assert m.compute().item() == 0.0

    e = EscapeRatio()
    assert isinstance(e, MulticlassEscapeRatio)
    e.update(origin, result)
    # case 0: top2 {0,1}, result 2 -> escaped; case 2: top2 {0,1}, result 1 -> ok; case 3: ok
    assert e.compute().item() == pytest.approx(1 / 4)

    b = MisclassificationRate(task="binary", attribute=0)
    assert isinstance(b, BinaryMisclassificationRate)
    b.update(T([[1.0, 1.0]]), T([[-1.0, 1.0]]))
    b.update(T([[1.0, 1.0]]), T([[1.0, -1.0]]))
    assert b.compute().item() == 0.5
    be = EscapeRatio(task="binary", attribute=0)
    assert isinstance(be, BinaryEscapeRatio)
    be.update(T([[1.0, 1.0]]), T([[1.0, -1.0]]))
    assert be.compute().item() == 1.0

    d = MisclassificationRate(task="detection")
    assert isinstance(d, DetectionMisclassificationRate)
    d.update(T([[[1.0, 0.0]]]), T([[[0.0, 1.0]]]))  # 1 of 1
    d.update(T([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]]), T([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]]))  # 0 of 3
    assert d.compute().item() == pytest.approx(1 / 4)  # averaged over all B*D detections (eq. 11)

    c = ConfidenceReduction(target_class=0)
    c.update(T([[[0.9, 0.1]]]), T([[[0.4, 0.6]]]))
    c.update(T([[0.5, 0.5], [0.5, 0.5]]), T([[0.5, 0.5], [0.2, 0.8]]))
    assert c.compute().item() == pytest.approx((0.5 + 0.0 + 0.3) / 3)
    with pytest.raises(ValueError):
        EscapeRatio(task="detection")


def test_merge_state_matches_single_pass():
    """States reduce like a DDP sync: merging two halves equals one pass over everything."""
    g = torch.Generator().manual_seed(0)
    origin, result = torch.randn(10, 5, generator=g), torch.randn(10, 5, generator=g)
    for cls in (MulticlassMisclassificationRate, MulticlassEscapeRatio):
        a, b, full = cls(), cls(), cls()
        a.update(origin[:4], result[:4])
        b.update(origin[4:], result[4:])
        full.update(origin, result)
        a.merge_state(b)
        assert a.compute().item() == pytest.approx(full.compute().item())
