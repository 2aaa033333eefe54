"""Task metrics (HyNeA eqs. 9-15) against values worked out by hand."""

import math
import warnings

import pytest
import torch

from hynea_pl.metrics import ConfidenceReduction, EscapeRatio, MisclassificationRate, case_values
from hynea_pl.metrics.functional import (
    binary_escape_ratio,
    binary_misclassification_rate,
    confidence_reduction,
    detection_misclassification_rate,
    escape_ratio,
    misclassification_rate,
    top2,
)
from hynea_pl.schema import CaseRecord

T = torch.tensor


def case(task, origin, result, target=0, flipped=False, error=None):
    return CaseRecord(method="m", run="r", task=task, case_id="c0-0", seed=0, origin_class=0, target=target,
                      origin_pred=origin, result_pred=result, flipped=flipped, error=error)


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


def test_run_metrics_are_updated_per_case_record():
    cases = [case("multiclass", [2.0, 1.0, 0.0], [0.0, 1.0, 2.0], flipped=True),  # escaped (2 not in top-2)
             case("multiclass", [0.0, 3.0, 1.0], [0.0, 3.0, 1.0]),
             case("multiclass", [5.0, 4.0, 0.0], [4.0, 5.0, 0.0], flipped=False),  # flipped, recorded as not
             case("multiclass", [1.0, 0.0], None, flipped=True),  # unusable predictions: the recorded flip counts
             case("multiclass", [1.0, 0.0], [0.0, 1.0], error="RuntimeError")]  # not misclassified, no escape
    assert case_values(cases[0]) == {"mr": 1.0, "esc": 1.0, "cr": None}
    assert case_values(cases[3]) is None and case_values(cases[4]) is None
    mr, esc, cr = MisclassificationRate(), EscapeRatio(), ConfidenceReduction()
    for record in cases:
        for metric in (mr, esc, cr):
            metric.update(record)
    assert mr.compute() == {"misclassification_rate": 3 / 5, "misclassification_rate_ok": 3 / 4,
                            "flipped_mismatch": 1, "n_pred_missing": 1}
    assert esc.compute()["n"] == 3 and esc.compute()["mean"] == pytest.approx(1 / 3)
    assert cr.compute()["n"] == 0
    # binary (eqs. 10, 14) and detection (eqs. 11, 15 from the logits), each case's values by its SUT class
    binary = case("binary", [1.0, 1.0, -1.0], [-1.0, -1.0, -1.0], target=0, flipped=True)
    assert case_values(binary) == {"mr": 1.0, "esc": 0.5, "cr": None}
    logits = [[2.0, 0.0], [0.0, 1.0]]
    detection = case("detection", logits, [[0.0, 2.0], [0.0, 1.0]], target=0, flipped=True)
    values = case_values(detection)
    assert values["mr"] == 0.5 and values["esc"] is None
    assert values["cr"] == pytest.approx((torch.sigmoid(T(2.0)) - 0.5).item() / 2)
    cr.update(detection)
    assert cr.compute()["mean"] == pytest.approx(values["cr"])


def test_merge_state_matches_single_pass():
    """States reduce like a DDP sync: merging two halves equals one pass over everything."""
    g = torch.Generator().manual_seed(0)
    origin, result = torch.randn(10, 5, generator=g), torch.randn(10, 5, generator=g)
    cases = [case("multiclass", o.tolist(), r.tolist(), flipped=bool(o.argmax() != r.argmax()))
             for o, r in zip(origin, result)]
    for cls in (MisclassificationRate, EscapeRatio):
        a, b, full = cls(), cls(), cls()
        for i, record in enumerate(cases):
            (a if i < 4 else b).update(record)
            full.update(record)
        a.merge_state(b)
        assert a.compute() == pytest.approx(full.compute())
    mr = MisclassificationRate()
    with warnings.catch_warnings():  # torchmetrics warns about compute() before update()
        warnings.simplefilter("ignore")
        assert math.isnan(mr.compute()["misclassification_rate"])  # nothing seen yet
